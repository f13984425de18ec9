#!/usr/bin/env python3
"""Data-parallel training throughput: Kiln's `--gpus` against PyTorch DistributedDataParallel,
on the same nets and GPUs in the same run (issue 18).

Run on a machine with two GPUs (needs numpy, torch with CUDA and NCCL, a built `kiln`):

    python3 bench/ddp_bench.py --kiln bazel-bin/tools/kiln --models-dir ../shared/models/caffe \
        --out /tmp/ddp_bench [--rows resnet18:64,caffenet:128] [--precisions fp32,fp16] \
        [--gpus 0,1] [--iterations 20] [--kiln-args "--algo measure"] [--perf-md docs/PERF.md] \
        [--kiln-multi-args --no-overlap]

For every (net, per-GPU batch, precision) row, on 1 GPU (the first of --gpus) and on all of
--gpus:

1. Kiln: `kiln time --train --model NET --input-shape data=B,C,H,W --input-shape label=B
   --precision P --iterations K --json`, with `--gpus 0,1` for several GPUs (one process per
   GPU, gradients all-reduced with NCCL inside every timed step; by default each bucket's
   all-reduce starts during backward, and --kiln-multi-args --no-overlap measures them all after
   backward instead). Rank 0 reports images/s = GPUs x B / median step.
2. PyTorch: torch.multiprocessing.spawn of one process per GPU, NCCL process group, the TRAIN net
   of the same prototxt built by caffe_torch_train (as train_bench_torch builds it: synthetic
   data, SGD momentum 0.9, weight decay 5e-4, cudnn.benchmark on; fp32 with TF32 off, fp16 as
   autocast + GradScaler with f32 weights and channels_last) wrapped in
   DistributedDataParallel(device_ids=[rank]) (bucket defaults), also for one GPU. Rank 0 times
   the median of K CUDA-event-timed steps after the warm-up; images/s = GPUs x B / median.
3. Scaling efficiency = images/s on N GPUs / (N x images/s on 1 GPU), for each side; the
   Kiln/DDP ratio = Kiln images/s / DDP images/s at the same GPU count.

OUT/ddp_bench.json is rewritten after every measurement; the table goes to OUT/ddp_bench.md, to
stdout, and with --perf-md between the ddp-bench markers of that file. A failing measurement is
recorded with its error and the run goes on. --torch-device cpu (gloo, CPU) and kiln's
`--device cpu` (with --kiln-args) dry-run the script without GPUs: the multi-GPU Kiln rows then
fail with kiln's own message, which is what such a run can show.
"""

import argparse
import json
import os
import shlex
import socket
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_bench as tb  # noqa: E402  (the path must be set first)
from graph_bench_report import fmt  # noqa: E402

BEGIN_MARK = "<!-- ddp-bench:begin -->"
END_MARK = "<!-- ddp-bench:end -->"
DEFAULT_ROWS = "resnet18:64,caffenet:128"


def log(line):
    sys.stderr.write("[%7.1fs] %s\n" % (time.time() - tb._START, line))
    sys.stderr.flush()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------
# Kiln
# ------------------------------------------------------------------------------------------------

def kiln_measure(args, prototxt, shapes, precision, gpus):
    """{images_per_s, step_ms, cmd} or {error, stderr_tail, cmd} for `kiln time --train`."""
    extra = shlex.split(args.kiln_args)
    if len(gpus) > 1:
        extra += shlex.split(args.kiln_multi_args)
        extra += ["--gpus", ",".join(str(g) for g in gpus)]
    cmd = tb.kiln_command(args.kiln, prototxt, shapes, precision, args.iterations, extra)
    env = dict(os.environ)
    if len(gpus) == 1:
        env["CUDA_VISIBLE_DEVICES"] = str(gpus[0])
    result = {"cmd": " ".join(shlex.quote(c) for c in cmd)}
    import subprocess
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", "timed out after %ss" % args.timeout
    except OSError as e:
        rc, out, err = 127, "", str(e)
    result["seconds"] = round(time.time() - start, 1)
    report = tb.parse_kiln_json(out) if rc == 0 else None
    if report is None:
        result["error"] = "rc %d" % rc if rc != 0 else "no JSON with train_step_ms on stdout"
        result["stderr_tail"] = tb.tail(err) or tb.tail(out)
        return result
    result["step_ms"] = tb.number(report, "train_step_ms")
    result["images_per_s"] = tb.number(report, "images_per_second")
    result["world_size"] = report.get("world_size", 1)
    result["backend"] = report.get("backend")
    if result["world_size"] != len(gpus):
        result["error"] = "kiln reports world_size %r, expected %d" % (result["world_size"],
                                                                       len(gpus))
    return result


# ------------------------------------------------------------------------------------------------
# PyTorch DDP
# ------------------------------------------------------------------------------------------------

def _ddp_worker(rank, world, port, prototxt, shapes, precision, args_dict, result_path):
    """One DDP process: build, wrap, warm up, time; rank 0 writes the result as JSON."""
    result = {}
    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        import train_bench_torch as tbt
        from graph_bench_torch import cpu_median_ms, cuda_median_ms, set_torch_precision
        cuda = args_dict["torch_device"] == "cuda"
        if cuda:
            torch.cuda.set_device(rank)
        dist.init_process_group("nccl" if cuda else "gloo",
                                init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                                world_size=world)
        result["settings"] = set_torch_precision("fp32")
        device = "cuda:%d" % rank if cuda else "cpu"
        net, optimizer, inputs, scaler = tbt.build(prototxt, shapes, precision,
                                                   "cuda" if cuda else "cpu")
        if cuda:
            net = net.to(device)
            inputs = [x.to(device) for x in inputs]
        model = DDP(net, device_ids=[rank] if cuda else None)
        step = tbt.make_step(model, optimizer, inputs, precision, "cuda" if cuda else "cpu",
                             scaler)
        for _ in range(args_dict["warmup"]):
            step()
        if cuda:
            torch.cuda.synchronize()
            ms, low = cuda_median_ms(step, args_dict["iterations"])
        else:
            ms, low = cpu_median_ms(step, args_dict["iterations"])
        dist.barrier()
        result.update(step_ms=ms, min_ms=low,
                      images_per_s=world * shapes[0][1][0] * 1000.0 / ms, world_size=world)
        dist.destroy_process_group()
    except Exception as e:  # recorded, the run goes on
        result["error"] = "%s: %s" % (type(e).__name__, e)
        result["traceback"] = traceback.format_exc()[-3000:]
    if rank == 0 or "error" in result:
        path = result_path if rank == 0 else "%s.rank%d" % (result_path, rank)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(result, f)


def ddp_measure(args, prototxt, shapes, precision, gpus):
    """{images_per_s, step_ms} or {error, traceback} for PyTorch DDP on `gpus`."""
    import torch.multiprocessing as mp
    world = len(gpus)
    with tempfile.TemporaryDirectory() as tmp:
        result_path = os.path.join(tmp, "result.json")
        args_dict = {"torch_device": args.torch_device, "warmup": args.warmup,
                     "iterations": args.iterations}
        # Each process sees its GPUs as 0..world-1 in --gpus order.
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
        start = time.time()
        try:
            mp.spawn(_ddp_worker, nprocs=world, join=True,
                     args=(world, free_port(), prototxt, shapes, precision, args_dict,
                           result_path))
        except Exception as e:
            return {"error": "spawn: %s: %s" % (type(e).__name__, e),
                    "traceback": traceback.format_exc()[-3000:]}
        finally:
            if saved is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = saved
        errors = []
        for name in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, name), encoding="utf-8") as f:
                r = json.load(f)
            if name == "result.json" and "error" not in r:
                r["seconds"] = round(time.time() - start, 1)
                return r
            errors.append(r)
        return errors[0] if errors else {"error": "no result from rank 0"}


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

def derived(row, n):
    """Scaling efficiencies and the Kiln/DDP ratios of a row measured on 1 and n GPUs."""
    def ips(side, world):
        return (row.get(side, {}).get(str(world)) or {}).get("images_per_s")
    for side in ("kiln", "ddp"):
        one, many = ips(side, 1), ips(side, n)
        row["%s_scaling" % side] = many / (n * one) if one and many else None
    for world in (1, n):
        k, d = ips("kiln", world), ips("ddp", world)
        row["ratio_%d" % world] = k / d if k and d else None


def markdown_table(rows, n):
    head = ("| net | batch/GPU | precision | Kiln 1 GPU img/s | Kiln %d GPUs img/s | Kiln scaling "
            "| DDP 1 GPU img/s | DDP %d GPUs img/s | DDP scaling | Kiln/DDP 1 GPU | Kiln/DDP %d "
            "GPUs |" % (n, n, n))
    lines = [head, "| --- | ---: | --- |" + " ---: |" * 8]
    for r in rows:
        def ips(side, world):
            m = r.get(side, {}).get(str(world)) or {}
            return "failed" if m.get("error") else fmt(m.get("images_per_s"), "%.0f")
        pct = lambda v: fmt(None if v is None else 100 * v, "%.1f%%")  # noqa: E731
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["net"], r["batch"], r["precision"], ips("kiln", 1), ips("kiln", n),
            pct(r.get("kiln_scaling")), ips("ddp", 1), ips("ddp", n), pct(r.get("ddp_scaling")),
            fmt(r.get("ratio_1"), "%.2f"), fmt(r.get("ratio_%d" % n), "%.2f")))
    failures = []
    for r in rows:
        for side in ("kiln", "ddp"):
            for world, m in sorted((r.get(side) or {}).items()):
                if m and m.get("error"):
                    detail = tb.tail(m.get("stderr_tail") or m.get("traceback") or "", 2)
                    failures.append("- %s b%d %s, %s on %s GPU(s): %s%s" % (
                        r["net"], r["batch"], r["precision"], side, world, m["error"],
                        (": " + detail.replace("\n", " / ")) if detail else ""))
    if failures:
        lines += ["", "Failures:"] + failures
    return "\n".join(lines)


def write_reports(rows, n, env, argv, args):
    text = markdown_table(rows, n)
    with open(os.path.join(args.out, "ddp_bench.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    if args.perf_md:
        run = ("Run %s UTC on %s GPUs %s (driver %s), PyTorch %s, kiln %s; median of %d timed "
               "steps after %d warm-up steps (Kiln: 3); images/s = GPUs x batch / median step. "
               "Scaling = N-GPU images/s / (N x 1-GPU images/s). Command: `%s`."
               % (env.get("date_utc"), env.get("gpu"), args.gpus, env.get("driver", "?"),
                  env.get("torch"), env.get("kiln_version", "?"), args.iterations, args.warmup,
                  " ".join(shlex.quote(a) for a in argv)))
        tb.gbr.replace_section(args.perf_md,
                               "\n".join([BEGIN_MARK, run, "", text, END_MARK]) + "\n",
                               begin_mark=BEGIN_MARK, end_mark=END_MARK)
        log("wrote the ddp-bench section of %s" % args.perf_md)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", required=True, help="the kiln CLI binary")
    parser.add_argument("--models-dir", default=os.path.normpath(
        os.path.join(HERE, "..", "..", "shared", "models", "caffe")))
    parser.add_argument("--out", required=True, help="folder for ddp_bench.json and .md")
    parser.add_argument("--rows", default=DEFAULT_ROWS, help="NET:BATCH per GPU, comma-separated")
    parser.add_argument("--precisions", default="fp32,fp16")
    parser.add_argument("--gpus", default="0,1", help="the GPUs of the multi-GPU runs")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5, help="PyTorch warm-up steps")
    parser.add_argument("--kiln-args", default="", help="more kiln flags (e.g. --algo measure)")
    parser.add_argument("--kiln-multi-args", default="",
                        help="more kiln flags for the multi-GPU runs only (e.g. --no-overlap)")
    parser.add_argument("--perf-md", help="markdown file whose ddp-bench section is replaced")
    parser.add_argument("--timeout", type=float, default=240, help="seconds per kiln run")
    parser.add_argument("--torch-device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: a dry run with gloo on the CPU")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--skip-kiln", action="store_true")
    args = parser.parse_args()
    rows_spec = tb.parse_rows(args.rows)
    gpus = [int(g) for g in args.gpus.split(",") if g.strip() != ""]
    if len(gpus) < 2:
        raise SystemExit("--gpus: give at least two GPUs (the 1-GPU runs use the first)")
    n = len(gpus)
    os.makedirs(args.out, exist_ok=True)
    kiln = os.path.abspath(args.kiln)
    try:
        env = tb.environment(kiln, args.torch_device) if not args.skip_torch else {
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    except Exception as e:  # the report still comes out
        env = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "env_error": str(e)}
    rows = []
    json_path = os.path.join(args.out, "ddp_bench.json")
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    total = len(rows_spec) * len(precisions) * 2 * (int(not args.skip_kiln) +
                                                    int(not args.skip_torch))
    try:
        measure_all(args, rows_spec, precisions, gpus, n, env, rows, json_path, total)
    except KeyboardInterrupt:
        # `timeout -s INT` (tools/gpu_check_dist.sh caps the benchmark): report what finished.
        import multiprocessing
        for child in multiprocessing.active_children():
            child.terminate()
        log("interrupted: reporting the measurements that finished")
        write_reports(rows, n, env, sys.argv, args)
        return 3
    write_reports(rows, n, env, sys.argv, args)
    return 0


def measure_all(args, rows_spec, precisions, gpus, n, env, rows, json_path, total):
    """Every measurement, in row order; `rows` and the JSON grow as they finish."""
    done = 0
    for net, batch in rows_spec:
        prototxt_name, chw = tb.NETS[net]
        prototxt = os.path.abspath(os.path.join(args.models_dir, prototxt_name))
        shapes = tb.data_shapes(prototxt, chw, batch)
        for precision in precisions:
            row = {"net": net, "batch": batch, "precision": precision, "model": prototxt,
                   "kiln": {}, "ddp": {}}
            rows.append(row)
            for world_gpus in (gpus[:1], gpus):
                for side in ("kiln", "ddp"):
                    if (side == "kiln" and args.skip_kiln) or (side == "ddp" and args.skip_torch):
                        continue
                    done += 1
                    log("(%d/%d) %s %s b%d/GPU %s on GPU(s) %s" % (
                        done, total, side, net, batch, precision,
                        ",".join(map(str, world_gpus))))
                    measure = kiln_measure if side == "kiln" else ddp_measure
                    m = measure(args, prototxt, shapes, precision, world_gpus)
                    row[side][str(len(world_gpus))] = m
                    log("  -> %s" % (("failed: %s %s" % (m["error"], tb.tail(
                        m.get("stderr_tail") or m.get("traceback") or "", 1)))
                        if m.get("error") else "%.1f images/s (step %.2f ms)" % (
                            m["images_per_s"], m["step_ms"])))
                    derived(row, n)
                    with open(json_path, "w", encoding="utf-8") as f:
                        json.dump({"env": env, "gpus": gpus, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
