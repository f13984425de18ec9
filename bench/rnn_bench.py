#!/usr/bin/env python3
"""Kiln's RNN primitives beside PyTorch's nn.LSTM / nn.GRU (cuDNN) on one GPU, in one run.

For every row (cell:hidden:batch:seq:layers, input size = hidden, sequence-major,
unidirectional), precision (f32, tf32, f16) and mode (inference = forward under no_grad,
training = forward + backward into the input and every weight), both sides are timed the same
way: wall time per call over --iters back-to-back calls after 10 warm-up calls, launches
included, the median of 5 such timings. Kiln's time is through an RnnPlan (each call one CUDA
graph launch once its tensors repeat, as in a training loop); its "direct" column is the free
functions, every kernel launched from the host.
Prints a table with the ratio PyTorch time / Kiln plan time (above 1: Kiln is faster) and the
geometric mean per (cell, precision, mode); --json writes every number.

    python3 bench/rnn_bench.py --kiln-bench bazel-bin/bench/rnn_bench [--rows ...] [--json F]
"""
import argparse
import json
import math
import subprocess
import sys
import time

DEFAULT_ROWS = ("lstm:512:64:50:1,lstm:512:32:100:2,lstm:1024:64:100:1,lstm:1024:128:50:2,"
                "lstm:2048:32:50:1,lstm:2048:64:100:4,"
                "gru:512:64:50:1,gru:1024:64:100:2,gru:2048:32:50:1")


def parse_rows(text):
    rows = []
    for part in text.split(","):
        cell, hidden, batch, seq, layers = part.split(":")
        rows.append((cell, int(hidden), int(batch), int(seq), int(layers)))
    return rows


def torch_ms(torch, row, precision, mode, iters):
    cell, hidden, batch, seq, layers = row
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    dtype = torch.float16 if precision == "f16" else torch.float32
    module = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cell]
    net = module(hidden, hidden, num_layers=layers).cuda().to(dtype)
    x = torch.randn(seq, batch, hidden, device="cuda", dtype=dtype)
    h0 = torch.randn(layers, batch, hidden, device="cuda", dtype=dtype) * 0.5
    state = (h0, torch.randn_like(h0) * 0.5) if cell == "lstm" else h0
    dy = torch.randn(seq, batch, hidden, device="cuda", dtype=dtype)

    def once():
        if mode == "inference":
            with torch.no_grad():
                net(x, state)
            return
        xi = x.detach().requires_grad_(True)
        y, _ = net(xi, state)
        y.backward(dy)

    # As Kiln's side: 10 warm-up calls (cuDNN's plans and persistent kernels are chosen there),
    # then the median of 5 timings of `iters` back-to-back calls.
    for _ in range(10):
        once()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iters):
            once()
        torch.cuda.synchronize()
        per_call.append((time.perf_counter() - start) * 1000 / iters)
    return sorted(per_call)[2]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln-bench", required=True, help="the rnn_bench binary")
    parser.add_argument("--rows", default=DEFAULT_ROWS)
    parser.add_argument("--precisions", default="f32,tf32,f16")
    parser.add_argument("--modes", default="inference,training")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--json", help="write every measurement here")
    args = parser.parse_args()
    try:
        rows = parse_rows(args.rows)
    except ValueError:
        sys.exit("rnn_bench.py: --rows is cell:hidden:batch:seq:layers,...")
    import torch  # the GPU machine has it; imported late so --help works anywhere

    proc = subprocess.run([args.kiln_bench, "--rows=" + args.rows,
                           "--precisions=" + args.precisions, "--modes=" + args.modes,
                           "--iters=%d" % args.iters], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("rnn_bench.py: %s failed:\n%s" % (args.kiln_bench, proc.stderr))
    kiln = {}
    for line in proc.stdout.splitlines():
        m = json.loads(line)
        key = (m["cell"], m["hidden"], m["batch"], m["seq"], m["layers"], m["precision"],
               m["mode"])
        kiln[key] = (m["kiln_ms"], m["kiln_direct_ms"])
    results, total = [], len(kiln)
    for i, key in enumerate(sorted(kiln)):
        row, precision, mode = key[:5], key[5], key[6]
        t = torch_ms(torch, row, precision, mode, args.iters)
        # A plan that failed (-1) leaves the ratio to the direct calls; the table says so.
        plan_ms, direct_ms = kiln[key]
        best = plan_ms if plan_ms > 0 else direct_ms
        results.append({"cell": row[0], "hidden": row[1], "batch": row[2], "seq": row[3],
                        "layers": row[4], "precision": precision, "mode": mode,
                        "kiln_ms": plan_ms, "kiln_direct_ms": direct_ms, "torch_ms": t,
                        "ratio": t / best, "plan_failed": plan_ms <= 0})
        sys.stderr.write("\rrnn_bench.py: %d/%d measured" % (i + 1, total))
    sys.stderr.write("\n")
    print("%-5s %6s %6s %5s %3s %-5s %-9s %10s %10s %10s %7s" %
          ("cell", "hidden", "batch", "seq", "L", "prec", "mode", "kiln ms", "direct ms",
           "torch ms", "ratio"))
    for r in results:
        print("%-5s %6d %6d %5d %3d %-5s %-9s %10s %10.3f %10.3f %7.2f" %
              (r["cell"], r["hidden"], r["batch"], r["seq"], r["layers"], r["precision"],
               r["mode"], "failed" if r["plan_failed"] else "%.3f" % r["kiln_ms"],
               r["kiln_direct_ms"], r["torch_ms"], r["ratio"]))
    groups = {}
    for r in results:
        groups.setdefault((r["cell"], r["precision"], r["mode"]), []).append(r["ratio"])
    print("\ngeomean of torch/kiln (above 1: Kiln faster)")
    for key in sorted(groups):
        ratios = groups[key]
        print("  %-5s %-5s %-9s %.3f over %d rows" %
              (key + (math.exp(sum(map(math.log, ratios)) / len(ratios)), len(ratios))))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
