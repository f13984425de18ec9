#!/usr/bin/env python3
"""Whole Caffe nets: Kiln's graph engine against PyTorch (eager and CUDA graph) on one GPU.

Run on the GPU machine (needs numpy, torch with CUDA, and a built `kiln` binary):

    python3 bench/graph_bench.py --kiln bazel-bin/tools/kiln \
        --models-dir ../shared/models/caffe --out /tmp/graph_bench \
        [--rows caffenet:128,resnet18:64,densenet121:64,fcn8s:4] [--precisions fp32,tf32,fp16] \
        [--iterations 50] [--perf-md docs/PERF.md]

For every (net, batch, precision) row:

1. Weights. By default (`--weights-from numpy`) this script writes seeded random weights with
   fan-in-scaled magnitudes and real BatchNorm statistics (caffe_torch.random_weights), and the
   last weighted layer is rescaled so the output before any final Softmax has RMS 2. Kiln's own
   `--fill-seed` runs the prototxt's fillers, and the deploy files here mostly have none (zero
   convolutions in DenseNet) or none for BatchNorm (zero statistics, so every BN multiplies by
   1/sqrt(eps) and ResNet-18 overflows), which would make the numerical comparison empty.
   `--weights-from kiln` does what Kiln does (`kiln run --fill-seed 1 --save-weights W`).
2. `kiln run` on a fixed random input (float32 NCHW, N(0,1), seeded) saves the net's last blob
   (the top of the last layer); `kiln time --json` gives the median forward time and memory.
3. PyTorch loads the same weights through caffe_torch, runs the same input, and is timed eager
   and as a captured CUDA graph (median of per-iteration CUDA-event times after warm-up).
   fp32 turns TF32 off, tf32 turns it on, fp16/bf16 convert the model and use channels_last.
4. rel L2 = ||torch - kiln|| / ||kiln|| on that output. Results go to OUT/graph_bench.json after
   every row (so a run cut short keeps what it finished; `--append` merges runs) and a markdown
   table is printed last (and written into --perf-md between the graph-bench markers).
"""

import argparse
import datetime
import gc
import glob
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import caffe_torch as ct  # noqa: E402  (the path must be set first)

DEFAULT_ROWS = "caffenet:128,resnet18:64,densenet121:64,fcn8s:4"
BEGIN_MARK = "<!-- graph-bench:begin -->"
END_MARK = "<!-- graph-bench:end -->"
INPUT_SEED = 12345
TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}

_START = time.time()


def log(message):
    print("[%7.1fs] %s" % (time.time() - _START, message), flush=True)


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
# PyTorch side
# ------------------------------------------------------------------------------------------------

def set_torch_precision(precision):
    """TF32 on for tf32 only. Uses the fp32_precision API where it exists (PyTorch >= 2.9, which
    warns about the old flags and does not allow mixing the two), else allow_tf32."""
    mode = "tf32" if precision == "tf32" else "ieee"
    torch.backends.cudnn.benchmark = True
    if hasattr(torch.backends.cudnn, "conv") and hasattr(torch.backends.cuda.matmul,
                                                          "fp32_precision"):
        try:
            torch.backends.cuda.matmul.fp32_precision = mode
            torch.backends.cudnn.conv.fp32_precision = mode
            return "cuda.matmul/cudnn.conv fp32_precision=%s" % mode
        except (AttributeError, RuntimeError, ValueError) as e:
            log("fp32_precision API refused (%s); using allow_tf32" % e)
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    return "allow_tf32=%s" % (mode == "tf32")


def cuda_median_ms(fn, iterations):
    """Median (and min) of per-iteration times between CUDA events around fn()."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(times), min(times)


def cpu_median_ms(fn, iterations):
    """The CPU stand-in for cuda_median_ms, for dry runs of this script without a GPU."""
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times), min(times)


def torch_row(netdef, weights, x_np, precision, out_blob, iterations, warmup, device="cuda"):
    """Build, run once (output), warm up, measure peak memory, time eager and CUDA graph."""
    result = {"torch_settings": set_torch_precision(precision)}
    # Whatever an earlier row left allocated (a CUDA graph's pool, cached tensors) is not this
    # net's: the peak below is counted from here.
    baseline = torch.cuda.memory_allocated() if device == "cuda" else 0
    net = ct.CaffeNet(netdef, weights, outputs=[out_blob]).eval()
    x = torch.from_numpy(x_np)
    if precision in TORCH_DTYPES:
        dtype = TORCH_DTYPES[precision]
        net = net.to(device=device, dtype=dtype).to(memory_format=torch.channels_last)
        x = x.to(device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)
    else:
        net = net.to(device)
        x = x.to(device)
    if device == "cpu":
        with torch.inference_mode():
            result["torch_out"] = net(x).float().numpy()
            result["eager_ms"], result["eager_min_ms"] = cpu_median_ms(lambda: net(x),
                                                                       iterations)
        result["graph_error"] = "no CUDA graph on the CPU (dry run)"
        return result
    with torch.inference_mode():
        net.check_shapes = True  # one checked pass: every blob has Caffe's shape
        y = net(x)
        net.check_shapes = False
        result["torch_out"] = y.float().cpu().numpy()
        del y
        for _ in range(warmup):
            net(x)
        torch.cuda.synchronize()

        # Everything resident counts: weights, input, the forward's activations and workspace.
        torch.cuda.reset_peak_memory_stats()
        out = net(x)
        torch.cuda.synchronize()
        result["torch_peak_bytes"] = torch.cuda.max_memory_allocated() - baseline
        result["torch_baseline_bytes"] = baseline
        del out

        result["eager_ms"], result["eager_min_ms"] = cuda_median_ms(lambda: net(x), iterations)

        try:
            # Warm up on a side stream before capture, as PyTorch's CUDA graph notes ask.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    net(x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = net(x)
            for _ in range(warmup):
                graph.replay()
            result["graph_ms"], result["graph_min_ms"] = cuda_median_ms(graph.replay, iterations)
            replay = static_out.float().cpu().numpy()
            result["graph_vs_eager_rel_l2"] = rel_l2(replay, result["torch_out"])
            del graph, static_out
        except Exception as e:  # noqa: BLE001  (a failed capture must not lose the row)
            result["graph_error"] = "%s: %s" % (type(e).__name__, e)
    return result  # the caller frees the GPU memory once net and x are out of scope


def rel_l2(a, b):
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    denominator = np.linalg.norm(b)
    if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        return float("nan")
    if denominator == 0:
        return 0.0 if np.linalg.norm(a) == 0 else float("inf")
    return float(np.linalg.norm(a - b) / denominator)


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


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------

def fmt(value, pattern, missing="-"):
    if value is None:
        return missing
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return pattern % value


def markdown_table(rows):
    head = ("| net | batch | precision | Kiln ms | torch eager ms | torch CUDA-graph ms "
            "| Kiln img/s | eager img/s | eager/Kiln | graph/Kiln | Kiln MiB | torch MiB "
            "| rel L2 |")
    lines = [head, "|" + "---|" * 13]
    notes = []
    for r in rows:
        kiln_ms, eager_ms, graph_ms = r.get("kiln_ms"), r.get("eager_ms"), r.get("graph_ms")
        batch = r["batch"]
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["net"], batch, r["precision"],
            fmt(kiln_ms, "%.2f", "FAIL"), fmt(eager_ms, "%.2f", "FAIL"),
            fmt(graph_ms, "%.2f", "FAIL"),
            fmt(r.get("kiln_images_per_s"), "%.0f"),
            fmt(batch * 1000.0 / eager_ms if eager_ms else None, "%.0f"),
            fmt(eager_ms / kiln_ms if eager_ms and kiln_ms else None, "%.2f"),
            fmt(graph_ms / kiln_ms if graph_ms and kiln_ms else None, "%.2f"),
            fmt(r["kiln_total_bytes"] / 2 ** 20 if r.get("kiln_total_bytes") else None, "%.0f"),
            fmt(r["torch_peak_bytes"] / 2 ** 20 if r.get("torch_peak_bytes") else None, "%.0f"),
            fmt(r.get("rel_l2"), "%.2e")))
        for key in ("error", "kiln_run_error", "kiln_time_error", "torch_error", "graph_error",
                    "compare_error"):
            if r.get(key):
                first = str(r[key]).strip().splitlines()
                notes.append("- %s b%d %s: %s: %s" % (r["net"], batch, r["precision"], key,
                                                      first[-1] if first else "?"))
    return "\n".join(lines), notes


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
    return env


def write_perf_md(path, env, args, table, notes, weights_note):
    section = [
        BEGIN_MARK,
        "### Whole nets: Kiln graph engine vs PyTorch (`bench/graph_bench.py`)",
        "",
        "Run %s UTC on %s (driver %s), PyTorch %s, CUDA %s, cuDNN %s. Command: `%s`." % (
            env.get("date_utc"), env.get("gpu"), env.get("driver", "?"), env.get("torch"),
            env.get("cuda"), env.get("cudnn"), " ".join(shlex.quote(a) for a in sys.argv)),
        "",
        "Times are medians over %d iterations after %d warm-up ones. Kiln: `kiln time` "
        "(whole forward, un-instrumented; a replayed CUDA graph where Kiln captured one, see "
        "`kiln_cuda_graph` in graph_bench.json, so graph/Kiln is the like-for-like ratio). "
        "PyTorch: CUDA events around each eager forward, or "
        "around each replay of the captured CUDA graph; cudnn.benchmark on; fp16 uses "
        "`model.half()` and channels_last. eager/Kiln and graph/Kiln > 1 mean Kiln is faster. "
        "Kiln MiB: weights + activations + workspace of the plan; torch MiB: "
        "`max_memory_allocated` over one forward, weights included. rel L2 = "
        "||torch - kiln|| / ||kiln|| on the top of the last layer, same weights (%s) and the "
        "same N(0,1) input." % (args.iterations, args.warmup, weights_note),
        "",
        table,
    ]
    if notes:
        section += ["", "Failures:", ""] + notes
    section.append(END_MARK)
    text = "\n".join(section) + "\n"
    old = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    begin, end = old.find(BEGIN_MARK), old.find(END_MARK)
    if begin >= 0 and end > begin:
        end_line = old.find("\n", end)
        end_line = len(old) if end_line < 0 else end_line + 1
        new = old[:begin] + text + old[end_line:]
    else:
        new = old + ("\n" if old and not old.endswith("\n") else "") + ("\n" if old else "") + text
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", required=True, help="the kiln CLI binary")
    parser.add_argument("--models-dir", required=True, help="folder of the deploy prototxts")
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
                        help="extra flags for both kiln commands, one shell-quoted string")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per kiln command")
    parser.add_argument("--torch-device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu only for dry runs of this script on a machine without a GPU")
    parser.add_argument("--kiln-device", default="cuda",
                        help="kiln's --device (cuda; cpu for dry runs)")
    parser.add_argument("--append", action="store_true",
                        help="merge with rows already in OUT/graph_bench.json")
    args = parser.parse_args()

    os.makedirs(args.out, exist_ok=True)
    kiln = os.path.abspath(args.kiln)
    extra = shlex.split(args.kiln_args) + (["--layout", args.layout] if args.layout else [])
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    plan = [(net, batch, p) for net, batch in parse_rows(args.rows) for p in precisions]
    if args.torch_device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("graph_bench: PyTorch sees no CUDA device")

    env = environment()
    rc, out, err, _ = run_command([kiln, "version"], 60)
    env["kiln_version"] = (out or err).strip().splitlines()[0] if (out or err).strip() else "?"
    log("GPU %s, PyTorch %s, cuDNN %s, kiln %s" % (env.get("gpu"), env["torch"],
                                                   env.get("cudnn"), env["kiln_version"]))
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
            json.dump({"environment": env, "argv": sys.argv, "rows": merged}, f, indent=1)
        return merged

    for index, (net_name, batch, precision) in enumerate(plan):
        row = {"net": net_name, "batch": batch, "precision": precision}
        rows.append(row)
        where = "row %d/%d %s b%d %s" % (index + 1, len(plan), net_name, batch, precision)
        try:
            info = nets.get(net_name)
            if info is None:
                prototxt = os.path.abspath(find_prototxt(args.models_dir, net_name))
                info = {"prototxt": prototxt,
                        "weights_path": os.path.join(args.out, "%s.caffemodel" % net_name)}
                nets[net_name] = info
                if args.weights_from == "numpy":
                    log("%s: writing seeded weights %s" % (where, info["weights_path"]))
                    info["weights_note"] = make_numpy_weights(
                        prototxt, info["weights_path"], args.seed, device=args.torch_device)
                    log("%s: %s" % (where, info["weights_note"] or "weights written"))
            prototxt = info["prototxt"]
            netdef = ct.load_net(prototxt, batch=batch)
            if len(netdef.inputs) != 1:
                raise ValueError("nets with %d inputs are not supported" % len(netdef.inputs))
            input_name, input_shape = netdef.inputs[0]
            out_blob = netdef.last_top
            row.update(model=prototxt, input=input_name, input_shape=input_shape,
                       output_blob=out_blob, weights_from=args.weights_from)
            row_dir = os.path.join(args.out, "%s_b%d" % (net_name, batch))
            os.makedirs(row_dir, exist_ok=True)
            x_path = os.path.join(row_dir, "input.npy")
            x = make_input(x_path, input_shape)

            # 1. Kiln's output on the input (and, with --weights-from kiln, the weights).
            kiln_out_path = os.path.join(row_dir, "kiln_%s.npy" % precision)
            if os.path.exists(kiln_out_path):
                os.remove(kiln_out_path)
            cmd = [kiln, "run", "--model", prototxt]
            if args.weights_from == "kiln" and not os.path.exists(info["weights_path"]):
                cmd += ["--fill-seed", str(args.seed), "--save-weights", info["weights_path"]]
            else:
                cmd += ["--weights", info["weights_path"]]
            cmd += ["--input-shape", "%s=%s" % (input_name, ",".join(map(str, input_shape))),
                    "--input", "%s=%s" % (input_name, x_path),
                    "--output", "%s=%s" % (out_blob, kiln_out_path),
                    "--device", args.kiln_device, "--precision", precision] + extra
            log("%s: kiln run" % where)
            rc, out, err, seconds = run_command(cmd, args.timeout)
            row["kiln_run_cmd"] = " ".join(shlex.quote(c) for c in cmd)
            row["kiln_run_s"] = round(seconds, 2)
            if rc != 0 or not os.path.exists(kiln_out_path):
                row["kiln_run_error"] = "rc %d: %s" % (rc, tail(err or out))
                log("%s: kiln run failed: %s" % (where, tail(err or out, 2)))

            # 2. Kiln's timing.
            cmd = [kiln, "time", "--model", prototxt, "--weights", info["weights_path"],
                   "--batch", str(batch), "--precision", precision, "--device", args.kiln_device,
                   "--iterations", str(args.iterations), "--json"] + extra
            if not os.path.exists(info["weights_path"]):
                row["kiln_time_error"] = "no weights file (kiln run did not write it)"
            else:
                log("%s: kiln time" % where)
                rc, out, err, seconds = run_command(cmd, args.timeout)
                row["kiln_time_cmd"] = " ".join(shlex.quote(c) for c in cmd)
                row["kiln_time_s"] = round(seconds, 2)
                report = parse_json_object(out) if rc == 0 else None
                if report is None:
                    row["kiln_time_error"] = "rc %d: %s" % (rc, tail(err or out))
                    log("%s: kiln time failed: %s" % (where, tail(err or out, 2)))
                else:
                    row["kiln"] = report
                    row["kiln_ms"] = number(report, "forward_ms")
                    row["kiln_images_per_s"] = number(report, "images_per_s") or (
                        batch * 1000.0 / row["kiln_ms"] if row["kiln_ms"] else None)
                    row["kiln_total_bytes"] = number(report, "memory", "total_bytes")
                    for key in ("layout", "device", "backend", "cuda_graph"):
                        if key in report:
                            row["kiln_" + key] = report[key]
                    if number(report, "batch") not in (None, batch):
                        row["kiln_time_error"] = "kiln timed batch %s" % report.get("batch")

            # 3. PyTorch, on the weights file Kiln read.
            if not os.path.exists(info["weights_path"]):
                raise RuntimeError("no weights file for PyTorch either")
            if "weights" not in info:
                log("%s: reading %s" % (where, info["weights_path"]))
                info["weights"] = ct.load_caffemodel(info["weights_path"])
            log("%s: PyTorch eager + CUDA graph" % where)
            try:
                result = torch_row(netdef, info["weights"], x, precision, out_blob,
                                   args.iterations, args.warmup, args.torch_device)
            except Exception as e:  # noqa: BLE001
                row["torch_error"] = "%s: %s" % (type(e).__name__, e)
                row["torch_traceback"] = traceback.format_exc()
                log("%s: PyTorch failed: %s" % (where, row["torch_error"]))
                result = {}
            finally:
                gc.collect()
                if args.torch_device == "cuda":
                    torch.cuda.empty_cache()
            torch_out = result.pop("torch_out", None)
            row.update(result)
            if precision == "fp32" and torch_out is not None:
                torch_fp32[(net_name, batch)] = torch_out

            # 4. Agreement.
            if torch_out is not None and os.path.exists(kiln_out_path):
                kiln_out = np.load(kiln_out_path)
                if kiln_out.size != torch_out.size:
                    row["compare_error"] = "kiln output %s, PyTorch %s" % (kiln_out.shape,
                                                                          torch_out.shape)
                else:
                    if kiln_out.shape != torch_out.shape:
                        row["compare_note"] = "shapes %s (kiln) vs %s (torch), same size" % (
                            kiln_out.shape, torch_out.shape)
                    row["rel_l2"] = rel_l2(torch_out, kiln_out)
                    row["max_abs_diff"] = float(np.max(np.abs(
                        torch_out.reshape(-1).astype(np.float64)
                        - kiln_out.reshape(-1).astype(np.float64))))
                    row["kiln_out_rms"] = float(np.sqrt(np.mean(
                        kiln_out.astype(np.float64) ** 2)))
                    if (net_name, batch) in torch_fp32:
                        row["kiln_vs_torch_fp32_rel_l2"] = rel_l2(torch_fp32[(net_name, batch)],
                                                                  kiln_out)
            log("%s: kiln %s ms, eager %s ms, graph %s ms, rel L2 %s" % (
                where, fmt(row.get("kiln_ms"), "%.3f"), fmt(row.get("eager_ms"), "%.3f"),
                fmt(row.get("graph_ms"), "%.3f"), fmt(row.get("rel_l2"), "%.2e")))
        except Exception as e:  # noqa: BLE001  (one bad row must not lose the others)
            row["error"] = "%s: %s" % (type(e).__name__, e)
            row["traceback"] = traceback.format_exc()
            log("%s: FAILED: %s" % (where, row["error"]))
        save()

    merged = save()
    weights_note = ("seeded random weights from caffe_torch.random_weights, seed %d, output "
                    "layer scaled to RMS 2" % args.seed if args.weights_from == "numpy"
                    else "Kiln's --fill-seed %d fillers" % args.seed)
    table, notes = markdown_table(merged)
    if args.perf_md:
        write_perf_md(args.perf_md, env, args, table, notes, weights_note)
        log("wrote the graph-bench section of %s" % args.perf_md)
    log("results in %s" % json_path)
    print("", flush=True)
    print(table, flush=True)
    if notes:
        print("\n" + "\n".join(notes), flush=True)


if __name__ == "__main__":
    main()
