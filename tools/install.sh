#!/usr/bin/env bash
# Installs libkiln.so and its headers for programs that embed Kiln (docs/EMBEDDING.md):
#   bash tools/install.sh --prefix P [--overwrite] [--lib BUILT_LIBKILN_SO]
# builds //api:libkiln.so (unless --lib names one already built) and writes
#   P/lib/libkiln.so.X.Y.Z, P/lib/libkiln.so.X, P/lib/libkiln.so   (X.Y.Z: include/kiln/kiln.h)
#   P/include/kiln/kiln.h, P/include/kiln/kiln.hpp
#   P/lib/pkgconfig/kiln.pc                                         (pkg-config --libs kiln)
#   P/lib/cmake/Kiln/KilnConfig.cmake, KilnConfigVersion.cmake     (find_package(Kiln))
# A file already there that Kiln did not install is never replaced; one it did (an earlier
# install) is replaced only with --overwrite.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="" lib="" overwrite=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a folder}"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --lib) lib="${2:?--lib needs a file}"; shift 2 ;;
    --overwrite) overwrite=1; shift ;;
    *) echo "install: unknown argument '$1' (use --prefix P [--overwrite] [--lib FILE])" >&2; exit 2 ;;
  esac
done
[ -n "$prefix" ] || { echo "install: --prefix P is required" >&2; exit 2; }
version_part() { sed -n "s/^#define KILN_VERSION_$1 \([0-9]*\)$/\1/p" include/kiln/kiln.h; }
major=$(version_part MAJOR) minor=$(version_part MINOR) patch=$(version_part PATCH)
version="$major.$minor.$patch"
if [ -z "$lib" ]; then
  echo "install: building //api:libkiln.so..."
  bazel build --disk_cache="${HOME}/.cache/kiln-bazel-disk" //api:libkiln.so
  lib="$(bazel info bazel-bin 2>/dev/null)/api/libkiln.so"
fi
[ -f "$lib" ] || { echo "install: $lib does not exist" >&2; exit 1; }

# Every file this install writes, relative to the prefix.
files=("lib/libkiln.so.$version" "lib/libkiln.so.$major" "lib/libkiln.so" "include/kiln/kiln.h"
       "include/kiln/kiln.hpp" "lib/pkgconfig/kiln.pc" "lib/cmake/Kiln/KilnConfig.cmake"
       "lib/cmake/Kiln/KilnConfigVersion.cmake")
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
for f in "${files[@]}"; do
  target="$prefix/$f"
  if [ -e "$target" ] || [ -L "$target" ]; then
    if ! grep -q "kiln\|Kiln\|KILN" "$target" 2>/dev/null && [ ! -L "$target" ]; then
      echo "install: $target exists and is not Kiln's; not replaced (choose another --prefix)" >&2
      exit 1
    fi
    if [ "$overwrite" != 1 ]; then
      echo "install: $target exists (an earlier install?); add --overwrite to replace it" >&2
      exit 1
    fi
  fi
done

stage=$(mktemp -d "$prefix/.kiln-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib/pkgconfig" "$stage/lib/cmake/Kiln" "$stage/include/kiln"
strip --strip-unneeded -o "$stage/lib/libkiln.so.$version" "$lib"
chmod 0755 "$stage/lib/libkiln.so.$version"
ln -s "libkiln.so.$version" "$stage/lib/libkiln.so.$major"
ln -s "libkiln.so.$major" "$stage/lib/libkiln.so"
cp include/kiln/kiln.h include/kiln/kiln.hpp "$stage/include/kiln/"
fill() { sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" "$1"; }
fill tools/install/kiln.pc.in >"$stage/lib/pkgconfig/kiln.pc"
fill tools/install/KilnConfig.cmake.in >"$stage/lib/cmake/Kiln/KilnConfig.cmake"
fill tools/install/KilnConfigVersion.cmake.in >"$stage/lib/cmake/Kiln/KilnConfigVersion.cmake"
# Each file moved into place with a rename (on the prefix's own file system: the stage is in it).
for f in "${files[@]}"; do
  mkdir -p "$(dirname "$prefix/$f")"
  mv -fT "$stage/$f" "$prefix/$f"
done
echo "install: Kiln $version in $prefix (pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig;" \
  "CMake: -DCMAKE_PREFIX_PATH=$prefix)"
