#!/usr/bin/env bash
# The Python package's check, as a new user would do it: a fresh venv that sees Debian's packages
# (numpy, pybind11, pytest, tqdm, torch), `pip install --no-build-isolation .` from this checkout
# (no package index), `import kiln` from elsewhere, then pytest on python/tests against the
# installed package. Writes pytest's JUnit XML to $1 (tools/test.sh counts it).
#   bash tools/test_python.sh [JUNIT_XML]
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
xml="${1:-/tmp/kiln-pytest.xml}"
# Debian's Python, the one apt installed the packages for (a pyenv or other python3 earlier in
# PATH does not see them).
python="${KILN_PYTHON:-/usr/bin/python3}"
venv="$(mktemp -d "${TMPDIR:-/tmp}/kiln-venv.XXXXXX")"
trap 'rm -rf "$venv"' EXIT
"$python" -m venv --system-site-packages "$venv"
echo "test_python: pip install --no-build-isolation . (builds //api:libkiln.so and the module)"
"$venv/bin/python" -m pip install --no-build-isolation --no-index --disable-pip-version-check \
  -q "$repo"
(cd "$venv" && "$venv/bin/python" -c "import kiln; print('test_python: kiln', kiln.__version__)")
# The wheel `pip wheel` makes installs into another fresh venv and imports there.
wheels="$venv/wheels" other="$venv/other"
"$venv/bin/python" -m pip wheel --no-build-isolation --no-index --no-deps \
  --disable-pip-version-check -q -w "$wheels" "$repo"
"$python" -m venv --system-site-packages "$other"
"$other/bin/python" -m pip install --no-index --disable-pip-version-check -q "$wheels"/kiln-*.whl
(cd "$other" && "$other/bin/python" -c \
  "import kiln; print('test_python: wheel', kiln.__version__, kiln.__file__)")
bazel build --disk_cache="${HOME}/.cache/kiln-bazel-disk" //tools:kiln >/dev/null 2>&1
export KILN_CLI="$repo/bazel-bin/tools/kiln"
cd "$venv"
# The CPU example, as the README shows it (skipped without the shared Caffe models).
if [ -f "$repo/../shared/models/caffe/lenet_iter_10000.caffemodel" ]; then
  "$venv/bin/python" "$repo/examples/python/lenet_pycaffe.py" >/dev/null
  echo "test_python: examples/python/lenet_pycaffe.py ran"
fi
"$venv/bin/python" -m pytest -q -p no:cacheprovider --junitxml="$xml" "$repo/python/tests"
