#!/usr/bin/env bash
# Packs built binaries for the GPU machine: bash tools/pack_gpu_binaries.sh DEST BINARY...
# Each BINARY is a path under bazel-bin (tools/kiln, tests/runtime/cuda_network_test, ...); it is
# stripped into a temporary tree and the tree is written to DEST/bin.tar.xz, which
# tools/gpu_check.sh unpacks there. Every Kiln binary links the whole CUDA kernel library, so
# they share most of their bytes: a 256 MiB dictionary, larger than any one binary, lets xz see
# the repeats (eight test binaries: 77 MB with the default dictionary, 16 MB with this one),
# which keeps the carried folder far under the device tool's 64 MiB. One thread: a multi-threaded
# xz cuts the stream into blocks and loses the repeats.
# KILN_BAZEL_BIN names another bazel-bin (a build in its own --output_base).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${KILN_BAZEL_BIN:-bazel-bin}"
dest="$1"
shift
stage=$(mktemp -d /tmp/kiln-pack.XXXXXX)
trap 'rm -rf "$stage"' EXIT
for b in "$@"; do
  mkdir -p "$stage/$(dirname "$b")"
  strip -o "$stage/$b" "$bin/$b"
done
mkdir -p "$dest"
echo "packing $# binaries into $dest/bin.tar.xz (about a minute per binary)..."
tar -C "$stage" -cf - . | xz -T1 --lzma2=preset=6,dict=256MiB >"$dest/bin.tar.xz"
du -h "$dest/bin.tar.xz"
