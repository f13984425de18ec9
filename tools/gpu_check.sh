#!/usr/bin/env bash
# The whole GPU check in one command, for the GPU machine. Expects the portable binaries in
# .gpu/ (made by `tools/gpu_check.sh --stage` here) and writes logs to $OUT (or /tmp).
set -uo pipefail
cd "$(dirname "$0")/.."

# Several GPUs (issue 18): tools/gpu_check_dist.sh says what it checks.
if [ "${1:-}" = "--stage" ] && [ "${2:-}" = "dist" ]; then
  exec bash tools/gpu_check_dist.sh --stage "${3:-.gpu-dist}"
fi
if [ "${1:-}" = "dist" ]; then
  exec bash tools/gpu_check_dist.sh
fi
if [ "${1:-}" = "--stage" ] && [ "${2:-}" = "train" ]; then
  # Training: the gradient kernels' tests, the graph tests (shared kernels changed), the solver
  # update, the CLI, Fashion-MNIST's IDX files and the train prototxts for the benchmark.
  bazel build --config=portable //tools:kiln //tests/kernels:cuda_gradient_test \
    //tests/kernels:solver_update_cuda_test //tests/kernels:cuda_graph_nn_test \
    //tests/kernels:cuda_graph_tensor_test //tests/runtime:cuda_network_test \
    //tests/kernels:primitives_cuda_test //tests/kernels:conv_cuda_test \
    //tests/kernels:primitives_channels_last_cuda_test \
    //tests/kernels:primitives_batchnorm_cuda_test \
    //tests/distributed:nccl_communicator_test || exit 1
  rm -rf .gpu && mkdir -p .gpu/models
  bash tools/pack_gpu_binaries.sh .gpu tools/kiln tests/kernels/cuda_gradient_test \
    tests/kernels/solver_update_cuda_test tests/kernels/cuda_graph_nn_test \
    tests/kernels/cuda_graph_tensor_test tests/runtime/cuda_network_test \
    tests/kernels/primitives_cuda_test tests/kernels/conv_cuda_test \
    tests/kernels/primitives_channels_last_cuda_test tests/kernels/primitives_batchnorm_cuda_test \
    tests/distributed/nccl_communicator_test || exit 1
  cp ../shared/models/caffe/*.prototxt .gpu/models/
  du -sh .gpu
  exit 0
fi
if [ "${1:-}" = "--stage" ] && [ "${2:-}" = "fashion" ]; then
  # Fashion-MNIST training alone: the CLI and the IDX files, in .gpu-fashion/ (the tests' binaries
  # and the data together are over the 64 MiB carry limit).
  bazel build --config=portable //tools:kiln || exit 1
  rm -rf .gpu-fashion && mkdir -p .gpu-fashion/fashion_mnist
  bash tools/pack_gpu_binaries.sh .gpu-fashion tools/kiln || exit 1
  cp /usr/share/datasets/fashion-mnist/*.gz .gpu-fashion/fashion_mnist/
  du -sh .gpu-fashion
  exit 0
fi
if [ "${1:-}" = "--stage" ] && [ "${2:-}" = "graph" ]; then
  # The graph engine's check: its tests, the CLI, the shared models and the benchmark scripts.
  bazel build --config=portable //tools:kiln //tests/kernels:cuda_test \
    //tests/kernels:cuda_graph_nn_test //tests/kernels:cuda_graph_tensor_test \
    //tests/runtime:cuda_network_test //examples:01_small_cnn \
    //tests/kernels:primitives_cuda_test //tests/kernels:conv_cuda_test || exit 1
  rm -rf .gpu && mkdir -p .gpu/models
  bash tools/pack_gpu_binaries.sh .gpu tools/kiln tests/kernels/cuda_test \
    tests/kernels/cuda_graph_nn_test tests/kernels/cuda_graph_tensor_test \
    tests/runtime/cuda_network_test examples/01_small_cnn tests/kernels/primitives_cuda_test \
    tests/kernels/conv_cuda_test || exit 1
  cp ../shared/models/caffe/*.prototxt .gpu/models/
  du -sh .gpu
  exit 0
fi
if [ "${1:-}" = "--stage" ]; then
  bazel build --config=portable //tests/kernels:cuda_test //tests/kernels:reference_test \
    //tests/kernels:conv_cuda_test //bench:conv_bench //examples:01_small_cnn //tools:kiln \
    //tests/kernels:primitives_cuda_test //tests/kernels:primitives_channels_last_cuda_test \
    //bench:primitives_bench || exit 1
  # The static OpenBLAS makes each binary ~27 MB; compressed they fit the 64 MiB carry limit.
  rm -rf .gpu && mkdir -p .gpu
  bash tools/pack_gpu_binaries.sh .gpu tests/kernels/cuda_test tests/kernels/reference_test \
    tests/kernels/conv_cuda_test bench/conv_bench examples/01_small_cnn tools/kiln \
    tests/kernels/primitives_cuda_test tests/kernels/primitives_channels_last_cuda_test \
    bench/primitives_bench || exit 1
  exit 0
fi

out="${OUT:-/tmp/kiln-gpu}"
# all | conv (convolution tests, memcheck, benchmark) | conv-quick (no memcheck) | train (the
# gradient kernels and bench/train_bench.py; stage with --stage train; KILN_SKIP_BENCH=1 skips
# the benchmark, KILN_SKIP_TESTS=1 the tests) | fashion (Fashion-MNIST LeNet trained with `kiln
# train` in fp32 and fp16; stage with --stage fashion, carry .gpu-fashion) |
# primitives (the other primitives: tests, memcheck, racecheck, benchmark) | primitives-quick |
# dist (two GPUs: NCCL, --gpus training against one GPU, killed ranks, DDP benchmark; stage with
# --stage dist; see tools/gpu_check_dist.sh)
what="${1:-all}"
mkdir -p "$out"
bin=/tmp/kiln-bin
stage=.gpu
[ "$what" = fashion ] && stage=.gpu-fashion
mkdir -p "$bin" && tar -C "$bin" -xJf "$stage/bin.tar.xz" || exit 1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
declare -A result
# cuDNN for the benchmark's side-by-side column: the one PyTorch ships, if any.
cudnn_dir=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(os.path.dirname(nvidia.cudnn.__file__), 'lib'))" 2>/dev/null)
if [ -n "$cudnn_dir" ] && [ -e "$cudnn_dir/libcudnn.so.9" ]; then
  export KILN_CUDNN_PATH="$cudnn_dir/libcudnn.so.9" LD_LIBRARY_PATH="$cudnn_dir:$LD_LIBRARY_PATH"
fi
run() {
  local name=$1
  shift
  "$@" >"$out/$name.log" 2>&1
  result[$name]=$?
}
if [ "$what" = conv ] || [ "$what" = conv-quick ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/nvidia_smi.log" 2>&1
  run conv_cuda_test "$bin/tests/kernels/conv_cuda_test"
  if [ "$what" = conv ]; then
    run conv_memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
      "$bin/tests/kernels/conv_cuda_test"
  fi
  run conv_bench "$bin/bench/conv_bench" ${KILN_BENCH_ARGS:-}
  # Whether the Hopper tensor-core instructions made it into the build.
  if command -v cuobjdump >/dev/null; then
    echo "HGMMA instructions in conv_bench: $(cuobjdump --dump-sass "$bin/bench/conv_bench" 2>/dev/null | grep -c HGMMA)"
  fi
  cat "$out/nvidia_smi.log"
  grep -E "^\[  (PASSED|FAILED)|runs checked|Failure|got .* want" "$out/conv_cuda_test.log" | head -40
  [ -f "$out/conv_memcheck.log" ] && tail -3 "$out/conv_memcheck.log"
  sed -n '/^mode /,$p' "$out/conv_bench.log"
  for k in conv_cuda_test conv_memcheck conv_bench; do
    [ -n "${result[$k]+x}" ] && printf '%-16s exit %s\n' "$k" "${result[$k]}"
  done
  exit 0
fi
if [ "$what" = graph ]; then
  # Every graph kernel against the reference, whole networks in four precisions, threads, the
  # CLI with no --device, then the benchmark against PyTorch (bench/graph_bench.py).
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/nvidia_smi.log" 2>&1
  export KILN_MODELS_DIR="$PWD/.gpu/models"
  run cuda_test "$bin/tests/kernels/cuda_test"
  run graph_nn_test "$bin/tests/kernels/cuda_graph_nn_test"
  run graph_tensor_test "$bin/tests/kernels/cuda_graph_tensor_test"
  run network_test "$bin/tests/runtime/cuda_network_test"
  run primitives_test "$bin/tests/kernels/primitives_cuda_test"
  run conv_test "$bin/tests/kernels/conv_cuda_test"
  # The compiler's structure and memory on every shared deploy net (CUDA plans, fp32 and fp16).
  run compile_fp32 python3 tools/compile_report.py --kiln "$bin/tools/kiln" \
    --models-dir .gpu/models --kiln-args "--device cuda --precision fp32"
  run compile_fp16 python3 tools/compile_report.py --kiln "$bin/tools/kiln" \
    --models-dir .gpu/models --kiln-args "--device cuda --precision fp16"
  python3 -c "import numpy as np; np.save('/tmp/x.npy', np.random.rand(1,3,224,224).astype(np.float32))"
  run kiln_run_auto "$bin/tools/kiln" run --model .gpu/models/resnet18_deploy.prototxt \
    --fill-seed 1 --input data=/tmp/x.npy
  if [ -z "${KILN_SKIP_BENCH:-}" ]; then
    # Kiln measures its convolution algorithms as PyTorch's cudnn.benchmark does; weights,
    # inputs and outputs stay in /tmp (too large to bring back), the table and JSON come back.
    mkdir -p /tmp/graph_bench
    PYTHONUNBUFFERED=1 run graph_bench python3 bench/graph_bench.py --kiln "$bin/tools/kiln" \
      --models-dir .gpu/models --out /tmp/graph_bench \
      --kiln-args "--algo measure --tuning-file /tmp/graph_bench/tuning.txt" ${KILN_BENCH_ARGS:-}
    cp /tmp/graph_bench/graph_bench.json /tmp/graph_bench/graph_bench.md "$out/" 2>/dev/null
  fi
  cat "$out/nvidia_smi.log"
  for k in cuda_test graph_nn_test graph_tensor_test network_test primitives_test conv_test; do
    grep -E "^\[  (PASSED|FAILED)|cases checked|Failure|FAILED  \]" "$out/$k.log" | head -20
  done
  grep -E "^network |^threads" "$out/network_test.log"
  cat "$out/compile_fp32.log" "$out/compile_fp16.log" | grep -v "^\["
  cat "$out/kiln_run_auto.log"
  [ -f "$out/graph_bench.log" ] && tail -30 "$out/graph_bench.log"
  for k in cuda_test graph_nn_test graph_tensor_test network_test primitives_test conv_test \
    compile_fp32 compile_fp16 kiln_run_auto graph_bench; do
    [ -n "${result[$k]+x}" ] && printf '%-18s exit %s\n' "$k" "${result[$k]}"
  done
  exit 0
fi
if [ "$what" = fashion ]; then
  # Fashion-MNIST LeNet trained with `kiln train` (fp32, then fp16): the issue's accuracy runs.
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/nvidia_smi.log" 2>&1
  fm=/tmp/fashion_mnist && mkdir -p "$fm"
  for set in train t10k; do
    name=$([ "$set" = train ] && echo train || echo test)
    "$bin/tools/kiln" convert --images .gpu-fashion/fashion_mnist/$set-images-idx3-ubyte.gz \
      --labels .gpu-fashion/fashion_mnist/$set-labels-idx1-ubyte.gz \
      --out "$fm/fashion_mnist_${name}_lmdb" --overwrite >>"$out/convert.log" 2>&1
  done
  solver="$PWD/examples/fashion_mnist/lenet_solver.prototxt"
  for p in fp32 fp16; do
    start=$(date +%s%N)
    (cd "$fm" && "$bin/tools/kiln" train --solver "$solver" --precision $p \
      --curve "$out/fashion_curve_$p.svg") >"$out/train_$p.log" 2>"$out/train_$p.err"
    result[train_$p]=$?
    echo "wall $((($(date +%s%N) - start) / 1000000)) ms" >>"$out/train_$p.log"
  done
  cat "$out/nvidia_smi.log"
  for p in fp32 fp16; do
    grep -E "^kiln train|Test net output|^wall" "$out/train_$p.log" | tail -5
    tail -2 "$out/train_$p.err"
    printf '%-18s exit %s\n' "train_$p" "${result[train_$p]}"
  done
  exit 0
fi
if [ "$what" = train ]; then
  # Gradient kernels against the reference in every precision and layout, the solver update,
  # the graph tests, then Fashion-MNIST LeNet trained with `kiln train` (fp32, then fp16), then
  # bench/train_bench.py against PyTorch (unless KILN_SKIP_BENCH is set).
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/nvidia_smi.log" 2>&1
  export KILN_MODELS_DIR="$PWD/.gpu/models"
  # KILN_SKIP_TESTS=1: only the benchmark (a second call, after the tests passed in a first).
  if [ -z "${KILN_SKIP_TESTS:-}" ]; then
  run gradient_test "$bin/tests/kernels/cuda_gradient_test"
  run solver_test "$bin/tests/kernels/solver_update_cuda_test"
  run graph_nn_test "$bin/tests/kernels/cuda_graph_nn_test"
  run graph_tensor_test "$bin/tests/kernels/cuda_graph_tensor_test"
  run network_test "$bin/tests/runtime/cuda_network_test"
  run primitives_test "$bin/tests/kernels/primitives_cuda_test"
  run conv_test "$bin/tests/kernels/conv_cuda_test"
  run channels_last_test "$bin/tests/kernels/primitives_channels_last_cuda_test"
  run batchnorm_test "$bin/tests/kernels/primitives_batchnorm_cuda_test"
  # One GPU: the one-rank NCCL cases run, the two-rank ones skip (tools/gpu_check_dist.sh).
  run nccl_test "$bin/tests/distributed/nccl_communicator_test"
  fi
  if [ -z "${KILN_SKIP_BENCH:-}" ] && [ -f bench/train_bench.py ]; then
    mkdir -p /tmp/train_bench
    # Kiln measures its convolution algorithms as PyTorch's cudnn.benchmark does.
    PYTHONUNBUFFERED=1 run train_bench python3 bench/train_bench.py --kiln "$bin/tools/kiln" \
      --models-dir .gpu/models --out /tmp/train_bench \
      --kiln-args "--algo measure --tuning-file /tmp/train_bench/tuning.txt" ${KILN_BENCH_ARGS:-}
    cp /tmp/train_bench/train_bench.json /tmp/train_bench/train_bench.md "$out/" 2>/dev/null
  fi
  cat "$out/nvidia_smi.log"
  for k in gradient_test solver_test graph_nn_test graph_tensor_test network_test \
    primitives_test conv_test channels_last_test batchnorm_test nccl_test; do
    grep -E "^\[  (PASSED|FAILED)|cases checked|cuda gradients|Failure|FAILED  \]" \
      "$out/$k.log" | head -12
  done
  grep -E "^network |^threads" "$out/network_test.log" | tail -4
  [ -f "$out/train_bench.log" ] && tail -20 "$out/train_bench.log"
  for k in gradient_test solver_test graph_nn_test graph_tensor_test network_test \
    primitives_test conv_test channels_last_test batchnorm_test nccl_test \
    train_bench; do
    [ -n "${result[$k]+x}" ] && printf '%-18s exit %s\n' "$k" "${result[$k]}"
  done
  exit 0
fi
if [ "$what" = primitives ] || [ "$what" = primitives-quick ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/nvidia_smi.log" 2>&1
  run primitives_cuda_test "$bin/tests/kernels/primitives_cuda_test"
  run channels_last_test "$bin/tests/kernels/primitives_channels_last_cuda_test"
  if [ "$what" = primitives ]; then
    # The same test under memcheck (out-of-bounds, misaligned) and racecheck (shared memory).
    run prim_memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
      "$bin/tests/kernels/primitives_cuda_test"
    # racecheck looks at shared memory only: the kernels that use it are the reductions (batch
    # norm, PReLU slope, bias gradients), softmax and its loss, LRN backward's ring, and the
    # row-tiled pooling (staged rows, the backward accumulator and its warp sub-steps).
    run prim_racecheck compute-sanitizer --tool racecheck --error-exitcode 1 \
      "$bin/tests/kernels/primitives_cuda_test" \
      "--gtest_filter=*BatchNorm*:*Softmax*:*Lrn*:*PRelu*:*TensorOps*:*Pooling*"
    # The channels-last kernels: LRN's warp shuffles and loads at a warp's ends, and the tiled
    # pooling backward (outputs staged in shared memory, then gathered).
    run cl_memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
      "$bin/tests/kernels/primitives_channels_last_cuda_test"
    run cl_racecheck compute-sanitizer --tool racecheck --error-exitcode 1 \
      "$bin/tests/kernels/primitives_channels_last_cuda_test" "--gtest_filter=*Pooling*"
  fi
  run primitives_bench "$bin/bench/primitives_bench" ${KILN_BENCH_ARGS:-}
  cat "$out/nvidia_smi.log"
  for k in primitives_cuda_test channels_last_test; do
    grep -E "^\[  (PASSED|FAILED)|results checked|Failure|got .* want|overwritten" \
      "$out/$k.log" | head -40
  done
  for k in prim_memcheck prim_racecheck cl_memcheck cl_racecheck; do
    [ -f "$out/$k.log" ] && tail -2 "$out/$k.log"
  done
  sed -n '/^device copy/,$p' "$out/primitives_bench.log"
  for k in primitives_cuda_test channels_last_test prim_memcheck prim_racecheck cl_memcheck \
    cl_racecheck primitives_bench; do
    [ -n "${result[$k]+x}" ] && printf '%-22s exit %s\n' "$k" "${result[$k]}"
  done
  exit 0
fi
run kiln_version "$bin/tools/kiln" version
run cuda_test "$bin/tests/kernels/cuda_test" --gtest_output=xml:"$out/cuda_test.xml"
run reference_test "$bin/tests/kernels/reference_test"
run small_cnn_auto "$bin/examples/01_small_cnn"
run small_cnn_cuda "$bin/examples/01_small_cnn" --backend=cuda --dump
run small_cnn_cpu "$bin/examples/01_small_cnn" --backend=cpu
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/nvidia_smi.log" 2>&1

cat "$out/kiln_version.log"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests? from .* ran|CUDA runtime|device 0" "$out/cuda_test.log"
grep -E "backend|probabilities|sum" "$out/small_cnn_auto.log" "$out/small_cnn_cpu.log"
echo
printf '%-16s %s\n' check exit
for k in kiln_version cuda_test reference_test small_cnn_auto small_cnn_cuda small_cnn_cpu; do
  printf '%-16s %s\n' "$k" "${result[$k]}"
done
