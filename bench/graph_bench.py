#!/usr/bin/env python3
"""Whole Caffe nets: Kiln's graph engine (fused and unfused) against PyTorch (eager, CUDA graph,
torch.compile) on one GPU.

Run on the GPU machine (needs numpy, torch with CUDA, and a built `kiln` binary):

    python3 bench/graph_bench.py --kiln bazel-bin/tools/kiln \
        --models-dir ../shared/models/caffe --out /tmp/graph_bench \
        [--rows caffenet:128,resnet18:64,densenet121:64,fcn8s:4] [--precisions fp32,tf32,fp16] \
        [--iterations 50] [--perf-md docs/PERF.md] [--no-compile] [--compile-mode default]

For every (net, batch, precision) row:

1. Weights. By default (`--weights-from numpy`) this script writes seeded random weights with
   fan-in-scaled magnitudes and real BatchNorm statistics (caffe_torch.random_weights), and the
   last weighted layer is rescaled so the output before any final Softmax has RMS 2. Kiln's own
   `--fill-seed` runs the prototxt's fillers, and the deploy files here mostly have none (zero
   convolutions in DenseNet) or none for BatchNorm (zero statistics, so every BN multiplies by
   1/sqrt(eps) and ResNet-18 overflows), which would make the numerical comparison empty.
   `--weights-from kiln` does what Kiln does (`kiln run --fill-seed 1 --save-weights W`).
2. Kiln, twice (`--kiln-variants`): "unfused" (`--optimize off`, the imported graph as it is)
   and "fused" (`--optimize on`: BatchNorm folding, conv + residual + ReLU epilogues, Dropout
   removal, in-place memory planning). Each: `kiln run` on a fixed random input (float32 NCHW,
   N(0,1), seeded) saves the net's last blob (the top of the last layer); `kiln time --json`
   gives the median forward time and memory (memory.total_bytes).
3. PyTorch loads the same weights through caffe_torch, runs the same input, and is timed eager,
   as a captured CUDA graph and through `torch.compile(model)` (Inductor, `--compile-mode`;
   warmed up until it compiles nothing new, the compilation time reported apart; `--no-compile`
   skips it; a compiler failure is recorded in the row). Median of per-iteration CUDA-event
   times after warm-up. fp32 turns TF32 off, tf32 turns it on, fp16/bf16 convert the model and
   use channels_last, for all three.
4. rel L2 = ||torch - kiln|| / ||kiln|| on that output for each Kiln variant, and
   ||compile - eager|| / ||eager|| for torch.compile. Results go to OUT/graph_bench.json after
   every row (so a run cut short keeps what it finished; `--append` merges runs); the markdown
   tables go to OUT/graph_bench.md and into --perf-md between the graph-bench markers, and the
   log ends with a short table and the targets' summary (graph_bench_report.py).
"""

import argparse
import datetime
import gc
import glob
import json
import os
import platform
import shlex
import subprocess
import sys
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import caffe_torch as ct  # noqa: E402  (the path must be set first)
from graph_bench_report import (  # noqa: E402
    OPTIMIZE_FLAG, VARIANTS, Progress, fmt, log, perf_section, print_report, replace_section)
from graph_bench_torch import rel_l2, set_torch_precision, torch_row  # noqa: E402

DEFAULT_ROWS = "caffenet:128,resnet18:64,densenet121:64,fcn8s:4"
INPUT_SEED = 12345


# ------------------------------------------------------------------------------------------------
# Finding models and running Kiln
# ------------------------------------------------------------------------------------------------

def find_prototxt(models_dir, net):
    """caffenet -> caffenet_deploy.prototxt, fcn8s -> fcn8s_voc_deploy.prototxt, or a file name."""
    if os.path.isfile(net):
        return net
    for name in (net, net + ".prototxt", net + "_deploy.prototxt"):
        path = os.path.join(models_dir, name)
        if os.path.isfile(path) and path.endswith(".prototxt"):
            return path
    matches = sorted(glob.glob(os.path.join(models_dir, net + "*_deploy.prototxt")))
    matches = [m for m in matches if not os.path.basename(m).startswith("v1_")]
    if len(matches) == 1:
        return matches[0]
    raise FileNotFoundError("no deploy prototxt for '%s' in %s (candidates: %s)"
                            % (net, models_dir, [os.path.basename(m) for m in matches]))


def run_command(cmd, timeout):
    """(returncode, stdout, stderr, seconds); a timeout or a missing binary is a failed run."""
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - start
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out, "timed out after %ss" % timeout, time.time() - start
    except OSError as e:
        return 127, "", str(e), time.time() - start


def tail(text, lines=6):
    return "\n".join((text or "").strip().splitlines()[-lines:])


def parse_json_object(text):
    """The last JSON object on stdout that has forward_ms; tolerant of log lines around it."""
    decoder = json.JSONDecoder()
    found = None
    for i, ch in enumerate(text):
        if ch != "{" or (i > 0 and text[i - 1] not in "\n\r"):
            continue
        try:
            obj, _ = decoder.raw_decode(text, i)
        except ValueError:
            continue
        if isinstance(obj, dict) and "forward_ms" in obj:
            found = obj
    if found is None:
        try:
            obj = json.loads(text)
            if isinstance(obj, dict):
                found = obj
        except ValueError:
            pass
    return found


def number(obj, *path):
    """obj[path...] as a float, or None when missing or not a number."""
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    try:
        return float(obj)
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------------------------------------
# Weights and inputs
# ------------------------------------------------------------------------------------------------

def last_weighted_layer(netdef):
    for layer in reversed(netdef.layers):
        if layer.type in ("Convolution", "Deconvolution", "InnerProduct"):
            return layer
    return None


def make_numpy_weights(prototxt, path, seed, target_rms=2.0, device="cuda"):
    """Seeded random weights (see caffe_torch.random_weights), output layer calibrated on GPU."""
    netdef = ct.load_net(prototxt, batch=1)
    shapes = ct.CaffeNet(netdef, init_weights=False)
    weights = ct.random_weights(shapes, seed=seed)
    last = last_weighted_layer(netdef)
    note = ""
    if last is not None:
        # One forward at batch 1 to measure the last weighted layer's output, then scale its
        # weight and bias so it has RMS target_rms: a final Softmax then neither saturates
        # (one-hot) nor flattens (uniform), and the comparison stays sensitive.
        name, shape = netdef.inputs[0]
        x = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
        net = ct.CaffeNet(netdef, weights, outputs=[last.tops[0]]).eval().to(device)
        set_torch_precision("fp32")
        with torch.inference_mode():
            y = net(torch.from_numpy(x).to(device)).double()
            rms = float(y.pow(2).mean().sqrt())
        del net, y
        if device == "cuda":
            torch.cuda.empty_cache()
        if np.isfinite(rms) and rms > 0:
            factor = target_rms / rms
            weights[last.name] = [b * np.float32(factor) for b in weights[last.name]]
            note = "layer %s scaled by %.4g (output RMS %.4g -> %.3g)" % (last.name, factor, rms,
                                                                          target_rms)
    ct.save_caffemodel(path, weights, types=shapes.param_types, net_name=netdef.name)
    return note


def make_input(path, shape):
    x = np.random.default_rng(INPUT_SEED).standard_normal(shape, dtype=np.float32)
    np.save(path, x)
    return x


def environment():
    env = {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
           "python": platform.python_version(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "host": platform.node()}
    try:
        env["cudnn"] = torch.backends.cudnn.version()
        env["gpu"] = torch.cuda.get_device_name(0)
    except Exception as e:  # noqa: BLE001
        env["gpu"] = "unavailable (%s)" % e
    rc, out, _, _ = run_command(["nvidia-smi", "--query-gpu=driver_version",
                                 "--format=csv,noheader"], 30)
    if rc == 0 and out.strip():
        env["driver"] = out.strip().splitlines()[0]
    try:
        import triton  # noqa: F401  (torch.compile's GPU code generator)
        env["triton"] = getattr(triton, "__version__", "?")
    except Exception:  # noqa: BLE001
        env["triton"] = "not installed"
    return env


# ------------------------------------------------------------------------------------------------
# Kiln, one variant (--optimize off: unfused, on: fused)
# ------------------------------------------------------------------------------------------------

def optimize_flag(variant, args):
    """kiln's --optimize for a variant: off (unfused), on or memory (fused, --fused-optimize)."""
    return args.fused_optimize if variant == "fused" else OPTIMIZE_FLAG[variant]


def without_optimize_flag(args):
    """--kiln-args minus any --optimize (the variants set it): (kept, dropped)."""
    kept, dropped, i = [], [], 0
    while i < len(args):
        if args[i] == "--optimize":
            dropped += args[i:i + 2]
            i += 2
        elif args[i].startswith("--optimize="):
            dropped.append(args[i])
            i += 1
        else:
            kept.append(args[i])
            i += 1
    return kept, dropped


def kiln_run(kiln, variant, row, net, args, extra, progress):
    """`kiln run` of one variant: the output blob on the row's input, into net["out_paths"]."""
    p = "kiln_%s_" % variant
    out_path = net["out_paths"][variant]
    if os.path.exists(out_path):
        os.remove(out_path)
    cmd = [kiln, "run", "--model", net["prototxt"]]
    if args.weights_from == "kiln" and not os.path.exists(net["weights_path"]):
        cmd += ["--fill-seed", str(args.seed), "--save-weights", net["weights_path"]]
    else:
        cmd += ["--weights", net["weights_path"]]
    cmd += ["--input-shape", "%s=%s" % (net["input"], ",".join(map(str, net["input_shape"]))),
            "--input", "%s=%s" % (net["input"], net["x_path"]),
            "--output", "%s=%s" % (net["output_blob"], out_path),
            "--device", args.kiln_device, "--precision", row["precision"],
            "--optimize", optimize_flag(variant, args)] + extra
    progress.step("kiln run --optimize %s (%s)" % (optimize_flag(variant, args), variant))
    rc, out, err, seconds = run_command(cmd, args.timeout)
    row[p + "run_cmd"] = " ".join(shlex.quote(c) for c in cmd)
    row[p + "run_s"] = round(seconds, 2)
    if rc != 0 or not os.path.exists(out_path):
        row[p + "run_error"] = "rc %d: %s" % (rc, tail(err or out))
        progress.note("kiln run (%s) failed: %s" % (variant, tail(err or out, 2)))


def kiln_time(kiln, variant, row, net, args, extra, progress):
    """`kiln time --json` of one variant: ms, images/s, memory.total_bytes, the report."""
    p = "kiln_%s_" % variant
    batch = row["batch"]
    cmd = [kiln, "time", "--model", net["prototxt"], "--weights", net["weights_path"],
           "--batch", str(batch), "--precision", row["precision"], "--device", args.kiln_device,
           "--iterations", str(args.iterations), "--optimize", optimize_flag(variant, args),
           "--json"] + extra
    if not os.path.exists(net["weights_path"]):
        row[p + "time_error"] = "no weights file (kiln run did not write it)"
        return
    progress.step("kiln time --optimize %s (%s)" % (optimize_flag(variant, args), variant))
    rc, out, err, seconds = run_command(cmd, args.timeout)
    row[p + "time_cmd"] = " ".join(shlex.quote(c) for c in cmd)
    row[p + "time_s"] = round(seconds, 2)
    report = parse_json_object(out) if rc == 0 else None
    if report is None:
        row[p + "time_error"] = "rc %d: %s" % (rc, tail(err or out))
        progress.note("kiln time (%s) failed: %s" % (variant, tail(err or out, 2)))
        return
    row[p + "report"] = report
    row[p + "ms"] = number(report, "forward_ms")
    row[p + "images_per_s"] = number(report, "images_per_s") or (
        batch * 1000.0 / row[p + "ms"] if row[p + "ms"] else None)
    row[p + "total_bytes"] = number(report, "memory", "total_bytes")
    for key in ("layout", "device", "backend", "cuda_graph"):
        if key in report:
            row[p + key] = report[key]
    layers = report.get("layers")
    if isinstance(layers, list):
        # `kiln time` names a fused step after all of its layers: "conv1+bn1+scale1+relu1".
        row[p + "fused_groups"] = sum(1 for layer in layers
                                      if "+" in str(layer.get("name", "")))
    if number(report, "batch") not in (None, batch):
        row[p + "time_error"] = "kiln timed batch %s" % report.get("batch")


def compare_outputs(row, variant, out_path, torch_out, torch_fp32_out):
    """rel L2 of PyTorch eager against one Kiln variant's output; returns that output."""
    p = "kiln_%s_" % variant
    if torch_out is None or not os.path.exists(out_path):
        return None
    kiln_out = np.load(out_path)
    if kiln_out.size != torch_out.size:
        row[p + "compare_error"] = "kiln output %s, PyTorch %s" % (kiln_out.shape,
                                                                  torch_out.shape)
        return None
    if kiln_out.shape != torch_out.shape:
        row[p + "compare_note"] = "shapes %s (kiln) vs %s (torch), same size" % (
            kiln_out.shape, torch_out.shape)
    row[p + "rel_l2"] = rel_l2(torch_out, kiln_out)
    row[p + "max_abs_diff"] = float(np.max(np.abs(
        torch_out.reshape(-1).astype(np.float64) - kiln_out.reshape(-1).astype(np.float64))))
    row[p + "out_rms"] = float(np.sqrt(np.mean(kiln_out.astype(np.float64) ** 2)))
    if torch_fp32_out is not None:
        row[p + "vs_torch_fp32_rel_l2"] = rel_l2(torch_fp32_out, kiln_out)
    return kiln_out


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------

def parse_rows(text):
    rows = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        net, _, batch = item.rpartition(":")
        if not net or not batch.isdigit() or int(batch) < 1:
            raise SystemExit("--rows: '%s' is not NET:BATCH" % item)
        rows.append((net, int(batch)))
    return rows


def prepare_net(nets, net_name, batch, args, progress):
    """The net's prototxt and weights (written once per net), the row's input and file names."""
    info = nets.get(net_name)
    if info is None:
        prototxt = os.path.abspath(find_prototxt(args.models_dir, net_name))
        info = {"prototxt": prototxt,
                "weights_path": os.path.join(args.out, "%s.caffemodel" % net_name)}
        nets[net_name] = info
        if args.weights_from == "numpy":
            progress.step("writing seeded weights %s" % info["weights_path"])
            info["weights_note"] = make_numpy_weights(prototxt, info["weights_path"], args.seed,
                                                      device=args.torch_device)
            progress.note(info["weights_note"] or "weights written")
    netdef = ct.load_net(info["prototxt"], batch=batch)
    if len(netdef.inputs) != 1:
        raise ValueError("nets with %d inputs are not supported" % len(netdef.inputs))
    row_dir = os.path.join(args.out, "%s_b%d" % (net_name, batch))
    os.makedirs(row_dir, exist_ok=True)
    net = dict(info, netdef=netdef, input=netdef.inputs[0][0], input_shape=netdef.inputs[0][1],
               output_blob=netdef.last_top, x_path=os.path.join(row_dir, "input.npy"))
    net["x"] = make_input(net["x_path"], net["input_shape"])
    return info, net, row_dir


def run_row(row, nets, torch_fp32, args, kiln, extra, variants, progress):
    """One (net, batch, precision): Kiln's variants, PyTorch, the comparisons. Failures of a
    part are recorded in the row under their own keys; anything else raises to the caller."""
    net_name, batch, precision = row["net"], row["batch"], row["precision"]
    info, net, row_dir = prepare_net(nets, net_name, batch, args, progress)
    row.update(model=net["prototxt"], input=net["input"], input_shape=net["input_shape"],
               output_blob=net["output_blob"], weights_from=args.weights_from,
               kiln_variants=list(variants))
    net["out_paths"] = {v: os.path.join(row_dir, "kiln_%s_%s.npy" % (precision, v))
                        for v in variants}

    # 1. Kiln: the output on the input (and, with --weights-from kiln, the weights), the timing.
    for variant in variants:
        kiln_run(kiln, variant, row, net, args, extra, progress)
        kiln_time(kiln, variant, row, net, args, extra, progress)

    # 2. PyTorch, on the weights file Kiln read.
    if not os.path.exists(info["weights_path"]):
        raise RuntimeError("no weights file for PyTorch either")
    if "weights" not in info:
        progress.step("reading %s" % info["weights_path"])
        info["weights"] = ct.load_caffemodel(info["weights_path"])
    progress.step("PyTorch eager + CUDA graph" if args.torch_device == "cuda"
                  else "PyTorch eager (CPU dry run)")
    compile_mode = None if args.no_compile else args.compile_mode
    if compile_mode is None:
        row["compile_skipped"] = True
    try:
        result = torch_row(net["netdef"], info["weights"], net["x"], precision,
                           net["output_blob"], args.iterations, args.warmup, args.torch_device,
                           compile_mode=compile_mode, step=progress.step)
    except Exception as e:  # noqa: BLE001
        row["torch_error"] = "%s: %s" % (type(e).__name__, e)
        row["torch_traceback"] = traceback.format_exc()
        progress.note("PyTorch failed: %s" % row["torch_error"])
        result = {}
    finally:
        gc.collect()
        if args.torch_device == "cuda":
            torch.cuda.empty_cache()
    torch_out = result.pop("torch_out", None)
    row.update(result)
    if row.get("compile_error"):
        progress.note("torch.compile failed: %s" % row["compile_error"])
    if precision == "fp32" and torch_out is not None:
        torch_fp32[(net_name, batch)] = torch_out

    # 3. Agreement: each Kiln variant against PyTorch eager, and the two variants.
    outputs = {v: compare_outputs(row, v, net["out_paths"][v], torch_out,
                                  torch_fp32.get((net_name, batch))) for v in variants}
    if outputs.get("fused") is not None and outputs.get("unfused") is not None:
        row["kiln_fused_vs_unfused_rel_l2"] = rel_l2(outputs["fused"], outputs["unfused"])
    progress.note(
        "kiln unfused %s ms, fused %s ms; eager %s, graph %s, compile %s ms%s; rel L2 unfused "
        "%s, fused %s, compile %s" % (
            fmt(row.get("kiln_unfused_ms"), "%.3f"), fmt(row.get("kiln_fused_ms"), "%.3f"),
            fmt(row.get("eager_ms"), "%.3f"), fmt(row.get("graph_ms"), "%.3f"),
            fmt(row.get("compile_ms"), "%.3f"),
            " (compiled in %.1f s)" % row["compile_s"] if row.get("compile_s") else "",
            fmt(row.get("kiln_unfused_rel_l2"), "%.2e"), fmt(row.get("kiln_fused_rel_l2"), "%.2e"),
            fmt(row.get("compile_vs_eager_rel_l2"), "%.2e")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", help="the kiln CLI binary (required unless --report-only)")
    parser.add_argument("--models-dir",
                        help="folder of the deploy prototxts (required unless --report-only)")
    parser.add_argument("--out", required=True, help="folder for weights, inputs, outputs, JSON")
    parser.add_argument("--rows", default=DEFAULT_ROWS, help="NET:BATCH,... (default %(default)s)")
    parser.add_argument("--precisions", default="fp32,tf32,fp16")
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--perf-md", help="markdown file whose graph-bench section is replaced")
    parser.add_argument("--weights-from", choices=("numpy", "kiln"), default="numpy",
                        help="numpy: this script's seeded weights (default); kiln: "
                             "kiln run --fill-seed 1 --save-weights (the prototxt fillers)")
    parser.add_argument("--seed", type=int, default=1, help="weight seed")
    parser.add_argument("--layout", help="passed to kiln as --layout (nchw|nhwc|auto)")
    parser.add_argument("--kiln-args", default="",
                        help="extra flags for every kiln command, one shell-quoted string "
                             "(an --optimize there is dropped: --kiln-variants sets it)")
    parser.add_argument("--kiln-variants", default=",".join(VARIANTS),
                        help="which Kiln plans to run: unfused (--optimize off), fused "
                             "(--optimize on) or both (default %(default)s)")
    parser.add_argument("--fused-optimize", choices=("on", "memory"), default="on",
                        help="kiln's --optimize for the fused variant: on (default), or memory "
                             "(also split_for_memory: the peak convolution in channel slices)")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the torch.compile column (compilation takes ~1 min a row)")
    parser.add_argument("--compile-mode", default="default",
                        help="torch.compile mode: default (Inductor), reduce-overhead, "
                             "max-autotune, ... (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per kiln command")
    parser.add_argument("--heartbeat", type=float, default=60,
                        help="seconds between 'still running' lines during one long step")
    parser.add_argument("--torch-device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu only for dry runs of this script on a machine without a GPU")
    parser.add_argument("--kiln-device", default="cuda",
                        help="kiln's --device (cuda; cpu for dry runs)")
    parser.add_argument("--append", action="store_true",
                        help="merge with rows already in OUT/graph_bench.json")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: the tables (and --perf-md) from OUT/graph_bench.json")
    args = parser.parse_args()
    if args.report_only:
        return report_only(args)
    if not args.kiln or not args.models_dir:
        parser.error("--kiln and --models-dir are required (unless --report-only)")

    os.makedirs(args.out, exist_ok=True)
    kiln = os.path.abspath(args.kiln)
    extra, dropped = without_optimize_flag(shlex.split(args.kiln_args))
    if dropped:
        log("--kiln-args: dropped %s (the unfused and fused variants set --optimize)"
            % " ".join(dropped))
    extra += ["--layout", args.layout] if args.layout else []
    variants = [v.strip() for v in args.kiln_variants.split(",") if v.strip()]
    if not variants or any(v not in VARIANTS for v in variants):
        raise SystemExit("--kiln-variants: a list of %s" % ", ".join(VARIANTS))
    variants = [v for v in VARIANTS if v in variants]  # unfused first: it saves kiln's weights
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    plan = [(net, batch, p) for net, batch in parse_rows(args.rows) for p in precisions]
    if args.torch_device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("graph_bench: PyTorch sees no CUDA device")

    env = environment()
    rc, out, err, _ = run_command([kiln, "version"], 60)
    env["kiln_version"] = (out or err).strip().splitlines()[0] if (out or err).strip() else "?"
    log("GPU %s, PyTorch %s, cuDNN %s, Triton %s, kiln %s; %d rows, Kiln %s, torch.compile %s"
        % (env.get("gpu"), env["torch"], env.get("cudnn"), env.get("triton"),
           env["kiln_version"], len(plan), "+".join(variants),
           "skipped" if args.no_compile else "mode " + args.compile_mode))
    weights_note = ("seeded random weights from caffe_torch.random_weights, seed %d, output "
                    "layer scaled to RMS 2" % args.seed if args.weights_from == "numpy"
                    else "Kiln's --fill-seed %d fillers" % args.seed)
    settings = {"iterations": args.iterations, "warmup": args.warmup,
                "compile_mode": None if args.no_compile else args.compile_mode,
                "kiln_variants": variants, "fused_optimize": args.fused_optimize,
                "weights_note": weights_note}
    json_path = os.path.join(args.out, "graph_bench.json")
    previous = []
    if args.append and os.path.exists(json_path):
        with open(json_path, encoding="utf-8") as f:
            previous = json.load(f).get("rows", [])

    nets = {}        # net -> {"prototxt", "weights_path", "weights_note", "weights" (dict)}
    torch_fp32 = {}  # (net, batch) -> PyTorch fp32 output, to show every precision against it
    rows = []

    def save():
        keys = {(r["net"], r["batch"], r["precision"]) for r in rows}
        merged = [r for r in previous if (r["net"], r["batch"], r["precision"]) not in keys] + rows
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump({"environment": env, "argv": sys.argv, "settings": settings,
                       "rows": merged}, f, indent=1)
        return merged

    with Progress(len(plan), heartbeat_s=args.heartbeat) as progress:
        for index, (net_name, batch, precision) in enumerate(plan):
            row = {"net": net_name, "batch": batch, "precision": precision}
            rows.append(row)
            progress.start_row(index + 1, "%s b%d %s" % (net_name, batch, precision))
            try:
                run_row(row, nets, torch_fp32, args, kiln, extra, variants, progress)
            except Exception as e:  # noqa: BLE001  (one bad row must not lose the others)
                row["error"] = "%s: %s" % (type(e).__name__, e)
                row["traceback"] = traceback.format_exc()
                progress.note("FAILED: %s" % row["error"])
            progress.end_row()
            save()

    merged = save()
    write_reports(merged, env, sys.argv, settings, args.out, args.perf_md)


def write_reports(rows, env, argv, settings, out_dir, perf_md=None):
    """OUT/graph_bench.md, the --perf-md section, and the tables at the end of the log."""
    if perf_md:
        replace_section(perf_md, perf_section(
            env, argv, settings.get("iterations"), settings.get("warmup"),
            settings.get("compile_mode"), settings.get("weights_note", "?"), rows))
        log("wrote the graph-bench section of %s" % perf_md)
    markdown_path = os.path.join(out_dir, "graph_bench.md")
    if not os.access(out_dir, os.W_OK):  # --report-only on a folder fetched read-only
        markdown_path = None
    log("results in %s%s" % (os.path.join(out_dir, "graph_bench.json"),
                             " and " + markdown_path if markdown_path else ""))
    print_report(rows, markdown_path)


def report_only(args):
    """--report-only: the tables and the --perf-md section again from OUT/graph_bench.json (e.g.
    the one tools/gpu_check.sh brings back), with the environment, command and settings of the
    run that wrote it."""
    json_path = os.path.join(args.out, "graph_bench.json")
    with open(json_path, encoding="utf-8") as f:
        data = json.load(f)
    settings = data.get("settings") or {"iterations": args.iterations, "warmup": args.warmup,
                                        "compile_mode": args.compile_mode}
    write_reports(data.get("rows", []), data.get("environment", {}), data.get("argv", sys.argv),
                  settings, args.out, args.perf_md)


if __name__ == "__main__":
    main()
