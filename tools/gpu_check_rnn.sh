#!/usr/bin/env bash
# Sequence models on the GPU (issue 34): the RNN and CTC primitives' tests against the CPU
# reference, every graph kernel's cases (cuda_graph_nn_test: RNN, Embed, CTCLoss, ArgMax,
# LSTMUnit, InnerProduct with axis, SoftmaxWithLoss with axis and ignore_label among them), the
# tensor family's (cuda_graph_tensor_test: Tile and Reduction), every gradient case
# (cuda_gradient_test), whole Caffe nets' loss and gradients against the reference
# (whole_net_cuda_test: the LSTM's static input among them), then bench/rnn_bench.py beside
# PyTorch's cuDNN nn.LSTM / nn.GRU and bench/ctc_bench.py beside nn.CTCLoss, then the two
# training jobs, in one run. A table of what passed and the geomeans comes last.
# Stage here (fills .gpu-rnn/, carried to the GPU machine):
#   bash tools/gpu_check_rnn.sh --stage
# then run there (carry [".gpu-rnn"]):
#   OUT=$OUT bash tools/gpu_check_rnn.sh [RNN_ROWS] [CTC_ROWS]
# RNN_ROWS as rnn_bench.py's --rows (default: its own), CTC_ROWS as ctc_bench.py's --rows
# (default 1000:32:30:ragged,1000:32:1000:ragged,1000:64:5000:full). KILN_SKIP_TESTS=1,
# KILN_SKIP_BENCH=1, KILN_SKIP_LM=1 and KILN_SKIP_CTC=1 (the CTC training job) select parts;
# KILN_LM_ITERS sets the language models' iterations (10000).
set -u
cd "$(dirname "$0")/.."
binaries=(tests/ops/rnn/rnn_primitive_cuda_test tests/ops/ctc/ctc_primitive_cuda_test
  tests/kernels/cuda_graph_nn_test tests/kernels/cuda_graph_tensor_test
  tests/kernels/cuda_gradient_test tests/training/whole_net_cuda_test bench/rnn_bench
  bench/ctc_bench tools/kiln)
if [ "${1:-}" = "--stage" ]; then
  targets=()
  for b in "${binaries[@]}"; do targets+=("//$(dirname "$b"):$(basename "$b")"); done
  bazel build --config=portable "${targets[@]}" || exit 1
  rm -rf .gpu-rnn && mkdir -p .gpu-rnn
  bash tools/pack_gpu_binaries.sh .gpu-rnn "${binaries[@]}" || exit 1
  cp bench/rnn_bench.py bench/ctc_bench.py examples/char_lm/char_lm.py .gpu-rnn/
  # The language model's batches (h5py is here, maybe not there): reused with --data-from.
  /usr/bin/python3 examples/char_lm/char_lm.py --work .gpu-rnn/lm_data --prepare-only || exit 1
  cp examples/ctc_strips/ctc_strips.py .gpu-rnn/
  /usr/bin/python3 examples/ctc_strips/ctc_strips.py --work .gpu-rnn/ctc_data --prepare-only ||
    exit 1
  grep -qx "/.gpu-rnn/" .git/info/exclude || echo "/.gpu-rnn/" >>.git/info/exclude
  du -sh .gpu-rnn
  exit 0
fi
rnn_rows="${1:-}"
ctc_rows="${2:-1000:32:30:ragged,1000:32:1000:ragged,1000:64:5000:full}"
out="${OUT:-/tmp/kiln-gpu-rnn}"
mkdir -p "$out"
bin=/tmp/kiln-bin-rnn
mkdir -p "$bin" && tar -C "$bin" -xJf .gpu-rnn/bin.tar.xz || exit 1
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
declare -A result
run() {
  local name=$1
  shift
  echo "== $name" >&2
  "$@" >"$out/$name.log" 2>&1
  result[$name]=$?
}
# run in the background; `collect NAME` after `wait` records its exit status.
run_async() {
  local name=$1
  shift
  echo "== $name (in the background)" >&2
  ("$@" >"$out/$name.log" 2>&1; echo $? >"$out/$name.rc") &
}
collect() { result[$1]=$(cat "$out/$1.rc" 2>/dev/null || echo 255); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
if [ "${KILN_SKIP_TESTS:-0}" != 1 ]; then
  run rnn_primitive_cuda_test "$bin/tests/ops/rnn/rnn_primitive_cuda_test"
  run ctc_primitive_cuda_test "$bin/tests/ops/ctc/ctc_primitive_cuda_test"
  # The whole tables (KILN_GRAPH_CASES / KILN_GRADIENT_CASES select families by name).
  run graph_cases "$bin/tests/kernels/cuda_graph_nn_test" --gtest_filter='*EveryCase*'
  run gradient_cases "$bin/tests/kernels/cuda_gradient_test" --gtest_filter='*EveryCase*'
  run tensor_graph_cases "$bin/tests/kernels/cuda_graph_tensor_test" --gtest_filter='*EveryCase*'
  run whole_net_cuda_test "$bin/tests/training/whole_net_cuda_test"
fi
if [ "${KILN_SKIP_BENCH:-0}" != 1 ]; then
  rnn_args=(--kiln-bench "$bin/bench/rnn_bench" --iters 10 --json "$out/rnn_bench.json")
  [ -n "$rnn_rows" ] && rnn_args+=(--rows "$rnn_rows")
  run rnn_bench python3 .gpu-rnn/rnn_bench.py "${rnn_args[@]}"
  run ctc_bench python3 .gpu-rnn/ctc_bench.py --kiln-bench "$bin/bench/ctc_bench" \
    --rows "$ctc_rows" --json "$out/ctc_bench.json"
fi
if [ "${KILN_SKIP_LM:-0}" != 1 ]; then
  # The character LSTM language model: kiln train beside PyTorch from the same weights and
  # batches (examples/char_lm/char_lm.py). Without dropout the two compute the same numbers:
  # checked, the curves' 50-iteration means within 2%. The quality run: two layers, dropout
  # (masks drawn on each side) and the state carried from batch to batch; checked, the final
  # test perplexity at most 5, the curves within 5%. The two run at once (the GPU is far from
  # full with either).
  run_async char_lm python3 .gpu-rnn/char_lm.py --kiln "$bin/tools/kiln" \
    --work /tmp/kiln-char-lm --data-from .gpu-rnn/lm_data --device cuda \
    --iters "${KILN_LM_ITERS:-10000}" --check --json "$out/char_lm.json"
  run char_lm_quality python3 .gpu-rnn/char_lm.py --kiln "$bin/tools/kiln" \
    --work /tmp/kiln-char-lm-quality --data-from .gpu-rnn/lm_data --device cuda \
    --iters "${KILN_LM_ITERS:-10000}" --layers 2 --dropout 0.3 --carry-state --check \
    --curve-tolerance 0.05 --max-perplexity 5 --json "$out/char_lm_quality.json"
  wait
  collect char_lm
  cp /tmp/kiln-char-lm/char_lm_curve.svg /tmp/kiln-char-lm/kiln_train.log "$out/" 2>/dev/null
  cp /tmp/kiln-char-lm-quality/char_lm_curve.svg "$out/char_lm_quality_curve.svg" 2>/dev/null
fi
if [ "${KILN_SKIP_CTC:-0}" != 1 ]; then
  # Fashion-MNIST strips read by an LSTM trained with CTC (examples/ctc_strips/ctc_strips.py):
  # sequence accuracy on the test strips at least 0.7.
  run ctc_strips python3 .gpu-rnn/ctc_strips.py --kiln "$bin/tools/kiln" --work /tmp/kiln-ctc \
    --data-from .gpu-rnn/ctc_data --device cuda --iters "${KILN_CTC_ITERS:-4000}" --check \
    --min-accuracy 0.7 --json "$out/ctc_strips.json"
  cp /tmp/kiln-ctc/kiln_train.log "$out/ctc_train.log" 2>/dev/null
  cp /tmp/kiln-ctc/ctc_strips_iter_*_curve.svg "$out/" 2>/dev/null
fi
echo
cat "$out/gpu.txt"
for name in rnn_primitive_cuda_test ctc_primitive_cuda_test graph_cases gradient_cases \
  tensor_graph_cases whole_net_cuda_test rnn_bench ctc_bench char_lm char_lm_quality ctc_strips; do
  [ -n "${result[$name]+x}" ] || continue
  printf '%-26s %s  %s\n' "$name" "$([ "${result[$name]}" = 0 ] && echo ok || echo "FAILED (${result[$name]})")" \
    "$(grep -E 'PASSED|FAILED|cases checked|variants checked' "$out/$name.log" | tr '\n' ' ' | cut -c1-90)"
done
declare -A shown=([rnn_bench]=16 [ctc_bench]=14 [char_lm]=12 [char_lm_quality]=12 [ctc_strips]=8)
for name in rnn_bench ctc_bench char_lm char_lm_quality ctc_strips; do
  [ -f "$out/$name.log" ] && { echo; echo "-- $name"; tail -"${shown[$name]}" "$out/$name.log"; }
done
# Exit status: 0 when every part that ran passed.
for name in "${!result[@]}"; do [ "${result[$name]}" = 0 ] || exit 1; done
exit 0
