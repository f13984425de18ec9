#!/usr/bin/env bash
# The character LSTM language model (examples/char_lm/char_lm.py) trained on the CPU by
# `kiln train` through HDF5Data -> Embed -> LSTM -> InnerProduct(axis 2) -> SoftmaxWithLoss(axis
# 2), beside the same model in PyTorch (Debian's python3-torch) from the same weights on the same
# batches: the first loss must agree to 1e-4 and the 50-iteration means of the next 100
# iterations to 1e-4 relative. Only rounding separates the two; a semantic difference (a gate
# order, a bias stepped twice, a clipping rule) shows within a few iterations at 1e-3.
set -euo pipefail
kiln="$PWD/tools/kiln"
script="$PWD/examples/char_lm/char_lm.py"
python=/usr/bin/python3  # Debian's, which has numpy, h5py and torch
if [ ! -d /usr/share/games/fortunes ]; then
  echo "no corpus: Debian's fortunes package is missing (tools/setup.sh installs it)" >&2
  exit 1
fi
work="${TEST_TMPDIR:-/tmp}/char_lm"
"$python" "$script" --kiln "$kiln" --work "$work" --device cpu --chars 200000 --batch 8 \
  --steps 12 --embed 16 --hidden 32 --iters 150 --test-interval 50 --check \
  --curve-tolerance 1e-4
# The state carried from batch to batch (cont 0 only where a stream begins): kiln train carries
# each LSTM's h and c as Caffe's layer keeps them, PyTorch its (h, c), detached; two stacked
# layers. Only rounding separates the two again.
"$python" "$script" --kiln "$kiln" --work "$work-carried" --device cpu --chars 200000 --batch 8 \
  --steps 12 --embed 16 --hidden 32 --iters 150 --test-interval 50 --layers 2 --carry-state \
  --check --curve-tolerance 1e-4
# Two stacked LSTMs with a Dropout after each (the quality run's shape): the masks differ between
# the two sides, so only the 50-iteration means are compared, within 5%.
"$python" "$script" --kiln "$kiln" --work "$work-dropout" --device cpu --chars 200000 --batch 8 \
  --steps 12 --embed 16 --hidden 32 --iters 150 --test-interval 50 --layers 2 --dropout 0.3 \
  --check --curve-tolerance 0.05
