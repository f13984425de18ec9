#!/usr/bin/env bash
# Every family of network on the GPU (issue 37): the convolution primitives' tests (the depthwise
# kernels among them), the per-layer time of the public nets in Kiln, then bench/graph_bench.py
# on public Caffe nets that are not in ../shared (bench/public_models.py fetches them) beside
# ResNet-18 and DenseNet-121, against PyTorch eager and torch.compile in the same run; and the
# default (no --algo) run twice against a fresh tuning cache.
# Stage here (fills .gpu-nets/, carried to the GPU machine):
#   bash tools/gpu_check_nets.sh --stage [--mirror DIR]
# then run there (carry [".gpu-nets"]):
#   OUT=$OUT bash tools/gpu_check_nets.sh [ROWS] [PRECISIONS]
# ROWS as graph_bench.py's --rows (default mobilenet:64,mobilenet_v2:64), PRECISIONS as its
# --precisions (default tf32,fp16). KILN_COMPILE_MODE (default reduce-overhead, the issue's
# anchor), KILN_SKIP_TESTS=1 and KILN_SKIP_BENCH=1 select parts.
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--stage" ]; then
  shift
  bazel build --config=portable //tools:kiln //tests/kernels:conv_cuda_test || exit 1
  rm -rf .gpu-nets && mkdir -p .gpu-nets/models
  bash tools/pack_gpu_binaries.sh .gpu-nets tools/kiln tests/kernels/conv_cuda_test || exit 1
  cp ../shared/models/caffe/{resnet18,densenet121,caffenet}_deploy.prototxt .gpu-nets/models/
  python3 bench/public_models.py --out .gpu-nets/models "$@" || exit 1
  # Their training prototxts for bench/train_bench.py (--models-dir .gpu-nets/models).
  for deploy in .gpu-nets/models/*_deploy.prototxt; do
    python3 bench/deploy_to_train.py "$deploy" "${deploy%_deploy.prototxt}_train.prototxt" \
      --overwrite >/dev/null || exit 1
  done
  grep -qx "/.gpu-nets/" .git/info/exclude || echo "/.gpu-nets/" >>.git/info/exclude
  du -sh .gpu-nets
  exit 0
fi
rows="${1:-mobilenet:64,mobilenet_v2:64}"
precisions="${2:-tf32,fp16}"
out="${OUT:-/tmp/kiln-gpu-nets}"
mkdir -p "$out"
bin=/tmp/kiln-bin-nets
mkdir -p "$bin" && tar -C "$bin" -xJf .gpu-nets/bin.tar.xz || exit 1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
declare -A result
run() {
  local name=$1
  shift
  "$@" >"$out/$name.log" 2>&1
  result[$name]=$?
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/nvidia_smi.log" 2>&1
if [ -z "${KILN_SKIP_TESTS:-}" ]; then
  run conv_cuda_test "$bin/tests/kernels/conv_cuda_test"
fi
# Where the time goes, layer by layer, in the first row's net (fp16, measured algorithms).
first_net="${rows%%,*}"
first_net="${first_net%%:*}"
run layers_fp16 "$bin/tools/kiln" time --model ".gpu-nets/models/${first_net}_deploy.prototxt" \
  --device cuda --precision fp16 --layout auto --algo measure \
  --input-shape "data=64,3,224,224" --iterations 30
# Fast by default: the first net with no --algo, twice, against a fresh per-user cache (the
# first run measures into it, the second reads it), wall time and forward time of each.
export KILN_CACHE_DIR=/tmp/kiln-cache-check
rm -rf "$KILN_CACHE_DIR"
for i in 1 2; do
  start=$(date +%s%N)
  run default_$i "$bin/tools/kiln" time --model ".gpu-nets/models/${first_net}_deploy.prototxt" \
    --device cuda --precision fp16 --input-shape "data=64,3,224,224" --iterations 30
  echo "wall $((($(date +%s%N) - start) / 1000000)) ms" >>"$out/default_$i.log"
done
unset KILN_CACHE_DIR
if [ -z "${KILN_SKIP_BENCH:-}" ]; then
  mkdir -p /tmp/graph_bench_nets
  run graph_bench python3 bench/graph_bench.py --kiln "$bin/tools/kiln" \
    --models-dir .gpu-nets/models --out /tmp/graph_bench_nets --rows "$rows" \
    --precisions "$precisions" --kiln-variants fused \
    --compile-mode "${KILN_COMPILE_MODE:-reduce-overhead}" \
    --kiln-args "--algo measure --layout auto --tuning-file /tmp/graph_bench_nets/tuning.txt"
  cp /tmp/graph_bench_nets/graph_bench.json /tmp/graph_bench_nets/graph_bench.md "$out/" \
    2>/dev/null
fi
cat "$out/nvidia_smi.log"
[ -f "$out/conv_cuda_test.log" ] &&
  grep -E "^\[  (PASSED|FAILED)|runs checked|runs applied|Failure|got .* want" \
    "$out/conv_cuda_test.log" | head -30
grep -E "^layer|/dw|sum of layers|^forward" "$out/layers_fp16.log" | head -45
for i in 1 2; do
  echo "no --algo, run $i: $(grep -E "^forward|^wall" "$out/default_$i.log" | tr '\n' ' ')"
done
[ -f "$out/graph_bench.log" ] && tail -25 "$out/graph_bench.log"
for k in conv_cuda_test layers_fp16 default_1 default_2 graph_bench; do
  [ -n "${result[$k]+x}" ] && printf '%-16s exit %s\n' "$k" "${result[$k]}"
done
exit 0
