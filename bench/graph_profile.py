#!/usr/bin/env python3
"""Where an inference forward's time goes, Kiln beside PyTorch eager, on the GPU machine.

    bench/graph_profile.py --kiln KILN --models-dir DIR [--rows fcn8s:4:fp16,...] \
        [--kiln-args '--algo measure'] [--out DIR]

For each row: `kiln time` (its per-layer table from one instrumented pass, the fused plan unless
--kiln-args says `--optimize off`) and the same net in PyTorch eager, built as
bench/graph_bench.py builds it, under torch.profiler: the CUDA time of each aten op per input
shape, so that each convolution layer of the net has its own line. The two tables are printed
one after the other and compared by eye. This is a diagnosis tool, not the benchmark:
bench/graph_bench.py is the benchmark.
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graph_bench as gb  # noqa: E402


def kiln_profile(kiln, prototxt, weights, batch, precision, extra):
    cmd = [kiln, "time", "--model", prototxt, "--weights", weights, "--batch", str(batch),
           "--precision", precision, "--iterations", "20", "--device", "cuda"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def torch_profile(prototxt, weights_path, batch, precision, steps=5):
    import torch
    import caffe_torch as ct
    from graph_bench_torch import TORCH_DTYPES, set_torch_precision
    set_torch_precision(precision)
    netdef = ct.load_net(prototxt, batch=batch)
    weights = ct.load_caffemodel(weights_path)
    net = ct.CaffeNet(netdef, weights, outputs=[netdef.last_top]).eval()
    x = torch.randn(*netdef.inputs[0][1])
    if precision in TORCH_DTYPES:
        dtype = TORCH_DTYPES[precision]
        net = net.to(device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
        x = x.to(device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
    else:
        net, x = net.cuda(), x.cuda()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.inference_mode():
        for _ in range(10):
            net(x)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
            for _ in range(steps):
                net(x)
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages(group_by_input_shape=True):
        # Self device time: each kernel counted once, under the op that launched it.
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = getattr(e, "self_cuda_time_total", 0)
        if t > 0:
            shapes = str(e.input_shapes)[:70] if e.input_shapes else ""
            rows.append((t / 1000.0 / steps, e.count // steps, e.key, shapes))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    lines = ["torch eager, self CUDA time per forward by op and input shape (%.3f ms):" % total]
    for ms, count, key, shapes in rows[:40]:
        lines.append("  %-28s %3d %8.3f ms %5.1f%%  %s" % (key[:28], count, ms, 100 * ms / total,
                                                          shapes))
    # The same time summed per op, to compare with kiln's per-type sums.
    per_op = {}
    for ms, count, key, _ in rows:
        total_ms, n = per_op.get(key, (0.0, 0))
        per_op[key] = (total_ms + ms, n + count)
    lines.append("torch eager, self CUDA time per forward by op:")
    for key, (ms, count) in sorted(per_op.items(), key=lambda kv: -kv[1][0])[:15]:
        lines.append("  %-36s %4d %8.3f ms %5.1f%%" % (key[:36], count, ms, 100 * ms / total))
    del net, x
    torch.cuda.empty_cache()
    return "\n".join(lines)


def kiln_type_sums(text):
    """kiln time's per-layer table summed by layer type: [(type, layers, ms)], largest first."""
    sums = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[0] == "layer":
            continue
        try:
            ms = float(parts[2])
        except ValueError:
            continue
        total_ms, n = sums.get(parts[1], (0.0, 0))
        sums[parts[1]] = (total_ms + ms, n + 1)
    return sorted(((t, n, ms) for t, (ms, n) in sums.items()), key=lambda r: -r[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--rows", default="fcn8s:4:fp16,fcn8s:4:tf32")
    ap.add_argument("--kiln-args", default="")
    ap.add_argument("--out", default="/tmp/graph_profile")
    args = ap.parse_args()
    extra = args.kiln_args.split()
    os.makedirs(args.out, exist_ok=True)
    report = []
    for spec in args.rows.split(","):
        net, batch, precision = spec.split(":")
        prototxt = os.path.abspath(gb.find_prototxt(args.models_dir, net))
        weights = os.path.join(args.out, "%s.caffemodel" % net)
        if not os.path.exists(weights):
            gb.make_numpy_weights(prototxt, weights, seed=1)
        rc, text = kiln_profile(args.kiln, prototxt, weights, int(batch), precision, extra)
        report.append("=== %s b%s %s: kiln %s (rc %d)\n%s" % (net, batch, precision,
                                                             " ".join(extra), rc, text))
        report[-1] += "\nkiln, per-layer time summed by layer type:\n" + "\n".join(
            "  %-28s %4d %8.3f ms" % row for row in kiln_type_sums(text))
        try:
            report.append(torch_profile(prototxt, weights, int(batch), precision))
        except Exception as e:  # noqa: BLE001  (a diagnosis run reports and goes on)
            report.append("torch profile failed: %r" % e)
        print(report[-2] + "\n" + report[-1], flush=True)
    with open(os.path.join(args.out, "graph_profile.txt"), "w") as f:
        f.write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
