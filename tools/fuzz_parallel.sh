#!/usr/bin/env bash
# One libFuzzer target on many cores at once (a machine borrowed for it, e.g. the GPU machine's 16
# cores, docs/RELIABILITY.md), from a folder staged here with
#   bash tools/fuzz_parallel.sh --stage TARGET DIR     # DIR/: the ASan+UBSan binary, compressed
# and run there (in the repository, whose tests/fuzz/corpus/TARGET it starts from) with
#   OUT=$OUT bash tools/fuzz_parallel.sh DIR JOBS RUNS_PER_JOB SECONDS
# JOBS fuzzing processes share one working corpus; each stops after RUNS_PER_JOB executions or
# SECONDS. Prints the executions of every job, their sum, and whether any crashed (a crashing
# input is kept in $OUT as crash-*; the new corpus inputs come back as $OUT/new-corpus.tar.xz).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --stage ]; then
  target="$2" dir="$3"
  KILN_FUZZ_SECONDS=1 bash tools/fuzz.sh 1 "$target" >/dev/null  # builds the binary
  bin="$(bazel --output_base="${HOME}/.cache/kiln-fuzz-output-base" info --config=libfuzzer \
    bazel-bin 2>/dev/null)/tests/fuzz/${target}_libfuzzer"
  rm -rf "$dir" && mkdir -p "$dir"
  xz -T1 -c "$bin" >"$dir/fuzzer.xz"  # the corpus travels with the repository
  echo "$target" >"$dir/target"
  echo "staged $target in $dir: $(du -h "$dir/fuzzer.xz" | cut -f1)"
  exit 0
fi
dir="$1" jobs="$2" runs="$3" seconds="$4"
out="${OUT:-/tmp/kiln-fuzz-parallel}"
mkdir -p "$out"
work=$(mktemp -d /tmp/kiln-fuzz.XXXXXX)
target=$(cat "$dir/target")
xz -dc "$dir/fuzzer.xz" >"$work/fuzzer" && chmod +x "$work/fuzzer"
cp -r "tests/fuzz/corpus/$target" "$work/corpus"
ls "$work/corpus" | sort >"$work/before"
cd "$work"
rc=0
"$work/fuzzer" -jobs="$jobs" -workers="$jobs" -runs="$runs" -max_total_time="$seconds" \
  -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/" \
  "$work/corpus" >"$out/fuzz.log" 2>&1 || rc=$?
total=0
for log in fuzz-*.log; do
  n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  echo "$log: $n executions"
  total=$((total + n))
  cp "$log" "$out/"
done
ls corpus | sort >after
comm -13 before after | sed 's|^|corpus/|' | tar -cJf "$out/new-corpus.tar.xz" -T - 2>/dev/null || true
crashes=$(find "$out" -maxdepth 1 \( -name "crash-*" -o -name "leak-*" -o -name "oom-*" -o -name "timeout-*" \) | wc -l)
echo "$target: $total executions in $jobs jobs, exit $rc, $crashes crashing inputs"
