#!/usr/bin/env bash
# Long libFuzzer runs of every parser entry point (tests/fuzz), with ASan + UBSan.
#   bash tools/fuzz.sh [RUNS] [TARGET...]    default 1000000 executions per target, all targets
#   bash tools/fuzz.sh minimize [TARGET...]  shrink the kept corpus tests/fuzz/corpus/<target>/ to
#                                            a small set with the same edge coverage (hit counts
#                                            ignored: -use_counters=0; seed_* and regress_* stay)
# Environment:
#   KILN_FUZZ_SECONDS=N   also stop each target after N seconds (libFuzzer's -max_total_time)
#   KILN_FUZZ_PARALLEL=1  run the targets at once (one process each) instead of one after another
#   KILN_FUZZ_MERGE=1     afterwards, add the inputs that reach new coverage to the kept corpus
#                         tests/fuzz/corpus/<target>/ (libFuzzer -merge=1: only what adds coverage)
#   KILN_FUZZ_OUT=DIR     working folder (default /tmp/kiln-fuzz): logs, working corpora, crashes
# Builds with clang in a separate Bazel output base. Each target starts from its kept corpus plus
# its seeds (Caffe files from ../shared, tests/fuzz/*seed*); the working corpus in DIR grows from
# run to run. Prints one line per target: executions, rate, and crash or not (a crashing input is
# left at DIR/<target>-crash-*; it belongs in tests/fuzz/corpus/<target>/ once fixed).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=run
if [ "${1:-}" = minimize ]; then mode=minimize; shift; fi
runs="${1:-1000000}"
[ "$mode" = run ] && { shift || true; }
base="${HOME}/.cache/kiln-fuzz-output-base"
out="${KILN_FUZZ_OUT:-/tmp/kiln-fuzz}"
seconds="${KILN_FUZZ_SECONDS:-0}"
all=(net_text net_binary solver graph_text image datum idx npy solverstate)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all[@]}"); fi
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

run_one() {
  local t="$1" corpus="$out/$1-corpus" log="$out/$1.log"
  mkdir -p "$corpus"
  case "$t" in
    net_text) cp "$models"/*.prototxt "$corpus"/; rm -f "$corpus"/*solver* ;;
    net_binary) cp "$models"/mtcnn_det1_pnet.caffemodel "$corpus"/ ;;
    solver) cp "$models"/*solver*.prototxt "$corpus"/ ;;
    graph_text) cp tests/fuzz/graph_seed.txt "$corpus"/ ;;
    image) cp tests/fuzz/image_seed* "$corpus"/ ;;
  esac
  local kept="tests/fuzz/corpus/$t"
  mkdir -p "$kept"
  local rc=0
  "$bin/${t}_libfuzzer" -runs="$runs" -max_total_time="$seconds" -max_len=4096 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/$t-" \
    "$corpus" "$kept" >"$log" 2>&1 || rc=$?
  local execs rate status="no crash"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  # libFuzzer exits non-zero on a crash, a sanitizer report, a leak, an OOM or a timeout (slow
  # units are only reported). A run stopped by a signal counts too: it did not finish clean.
  if [ "$rc" != 0 ] || grep -q 'runtime error:' "$log"; then
    status="CRASH or stopped, exit $rc (see $log)"
  elif [ "${KILN_FUZZ_MERGE:-0}" = 1 ]; then
    "$bin/${t}_libfuzzer" -merge=1 -max_len=4096 -rss_limit_mb=2048 "$kept" "$corpus" \
      >"$out/$t-merge.log" 2>&1 || status="merge failed (see $out/$t-merge.log)"
  fi
  echo "$t: ${execs:-0} executions, ${rate:-0}/s, $status" >"$out/$t.summary"
}

minimize_one() {
  local t="$1" kept="tests/fuzz/corpus/$1" fresh="$out/$1-minimized"
  rm -rf "$fresh" && mkdir -p "$fresh"
  # What is already in the first folder counts as covered: the named files go first.
  find "$kept" -maxdepth 1 -type f \( -name 'seed_*' -o -name 'regress_*' \) -exec cp {} "$fresh"/ \;
  "$bin/${t}_libfuzzer" -merge=1 -use_counters=0 -max_len=4096 -rss_limit_mb=2048 "$fresh" "$kept" \
    >"$out/$t-minimize.log" 2>&1 || { echo "$t: minimize failed (see $out/$t-minimize.log)"; return 1; }
  local before
  before=$(find "$kept" -type f | wc -l)
  find "$kept" -maxdepth 1 -type f -delete && cp "$fresh"/* "$kept"/
  echo "$t: kept corpus $before -> $(find "$kept" -type f | wc -l) files, $(du -sk --apparent-size "$kept" | cut -f1) KB"
}

if [ "$mode" = minimize ]; then
  for t in "${targets[@]}"; do minimize_one "$t"; done
  exit 0
fi

for t in "${targets[@]}"; do
  if [ "${KILN_FUZZ_PARALLEL:-0}" = 1 ]; then run_one "$t" & else run_one "$t"; fi
done
wait
failed=0
for t in "${targets[@]}"; do
  cat "$out/$t.summary"
  grep -q 'no crash' "$out/$t.summary" || failed=1
done
exit "$failed"
