#!/usr/bin/env python3
"""Kiln's CTC loss beside PyTorch's F.ctc_loss on one GPU, in one run.

Every row (T:N:C:lengths) and precision is one training call of a CTC head: from logits
[T, N, C] to the mean loss (reduction='mean': each sample's loss over its label length, averaged
over the batch) and the gradient of that loss with respect to the logits.

  Kiln:   dnn::CtcLoss on the logits (log_softmax inside), reduction kMeanByTargetLength, with
          the logit gradient (bench/ctc_bench).
  torch:  log_probs = F.log_softmax(logits, 2, dtype=float32); F.ctc_loss(log_probs, ...,
          reduction='mean'); torch.autograd.grad(loss, logits). f16 rows keep f16 logits and
          their f16 gradient and compute the log_softmax and the loss in f32, as Kiln does
          (PyTorch's CUDA CTC has no f16 kernel).
    native: targets concatenated, int64, on the GPU: PyTorch's own CUDA kernel, the default path.
    cudnn:  targets concatenated, int32, on the CPU: PyTorch hands the call to cuDNN when also
            blank == 0, log_probs are f32, every input length is T and every label is shorter
            than 256, i.e. only on `full` rows (torch._use_cudnn_ctc_loss is asked; '-' when it
            says no).
  The ratio's anchor is the faster of the two torch columns: ratio = min(native, cudnn) / kiln
  (above 1: Kiln is faster); the geometric means are per (precision, lengths), also against
  native alone.

Rows: `ragged` draws input_lengths[n] in [T - T/5, T], `full` sets them all to T; label lengths
are drawn in --label-lengths (2 MAX < T - T/5, so every alignment exists), labels in [1, C),
blank 0. Both sides build the same inputs from the integer hash in mix() (mirrored by Mix() in
ctc_bench.cc): logits uniform on [-4, 4) in steps of 2^-21, exact in f32 (f16 rows round them
to nearest even on both sides). Both sides are timed the same way: wall time per call over
--iters back-to-back calls after 3 warm-up calls, synchronized at both ends, host work included.
Agreement: the same problem is also solved by torch in float64 (on the GPU, from the same
rounded logits): `loss rel` and `grad rel` are |kiln - f64| / |f64| of the mean loss and of the
logit gradient's L2 norm, `torch grad` the same for torch's own f32 kernel (which accumulates
over the T frames in f32); rows where Kiln is above --loss-tol / --grad-tol are marked '!' and
listed at the end.

    python3 bench/ctc_bench.py --kiln-bench bazel-bin/bench/ctc_bench [--rows ...] [--json F]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

DEFAULT_ROWS = ",".join("1000:%d:%d:%s" % (n, c, lengths)
                        for lengths in ("ragged", "full") for n in (32, 64)
                        for c in (30, 100, 1000, 5000))
MASK = 0xFFFFFFFF
LOGITS, LABEL_LENGTHS, LABELS, INPUT_LENGTHS = 1, 2, 3, 4  # ctc_bench.cc's Stream


def mix(x):
    """ctc_bench.cc's Mix on a Python int or an int64 tensor of values in [0, 2^32).

    The multipliers are below 2^31, so x * K stays below 2^63 and int64 tensors compute it
    exactly; the mask then keeps the low 32 bits, as uint32 arithmetic does."""
    x = x ^ (x >> 16)
    x = (x * 0x7feb352d) & MASK
    x = x ^ (x >> 15)
    x = (x * 0x2c1b3c6d) & MASK
    return x ^ (x >> 16)


def draw(stream, index):
    return mix(index ^ mix(stream))


def parse_rows(text):
    rows = []
    for part in text.split(","):
        t, n, c, lengths = part.split(":")
        row = (int(t), int(n), int(c), lengths)
        if lengths not in ("ragged", "full") or min(row[:3]) < 1 or row[2] < 2:
            raise ValueError(part)
        rows.append(row)
    return rows


def make_labels(row, min_label, max_label):
    """(labels concatenated, label_lengths, input_lengths), as ctc_bench.cc's MakeLabels."""
    t, n, c, lengths = row
    label_lengths = [min_label + draw(LABEL_LENGTHS, i) % (max_label - min_label + 1)
                     for i in range(n)]
    input_lengths = [t - draw(INPUT_LENGTHS, i) % (t // 5 + 1) if lengths == "ragged" else t
                     for i in range(n)]
    labels = [1 + draw(LABELS, k) % (c - 1) for k in range(sum(label_lengths))]
    return labels, label_lengths, input_lengths


def make_logits(torch, row, dtype):
    """The [T, N, C] logits on the GPU, as ctc_bench.cc's Logit, in chunks to bound memory."""
    t, n, c, _ = row
    out = torch.empty((t, n, c), dtype=torch.float32, device="cuda")
    flat, count = out.view(-1), t * n * c
    salt, step = mix(LOGITS), 1 << 24
    for start in range(0, count, step):
        stop = min(start + step, count)
        x = mix(torch.arange(start, stop, dtype=torch.int64, device="cuda") ^ salt)
        flat[start:stop] = ((x >> 8) - (1 << 23)).to(torch.float32) * 2.0 ** -21
    # Not a view: the caller makes it the leaf that autograd differentiates against.
    return out.to(dtype)


def wall_ms(torch, once, iters):
    for _ in range(3):
        once()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        once()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1000 / iters


def cudnn_eligible(torch, log_probs, targets, input_lengths, label_lengths):
    """Whether F.ctc_loss would take the cuDNN path for these operands (PyTorch decides)."""
    try:
        return bool(torch._use_cudnn_ctc_loss(log_probs, targets, input_lengths, label_lengths,
                                              0))
    except (AttributeError, RuntimeError, TypeError):
        # No such private function in this version: its documented conditions.
        return (torch.backends.cudnn.is_available() and torch.backends.cudnn.enabled and
                log_probs.dtype == torch.float32 and targets.dtype == torch.int32 and
                targets.device.type == "cpu" and
                all(i == log_probs.shape[0] for i in input_lengths) and
                all(l < 256 and l <= i for l, i in zip(label_lengths, input_lengths)))


def torch_row(torch, row, precision, min_label, max_label, iters):
    F = torch.nn.functional
    labels, label_lengths, input_lengths = make_labels(row, min_label, max_label)
    dtype = torch.float16 if precision == "f16" else torch.float32
    logits = make_logits(torch, row, dtype).requires_grad_(True)
    # Lengths as CPU tensors: F.ctc_loss reads them on the host without a device sync.
    il = torch.tensor(input_lengths, dtype=torch.int64)
    tl = torch.tensor(label_lengths, dtype=torch.int64)

    def step(targets):
        log_probs = F.log_softmax(logits, 2, dtype=torch.float32)
        loss = F.ctc_loss(log_probs, targets, il, tl, blank=0, reduction="mean")
        (grad,) = torch.autograd.grad(loss, logits)
        return loss, grad

    out = {}
    targets_gpu = torch.tensor(labels, dtype=torch.int64, device="cuda")
    out["native_ms"] = wall_ms(torch, lambda: step(targets_gpu), iters)
    loss, grad = step(targets_gpu)
    out["torch_loss"] = loss.item()
    out["torch_grad_norm"] = grad.float().norm().item()
    del grad
    # The float64 reference, from the same (rounded) logits.
    x64 = logits.detach().double().requires_grad_(True)
    loss64 = F.ctc_loss(F.log_softmax(x64, 2), targets_gpu, il, tl, blank=0, reduction="mean")
    (grad64,) = torch.autograd.grad(loss64, x64)
    out["ref_loss"] = loss64.item()
    out["ref_grad_norm"] = grad64.norm().item()
    del x64, grad64
    targets_cpu = torch.tensor(labels, dtype=torch.int32)
    with torch.no_grad():
        probe = F.log_softmax(logits, 2, dtype=torch.float32)
    eligible = cudnn_eligible(torch, probe, targets_cpu, input_lengths, label_lengths)
    del probe
    out["cudnn_eligible"] = eligible
    out["cudnn_ms"] = wall_ms(torch, lambda: step(targets_cpu), iters) if eligible else None
    out["cudnn_loss"] = step(targets_cpu)[0].item() if eligible else None
    del logits
    torch.cuda.empty_cache()
    return out


def run_kiln(binary, args):
    """{(T, N, C, lengths, precision): the binary's JSON object} for every row it measured."""
    proc = subprocess.run([binary, "--rows=" + args.rows, "--precisions=" + args.precisions,
                           "--label-lengths=" + args.label_lengths, "--iters=%d" % args.iters],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("ctc_bench.py: %s failed (exit %d):\n%s" %
                 (binary, proc.returncode, proc.stderr))
    kiln = {}
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        m = json.loads(line)
        kiln[(m["T"], m["batch"], m["classes"], m["lengths"], m["precision"])] = m
    return kiln


def rel(a, b):
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b):
        return None
    return abs(a - b) / max(abs(b), 1e-30)


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def fmt(value, spec, width):
    return ("%" + spec) % value if value is not None else "-".rjust(width)


def report(results, loss_tol, grad_tol):
    print("%5s %4s %5s %-6s %-4s %9s %9s %9s %6s %6s %9s %9s %10s" %
          ("T", "N", "C", "len", "prec", "kiln ms", "native", "cudnn", "ratio", "r/nat",
           "loss rel", "grad rel", "torch grad"))
    bad = []
    for r in results:
        ok = (r["loss_rel"] is not None and r["loss_rel"] <= loss_tol and
              r["grad_rel"] is not None and r["grad_rel"] <= grad_tol)
        r["agree"] = ok
        if not ok:
            bad.append(r)
        print("%5d %4d %5d %-6s %-4s %9.3f %9.3f %9s %6.2f %6.2f %9s %9s %10s%s" %
              (r["T"], r["batch"], r["classes"], r["lengths"], r["precision"], r["kiln_ms"],
               r["native_ms"], fmt(r["cudnn_ms"], "9.3f", 9), r["ratio"], r["ratio_native"],
               fmt(r["loss_rel"], "9.1e", 9), fmt(r["grad_rel"], "9.1e", 9),
               fmt(r["torch_grad_rel"], "10.1e", 10), "" if ok else " !"))
    groups = {}
    for r in results:
        groups.setdefault((r["precision"], r["lengths"]), []).append(r)
    print("\ngeomean of torch/kiln (above 1: Kiln faster; anchor = faster torch column)")
    for key in sorted(groups):
        rs = groups[key]
        print("  %-4s %-6s %.3f (vs native %.3f) over %d rows" %
              (key + (geomean([r["ratio"] for r in rs]),
                      geomean([r["ratio_native"] for r in rs]), len(rs))))
    if bad:
        print("\nctc_bench.py: %d row(s) where Kiln and the float64 reference disagree (loss rel > "
              "%g or grad rel > %g, or a non-finite value):" % (len(bad), loss_tol, grad_tol))
        for r in bad:
            print("  %d:%d:%d:%s %s kiln loss %s grad %s, f64 loss %s grad %s" %
                  (r["T"], r["batch"], r["classes"], r["lengths"], r["precision"],
                   r["kiln_loss"], r["kiln_grad_norm"], r["ref_loss"], r["ref_grad_norm"]))
    return not bad


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kiln-bench",
                        default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "ctc_bench"),
                        help="the ctc_bench binary (default: next to this script)")
    parser.add_argument("--rows", default=DEFAULT_ROWS, help="T:N:C:ragged|full,...")
    parser.add_argument("--precisions", default="f32,f16")
    parser.add_argument("--label-lengths", default="20:100", help="MIN:MAX label length")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--loss-tol", type=float, default=1e-4,
                        help="largest relative difference of the mean loss")
    parser.add_argument("--grad-tol", type=float, default=1e-3,
                        help="largest relative difference of the gradient's L2 norm")
    parser.add_argument("--json", help="write every measurement here")
    args = parser.parse_args()
    try:
        rows = parse_rows(args.rows)
        min_label, max_label = map(int, args.label_lengths.split(":"))
    except ValueError:
        sys.exit("ctc_bench.py: --rows is T:N:C:ragged|full,... and --label-lengths MIN:MAX")
    if args.iters < 1:
        sys.exit("ctc_bench.py: --iters must be positive")
    kiln = run_kiln(args.kiln_bench, args)
    import torch  # the GPU machine has it; imported late so --help works anywhere

    results, total = [], len(kiln)
    for i, key in enumerate(sorted(kiln)):
        k = kiln[key]
        t = torch_row(torch, key[:4], key[4], min_label, max_label, args.iters)
        best = min(ms for ms in (t["native_ms"], t["cudnn_ms"]) if ms is not None)
        results.append({"T": key[0], "batch": key[1], "classes": key[2], "lengths": key[3],
                        "precision": key[4], "kiln_ms": k["kiln_ms"],
                        "native_ms": t["native_ms"], "cudnn_ms": t["cudnn_ms"],
                        "cudnn_eligible": t["cudnn_eligible"], "torch_ms": best,
                        "ratio": best / k["kiln_ms"],
                        "ratio_native": t["native_ms"] / k["kiln_ms"],
                        "kiln_loss": k["loss"], "torch_loss": t["torch_loss"],
                        "cudnn_loss": t["cudnn_loss"], "kiln_grad_norm": k["grad_norm"],
                        "torch_grad_norm": t["torch_grad_norm"],
                        "ref_loss": t["ref_loss"], "ref_grad_norm": t["ref_grad_norm"],
                        "loss_rel": rel(k["loss"], t["ref_loss"]),
                        "grad_rel": rel(k["grad_norm"], t["ref_grad_norm"]),
                        "torch_grad_rel": rel(t["torch_grad_norm"], t["ref_grad_norm"]),
                        "workspace_bytes": k["workspace_bytes"]})
        sys.stderr.write("\rctc_bench.py: %d/%d measured" % (i + 1, total))
        sys.stderr.flush()
    sys.stderr.write("\n")
    agree = report(results, args.loss_tol, args.grad_tol)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                       "iters": args.iters, "label_lengths": args.label_lengths,
                       "results": results}, f, indent=1)
    if not agree:
        sys.exit(1)  # after the table and the JSON, so that a scripted run still notices


if __name__ == "__main__":
    main()
