#!/usr/bin/env bash
# The whole test suite: every test target (GPU tests skip cleanly without a GPU), the Python
# package's pytest suite (tools/test_python.sh), then the CPU tests under AddressSanitizer +
# UndefinedBehaviorSanitizer. Prints "N passed, N failed" last.
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
for check in tools/layers/check_layers.py tools/layers/check_sizes.py; do
  if python3 "$check" .; then
    structure_passed=$((structure_passed + 1))
  else
    structure_failed=$((structure_failed + 1))
    status=1
  fi
done

bazel test $cache $jobs //... 2>&1 | tee /tmp/kiln-test.log || status=1
# The Python package as a user gets it: `pip install .` into a fresh venv, then its pytest suite
# against the installed copy (before the ASan run, so bazel-bin is the plain build's).
python_xml=/tmp/kiln-pytest.xml
rm -f "$python_xml"
bash tools/test_python.sh "$python_xml" 2>&1 | tee /tmp/kiln-test-python.log || status=1
bazel test $cache $jobs --config=asan //... 2>&1 | tee /tmp/kiln-test-asan.log || status=1

# Count the GoogleTest cases of the plain run from the XML reports.
# (GPU tests skip without a GPU and are counted as skipped.)
passed=$structure_passed
failed=$structure_failed
skipped=0
for xml in $(find -L bazel-testlogs/ -name test.xml 2>/dev/null); do
  t=$(grep -o 'tests="[0-9]*"' "$xml" | head -1 | tr -dc 0-9)
  f=$(grep -o 'failures="[0-9]*"' "$xml" | head -1 | tr -dc 0-9)
  e=$(grep -o 'errors="[0-9]*"' "$xml" | head -1 | tr -dc 0-9)
  s=$(grep -c 'result="skipped"' "$xml")
  # A binary whose Caffe corpus was incomplete (tests/util/caffe_files.h) ran none of its tests.
  if grep -q "the Caffe test corpus is incomplete" "$(dirname "$xml")/test.log" 2>/dev/null; then
    s=${t:-0}
  fi
  passed=$((passed + ${t:-0} - ${f:-0} - ${e:-0} - ${s:-0}))
  failed=$((failed + ${f:-0} + ${e:-0}))
  skipped=$((skipped + ${s:-0}))
done
if [ -f "$python_xml" ]; then
  t=$(grep -o 'tests="[0-9]*"' "$python_xml" | head -1 | tr -dc 0-9)
  f=$(grep -o 'failures="[0-9]*"' "$python_xml" | head -1 | tr -dc 0-9)
  e=$(grep -o 'errors="[0-9]*"' "$python_xml" | head -1 | tr -dc 0-9)
  s=$(grep -o 'skipped="[0-9]*"' "$python_xml" | head -1 | tr -dc 0-9)
  passed=$((passed + ${t:-0} - ${f:-0} - ${e:-0} - ${s:-0}))
  failed=$((failed + ${f:-0} + ${e:-0}))
  skipped=$((skipped + ${s:-0}))
fi
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "tests: ${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$status"
