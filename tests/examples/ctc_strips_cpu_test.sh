#!/usr/bin/env bash
# The CTC strips job (examples/ctc_strips/ctc_strips.py) end to end on the CPU at a small size:
# Fashion-MNIST strips into two HDF5Data layers, kiln train through LSTM and CTCLoss, then kiln
# run of the ArgMax deploy net and the greedy decoding. 300 iterations of this small net cannot
# read strips yet (that takes the GPU job's 4000 iterations of a wider net, docs/PERF.md); the
# check is that every stage runs and the test CTC loss per label falls from about 20 at the start
# below 4 (3.05 when written), which a net whose training does not work stays far above.
set -euo pipefail
python=/usr/bin/python3  # Debian's, which has numpy and h5py
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "no Fashion-MNIST: Debian's dataset-fashion-mnist is missing (tools/setup.sh installs it)" >&2
  exit 1
fi
work="${TEST_TMPDIR:-/tmp}/ctc_strips"
"$python" "$PWD/examples/ctc_strips/ctc_strips.py" --kiln "$PWD/tools/kiln" --work "$work" \
  --device cpu --train-strips 1024 --test-strips 128 --hidden 32 --iters 300 \
  --test-interval 150 --json "$work/result.json"
"$python" - "$work/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["tests"]) == 2, r["tests"]
assert r["tests"][-1] < 4.0, "test CTC loss %s did not fall below 4" % r["tests"][-1]
assert 0.0 <= r["accuracy"] <= 1.0 and r["label_error_rate"] >= 0.0, r
print("ctc_strips: test CTC loss %.3f, sequence accuracy %.3f" % (r["tests"][-1], r["accuracy"]))
PY
