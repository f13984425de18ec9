#!/usr/bin/env bash
# Long libFuzzer runs of every parser entry point (tests/fuzz), with ASan + UBSan.
#   bash tools/fuzz.sh [RUNS]       default 1000000 executions per target
# Builds with clang in a separate Bazel output base, seeds each corpus from ../shared (Caffe
# files) or tests/fuzz, and prints one line per target with libFuzzer's execution count.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-1000000}"
base="${HOME}/.cache/kiln-fuzz-output-base"
out="${KILN_FUZZ_OUT:-/tmp/kiln-fuzz}"
targets=(net_text net_binary solver graph_text image)
# libFuzzer comes with clang's runtime libraries.
if ! command -v clang >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq clang libclang-rt-14-dev
fi
# --symlink_prefix=/: no bazel-* links, so the main build's bazel-testlogs is never repointed.
bazel --output_base="$base" build --config=libfuzzer --symlink_prefix=/ \
  --disk_cache="${HOME}/.cache/kiln-bazel-disk-fuzz" \
  $(printf '//tests/fuzz:%s_libfuzzer ' "${targets[@]}")
bin="$(bazel --output_base="$base" info --config=libfuzzer bazel-bin)/tests/fuzz"
models="$(cd .. && pwd)/shared/models/caffe"
mkdir -p "$out"
summary=()
for t in "${targets[@]}"; do
  corpus="$out/$t-corpus"
  rm -rf "$corpus" && mkdir -p "$corpus"
  case "$t" in
    net_text) cp "$models"/*.prototxt "$corpus"/; rm -f "$corpus"/*solver* ;;
    net_binary) cp "$models"/mtcnn_det1_pnet.caffemodel "$corpus"/ ;;
    solver) cp "$models"/*solver*.prototxt "$corpus"/ ;;
    graph_text) cp tests/fuzz/graph_seed.txt "$corpus"/ ;;
    image) cp tests/fuzz/image_seed* "$corpus"/ ;;
  esac
  log="$out/$t.log"
  "$bin/${t}_libfuzzer" -runs="$runs" -max_len=4096 -rss_limit_mb=4096 -print_final_stats=1 \
    "$corpus" >"$log" 2>&1 || { echo "$t: FAILED (see $log)"; tail -30 "$log"; exit 1; }
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  summary+=("$t: ${execs} executions, no crash")
done
printf '%s\n' "${summary[@]}"
