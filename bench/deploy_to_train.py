#!/usr/bin/env python3
"""Makes a training prototxt of a public deploy net, for the training benchmark
(train_bench.py): the net's input becomes a Data layer with the images and a label (its source is
never opened: `kiln time --train` and the PyTorch side feed synthetic batches of the given
shapes), the final Softmax goes, a SoftmaxWithLoss on its scores takes its place, and BatchNorm
layers normalize with the batch's statistics (use_global_stats false), as a network in training
does.

    python3 bench/deploy_to_train.py DEPLOY.prototxt OUT_train.prototxt [--overwrite]

The text is edited, not re-serialized: comments, field order and formatting stay the deploy
file's. Refuses to write over an existing file without --overwrite.
"""
import argparse
import os
import re
import sys


def layer_blocks(text):
    """(start, end, body) of every top-level `layer { ... }` (or V1 `layers { ... }`) block."""
    blocks, i, n = [], 0, len(text)
    pattern = re.compile(r"\blayers?\s*\{")
    while True:
        m = pattern.search(text, i)
        if m is None:
            return blocks
        line_start = text.rfind("\n", 0, m.start()) + 1
        if "#" in text[line_start:m.start()]:  # inside a comment
            i = m.end()
            continue
        depth, j, quote = 0, m.end() - 1, None
        while j < n:
            c = text[j]
            if quote:
                if c == "\\":
                    j += 1
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == "#":
                j = text.find("\n", j)
                if j < 0:
                    j = n
                continue
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if depth != 0:
            sys.exit("deploy_to_train.py: unbalanced braces after offset %d" % m.start())
        blocks.append((m.start(), j + 1, text[m.start():j + 1]))
        i = j + 1


def field(body, name):
    """The values of a top-level string or enum field `name` in a layer body."""
    return re.findall(r"\b%s\s*:\s*\"?([A-Za-z0-9_./\-]+)\"?" % name, body)


def convert(text, batch=1):
    blocks = layer_blocks(text)
    if not blocks:
        sys.exit("deploy_to_train.py: no layers")
    # The input: the header fields (input/input_dim/input_shape) or an Input layer.
    header_end = blocks[0][0]
    header = text[:header_end]
    image = None
    m = re.search(r"^\s*input\s*:\s*\"([^\"]+)\"", header, re.M)
    if m:
        image = m.group(1)
        header = re.sub(r"^\s*input\s*:.*$\n?", "", header, flags=re.M)
        header = re.sub(r"^\s*input_dim\s*:.*$\n?", "", header, flags=re.M)
        header = re.sub(r"input_shape\s*\{[^}]*\}\s*", "", header)
    drop = set()
    for k, (_, _, body) in enumerate(blocks):
        if field(body, "type")[:1] in (["Input"], ["INPUT"]):
            image = field(body, "top")[0]
            drop.add(k)
    if image is None:
        sys.exit("deploy_to_train.py: found no input (input: field or Input layer)")
    # The final Softmax (its top read by no layer) goes; its bottom is the scores.
    read = set()
    for _, _, body in blocks:
        read.update(field(body, "bottom"))
    scores = None
    for k, (_, _, body) in enumerate(blocks):
        kind = field(body, "type")[:1]
        tops = field(body, "top")
        if kind in (["Softmax"], ["SOFTMAX"]) and tops and tops[0] not in read:
            scores = field(body, "bottom")[0]
            drop.add(k)
    if scores is None:
        # No Softmax at the end (the net outputs its scores): the last layer's unread top.
        tops = [t for t in field(blocks[-1][2], "top") if t not in read]
        if len(tops) != 1:
            sys.exit("deploy_to_train.py: no final Softmax, and the last layer has %d unread "
                     "tops; cannot tell the scores" % len(tops))
        scores = tops[0]
    out, at = [header], header_end
    for k, (start, end, body) in enumerate(blocks):
        out.append(text[at:start])
        if k not in drop:
            out.append(re.sub(r"use_global_stats\s*:\s*true", "use_global_stats: false", body))
        at = end
    out.append(text[at:])
    # In the file's own format: V1 files (`layers`, enum types) cannot take a V2 `layer`.
    v1 = blocks[0][2].lstrip().startswith("layers")
    data = ('%s {\n  name: "data"\n  type: %s\n  top: "%s"\n  top: "label"\n'
            '  include { phase: TRAIN }\n  data_param { source: "synthetic" batch_size: %d '
            'backend: LMDB }\n}\n' % ("layers" if v1 else "layer", "DATA" if v1 else '"Data"',
                                       image, batch))
    loss = ('\n%s {\n  name: "loss"\n  type: %s\n  bottom: "%s"\n  bottom: "label"\n'
            '  top: "loss"\n}\n' % ("layers" if v1 else "layer",
                                     "SOFTMAX_LOSS" if v1 else '"SoftmaxWithLoss"', scores))
    body = "".join(out)
    first = layer_blocks(body)[0][0]
    return body[:first] + data + body[first:] + loss


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("deploy")
    p.add_argument("out")
    p.add_argument("--overwrite", action="store_true")
    args = p.parse_args()
    if os.path.exists(args.out) and not args.overwrite:
        sys.exit("deploy_to_train.py: %s exists (--overwrite replaces it)" % args.out)
    same = os.path.abspath(args.out) == os.path.abspath(args.deploy) or (
        os.path.exists(args.out) and os.path.samefile(args.out, args.deploy))
    if same:  # also through a link: never written over, even with --overwrite
        sys.exit("deploy_to_train.py: the output is the deploy file itself")
    with open(args.deploy) as f:
        text = f.read()
    with open(args.out, "w") as f:
        f.write(convert(text))
    print("%s -> %s" % (args.deploy, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
