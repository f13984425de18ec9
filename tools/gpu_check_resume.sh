#!/usr/bin/env bash
# Exact resume on the GPU machine: LeNet on Fashion-MNIST trained 40 iterations straight, and 17 +
# `kiln train --snapshot` + 23, on one GPU and on two (--gpus 0,1); the two final .caffemodel
# files must be byte-identical (docs/TRAINING.md, "Exact resume"). Stage here with
#   bash tools/gpu_check.sh --stage fashion        # .gpu-fashion: kiln and the IDX files
# then run there (a two-GPU kind, carry [".gpu-fashion"]):
#   OUT=$OUT bash tools/gpu_check_resume.sh
set -u
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/kiln-gpu}"
mkdir -p "$out" /tmp/kb && tar -C /tmp/kb -xJf .gpu-fashion/bin.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
kiln=/tmp/kb/tools/kiln
repo=$PWD
work=$(mktemp -d /tmp/kiln-resume.XXXXXX)
for set in train t10k; do
  name=$([ "$set" = train ] && echo train || echo test)
  "$kiln" convert --images "$repo/.gpu-fashion/fashion_mnist/$set-images-idx3-ubyte.gz" \
    --labels "$repo/.gpu-fashion/fashion_mnist/$set-labels-idx1-ubyte.gz" \
    --out "$work/fashion_mnist_${name}_lmdb" >/dev/null || exit 1
done
cp "$repo/examples/fashion_mnist/lenet_train_test.prototxt" "$work/"
cd "$work"
for gpus in 0 0,1; do
  t=$(echo "$gpus" | tr , _)
  sed -e 's/^max_iter:.*/max_iter: 40/' -e 's/^snapshot:.*/snapshot: 17/' \
    -e 's/^test_interval:.*/test_interval: 100000/' \
    -e "s/^snapshot_prefix:.*/snapshot_prefix: \"s$t\"/" \
    "$repo/examples/fashion_mnist/lenet_solver.prototxt" >"s$t.prototxt"
  sed -e "s/\"s$t\"/\"r$t\"/" "s$t.prototxt" >"r$t.prototxt"
  timeout 120 "$kiln" train --solver "s$t.prototxt" --gpus "$gpus" >"$out/straight_$t.log" 2>&1
  echo "gpus $gpus: straight rc=$?"
  timeout 120 "$kiln" train --solver "r$t.prototxt" --gpus "$gpus" \
    --snapshot "s${t}_iter_17.solverstate" >"$out/resumed_$t.log" 2>&1
  echo "gpus $gpus: resumed rc=$?"
  if cmp -s "s${t}_iter_40.caffemodel" "r${t}_iter_40.caffemodel"; then
    echo "gpus $gpus: 40 straight vs 17 + resume + 23: byte-identical"
  else
    echo "gpus $gpus: DIFFERENT or missing"
  fi
done
# A rank that fails alone (the KILN_TEST_FAIL_RANK_AT hook, base/fault_injection.h) must end the
# whole job with its error within seconds, not linger in the NCCL teardown until --dist-timeout.
for r in 1 0; do
  start=$(date +%s)
  KILN_TEST_FAIL_RANK_AT=$r:5 timeout 150 "$kiln" train --solver s0_1.prototxt --gpus 0,1 \
    --dist-timeout 100 >"$out/fail_rank$r.log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 60 ] &&
    grep -q "rank $r failed at iteration 5" "$out/fail_rank$r.log"; then
    echo "rank $r fails alone: PASS (exit $rc after ${took} s)"
  else
    echo "rank $r fails alone: FAIL (exit $rc after ${took} s)"
  fi
done
