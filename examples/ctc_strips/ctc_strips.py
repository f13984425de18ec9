#!/usr/bin/env python3
"""Reading strips of Fashion-MNIST items with an LSTM trained by CTC through `kiln train`
(issue 34's second training job): sequence accuracy on unseen strips.

A strip is 1 to 3 Fashion-MNIST images (Debian's dataset-fashion-mnist) pasted left to right at
random gaps on a 28 x 128 canvas; its label is their classes in order. The net reads the strip
as T = 32 frames of 4 pixel columns (112 values each) and must emit the class sequence; CTC
learns where the items are (no positions are given):

    HDF5Data frames (T x N x 112, cont T x N)      HDF5Data targets (labels N x 3, lengths N)
      -> InnerProduct (axis 2) -> ReLU -> LSTM (cont) -> InnerProduct (axis 2, 11 classes)
      -> CTCLoss (blank 0; class k + 1 is Fashion-MNIST class k)

The two HDF5Data layers read in lockstep: batch b of the frames (rows bT..bT+T-1, time-major as
in Caffe's LRCN layout) holds the strips whose targets are rows bN..bN+N-1 of the second.
After training, the TEST net's architecture with an ArgMax (axis 2) on the scores runs with
`kiln run` on the test strips; the best class per frame, repeats merged and blanks dropped
(greedy CTC decoding), is compared with the truth.

    python3 examples/ctc_strips/ctc_strips.py --kiln bazel-bin/tools/kiln --work /tmp/ctc \\
        [--device cuda] [--iters 3000] [--check --min-accuracy 0.7]

Everything is written under --work; numpy and h5py are Debian's (tools/setup.sh). --data-from
reuses a folder prepared (--prepare-only) on a machine with h5py.
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

FASHION = "/usr/share/datasets/fashion-mnist"
T, COLUMNS, HEIGHT, WIDTH, MAX_ITEMS, CLASSES = 32, 4, 28, 128, 3, 11


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def strips(images, labels, count, rng):
    """`count` strips: (count, 28, 128) uint8 canvases and (count, 3) labels (class + 1, 0 pad)
    with their lengths."""
    canvas = np.zeros((count, HEIGHT, WIDTH), np.uint8)
    targets = np.zeros((count, MAX_ITEMS), np.float32)
    lengths = rng.integers(1, MAX_ITEMS + 1, size=count)
    for s in range(count):
        n = lengths[s]
        picks = rng.integers(0, len(images), size=n)
        room = WIDTH - 28 * n
        gaps = np.sort(rng.integers(0, room + 1, size=n))  # left edges spread over the room
        for i, p in enumerate(picks):
            x = gaps[i] + 28 * i
            canvas[s, :, x:x + 28] = np.maximum(canvas[s, :, x:x + 28], images[p])
            targets[s, i] = labels[p] + 1
    return canvas, targets, lengths.astype(np.float32)


def frames(canvas, n):
    """Time-major frames of whole batches of n strips: (batches * T, n, 28 * COLUMNS) pixels
    (uint8, as stored; the net scales them), and cont (0 at each strip's first frame)."""
    batches = len(canvas) // n
    x = canvas[:batches * n]
    # (B, n, 28, T, COLUMNS) -> (B, T, n, 28 * COLUMNS)
    x = x.reshape(batches, n, HEIGHT, T, COLUMNS).transpose(0, 3, 1, 2, 4)
    x = x.reshape(batches * T, n, HEIGHT * COLUMNS)
    cont = np.ones((batches * T, n), np.uint8)
    cont[0::T] = 0
    return x, cont


def prepare(args):
    import h5py  # Debian's python3-h5py
    rng = np.random.default_rng(args.seed)
    sets = {"train": ("train", args.train_strips), "test": ("t10k", args.test_strips)}
    meta = {}
    for name, (prefix, count) in sets.items():
        images = idx(os.path.join(args.fashion, prefix + "-images-idx3-ubyte.gz"))
        labels = idx(os.path.join(args.fashion, prefix + "-labels-idx1-ubyte.gz"))
        count = count // args.batch * args.batch
        canvas, targets, lengths = strips(images, labels, count, rng)
        x, cont = frames(canvas, args.batch)
        # uint8 and deflate-compressed: HDF5Data reads them as float.
        with h5py.File(os.path.join(args.work, name + "_frames.h5"), "w") as f:
            f.create_dataset("data", data=x, compression="gzip")
            f.create_dataset("cont", data=cont, compression="gzip")
        with h5py.File(os.path.join(args.work, name + "_targets.h5"), "w") as f:
            f.create_dataset("labels", data=targets)
            f.create_dataset("input_lengths", data=np.full(count, T, np.float32))
            f.create_dataset("label_lengths", data=lengths)
        if name == "test":  # what the decoding reads
            np.savez_compressed(os.path.join(args.work, name + ".npz"), data=x, cont=cont,
                                labels=targets, lengths=lengths)
        meta[name] = count // args.batch
    with open(os.path.join(args.work, "data.json"), "w") as f:
        json.dump({"batches": meta, "batch": args.batch}, f)
    return meta


def write_lists(work):
    for name in ("train", "test"):
        for part in ("frames", "targets"):
            with open(os.path.join(work, "%s_%s_list.txt" % (name, part)), "w") as f:
                f.write(os.path.join(work, "%s_%s.h5" % (name, part)) + "\n")


def body(hidden):
    return """layer {
  name: "scale" type: "Power" bottom: "data" top: "pixels" power_param { scale: 0.00390625 }
}
layer {
  name: "embed" type: "InnerProduct" bottom: "pixels" top: "embed"
  inner_product_param { num_output: %d axis: 2 weight_filler { type: "xavier" } }
}
layer { name: "relu" type: "ReLU" bottom: "embed" top: "embed" }
layer {
  name: "lstm" type: "LSTM" bottom: "embed" bottom: "cont" top: "lstm"
  recurrent_param {
    num_output: %d
    weight_filler { type: "uniform" min: -0.08 max: 0.08 }
    bias_filler { type: "constant" value: 0 }
  }
}
layer {
  name: "scores" type: "InnerProduct" bottom: "lstm" top: "scores"
  inner_product_param { num_output: %d axis: 2 weight_filler { type: "xavier" } }
}
""" % (hidden, hidden, CLASSES)


def train_net(args):
    def data(phase, name):
        return """layer {
  name: "%s_frames" type: "HDF5Data" top: "data" top: "cont" include { phase: %s }
  hdf5_data_param { source: "%s" batch_size: %d }
}
layer {
  name: "%s_targets" type: "HDF5Data" top: "labels" top: "input_lengths" top: "label_lengths"
  include { phase: %s }
  hdf5_data_param { source: "%s" batch_size: %d }
}
""" % (name, phase, os.path.join(args.work, name + "_frames_list.txt"), T, name, phase,
           os.path.join(args.work, name + "_targets_list.txt"), args.batch)

    return ('name: "ctc_strips"\n' + data("TRAIN", "train") + data("TEST", "test") +
            body(args.hidden) + """layer {
  name: "loss" type: "CTCLoss" top: "loss"
  bottom: "scores" bottom: "labels" bottom: "input_lengths" bottom: "label_lengths"
  ctc_loss_param { blank_index: 0 }
}
""")


def deploy_net(args, strips):
    return ("""name: "ctc_strips_deploy"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: %d dim: %d dim: %d } } }
layer { name: "cont" type: "Input" top: "cont" input_param { shape { dim: %d dim: %d } } }
""" % (T, strips, HEIGHT * COLUMNS, T, strips) + body(args.hidden) + """layer {
  name: "best" type: "ArgMax" bottom: "scores" top: "best" argmax_param { axis: 2 }
}
""")


def solver(args, batches):
    return """net: "%s"
type: "Adam"
base_lr: %g
momentum: 0.9
momentum2: 0.999
lr_policy: "fixed"
max_iter: %d
display: 10
test_interval: %d
test_iter: %d
test_initialization: false
snapshot: 0
snapshot_prefix: "%s"
random_seed: %d
""" % (os.path.join(args.work, "ctc_strips.prototxt"), args.lr, args.iters, args.test_interval,
       batches["test"], os.path.join(args.work, "ctc_strips"), args.seed)


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[len(b)]


def greedy(best):
    """Greedy CTC decoding of one strip's per-frame classes."""
    out, previous = [], 0
    for c in best:
        if c != previous and c != 0:
            out.append(int(c))
        previous = c
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kiln", help="the kiln binary (required unless --prepare-only)")
    p.add_argument("--work", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--fashion", default=FASHION, help="the Fashion-MNIST IDX .gz files' folder")
    p.add_argument("--data-from", default=None)
    p.add_argument("--prepare-only", action="store_true")
    p.add_argument("--train-strips", type=int, default=20000)
    p.add_argument("--test-strips", type=int, default=4096)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--iters", type=int, default=4000)
    p.add_argument("--test-interval", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless the test sequence accuracy is at least --min-accuracy")
    p.add_argument("--min-accuracy", type=float, default=0.7)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.data_from and os.path.abspath(args.data_from) != os.path.abspath(args.work):
        for name in os.listdir(args.data_from):
            if name.endswith((".h5", ".npz", ".json")):
                with open(os.path.join(args.data_from, name), "rb") as a, \
                        open(os.path.join(args.work, name), "wb") as b:
                    b.write(a.read())
    if args.data_from:
        with open(os.path.join(args.work, "data.json")) as f:
            meta = json.load(f)
        batches, args.batch = meta["batches"], meta["batch"]
    else:
        batches = prepare(args)
    write_lists(args.work)
    if args.prepare_only:
        print("ctc_strips: %d train and %d test batches of %d strips in %s" %
              (batches["train"], batches["test"], args.batch, args.work))
        return 0
    if not args.kiln:
        p.error("--kiln is required")
    for name, text in (("ctc_strips.prototxt", train_net(args)),
                       ("ctc_strips_solver.prototxt", solver(args, batches))):
        with open(os.path.join(args.work, name), "w") as f:
            f.write(text)
    print("ctc_strips: %d train / %d test batches of %d strips, %d frames each" %
          (batches["train"], batches["test"], args.batch, T), flush=True)

    log = os.path.join(args.work, "kiln_train.log")
    start = time.time()
    with open(log, "w") as out:  # kiln's progress line stays on stderr
        code = subprocess.run([args.kiln, "train", "--solver",
                               os.path.join(args.work, "ctc_strips_solver.prototxt"),
                               "--device", args.device], stdout=out).returncode
    train_s = time.time() - start
    text = open(log).read()
    if code != 0:
        sys.exit("ctc_strips.py: kiln train failed (%d); its log: %s" % (code, log))
    losses = [float(m) for m in re.findall(r"^Iteration \d+ \([\d.]+ s\), loss = (\S+),", text,
                                           re.M)]
    tests = [float(m) for m in re.findall(r"Test net output #0: loss = (\S+)", text)]
    weights = os.path.join(args.work, "ctc_strips_iter_%d.caffemodel" % args.iters)

    # The test strips in one `kiln run` of the deploy net: batch = every test strip.
    test = np.load(os.path.join(args.work, "test.npz"))
    b, n = batches["test"], args.batch
    strips_total = b * n
    x = test["data"].reshape(b, T, n, -1).transpose(1, 0, 2, 3).reshape(T, b * n, -1)
    cont = test["cont"].reshape(b, T, n).transpose(1, 0, 2).reshape(T, b * n)
    np.save(os.path.join(args.work, "test_x.npy"), x.astype(np.float32))
    np.save(os.path.join(args.work, "test_cont.npy"), cont.astype(np.float32))
    with open(os.path.join(args.work, "ctc_strips_deploy.prototxt"), "w") as f:
        f.write(deploy_net(args, strips_total))
    best_path = os.path.join(args.work, "test_best.npy")
    proc = subprocess.run(
        [args.kiln, "run", "--model", os.path.join(args.work, "ctc_strips_deploy.prototxt"),
         "--weights", weights, "--device", args.device,
         "--input", "data=" + os.path.join(args.work, "test_x.npy"),
         "--input", "cont=" + os.path.join(args.work, "test_cont.npy"),
         "--output", "best=" + best_path, "--overwrite"], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("ctc_strips.py: kiln run failed:\n" + proc.stderr[-2000:])
    best = np.load(best_path).reshape(T, strips_total)
    correct = errors = items = 0
    for s in range(strips_total):
        truth = [int(c) for c in test["labels"][s][:int(test["lengths"][s])]]
        guess = greedy(best[:, s])
        correct += guess == truth
        errors += edit_distance(guess, truth)
        items += len(truth)

    accuracy = correct / strips_total
    print("\ntrain loss: first %.4f, last %.4f (kiln's display every 10 iterations; %d "
          "iterations in %.1f s)" % (losses[0], losses[-1], args.iters, train_s))
    for i, t in enumerate(tests):
        # kiln train tests every test_interval iterations and once more at the end.
        print("test CTC loss after %d: %.4f" % (min((i + 1) * args.test_interval, args.iters), t))
    print("test strips: %d of %d read exactly: sequence accuracy %.4f; label error rate %.4f "
          "(edit distance over %d items)" % (correct, strips_total, accuracy, errors / items,
                                              items))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"losses": losses, "tests": tests, "accuracy": accuracy,
                       "label_error_rate": errors / items,
                       "train_s": train_s, "args": vars(args)}, f)
    if args.check:
        ok = accuracy >= args.min_accuracy
        print("check: %s (sequence accuracy %.4f, needed %.2f)" %
              ("ok" if ok else "FAILED", accuracy, args.min_accuracy))
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
