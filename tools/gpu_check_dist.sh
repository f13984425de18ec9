#!/usr/bin/env bash
# The multi-GPU check (issue 18), for a machine with two GPUs. Called by tools/gpu_check.sh:
#
#   bash tools/gpu_check.sh --stage dist [DEST]   here: portable binaries, models and
#                                                  Fashion-MNIST into DEST (default .gpu-dist)
#   bash tools/gpu_check.sh dist                   on the GPU machine, from the repo root, with
#                                                  .gpu-dist carried; logs and reports to $OUT
#
# What the device run checks, each PASS or FAIL in the table at the end:
#   nccl_test      the gpu-tagged NCCL communicator tests on two GPUs
#   lenet_2gpu     LeNet (Fashion-MNIST), 20 steps: `--gpus 0,1` with batch B per GPU against
#                  one GPU with batch 2B, same seeds: the snapshots agree to 1e-5
#                  (kiln diff-weights: |a-b| <= 1e-5 (1 + |b|) for every weight)
#   resnet_2gpu    the same for a small BatchNorm-free ResNet
#   lenet_2gpu_no_overlap  lenet_2gpu with --no-overlap (every bucket all-reduced after
#                  backward instead of during it, on the trainer's stream)
#   kill_rank      two ranks started by hand (--rank/--world-size/--rendezvous); rank 1 is
#                  killed with SIGKILL mid-run; rank 0 must exit non-zero with an error within
#                  the --dist-timeout (20 s) plus a margin
#   kill_launcher  the same through `--gpus 0,1`: the launcher must exit non-zero naming rank 1
#   ddp_bench      bench/ddp_bench.py: Kiln vs PyTorch DDP, 1 and 2 GPUs (KILN_SKIP_BENCH=1
#                  skips it); its table in $OUT/ddp_bench.md and a PERF.md with its section
#
# Dry run without GPUs (what can run on a CPU machine): KILN_DIST_DRY_RUN=1 runs everything with
# the local bazel-bin binaries; the GPU items then FAIL with kiln's own messages, which shows the
# messages are clear and the script's plumbing works.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--stage" ]; then
  dest="${2:-.gpu-dist}"
  bazel build --config=portable //tools:kiln //tests/distributed:nccl_communicator_test || exit 1
  rm -rf "$dest" && mkdir -p "$dest/models" "$dest/fashion_mnist" || exit 1
  bash tools/pack_gpu_binaries.sh "$dest" tools/kiln tests/distributed/nccl_communicator_test ||
    exit 1
  models=../shared/models/caffe
  [ -d "$models" ] || models=/work/shared/models/caffe
  cp "$models/resnet18_train.prototxt" "$models/caffenet_train_val.prototxt" \
    "$models/lenet_train_test.prototxt" "$dest/models/" || exit 1
  cp /usr/share/datasets/fashion-mnist/train-*.gz "$dest/fashion_mnist/" || exit 1
  du -sh "$dest"
  exit 0
fi

out="${OUT:-/tmp/kiln-gpu-dist}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
work=/tmp/kiln-dist-work
rm -rf "$work" && mkdir -p "$work"
if [ -n "${KILN_DIST_DRY_RUN:-}" ]; then
  kiln="$PWD/bazel-bin/tools/kiln"
  nccl_test="$PWD/bazel-bin/tests/distributed/nccl_communicator_test"
  fm_src=/usr/share/datasets/fashion-mnist
  models=/work/shared/models/caffe
else
  bin=/tmp/kiln-dist-bin
  rm -rf "$bin" && mkdir -p "$bin"
  if ! tar -C "$bin" -xJf .gpu-dist/bin.tar.xz; then
    echo "FAIL: cannot unpack .gpu-dist/bin.tar.xz (stage it with: bash tools/gpu_check.sh --stage dist)"
    exit 1
  fi
  kiln="$bin/tools/kiln"
  nccl_test="$bin/tests/distributed/nccl_communicator_test"
  fm_src=.gpu-dist/fashion_mnist
  models="$PWD/.gpu-dist/models"
fi
# NCCL: the toolkit's, else the one PyTorch's wheels bring.
if grep -q "libnccl.so.2 => not found" <<<"$(ldd "$kiln" 2>/dev/null)"; then
  nccl_dir=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
  [ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$nccl_dir:$LD_LIBRARY_PATH"
fi
now_ms() { echo $(($(date +%s%N) / 1000000)); }
seconds_since() {  # ms timestamp -> "S.s"
  local d=$(($(now_ms) - $1))
  echo "$((d / 1000)).$((d % 1000 / 100))"
}
child_with_args() {  # parent pid, text in the child's arguments -> the child's pid
  local p
  for p in /proc/[0-9]*; do
    [ "$(awk '{print $4}' "$p/stat" 2>/dev/null)" = "$1" ] || continue
    [[ "$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" == *"$2"* ]] && basename "$p"
  done
}
declare -A result detail
# The dry run trains on the CPU where one process can (the multi-GPU steps then fail with kiln's
# message); on the GPU machine everything runs on CUDA.
device=cuda
[ -n "${KILN_DIST_DRY_RUN:-}" ] && device=cpu
order=()
record() {  # name PASS|FAIL detail
  result[$1]=$2
  detail[$1]=$3
  order+=("$1")
  echo "$2  $1: $3"
}
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  echo "kiln: $kiln"
  ldd "$kiln" | grep -E "nccl|cublas|cudart" || true
  "$kiln" version
  python3 -c 'import torch; print("torch", torch.__version__, "GPUs", torch.cuda.device_count())'
} >"$out/environment.log" 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")

# (a) The NCCL communicator's GPU cases (they need two GPUs for the two-rank ones).
"$nccl_test" >"$out/nccl_test.log" 2>&1
rc=$?
skipped=$(grep -c "^\[  SKIPPED \]" "$out/nccl_test.log")
summary=$(grep -E "^\[  (PASSED|FAILED) " "$out/nccl_test.log" | tr '\n' ' ')
if [ $rc -eq 0 ] && [ "$ngpu" -ge 2 ] && ! grep -q "SKIPPED" "$out/nccl_test.log"; then
  record nccl_test PASS "$summary"
else
  record nccl_test FAIL "exit $rc, $ngpu GPUs, $skipped skipped: $summary (see nccl_test.log)"
fi

# Fashion-MNIST's training set as the LMDB the prototxts read.
fm="$work/fashion_mnist"
mkdir -p "$fm"
"$kiln" convert --images "$fm_src/train-images-idx3-ubyte.gz" \
  --labels "$fm_src/train-labels-idx1-ubyte.gz" --out "$fm/fashion_mnist_train_lmdb" \
  --overwrite >"$out/convert.log" 2>&1 || echo "kiln convert failed: see convert.log"

# A copy of NAME's solver and net with batch BATCH per process and snapshots under PREFIX.
make_solver() {  # name batch prefix -> prints the solver path
  local name=$1 batch=$2 prefix=$3 dir="$work/$1_b$2"
  mkdir -p "$dir"
  sed "s/batch_size: 32/batch_size: $batch/" "examples/distributed/${name}_train.prototxt" \
    >"$dir/${name}_train.prototxt"
  sed -e "s|^net: .*|net: \"$dir/${name}_train.prototxt\"|" \
    -e "s|^snapshot_prefix: .*|snapshot_prefix: \"$prefix\"|" \
    "examples/distributed/${name}_solver.prototxt" >"$dir/solver.prototxt"
  echo "$dir/solver.prototxt"
}

# (b) Two GPUs of batch B against one GPU of batch 2B, 20 steps, same seeds; the bucket
# all-reduces overlap backward (the default), and for LeNet once more after it (--no-overlap).
B=32
for spec in lenet resnet_small lenet_no_overlap; do
  name=${spec%_no_overlap}
  flags=()
  [ "$spec" != "$name" ] && flags=(--no-overlap)
  item="${name}_2gpu${spec#"$name"}"
  one=$(make_solver $name $((2 * B)) "$work/${item}_one")
  two=$(make_solver $name $B "$work/${item}_two")
  # --algo heuristic: the same convolution algorithms on both sides (measured choices could
  # differ between the runs and move the weights past the 1e-5 the comparison allows).
  (cd "$fm" && CUDA_VISIBLE_DEVICES=0 timeout 300 "$kiln" train --solver "$one" --device "$device" \
    --algo heuristic --curve "$work/${item}_one.svg") >"$out/${item}_1gpu.log" 2>&1
  rc1=$?
  (cd "$fm" && timeout 300 "$kiln" train --solver "$two" --gpus 0,1 --device "$device" \
    --algo heuristic --dist-timeout 60 --curve "$work/${item}_two.svg" ${flags[@]+"${flags[@]}"}) \
    >"$out/${item}_2gpu.log" 2>&1
  rc2=$?
  a="$work/${item}_two_iter_20.caffemodel"
  b="$work/${item}_one_iter_20.caffemodel"
  if [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ] || [ ! -f "$a" ] || [ ! -f "$b" ]; then
    record "$item" FAIL "1 GPU exit $rc1, 2 GPUs exit $rc2 (see ${item}_1gpu.log, ${item}_2gpu.log): $(tail -1 "$out/${item}_2gpu.log")"
    continue
  fi
  "$kiln" diff-weights --weights "$a" --against "$b" --tolerance 1e-5 >"$out/${item}_diff.log" 2>&1
  rc=$?
  line=$(tail -1 "$out/${item}_diff.log")
  loss1=$(grep -E "^kiln train: 20 iterations" "$out/${item}_1gpu.log" | sed 's/.*final loss/final loss/')
  loss2=$(grep -E "^kiln train: 20 iterations" "$out/${item}_2gpu.log" | sed 's/.*final loss/final loss/')
  record "$item" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" \
    "${line#diff-weights: }; 1 GPU $loss1, 2 GPUs $loss2"
done

# (c) A rank killed with SIGKILL mid-run: the survivor must stop with an error, not hang.
timeout_s=20
solver=$(make_solver lenet $B "$work/kill")
addr="file:$work/kill_rdzv"
(cd "$fm" && CUDA_VISIBLE_DEVICES=0 exec "$kiln" train --solver "$solver" --iterations 1000000 \
  --rank 0 --world-size 2 --rendezvous "$addr" --dist-timeout $timeout_s --device "$device") \
  >"$out/kill_rank0.log" 2>&1 &
p0=$!
(cd "$fm" && CUDA_VISIBLE_DEVICES=1 exec "$kiln" train --solver "$solver" --iterations 1000000 \
  --rank 1 --world-size 2 --rendezvous "$addr" --dist-timeout $timeout_s --device "$device") \
  >"$out/kill_rank1.log" 2>&1 &
p1=$!
# Wait until both ranks train (their start lines are printed after NCCL joined), then 3 s more.
for _ in $(seq 1 120); do
  grep -q "rank 1 of 2" "$out/kill_rank1.log" 2>/dev/null && break
  kill -0 $p1 2>/dev/null || break
  sleep 0.5
done
sleep 3
if kill -0 $p0 2>/dev/null && kill -0 $p1 2>/dev/null; then
  kill -9 $p1
  killed_at=$(now_ms)
  limit_ms=$(((timeout_s * 2 + 30) * 1000))
  while kill -0 $p0 2>/dev/null && [ $(($(now_ms) - killed_at)) -lt $limit_ms ]; do
    sleep 0.2
  done
  if kill -0 $p0 2>/dev/null; then
    kill -9 $p0
    wait $p0 2>/dev/null
    record kill_rank FAIL "rank 0 still running $((limit_ms / 1000)) s after rank 1 was killed (a hang)"
  else
    wait $p0
    rc0=$?
    took=$(seconds_since $killed_at)
    err=$(grep -E "kiln train: [A-Z_]+: " "$out/kill_rank0.log" | tail -1)
    if [ $rc0 -ne 0 ] && [ -n "$err" ]; then
      record kill_rank PASS "rank 0 exit $rc0 ${took} s after rank 1 was killed: $err"
    else
      record kill_rank FAIL "rank 0 exit $rc0 ${took} s after the kill, no error line (see kill_rank0.log)"
    fi
  fi
else
  kill -9 $p0 $p1 2>/dev/null
  wait $p0 $p1 2>/dev/null
  record kill_rank FAIL "the ranks did not both start (see kill_rank0.log, kill_rank1.log): $(tail -1 "$out/kill_rank0.log")"
fi

# (c') The same through the launcher: kill rank 1's process; the launcher names it.
(cd "$fm" && exec "$kiln" train --solver "$solver" --iterations 1000000 --gpus 0,1 \
  --dist-timeout $timeout_s --device "$device") >"$out/kill_launcher.log" 2>&1 &
pl=$!
child=""
for _ in $(seq 1 120); do
  child=$(child_with_args $pl "--rank 1 ")
  [ -n "$child" ] && grep -q "Iteration" "$out/kill_launcher.log" 2>/dev/null && break
  kill -0 $pl 2>/dev/null || break
  sleep 0.5
done
if [ -n "$child" ] && kill -0 $pl 2>/dev/null; then
  sleep 2
  kill -9 "$child"
  killed_at=$(now_ms)
  while kill -0 $pl 2>/dev/null && [ $(($(now_ms) - killed_at)) -lt 60000 ]; do
    sleep 0.2
  done
  if kill -0 $pl 2>/dev/null; then
    kill -TERM $pl
    sleep 2
    record kill_launcher FAIL "the launcher still ran 60 s after rank 1 was killed"
  else
    wait $pl
    rcl=$?
    took=$(seconds_since $killed_at)
    msg=$(grep -E "rank 1 .*failed" "$out/kill_launcher.log" | tail -1)
    if [ $rcl -ne 0 ] && [ -n "$msg" ]; then
      record kill_launcher PASS "exit $rcl ${took} s after the kill: $msg"
    else
      record kill_launcher FAIL "exit $rcl ${took} s after the kill, no 'rank 1 ... failed' line (see kill_launcher.log)"
    fi
  fi
else
  kill -TERM $pl 2>/dev/null
  wait $pl 2>/dev/null
  record kill_launcher FAIL "rank 1 was not found training under the launcher (see kill_launcher.log): $(tail -1 "$out/kill_launcher.log")"
fi

# (d) The benchmark: Kiln --gpus vs PyTorch DDP.
if [ -z "${KILN_SKIP_BENCH:-}" ]; then
  cp docs/PERF.md "$out/PERF.md" 2>/dev/null
  bench_args=()
  [ -n "${KILN_DIST_DRY_RUN:-}" ] && bench_args=(--torch-device cpu --rows lenet:8 --precisions fp32 --iterations 3 --warmup 1 --kiln-args "--device cpu")
  # Capped so that the whole check fits a 10-minute command; on the cap (SIGINT) the benchmark
  # reports what it finished (timeout then exits 124).
  PYTHONUNBUFFERED=1 timeout -s INT -k 20 "${KILN_DDP_BENCH_CAP:-330}" python3 bench/ddp_bench.py --kiln "$kiln" --models-dir "$models" \
    --out "$out" --perf-md "$out/PERF.md" --kiln-args "${KILN_DDP_KILN_ARGS:---algo measure}" \
    ${bench_args[@]+"${bench_args[@]}"} >"$out/ddp_bench.log" 2>&1
  rc=$?
  fails=$(grep -c "failed" "$out/ddp_bench.md" 2>/dev/null)
  if [ $rc -eq 0 ] && [ "${fails:-0}" = 0 ]; then
    record ddp_bench PASS "table in ddp_bench.md, PERF.md section in \$OUT/PERF.md"
  elif [ $rc -eq 3 ] || [ $rc -eq 124 ]; then
    record ddp_bench FAIL "stopped at the ${KILN_DDP_BENCH_CAP:-330} s cap: partial table in ddp_bench.md (run it alone: see tools/gpu_check_dist.sh)"
  else
    record ddp_bench FAIL "exit $rc, ${fails:-?} failed measurements (see ddp_bench.log, ddp_bench.md)"
  fi
fi

echo
cat "$out/environment.log" | head -8
[ -f "$out/ddp_bench.md" ] && cat "$out/ddp_bench.md"
echo
printf '%-22s %-5s %s\n' check result detail
for k in "${order[@]}"; do
  printf '%-22s %-5s %s\n' "$k" "${result[$k]}" "${detail[$k]}"
done
