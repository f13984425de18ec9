#!/usr/bin/env python3
"""Where a training step's time goes, Kiln beside PyTorch eager, on the GPU machine.

    bench/train_profile.py --kiln KILN --models-dir DIR [--rows resnet18:64:fp16,...] \
        [--kiln-args '--algo measure'] [--out DIR]

For each row: `kiln time --train --profile` (its per-op table, one instrumented pass) and the
same net in PyTorch eager (bench/train_bench_torch.py's step) under torch.profiler, its CUDA
time summed per aten op. The two tables are printed one after the other; they name different
things (Kiln's graph ops, PyTorch's aten ops), so the comparison is by eye: convolution forward
against aten::cudnn_convolution, ConvolutionBackwardFilter against the weight half of
aten::convolution_backward, and so on. This is a diagnosis tool, not the benchmark:
bench/train_bench.py is the benchmark.
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_bench as tb  # noqa: E402


def kiln_profile(kiln, prototxt, shapes, precision, extra):
    cmd = tb.kiln_command(kiln, prototxt, shapes, precision, 20, extra + ["--profile"])
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def torch_profile(prototxt, shapes, precision, steps=5):
    import torch
    import train_bench_torch as tbt
    from graph_bench_torch import set_torch_precision
    set_torch_precision("fp32")
    net, optimizer, inputs, scaler = tbt.build(prototxt, shapes, precision, "cuda")
    step = tbt.make_step(net, optimizer, inputs, precision, "cuda", scaler)
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        # Self device time: each kernel counted once, under the op that launched it.
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = getattr(e, "self_cuda_time_total", 0)
        if t > 0:
            rows.append((t / 1000.0 / steps, e.count // steps, e.key))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    lines = ["torch eager, self CUDA time per step by op (%.3f ms in all):" % total]
    for ms, count, key in rows[:30]:
        lines.append("  %-60s %4d %9.3f ms %5.1f%%" % (key[:60], count, ms, 100 * ms / total))
    del net, optimizer, inputs, scaler
    torch.cuda.empty_cache()
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--rows", default="resnet18:64:fp16,resnet18:64:fp32,caffenet:128:fp16,"
                    "caffenet:128:fp32")
    ap.add_argument("--kiln-args", default="")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    extra = args.kiln_args.split()
    report = []
    for spec in args.rows.split(","):
        net, batch, precision = spec.split(":")
        name, chw = tb.NETS[net]
        prototxt = os.path.abspath(os.path.join(args.models_dir, name))
        shapes = tb.data_shapes(prototxt, chw, int(batch))
        rc, text = kiln_profile(args.kiln, prototxt, shapes, precision, extra)
        report.append("=== %s b%s %s: kiln (rc %d)\n%s" % (net, batch, precision, rc, text))
        try:
            report.append(torch_profile(prototxt, shapes, precision))
        except Exception as e:  # noqa: BLE001  (a diagnosis run reports and goes on)
            report.append("torch profile failed: %r" % e)
        print(report[-2] + "\n" + report[-1], flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "train_profile.txt"), "w") as f:
            f.write("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
