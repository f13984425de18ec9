#!/usr/bin/env bash
# The public API's GPU checks (issue 33, item 6) on a machine with two GPUs (nvidia-h100-x2).
# Stage here:
#   bazel build --config=portable //tools:kiln //tests/api:engine_gpu_test \
#     //tests/runtime:cuda_network_test
#   bash tools/pack_gpu_binaries.sh .gpu tools/kiln tests/api/engine_gpu_test \
#     tests/runtime/cuda_network_test
#   mkdir -p .gpu/models && cp ../shared/models/caffe/*.prototxt \
#     ../shared/models/caffe/lenet_iter_10000.caffemodel .gpu/models/
# then run there (carry [".gpu"]): OUT=$OUT bash tools/gpu_check_api.sh
set -u
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/kiln-gpu}"
mkdir -p "$out" /tmp/kb && tar -C /tmp/kb -xJf .gpu/bin.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
models="$PWD/.gpu/models"
declare -A result
# ResNet-18 filler weights for the variable-batch case (a .caffemodel written by `kiln run`).
python3 -c "import numpy; numpy.save('/tmp/r18_x.npy', numpy.zeros((1, 3, 224, 224), 'float32'))"
/tmp/kb/tools/kiln run --model "$models/resnet18_deploy.prototxt" --fill-seed 1 \
  --input data=/tmp/r18_x.npy --save-weights /tmp/r18.caffemodel --overwrite >/dev/null 2>&1
export KILN_RESNET18_PROTOTXT="$models/resnet18_deploy.prototxt"
export KILN_RESNET18_CAFFEMODEL=/tmp/r18.caffemodel
/tmp/kb/tests/api/engine_gpu_test >"$out/engine_gpu_test.log" 2>&1 && result[api]=PASS ||
  result[api]=FAIL
# The same plans as before the executor changed (weights shared, device per plan), whole nets.
[ "${SKIP_NETWORK:-0}" = 1 ] || KILN_MODELS_DIR="$models" /tmp/kb/tests/runtime/cuda_network_test >"$out/cuda_network_test.log" \
  2>&1 && result[network]=PASS || result[network]=FAIL
# The CLI on the second GPU.
[ "${SKIP_NETWORK:-0}" = 1 ] && result[network]=skipped
/tmp/kb/tools/kiln time --model "$models/lenet.prototxt" --weights \
  "$models/lenet_iter_10000.caffemodel" --device cuda:1 >"$out/kiln_run_cuda1.log" 2>&1 &&
  grep -q "cuda:1" "$out/kiln_run_cuda1.log" && result[cli]=PASS || result[cli]=FAIL
# Saved plans on ResNet-18 (filler weights): compile with measured algorithms and save, then
# load and time (no measuring).
r18="$models/resnet18_deploy.prototxt"
/tmp/kb/tools/kiln compile --model "$r18" --fill-seed 1 --batch 64 --precision fp16 \
  --algo measure --save-plan /tmp/r18.plan >"$out/r18_compile.log" 2>&1 &&
  /tmp/kb/tools/kiln time --plan /tmp/r18.plan --iterations 20 >"$out/r18_plan.log" 2>&1 &&
  result[plan]=PASS || result[plan]=FAIL
grep -h "plan written\|loaded in\|forward" "$out/r18_compile.log" "$out/r18_plan.log"
grep -h "ResNet-18 up to\|largest difference\|contexts added\|loaded in\|RunOnDevice returned\|cuda:1 took\|\[  PASSED\|\[  FAILED\|SKIPPED \]" \
  "$out/engine_gpu_test.log"
grep -h "tests ran\|PASSED\|FAILED" "$out/cuda_network_test.log" | tail -3
grep -h "backend" "$out/kiln_run_cuda1.log" | head -2
echo "saved ResNet-18 plan: ${result[plan]}; engine_gpu_test: ${result[api]}; cuda_network_test: ${result[network]}; kiln time --device cuda:1: ${result[cli]}"
