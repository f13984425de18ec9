#!/usr/bin/env bash
# See BUILD: install, build two consumers outside the workspace, run them, check the exports.
set -euo pipefail
here="$PWD"  # the runfiles tree of the workspace
models=""
for d in "$here/../caffe_models" "$here/external/caffe_models"; do
  [ -f "$d/MISSING" ] && models="$d" && break
done
[ -n "$models" ] || { echo "FAIL: @caffe_models is not in the runfiles"; exit 1; }
if [ ! -f "$models/lenet.prototxt" ] || [ ! -f "$models/lenet_iter_10000.caffemodel" ]; then
  # A clone with neither ../shared nor a network (third_party/caffe_models): nothing to run on.
  echo "SKIPPED: LeNet is missing from the Caffe test corpus: $(tr '\n' ' ' <"$models/MISSING")"
  exit 0
fi
work="${TEST_TMPDIR:-$(mktemp -d)}/installed"
rm -rf "$work" && mkdir -p "$work"
prefix="$work/prefix"
failed=0

echo "== install"
bash tools/install.sh --prefix "$prefix" --lib "$here/api/libkiln.so"
# A second install without --overwrite is refused and changes nothing.
before=$(cd "$prefix" && find . -type f -exec md5sum {} + | sort)
if bash tools/install.sh --prefix "$prefix" --lib "$here/api/libkiln.so" 2>"$work/again.err"; then
  echo "FAIL: a second install without --overwrite succeeded"; failed=1
fi
grep -q -- "--overwrite" "$work/again.err" || { echo "FAIL: no word of --overwrite"; failed=1; }
[ "$before" = "$(cd "$prefix" && find . -type f -exec md5sum {} + | sort)" ] ||
  { echo "FAIL: the refused install changed the prefix"; failed=1; }

echo "== exports"
lib="$prefix/lib/libkiln.so.0"
[ "$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')" = libkiln.so.0 ] ||
  { echo "FAIL: soname is not libkiln.so.0"; failed=1; }
# Names without their version (kiln_run@@KILN_0).
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
others=$(echo "$exported" | grep -v -e '^kiln_' -e '^KILN_0$' || true)
count=$(echo "$exported" | grep -c '^kiln_' || true)
echo "$count kiln_* symbols exported"
if [ -n "$others" ]; then
  echo "FAIL: libkiln.so exports more than the C API:"; echo "$others" | head -20; failed=1
fi
# Every function the header declares is exported.
declared=$(grep -o 'KILN_API [^(]*(' include/kiln/kiln.h | grep -o 'kiln_[a-z0-9_]*($' | tr -d '(' |
  sort -u)
[ "$(echo "$declared" | wc -l)" -ge 30 ] || { echo "FAIL: too few declarations found"; failed=1; }
for f in $declared; do
  # A here-string, not `echo | grep -q`: under pipefail, grep quitting at its match can kill
  # echo (bash writes line by line) with SIGPIPE, and the pipeline then fails at random.
  grep -qx "$f" <<<"$exported" ||
    { echo "FAIL: $f is declared in kiln.h but not exported"; failed=1; }
done

echo "== C consumer (gcc + pkg-config)"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
gcc -std=c99 -Wall -Werror -o "$work/c_consumer" tests/install/c_consumer.c \
  $(pkg-config --cflags --libs kiln) -lm
LD_LIBRARY_PATH="$prefix/lib" "$work/c_consumer" "$models/lenet.prototxt" \
  "$models/lenet_iter_10000.caffemodel" || failed=1

echo "== C++ consumer (CMake, find_package(Kiln))"
cp -r tests/install/cmake_consumer "$work/cmake_consumer"
cmake -S "$work/cmake_consumer" -B "$work/cmake_build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_FLAGS="-Wall -Werror" >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/cmake_build" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
"$work/cmake_build/cmake_consumer" "$models/lenet.prototxt" "$models/lenet_iter_10000.caffemodel" ||
  failed=1

if [ "$failed" != 0 ]; then echo "installed_consumers_test: FAILED"; exit 1; fi
echo "installed_consumers_test: PASS"
