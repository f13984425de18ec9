#!/usr/bin/env bash
# The whole test suite: every test target (GPU tests skip cleanly without a GPU), the Python
# package's pytest suite (tools/test_python.sh), then the CPU tests under AddressSanitizer +
# UndefinedBehaviorSanitizer, each run going on past a failure so that one does not hide the
# others. Prints the failed targets with the end of their logs, then "N passed, N failed" last.
set -uo pipefail
cd "$(dirname "$0")/.."
cache="--disk_cache=${HOME}/.cache/kiln-bazel-disk"
jobs="--jobs=$(nproc)"

# A full disk makes builds fail without saying why; keep room for two configurations' outputs.
bash tools/trim_disk_cache.sh "${HOME}/.cache/kiln-bazel-disk"
free_gb=$(( $(df -P -B1 "$HOME" | awk 'NR == 2 {print $4}') >> 30 ))
if [ "$free_gb" -lt 6 ]; then
  echo "test: only ${free_gb} GiB free on the disk of $HOME; the build needs about 6 GiB" >&2
fi

status=0
# The source tree's structure: includes only point down the layers (docs/ARCHITECTURE.md), no
# source file over 800 lines, no function in runtime/ over 120. Each check counts as one test.
structure_passed=0
structure_failed=0
structure_report=""  # what a failed check printed, repeated at the end with the other failures
for check in tools/layers/check_layers.py tools/layers/check_sizes.py; do
  if output=$(python3 "$check" . 2>&1); then
    structure_passed=$((structure_passed + 1))
    echo "$output"
  else
    structure_failed=$((structure_failed + 1))
    status=1
    echo "$output"
    structure_report+="--- ${check}: the end of its output"$'\n'"$(echo "$output" | tail -n 25)"$'\n'
    structure_report+="failed: ${check}"$'\n'
  fi
done

# Counts the GoogleTest cases of the XML reports in bazel-testlogs into passed/failed/skipped.
# (GPU tests skip without a GPU and are counted as skipped.)
passed=$structure_passed
failed=$structure_failed
skipped=0
count_junit() {  # FILE [FILE...]: add a JUnit report's cases to the totals
  local xml t f e s
  for xml in "$@"; do
    t=$(grep -o 'tests="[0-9]*"' "$xml" | head -1 | tr -dc 0-9)
    f=$(grep -o 'failures="[0-9]*"' "$xml" | head -1 | tr -dc 0-9)
    e=$(grep -o 'errors="[0-9]*"' "$xml" | head -1 | tr -dc 0-9)
    s=$(grep -c 'result="skipped"' "$xml")
    if [ "$s" -eq 0 ]; then s=$(grep -o 'skipped="[0-9]*"' "$xml" | head -1 | tr -dc 0-9); fi
    # A binary whose Caffe corpus was incomplete (tests/util/caffe_files.h) ran none of its tests.
    if grep -q "the Caffe test corpus is incomplete" "$(dirname "$xml")/test.log" 2>/dev/null; then
      s=${t:-0}
    fi
    passed=$((passed + ${t:-0} - ${f:-0} - ${e:-0} - ${s:-0}))
    failed=$((failed + ${f:-0} + ${e:-0}))
    skipped=$((skipped + ${s:-0}))
  done
}
# The targets Bazel's summary did not report as passed (a test can write a passing XML report and
# still fail, e.g. by crashing at exit).
failed_targets() {  # LOG
  grep -E '^//[^ ]+ +.*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE)' "$1" | awk '{print $1, $2}'
}
log_tails() {  # FAILED_TARGETS: the last lines of each failed target's test.log
  local target log
  echo "$1" | while read -r target _; do
    [ -n "$target" ] || continue
    log="bazel-testlogs/$(echo "${target#//}" | tr ':' '/')/test.log"
    echo "--- ${target}: the end of ${log}"
    tail -n 25 "$log" 2>/dev/null || echo "(no log)"
  done
}

bazel test $cache $jobs --keep_going //... 2>&1 | tee /tmp/kiln-test.log || status=1
# The plain run is counted now: the ASan run below writes its reports to the same testlogs folder.
# Only the reports of today's test targets count (an output base kept from an earlier checkout
# may hold reports of targets since removed).
count_junit $(bazel query 'tests(//...)' 2>/dev/null | while read -r target; do
  xml="bazel-testlogs/$(echo "${target#//}" | tr ':' '/')/test.xml"
  [ -f "$xml" ] && echo "$xml"
done)
plain_failures=$(failed_targets /tmp/kiln-test.log)
plain_tails=$(log_tails "$plain_failures")

# The Python package as a user gets it: `pip install .` into a fresh venv, then its pytest suite
# against the installed copy (before the ASan run, so bazel-bin is the plain build's).
python_xml=/tmp/kiln-pytest.xml
rm -f "$python_xml"
python_status=0
bash tools/test_python.sh "$python_xml" 2>&1 | tee /tmp/kiln-test-python.log || python_status=1
if [ -f "$python_xml" ]; then count_junit "$python_xml"; fi
if [ "$python_status" -ne 0 ]; then status=1; fi

bazel test $cache $jobs --keep_going --config=asan //... 2>&1 | tee /tmp/kiln-test-asan.log || status=1
asan_failures=$(failed_targets /tmp/kiln-test-asan.log)
asan_tails=$(log_tails "$asan_failures")
# Each target that failed under ASan counts once (its cases were counted in the plain run).
if [ -n "$asan_failures" ]; then failed=$((failed + $(echo "$asan_failures" | wc -l))); fi

# What failed comes last, where a reader of the output's tail sees it.
if [ -n "$structure_report" ]; then printf '%s' "$structure_report"; fi
if [ -n "$plain_failures" ]; then echo "$plain_tails"; echo "failed in the plain run:"; echo "$plain_failures"; fi
if [ "$python_status" -ne 0 ]; then
  echo "--- the end of tools/test_python.sh's output"; tail -n 25 /tmp/kiln-test-python.log
  echo "failed: tools/test_python.sh"
fi
if [ -n "$asan_failures" ]; then echo "$asan_tails"; echo "failed under ASan:"; echo "$asan_failures"; fi
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$status"
