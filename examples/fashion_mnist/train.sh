#!/usr/bin/env bash
# The main job: LeNet trained on Fashion-MNIST with `kiln train`, on the best backend (CUDA when a
# GPU is usable, else the CPU, saying why), ending with the final test accuracy.
#
#   bash examples/fashion_mnist/train.sh [extra kiln train flags, e.g. --iterations 2000]
#
# The IDX files come from Debian's dataset-fashion-mnist (tools/setup.sh installs it); they are
# converted once into LMDBs in $KILN_WORK_DIR (default ~/.cache/kiln/fashion_mnist), where the
# snapshots and the loss/accuracy curve (SVG) are written too. Nothing in the checkout changes.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="${KILN_WORK_DIR:-$HOME/.cache/kiln/fashion_mnist}"
idx="${KILN_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"
if [ ! -f "$idx/train-images-idx3-ubyte.gz" ]; then
  echo "train.sh: no Fashion-MNIST at $idx (run: bash tools/setup.sh, which installs" \
    "dataset-fashion-mnist, or set KILN_FASHION_MNIST)" >&2
  exit 1
fi
cd "$repo"
bazel build //tools:kiln
kiln="$repo/bazel-bin/tools/kiln"
mkdir -p "$work"
for set in train t10k; do
  name=$([ "$set" = train ] && echo train || echo test)
  if [ ! -d "$work/fashion_mnist_${name}_lmdb" ]; then
    "$kiln" convert --images "$idx/$set-images-idx3-ubyte.gz" \
      --labels "$idx/$set-labels-idx1-ubyte.gz" --out "$work/fashion_mnist_${name}_lmdb"
  fi
done
cd "$work"
"$kiln" train --solver "$repo/examples/fashion_mnist/lenet_solver.prototxt" \
  --curve "$work/lenet_fashion_curve.svg" "$@"
