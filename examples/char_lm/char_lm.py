#!/usr/bin/env python3
"""A character-level LSTM language model trained with `kiln train`, beside the same model in
PyTorch from the same initial weights on the same batches (issue 34's first training job).

The corpus is Debian's `fortunes` package (about 2.6 MB of English text, /usr/share/games/
fortunes). Bytes are the tokens (vocabulary 128: ASCII; any other byte becomes '?'); the last 5%
of the text is the test set. The net is Caffe's recurrent layout, as in Caffe's LRCN examples:

    HDF5Data (input, cont, target: T x N) -> Embed -> LSTM (cont) [-> Dropout] [-> LSTM ...]
    -> InnerProduct (axis 2) -> SoftmaxWithLoss (axis 2)

--layers stacks LSTMs; --dropout puts a Dropout after each of them (between layers and before
the prediction, as char-rnn does). Dropout draws different masks on the two sides, so with it
the two runs agree only within noise: the first-iteration check is skipped and the
--curve-tolerance given should be wider.

N streams read N equal parts of the text; a batch is the next T characters of every stream.
By default each batch starts its sequences afresh (cont is 0 at its first step), so the model
sees at most T characters of context. With --carry-state cont is 0 only where a stream begins:
each batch goes on from the LSTMs' state at the end of the last one (Caffe's LSTM keeps it
between forwards, and kiln train carries it), backpropagating through the batch's T steps only;
PyTorch's loop carries its (h, c) likewise, detached.

Steps, all under --work (nothing in the checkout is written):
  1. the HDF5 files kiln reads (and the same arrays as .npz for the PyTorch side);
  2. initial weights drawn from a seeded RNG, written as a .caffemodel for `kiln train
     --weights` and used as-is by PyTorch;
  3. `kiln train` on the solver written there and, at the same time, the PyTorch loop (SGD with
     momentum and Caffe's global-norm gradient clipping, written out so both follow one formula);
  4. a table of train loss and test perplexity for both, an SVG of both loss curves, and with
     --check the comparison's verdict in the exit code.

    python3 examples/char_lm/char_lm.py --kiln bazel-bin/tools/kiln --work /tmp/char_lm \\
        [--device cuda] [--iters 10000] [--hidden 512] [--check]

PyTorch (torch) and h5py come from Debian (python3-torch, python3-h5py; tools/setup.sh installs
them). Without h5py, --data-from reuses a folder prepared elsewhere.
"""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import time

import numpy as np

CORPUS = "/usr/share/games/fortunes"
VOCAB = 128


# ---------------------------------------------------------------------------------------------
# Data


def corpus_bytes(folder, limit):
    """The corpus text: the fortune files (not the .dat indexes or the .u8 copies), sorted."""
    names = sorted(n for n in os.listdir(folder)
                   if not n.endswith((".dat", ".u8")) and os.path.isfile(os.path.join(folder, n)))
    if not names:
        sys.exit("char_lm.py: no text in %s (install Debian's fortunes package)" % folder)
    text = b"".join(open(os.path.join(folder, n), "rb").read() for n in names)
    ids = np.frombuffer(text, dtype=np.uint8).copy()
    ids[ids >= VOCAB] = ord("?")
    return ids[:limit] if limit else ids


def streams(ids, n, t):
    """(rows, n) arrays input/cont/target: stream s reads its own 1/n of `ids`; rows are time
    steps, a whole number of batches of t rows."""
    per = (len(ids) - 1) // n // t * t
    if per == 0:
        sys.exit("char_lm.py: the text is too short for %d streams of %d steps" % (n, t))
    x = np.stack([ids[s * per:(s + 1) * per] for s in range(n)], axis=1)
    y = np.stack([ids[s * per + 1:(s + 1) * per + 1] for s in range(n)], axis=1)
    cont = np.ones_like(x)
    cont[0::t] = 0  # every batch starts its sequences afresh
    carried = np.ones_like(x)
    carried[0] = 0  # only a stream's first character starts a sequence
    return {"input": x, "cont": cont, "cont_carried": carried, "target": y}


def prepare(args):
    ids = corpus_bytes(args.corpus, args.chars)
    split = int(len(ids) * 0.95)
    sets = {"train": streams(ids[:split], args.batch, args.steps),
            "test": streams(ids[split:], args.batch, args.steps)}
    import h5py  # Debian's python3-h5py
    for name, arrays in sets.items():
        path = os.path.join(args.work, name + ".h5")
        with h5py.File(path, "w") as f:
            for key, a in arrays.items():
                # uint8, deflate-compressed: HDF5Data reads it as float
                f.create_dataset(key, data=a, compression="gzip")
        with open(os.path.join(args.work, name + "_list.txt"), "w") as f:
            f.write(path + "\n")
        np.savez_compressed(os.path.join(args.work, name + ".npz"), **arrays)
    return {k: v["input"].shape[0] // args.steps for k, v in sets.items()}, len(ids)


# ---------------------------------------------------------------------------------------------
# Weights: a seeded draw, written as a .caffemodel (protobuf wire format by hand: NetParameter
# layer = 100; LayerParameter name = 1, type = 2, blobs = 7; BlobProto data = 5, shape = 7;
# BlobShape dim = 1).


def initial_weights(args):
    rng = np.random.default_rng(args.seed)
    h, e = args.hidden, args.embed
    bound = 1.0 / math.sqrt(h)

    def uniform(shape, b):
        return rng.uniform(-b, b, size=shape).astype(np.float32)

    # Caffe's blob layouts; the LSTM's gates in Caffe's order i, f, o, g.
    weights = {"embed": [uniform((VOCAB, e), 0.1)]}
    for layer in range(args.layers):
        inputs = e if layer == 0 else h
        weights[lstm_name(layer)] = [uniform((4 * h, inputs), bound), uniform((4 * h,), bound),
                                     uniform((4 * h, h), bound)]
    weights["predict"] = [uniform((VOCAB, h), bound), np.zeros((VOCAB,), np.float32)]
    return weights


def lstm_name(layer):
    return "lstm" if layer == 0 else "lstm%d" % (layer + 1)


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def caffemodel(weights):
    net = b""
    for layer, blobs in weights.items():
        body = _field(1, layer.encode())
        for a in blobs:
            shape = _field(1, b"".join(_varint(d) for d in a.shape))
            data = _field(5, struct.pack("<%df" % a.size, *a.ravel().tolist()))
            body += _field(7, data + _field(7, shape))
        net += _field(100, body)
    return net


# ---------------------------------------------------------------------------------------------
# The Caffe files


def net_prototxt(args, batches):
    def data(phase, name):
        return """layer {
  name: "%s" type: "HDF5Data" top: "input" top: "%s" top: "target"
  include { phase: %s }
  hdf5_data_param { source: "%s" batch_size: %d }
}
""" % (name, cont_top(args), phase, os.path.join(args.work, name + "_list.txt"), args.steps)

    text = "name: \"char_lm\"\n" + data("TRAIN", "train") + data("TEST", "test") + """layer {
  name: "embed" type: "Embed" bottom: "input" top: "embedded"
  embed_param { input_dim: %d num_output: %d bias_term: false }
}
""" % (VOCAB, args.embed)
    below = "embedded"
    for layer in range(args.layers):
        name = lstm_name(layer)
        text += """layer {
  name: "%s" type: "LSTM" bottom: "%s" bottom: "%s" top: "%s"
  recurrent_param { num_output: %d }
}
""" % (name, below, cont_top(args), name, args.hidden)
        below = name
        if args.dropout > 0:
            # Caffe's Dropout: scaled by 1 / (1 - p) in TRAIN, the identity in TEST.
            text += """layer {
  name: "%s_drop" type: "Dropout" bottom: "%s" top: "%s_drop"
  dropout_param { dropout_ratio: %g }
}
""" % (name, name, name, args.dropout)
            below = name + "_drop"
    return text + """layer {
  name: "predict" type: "InnerProduct" bottom: "%s" top: "predict"
  inner_product_param { num_output: %d axis: 2 }
}
layer {
  name: "loss" type: "SoftmaxWithLoss" bottom: "predict" bottom: "target" top: "loss"
  softmax_param { axis: 2 }
}
""" % (below, VOCAB)


def cont_top(args):
    """The HDF5 dataset (and top) of the continuation markers."""
    return "cont_carried" if args.carry_state else "cont"


def solver_prototxt(args, batches):
    return """net: "%s"
type: "SGD"
base_lr: %g
momentum: %g
%sclip_gradients: %g
max_iter: %d
display: 1
test_interval: %d
test_iter: %d
test_initialization: false
snapshot: 0
snapshot_prefix: "%s"
""" % (os.path.join(args.work, "char_lm.prototxt"), args.lr, args.momentum,
       'lr_policy: "step"\ngamma: %g\nstepsize: %d\n' % (args.lr_gamma, args.lr_step)
       if args.lr_step > 0 else 'lr_policy: "fixed"\n', args.clip, args.iters,
       args.test_interval, batches["test"], os.path.join(args.work, "char_lm"))


# ---------------------------------------------------------------------------------------------
# The two runs


def start_kiln(args):
    """Starts `kiln train`; it runs while the PyTorch loop does (finish_kiln waits for it)."""
    cmd = [args.kiln, "train", "--solver", os.path.join(args.work, "char_lm_solver.prototxt"),
           "--weights", os.path.join(args.work, "init.caffemodel"), "--device", args.device,
           "--precision", "fp32"]
    log = os.path.join(args.work, "kiln_train.log")
    # kiln's progress line goes to a file of its own: the terminal shows PyTorch's.
    with open(log, "w") as out, open(os.path.join(args.work, "kiln_progress.log"), "w") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
    return proc, log, time.time()


def finish_kiln(started):
    proc, log, start = started
    code = proc.wait()
    seconds = time.time() - start
    with open(log) as f:
        text = f.read()
    if code != 0:
        sys.exit("char_lm.py: kiln train failed (%d); its log: %s" % (code, log))
    train = [float(m) for m in re.findall(r"^Iteration \d+ \([\d.]+ s\), loss = (\S+),",
                                          text, re.M)]
    test = [float(m) for m in re.findall(r"Test net output #0: loss = (\S+)", text)]
    return train, test, seconds


def run_torch(args, weights):
    import torch
    device = torch.device(args.torch_device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(args.seed)  # the dropout masks
    h = args.hidden
    embed = torch.nn.Embedding(VOCAB, args.embed).to(device)
    # One module a layer, so the dropout after each sits where the Caffe net has it.
    lstms = [torch.nn.LSTM(args.embed if layer == 0 else h, h).to(device)
             for layer in range(args.layers)]
    predict = torch.nn.Linear(h, VOCAB).to(device)
    to = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)
    ifog_to_ifgo = lambda w: torch.cat([w[:2 * h], w[3 * h:], w[2 * h:3 * h]])
    with torch.no_grad():
        embed.weight.copy_(to(weights["embed"][0]))
        for layer, lstm in enumerate(lstms):
            w_x, b, w_h = (to(a) for a in weights[lstm_name(layer)])
            lstm.weight_ih_l0.copy_(ifog_to_ifgo(w_x))
            lstm.weight_hh_l0.copy_(ifog_to_ifgo(w_h))
            lstm.bias_ih_l0.copy_(ifog_to_ifgo(b))
            lstm.bias_hh_l0.zero_()
        predict.weight.copy_(to(weights["predict"][0]))
        predict.bias.copy_(to(weights["predict"][1]))
    # Caffe's LSTM has one bias; PyTorch's second (bias_hh) stays zero and untrained, or the
    # bias would take two steps per update.
    for lstm in lstms:
        lstm.bias_hh_l0.requires_grad_(False)
    params = [p for m in [embed] + lstms + [predict] for p in m.parameters() if p.requires_grad]
    history = [torch.zeros_like(p) for p in params]
    # Read once: an NpzFile decompresses an array again on every access.
    data = {k: dict(np.load(os.path.join(args.work, k + ".npz"))) for k in ("train", "test")}
    t = args.steps

    def loss_of(arrays, b, training, states):
        """The batch's loss and each layer's (h, c) at its end. `states` is the last batch's:
        used with --carry-state except at a stream's start (b = 0, where cont is 0)."""
        x = to(arrays["input"][b * t:(b + 1) * t].astype(np.int64))
        y = to(arrays["target"][b * t:(b + 1) * t].astype(np.int64))
        out = embed(x)
        ends = []
        for layer, lstm in enumerate(lstms):
            carry = args.carry_state and b > 0 and states is not None
            # Backpropagation stops at the batch's start, as in Caffe (the state is an input).
            out, (h, c) = lstm(out, tuple(s.detach() for s in states[layer]) if carry else None)
            ends.append((h, c))
            if args.dropout > 0:
                out = torch.nn.functional.dropout(out, args.dropout, training=training)
        logits = predict(out)
        return (torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1)),
                ends)

    def test_loss():
        # The TEST net keeps its own state from batch to batch (its first batch starts streams).
        total, states = 0.0, None
        for b in range(test_batches):
            loss, states = loss_of(data["test"], b, False, states)
            total += float(loss)
        return total / test_batches

    train_batches = data["train"]["input"].shape[0] // t
    test_batches = data["test"]["input"].shape[0] // t
    train, test, states = [], [], None
    start = time.time()
    for it in range(args.iters):
        loss, states = loss_of(data["train"], it % train_batches, True, states)
        # Caffe's "step" policy: base_lr * gamma ^ floor(iter / stepsize).
        lr = args.lr * (args.lr_gamma ** (it // args.lr_step) if args.lr_step > 0 else 1.0)
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            # Caffe's ClipGradients, then its SGD: v = momentum * v + lr * g; w -= v.
            norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)))
            scale = args.clip / norm if args.clip > 0 and norm > args.clip else 1.0
            for p, v in zip(params, history):
                v.mul_(args.momentum).add_(p.grad, alpha=lr * scale)
                p.sub_(v)
        train.append(loss.detach())  # read at the end: no host sync per iteration
        # As kiln train: every test_interval iterations, and once more at the end.
        if (it + 1) % args.test_interval == 0 or it + 1 == args.iters:
            with torch.no_grad():
                test.append(test_loss())
        if sys.stderr.isatty() or it % 100 == 99:
            rate = (it + 1) / (time.time() - start)
            sys.stderr.write("\rtorch: iter %d/%d  loss %.4f  %.1f it/s  ETA %.0fs   " %
                             (it + 1, args.iters, float(train[-1]), rate,
                              (args.iters - it - 1) / rate))
    sys.stderr.write("\n")
    return [float(v) for v in train], test, time.time() - start


# ---------------------------------------------------------------------------------------------
# Report


def smooth(values, window):
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def curve_svg(path, curves, title):
    width, height, pad = 720, 360, 48
    top = max(max(c) for c in curves.values())
    low = min(min(c) for c in curves.values())
    n = max(len(c) for c in curves.values())
    colors = ["#1f77b4", "#d62728", "#2ca02c"]
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif"'
             ' font-size="12"><rect width="100%%" height="100%%" fill="white"/>' % (width, height),
             '<text x="%d" y="20">%s</text>' % (pad, title)]
    every = max(1, n // 800)  # at most ~800 points a curve: the picture stays small
    for i, (name, c) in enumerate(curves.items()):
        pts = " ".join("%.1f,%.1f" % (pad + (width - 2 * pad) * j / max(n - 1, 1),
                                      height - pad - (height - 2 * pad) * (v - low) /
                                      max(top - low, 1e-9))
                       for j, v in enumerate(c) if j % every == 0 or j == len(c) - 1)
        parts.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' %
                     (colors[i % 3], pts))
        parts.append('<text x="%d" y="%d" fill="%s">%s</text>' %
                     (width - pad - 220, 40 + 16 * i, colors[i % 3], name))
    parts.append('<text x="%d" y="%d">iteration 0 .. %d; loss %.3f .. %.3f</text></svg>' %
                 (pad, height - 12, n, low, top))
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kiln", help="the kiln binary (required unless --prepare-only)")
    p.add_argument("--work", required=True, help="folder for data, weights, logs, curve")
    p.add_argument("--device", default="cuda", help="kiln train --device (cuda or cpu)")
    p.add_argument("--torch-device", default=None, help="PyTorch's device (default: --device)")
    p.add_argument("--corpus", default=CORPUS)
    p.add_argument("--chars", type=int, default=0, help="use the first N characters (0: all)")
    p.add_argument("--data-from", default=None, help="a --work folder whose data to reuse")
    p.add_argument("--batch", type=int, default=64, help="streams N")
    p.add_argument("--steps", type=int, default=50, help="time steps T per batch")
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=1, help="stacked LSTM layers")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="Dropout ratio after each LSTM layer (0: none)")
    p.add_argument("--carry-state", action="store_true",
                   help="each batch goes on from the state the last one left (cont 0 only at a "
                        "stream's start)")
    p.add_argument("--iters", type=int, default=10000)
    p.add_argument("--test-interval", type=int, default=2000)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--lr-step", type=int, default=6000,
                   help="Caffe's step policy: multiply the rate by --lr-gamma every N iterations")
    p.add_argument("--lr-gamma", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless the curves agree (--curve-tolerance) and the final test "
                        "perplexity is at most --max-perplexity")
    p.add_argument("--curve-tolerance", type=float, default=0.02,
                   help="largest relative gap of the 50-iteration moving averages")
    p.add_argument("--max-perplexity", type=float, default=0)
    p.add_argument("--json", default=None)
    p.add_argument("--prepare-only", action="store_true",
                   help="write the data under --work and stop (for --data-from elsewhere)")
    args = p.parse_args()
    args.torch_device = args.torch_device or args.device
    if args.layers < 1 or not 0 <= args.dropout < 1:
        p.error("--layers must be at least 1 and --dropout in [0, 1)")
    if not args.kiln and not args.prepare_only:
        p.error("--kiln is required")
    os.makedirs(args.work, exist_ok=True)
    if args.data_from:
        with open(os.path.join(args.data_from, "data.json")) as f:
            meta = json.load(f)
        for name in ("train", "test"):
            for ext in (".h5", ".npz"):
                src = os.path.join(args.data_from, name + ext)
                dst = os.path.join(args.work, name + ext)
                if os.path.abspath(src) != os.path.abspath(dst):
                    with open(src, "rb") as a, open(dst, "wb") as b:
                        b.write(a.read())
            with open(os.path.join(args.work, name + "_list.txt"), "w") as f:
                f.write(os.path.join(args.work, name + ".h5") + "\n")
        batches, chars = meta["batches"], meta["chars"]
    else:
        batches, chars = prepare(args)
        with open(os.path.join(args.work, "data.json"), "w") as f:
            json.dump({"batches": batches, "chars": chars}, f)
    if args.prepare_only:
        print("char_lm: data for %d characters in %s" % (chars, args.work))
        return 0
    weights = initial_weights(args)
    with open(os.path.join(args.work, "init.caffemodel"), "wb") as f:
        f.write(caffemodel(weights))
    with open(os.path.join(args.work, "char_lm.prototxt"), "w") as f:
        f.write(net_prototxt(args, batches))
    with open(os.path.join(args.work, "char_lm_solver.prototxt"), "w") as f:
        f.write(solver_prototxt(args, batches))
    print("char_lm: %d characters, %d train / %d test batches of %d streams x %d steps" %
          (chars, batches["train"], batches["test"], args.batch, args.steps), flush=True)

    # Both sides train at once (a GPU is far from full with either); the seconds below are each
    # side's wall time while sharing the machine, not a speed comparison.
    kiln = start_kiln(args)
    try:
        t_train, t_test, t_s = run_torch(args, weights)
    except BaseException:
        kiln[0].kill()
        raise
    k_train, k_test, k_s = finish_kiln(kiln)
    if len(k_train) != args.iters or len(t_train) != args.iters:
        sys.exit("char_lm.py: %d kiln and %d torch losses for %d iterations" %
                 (len(k_train), len(t_train), args.iters))
    window = min(50, args.iters)
    ks, ts = smooth(k_train, window), smooth(t_train, window)
    gaps = [abs(a - b) / b for a, b in zip(ks[window:], ts[window:])] or [
        abs(a - b) / b for a, b in zip(ks, ts)]
    first_gap = abs(k_train[0] - t_train[0]) / t_train[0]
    curve_svg(os.path.join(args.work, "char_lm_curve.svg"),
              {"kiln train (50-it mean)": ks, "PyTorch (50-it mean)": ts},
              "char LSTM LM on fortunes: train loss (nats/char)")
    print("\n%-8s %12s %12s %14s %10s" % ("", "first loss", "last loss", "test ppl", "seconds"))
    for name, tr, te, s in (("kiln", k_train, k_test, k_s), ("pytorch", t_train, t_test, t_s)):
        print("%-8s %12.5f %12.5f %14s %10.1f" % (name, tr[0], tr[-1],
                                                  "%.3f" % math.exp(te[-1]) if te else "-", s))
    print("\nfirst-iteration loss gap %.2e; largest gap of the %d-iteration means after "
          "iteration %d: %.2e" % (first_gap, window, window, max(gaps)))
    for i, (a, b) in enumerate(zip(k_test, t_test)):
        print("test after %5d: kiln %.4f (ppl %.3f)  pytorch %.4f (ppl %.3f)" %
              (min((i + 1) * args.test_interval, args.iters), a, math.exp(a), b, math.exp(b)))
    # With dropout the masks differ from the first iteration on: only the means are compared.
    first_ok = first_gap < 1e-4 or args.dropout > 0
    verdict = max(gaps) <= args.curve_tolerance and first_ok and len(k_test) == len(t_test)
    if args.max_perplexity > 0:
        verdict = verdict and bool(k_test) and math.exp(k_test[-1]) <= args.max_perplexity
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kiln_train": k_train, "torch_train": t_train, "kiln_test": k_test,
                       "torch_test": t_test, "kiln_s": k_s, "torch_s": t_s,
                       "max_gap": max(gaps), "first_gap": first_gap, "ok": verdict,
                       "args": vars(args)}, f)
    print("curve: %s" % os.path.join(args.work, "char_lm_curve.svg"))
    if args.check:
        print("check: %s" % ("ok" if verdict else "FAILED"))
        return 0 if verdict else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
