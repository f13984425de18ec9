#!/usr/bin/env python3
"""One training step (forward, backward, SGD momentum update): Kiln against PyTorch eager and
torch.compile, on the same GPU in the same run (issues 17 and 37).

Run on the GPU machine (needs numpy, torch with CUDA, and a built `kiln` binary):

    python3 bench/train_bench.py --kiln bazel-bin/tools/kiln --models-dir ../shared/models/caffe \
        --out /tmp/train_bench [--rows lenet:64,caffenet:128,resnet18:64] \
        [--precisions fp32,fp16] [--iterations 30] [--compile-mode default|none|...] \
        [--kiln-args "--algo measure --tuning-file /tmp/train_bench/tuning.txt"] \
        [--perf-md docs/PERF.md]

For every (net, batch, precision) row:

1. Kiln: `kiln time --model NET.prototxt --train --input-shape data=N,C,H,W --input-shape
   label=N --precision P --iterations K [--kiln-args] --json`; its JSON gives train_step_ms
   (median of whole steps), images_per_second and memory.total_bytes (weights, optimizer state,
   activations, workspace). fp16 is f16 activations and weight copies with f32 master weights.
2. PyTorch eager (train_bench_torch.py): the TRAIN net from the same prototxt (caffe_torch_train:
   data layers become inputs, SoftmaxWithLoss is F.cross_entropy, Accuracy dropped, Dropout and
   BatchNorm in train mode), zero_grad(set_to_none=True), forward, backward,
   torch.optim.SGD(lr=0.01, momentum=0.9, weight_decay=5e-4).step(); fp32 with TF32 off, fp16 as
   autocast + GradScaler with f32 weights and channels_last; cudnn.benchmark on; 10 warm-up steps,
   then the median of --iterations CUDA-event-timed steps; peak memory = max_memory_allocated()
   over the timed steps (stats reset after the warm-up, everything of the previous row freed).
3. PyTorch compiled (train_bench_torch.compiled_train_row, unless --compile-mode none): the same
   step, fresh net and optimizer, with the module under torch.compile(net[, mode=--compile-mode])
   (forward and backward compiled; zero_grad, GradScaler and the SGD step eager as above). The
   steps that compile are warm-up: it goes on until max(--warmup, 3) steps in a row compiled
   nothing new, and their wall time is reported apart (compiled_compile_s, compiled_first_step_s);
   then the median of --iterations CUDA-event-timed steps and max_memory_allocated() as for eager.
4. All sides use synthetic data: N(0,1) images and integer labels in [0, 10); the data layers'
   databases need not exist, their shapes come from NETS below and the row's batch.

The target: Kiln's step <= 0.8 x eager's time, with Kiln's memory no higher than PyTorch's peak,
and, where the compiled side ran, Kiln's step <= compiled's (columns "compiled step ms" and
"compiled/Kiln ratio"; they appear when --compile-mode is not none).
OUT/train_bench.json is rewritten after every row (a run cut short keeps what it finished); the
table goes to OUT/train_bench.md, into --perf-md between the train-bench markers, and to stdout.
A failure of one side in one row (kiln exits non-zero, PyTorch raises, torch.compile raises or is
missing as in PyTorch 1.x: compiled_error, "n/a" in the table) is recorded in the row with its
stderr tail or traceback, and the run goes on. Progress lines with an ETA go to stderr.
"""

import argparse
import gc
import json
import os
import shlex
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import caffe_torch as ct  # noqa: E402  (the path must be set first)
import caffe_torch_train as ctt  # noqa: E402
import graph_bench_report as gbr  # noqa: E402
from graph_bench_report import Progress, clock, fmt, geomean, ratio  # noqa: E402

BEGIN_MARK = "<!-- train-bench:begin -->"
END_MARK = "<!-- train-bench:end -->"
TARGET_STEP_RATIO = 0.8  # Kiln step ms <= 0.8 x PyTorch eager step ms
TARGET_COMPILED_RATIO = 1.0  # Kiln step ms <= 1.0 x torch.compile's step ms (issue 37)
# torch.compile modes; "none" skips the compiled side. max-autotune-no-cudagraphs autotunes
# kernels without reduce-overhead's CUDA graphs; max-autotune does both.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune",
                 "none")
DEFAULT_ROWS = "lenet:64,caffenet:128,resnet18:64"
# net -> (train prototxt in --models-dir, C, H, W of the image top of its data layer)
NETS = {
    "lenet": ("lenet_train_test.prototxt", (1, 28, 28)),
    "caffenet": ("caffenet_train_val.prototxt", (3, 227, 227)),
    "resnet18": ("resnet18_train.prototxt", (3, 224, 224)),
    # The public deploy nets made trainable by deploy_to_train.py (tools/gpu_check_nets.sh
    # --stage writes them beside the deploy files in .gpu-nets/models).
    "mobilenet_v2": ("mobilenet_v2_train.prototxt", (3, 224, 224)),
    "resnet50": ("resnet50_train.prototxt", (3, 224, 224)),
    "squeezenet_v1.1": ("squeezenet_v1.1_train.prototxt", (3, 227, 227)),
    "shufflenet_v2": ("shufflenet_v2_train.prototxt", (3, 224, 224)),
}
TABLE_HEADER = ("| net | batch | precision | Kiln step ms | PyTorch eager step ms | eager/Kiln "
                "ratio | Kiln MiB | torch MiB | target met |")
TABLE_RULE = "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"
# The table when the compiled side ran (some row has compiled_mode): two columns more.
COMPILED_TABLE_HEADER = ("| net | batch | precision | Kiln step ms | PyTorch eager step ms | "
                         "eager/Kiln ratio | compiled step ms | compiled/Kiln ratio | Kiln MiB | "
                         "torch MiB | target met |")
COMPILED_TABLE_RULE = "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"

_START = time.time()


class StderrLines:
    """Where graph_bench_report.Progress puts its lines: stderr, with the run's clock."""

    def append(self, line):
        sys.stderr.write("[%7.1fs] %s\n" % (time.time() - _START, line))
        sys.stderr.flush()


# ------------------------------------------------------------------------------------------------
# Rows, nets, Kiln
# ------------------------------------------------------------------------------------------------

def parse_rows(text):
    """'lenet:64,caffenet:128' -> [("lenet", 64), ("caffenet", 128)]."""
    rows = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        net, _, batch = item.rpartition(":")
        if not net or not batch.isdigit() or int(batch) < 1:
            raise SystemExit("--rows: '%s' is not NET:BATCH" % item)
        if net not in NETS:
            raise SystemExit("--rows: unknown net '%s' (known: %s)" % (net, ", ".join(NETS)))
        rows.append((net, int(batch)))
    return rows


def data_shapes(prototxt, chw, batch):
    """[(top, shape)] of the TRAIN net's data layer: image top N x C x H x W, the others (the
    label) N."""
    netdef = ct.load_net(prototxt, phase="TRAIN")
    for layer in netdef.layers:
        if layer.type in ctt.DATA_LAYERS:
            return [(top, [batch] + list(chw) if i == 0 else [batch])
                    for i, top in enumerate(layer.tops)]
    raise ValueError("%s has no data layer in the TRAIN phase" % prototxt)


def run_command(cmd, timeout):
    """(returncode, stdout, stderr, seconds); a timeout or a missing binary is a failed run."""
    import subprocess
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - start
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return 124, "", (err.rstrip() + "\ntimed out after %ss" % timeout).strip(), \
            time.time() - start
    except OSError as e:
        return 127, "", str(e), time.time() - start


def tail(text, lines=12):
    return "\n".join((text or "").strip().splitlines()[-lines:])


def parse_kiln_json(text):
    """The last JSON object on stdout that has train_step_ms (log lines around it are fine)."""
    decoder = json.JSONDecoder()
    found = None
    for i, ch in enumerate(text):
        if ch != "{" or (i > 0 and text[i - 1] not in "\n\r"):
            continue
        try:
            obj, _ = decoder.raw_decode(text, i)
        except ValueError:
            continue
        if isinstance(obj, dict) and "train_step_ms" in obj:
            found = obj
    return found


def number(obj, *path):
    """obj[path...] as a float, or None when missing or not a number."""
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    try:
        return None if isinstance(obj, bool) else float(obj)
    except (TypeError, ValueError):
        return None


def kiln_command(kiln, prototxt, shapes, precision, iterations, extra):
    cmd = [kiln, "time", "--model", prototxt, "--train"]
    for top, shape in shapes:
        cmd += ["--input-shape", "%s=%s" % (top, ",".join(str(d) for d in shape))]
    return cmd + ["--precision", precision, "--iterations", str(iterations)] + extra + ["--json"]


def kiln_row(row, kiln, prototxt, shapes, args, extra):
    """Runs `kiln time --train` for the row; its numbers, or kiln_error + kiln_stderr_tail."""
    cmd = kiln_command(kiln, prototxt, shapes, row["precision"], args.iterations, extra)
    row["kiln_cmd"] = " ".join(shlex.quote(c) for c in cmd)
    rc, out, err, seconds = run_command(cmd, args.timeout)
    row["kiln_s"] = round(seconds, 2)
    report = parse_kiln_json(out) if rc == 0 else None
    if rc != 0 or report is None:
        row["kiln_error"] = ("rc %d" % rc if rc != 0
                             else "no JSON object with train_step_ms on stdout")
        row["kiln_stderr_tail"] = tail(err) or tail(out)
        return
    row["kiln_step_ms"] = number(report, "train_step_ms")
    row["kiln_images_per_s"] = (number(report, "images_per_second")
                                or number(report, "images_per_s"))
    memory = report.get("memory") if isinstance(report.get("memory"), dict) else {}
    row["kiln_memory"] = {k: v for k, v in memory.items() if isinstance(v, (int, float))}
    row["kiln_total_bytes"] = number(memory, "total_bytes")
    row["kiln_backend"] = report.get("backend")
    row["kiln_precision"] = report.get("precision")
    if row["kiln_step_ms"] is None or row["kiln_step_ms"] <= 0:
        row["kiln_error"] = "train_step_ms is %r" % report.get("train_step_ms")
        row["kiln_stderr_tail"] = tail(err)
    notes = []
    backend = str(row["kiln_backend"] or "cuda").lower()
    if "cuda" not in backend and "gpu" not in backend and args.torch_device == "cuda":
        notes.append("kiln ran on backend %s" % row["kiln_backend"])
    if row["kiln_precision"] not in (None, row["precision"]):
        notes.append("kiln reports precision %s" % row["kiln_precision"])
    if row["kiln_total_bytes"] is None:
        notes.append("no memory.total_bytes in kiln's JSON")
    if notes:
        row["kiln_note"] = "; ".join(notes)


def torch_part(row, prototxt, shapes, args):
    """PyTorch eager for the row; a failure is torch_error + torch_traceback."""
    import torch
    import train_bench_torch as tbt
    try:
        row.update(tbt.torch_train_row(prototxt, shapes, row["precision"], args.iterations,
                                       args.warmup, args.torch_device))
    except Exception as e:  # noqa: BLE001  (one bad row must not lose the others)
        row["torch_error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0]
                                         if str(e).strip() else "")
        row["torch_traceback"] = traceback.format_exc()[-20000:]
    finally:
        gc.collect()
        if args.torch_device == "cuda":
            torch.cuda.empty_cache()


def compiled_part(row, prototxt, shapes, args):
    """torch.compile's side of the row (args.compile_mode); a failure, or a PyTorch without
    torch.compile, is compiled_error and the row's other numbers stay."""
    import torch
    row["compiled_mode"] = args.compile_mode
    if row.get("torch_error"):
        # The same net and step: they would fail the same way, slower.
        row["compiled_error"] = "not run (PyTorch eager failed)"
        return
    try:
        import train_bench_torch as tbt
        row.update(tbt.compiled_train_row(prototxt, shapes, row["precision"], args.iterations,
                                          args.warmup, args.torch_device, args.compile_mode))
    except Exception as e:  # noqa: BLE001  (compiled_train_row catches its own; this is a bug)
        row["compiled_error"] = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0]
                                            if str(e).strip() else "")
        row["compiled_traceback"] = traceback.format_exc()[-20000:]
    finally:
        gc.collect()
        if args.torch_device == "cuda":
            torch.cuda.empty_cache()


def compile_mode_of(args):
    """The torch.compile mode to run, or None for none (and for callers' argument objects that
    predate --compile-mode)."""
    mode = getattr(args, "compile_mode", None)
    return None if mode in (None, "", "none") else mode


# ------------------------------------------------------------------------------------------------
# Tables and the PERF.md section
# ------------------------------------------------------------------------------------------------

def row_verdict(row):
    """(eager/Kiln ratio or None, target: True, False or None when a number is missing, the
    reasons it was missed: "time" (eager), "memory", "compiled" (where the compiled side ran;
    one that failed leaves the verdict to eager and memory, its n/a is in the table))."""
    speed = ratio(row.get("torch_step_ms"), row.get("kiln_step_ms"))
    kiln_bytes, torch_bytes = row.get("kiln_total_bytes"), row.get("torch_peak_bytes")
    if speed is None or not kiln_bytes or not torch_bytes:
        return speed, None, []
    missed = []
    if row["kiln_step_ms"] > TARGET_STEP_RATIO * row["torch_step_ms"]:
        missed.append("time")
    if kiln_bytes > torch_bytes:
        missed.append("memory")
    if compiled_ratio(row) is not None \
            and row["kiln_step_ms"] > TARGET_COMPILED_RATIO * row["compiled_step_ms"]:
        missed.append("compiled")
    return speed, not missed, missed


def compiled_ratio(row):
    """compiled/Kiln step time, or None (no compiled side, or a number missing)."""
    if row.get("compiled_error"):
        return None
    return ratio(row.get("compiled_step_ms"), row.get("kiln_step_ms"))


def has_compiled(rows):
    return any(r.get("compiled_mode") for r in rows)


def compiled_modes(rows):
    return ", ".join(sorted({str(r["compiled_mode"]) for r in rows if r.get("compiled_mode")}))


def _ms(value):
    return fmt(value, "%.3f" if value is not None and value < 1 else "%.2f")


def _mib(value):
    if not value:
        return None
    return value / 2.0 ** 20


def markdown_table(rows):
    compiled = has_compiled(rows)
    lines = [COMPILED_TABLE_HEADER, COMPILED_TABLE_RULE] if compiled else [TABLE_HEADER,
                                                                           TABLE_RULE]
    for r in rows:
        speed, met, missed = row_verdict(r)
        kiln_failed = r.get("kiln_error") or r.get("error")
        torch_failed = r.get("torch_error") or r.get("error")
        kiln_mib, torch_mib = _mib(r.get("kiln_total_bytes")), _mib(r.get("torch_peak_bytes"))
        cells = [
            r["net"], str(r["batch"]), r["precision"],
            "FAIL" if kiln_failed else _ms(r.get("kiln_step_ms")),
            "FAIL" if torch_failed else _ms(r.get("torch_step_ms")),
            fmt(speed, "%.2f"),
        ]
        if compiled:
            cells += [
                "n/a" if r.get("compiled_error") else ("FAIL" if r.get("error")
                                                       else _ms(r.get("compiled_step_ms"))),
                fmt(compiled_ratio(r), "%.2f"),
            ]
        cells += [
            "FAIL" if kiln_failed else fmt(kiln_mib, "%.1f" if (kiln_mib or 0) < 10 else "%.0f"),
            "FAIL" if torch_failed else fmt(torch_mib,
                                            "%.1f" if (torch_mib or 0) < 10 else "%.0f"),
            "-" if met is None else ("**yes**" if met else "no (%s)" % ", ".join(missed)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_line(rows):
    verdicts = [row_verdict(r) for r in rows]
    met = sum(1 for _, m, _ in verdicts if m)
    judged = sum(1 for _, m, _ in verdicts if m is not None)
    mean = geomean([s for s, _, _ in verdicts])
    compiled = ""
    if has_compiled(rows):
        compiled = (", Kiln step <= %.1fx torch.compile's (mode %s) where it ran"
                    % (TARGET_COMPILED_RATIO, compiled_modes(rows)))
    text = ("Target (Kiln step <= %.1fx PyTorch eager, Kiln memory <= PyTorch peak%s): met on %d "
            "of %d rows%s; geometric mean of eager/Kiln %s (target >= %.2f on every row)"
            % (TARGET_STEP_RATIO, compiled, met, len(rows),
               "" if judged == len(rows) else " (%d without both numbers)" % (len(rows) - judged),
               fmt(mean, "%.2f"), 1.0 / TARGET_STEP_RATIO))
    if has_compiled(rows):
        ratios = [compiled_ratio(r) for r in rows]
        ran = sum(1 for q in ratios if q is not None)
        text += ("; geometric mean of compiled/Kiln %s (target >= %.2f where it ran; %d of %d "
                 "rows with both numbers)"
                 % (fmt(geomean(ratios), "%.2f"), TARGET_COMPILED_RATIO, ran, len(rows)))
    return text + "."


def compile_times_line(rows):
    """How long torch.compile took per row (the warm-up steps that compiled), or None."""
    parts = ["%s b%d %s %.1f s" % (r["net"], r["batch"], r["precision"], r["compiled_compile_s"])
             for r in rows if r.get("compiled_compile_s") is not None
             and not r.get("compiled_error")]
    if not parts:
        return None
    return ("torch.compile (mode %s) compilation, the wall time of the warm-up steps that "
            "compiled (not in the step times): %s." % (compiled_modes(rows), ", ".join(parts)))


def row_notes(rows):
    """One line per failure or remark, for under the table."""
    notes = []
    for r in rows:
        label = "%s b%d %s" % (r["net"], r["batch"], r["precision"])
        if r.get("error"):
            notes.append("- %s: row failed: %s" % (label, r["error"]))
        if r.get("kiln_error"):
            stderr = "; ".join(s.strip() for s in tail(r.get("kiln_stderr_tail"), 3).splitlines()
                               if s.strip())
            notes.append("- %s: kiln failed (%s)%s" % (label, r["kiln_error"],
                                                        ": " + stderr if stderr else ""))
        if r.get("kiln_note"):
            notes.append("- %s: %s" % (label, r["kiln_note"]))
        if r.get("torch_error"):
            notes.append("- %s: PyTorch failed: %s" % (label, r["torch_error"]))
        before, after = r.get("torch_amp_scale_before"), r.get("torch_amp_scale_after")
        if before and after and after < before:
            notes.append("- %s: GradScaler's scale fell from %g to %g during the timed steps "
                         "(some steps skipped the update)" % (label, before, after))
        if r.get("torch_leftover_bytes"):
            notes.append("- %s: %.1f MiB of an earlier row were still allocated (not subtracted)"
                         % (label, r["torch_leftover_bytes"] / 2.0 ** 20))
        if r.get("compiled_error"):
            notes.append("- %s: torch.compile (mode %s) n/a: %s"
                         % (label, r.get("compiled_mode"), r["compiled_error"]))
        if r.get("compiled_note"):
            notes.append("- %s: torch.compile: %s" % (label, r["compiled_note"]))
        before, after = r.get("compiled_amp_scale_before"), r.get("compiled_amp_scale_after")
        if before and after and after < before:
            notes.append("- %s: compiled side's GradScaler scale fell from %g to %g during the "
                         "timed steps (some steps skipped the update)" % (label, before, after))
    return notes


def report_text(rows):
    """The table, the summary and the notes, as markdown lines."""
    text = [markdown_table(rows), "", "- " + summary_line(rows)]
    compile_times = compile_times_line(rows)
    if compile_times:
        text.append("- " + compile_times)
    notes = row_notes(rows)
    if notes:
        text += ["", "Failures and notes:", ""] + notes
    return "\n".join(text)


def perf_section(env, argv, settings, rows):
    """The text between the train-bench markers of docs/PERF.md, markers included."""
    compiled = ""
    if settings.get("compile_mode") not in (None, "none"):
        compiled = (" (torch.compile mode %s: after the steps that compiled and at least %d more)"
                    % (settings["compile_mode"], settings.get("compiled_warmup_min", 3)))
    run = ("Run %s UTC on %s (driver %s), PyTorch %s, CUDA %s, cuDNN %s, kiln %s; median of %d "
           "timed steps after %d warm-up steps%s. Command: `%s`."
           % (env.get("date_utc"), env.get("gpu"), env.get("driver", "?"), env.get("torch"),
              env.get("cuda"), env.get("cudnn"), env.get("kiln_version", "?"),
              settings.get("iterations"), settings.get("warmup"), compiled,
              " ".join(shlex.quote(a) for a in argv)))
    return "\n".join([BEGIN_MARK, run, "", report_text(rows), END_MARK]) + "\n"


def replace_section(path, text):
    gbr.replace_section(path, text, begin_mark=BEGIN_MARK, end_mark=END_MARK)


def write_reports(rows, env, argv, settings, out_dir, perf_md=None):
    """OUT/train_bench.md, the --perf-md section, and the table on stdout."""
    text = report_text(rows)
    markdown_path = os.path.join(out_dir, "train_bench.md")
    try:
        with open(markdown_path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError as e:  # --report-only on a folder fetched read-only
        StderrLines().append("could not write %s: %s" % (markdown_path, e))
    if perf_md:
        replace_section(perf_md, perf_section(env, argv, settings, rows))
        StderrLines().append("wrote the train-bench section of %s" % perf_md)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------

def environment(kiln, torch_device):
    import graph_bench  # the inference benchmark's environment probe (GPU, driver, versions)
    env = graph_bench.environment() if torch_device == "cuda" else {
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "gpu": "none (CPU dry run)"}
    if torch_device != "cuda":
        import torch
        env["torch"] = torch.__version__
    rc, out, err, _ = run_command([kiln, "version"], 60)
    text = (out or err).strip()
    env["kiln_version"] = text.splitlines()[0] if rc == 0 and text else "?"
    return env


def run_row(row, args, kiln, extra, progress):
    """Kiln, then PyTorch, for one row; each side's failure is recorded in the row."""
    prototxt_name, chw = NETS[row["net"]]
    prototxt = os.path.abspath(os.path.join(args.models_dir, prototxt_name))
    shapes = data_shapes(prototxt, chw, row["batch"])
    row.update(model=prototxt, inputs={top: shape for top, shape in shapes})
    progress.step("kiln time --train --precision %s" % row["precision"])
    kiln_row(row, kiln, prototxt, shapes, args, extra)
    if row.get("kiln_error"):
        progress.note("kiln failed (%s): %s" % (
            row["kiln_error"], tail(row.get("kiln_stderr_tail"), 1)))
    progress.step("PyTorch eager train step" if args.torch_device == "cuda"
                       else "PyTorch eager train step (CPU dry run)")
    torch_part(row, prototxt, shapes, args)
    if row.get("torch_error"):
        progress.note("PyTorch failed: %s" % row["torch_error"])
    compiled = ""
    if compile_mode_of(args):
        progress.step("torch.compile (mode %s) train step" % args.compile_mode)
        compiled_part(row, prototxt, shapes, args)
        if row.get("compiled_error"):
            progress.note("torch.compile n/a: %s" % row["compiled_error"])
        compiled = ", compiled %s ms%s, compiled/Kiln %s" % (
            "n/a" if row.get("compiled_error") else _ms(row.get("compiled_step_ms")),
            " (compiled in %.1f s)" % row["compiled_compile_s"]
            if row.get("compiled_compile_s") and not row.get("compiled_error") else "",
            fmt(compiled_ratio(row), "%.2f"))
    speed, met, missed = row_verdict(row)
    progress.note("kiln %s ms, eager %s ms, eager/Kiln %s%s, MiB kiln %s / torch %s%s" % (
        _ms(row.get("kiln_step_ms")), _ms(row.get("torch_step_ms")), fmt(speed, "%.2f"), compiled,
        fmt(_mib(row.get("kiln_total_bytes")), "%.0f"),
        fmt(_mib(row.get("torch_peak_bytes")), "%.0f"),
        "" if met is None else ("; target met" if met else "; target missed: " + ", ".join(
            missed))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", help="the kiln CLI binary (required unless --report-only)")
    parser.add_argument("--models-dir", default=os.path.normpath(
        os.path.join(HERE, "..", "..", "shared", "models", "caffe")),
        help="folder of the train prototxts (default %(default)s)")
    parser.add_argument("--out", required=True, help="folder for train_bench.json and .md")
    parser.add_argument("--rows", default=DEFAULT_ROWS,
                        help="NET:BATCH,... with NET in %s (default %%(default)s)"
                             % ", ".join(NETS))
    parser.add_argument("--precisions", default="fp32,fp16")
    parser.add_argument("--iterations", type=int, default=30, help="timed steps, every side")
    parser.add_argument("--warmup", type=int, default=10,
                        help="PyTorch warm-up steps (compiled: at least max(WARMUP, 3) after the "
                             "steps that compile)")
    parser.add_argument("--compile-mode", default="default", choices=COMPILE_MODES,
                        help="torch.compile mode of the compiled side; none skips it (default "
                             "%(default)s; compiling adds its time to every row)")
    parser.add_argument("--kiln-args", default="",
                        help="extra flags for kiln time, one shell-quoted string, e.g. "
                             "\"--algo measure --tuning-file T\"")
    parser.add_argument("--perf-md", help="markdown file whose train-bench section is replaced")
    parser.add_argument("--timeout", type=float, default=180,
                        help="seconds per kiln command (default %(default)s; the whole run "
                             "is meant to fit in about 10 minutes)")
    parser.add_argument("--heartbeat", type=float, default=60,
                        help="seconds between 'still running' lines during one long step")
    parser.add_argument("--torch-device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu only for dry runs of this script on a machine without a GPU")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: the table (and --perf-md) from OUT/train_bench.json")
    args = parser.parse_args()
    if args.report_only:
        with open(os.path.join(args.out, "train_bench.json"), encoding="utf-8") as f:
            data = json.load(f)
        write_reports(data.get("rows", []), data.get("environment", {}),
                      data.get("argv", sys.argv), data.get("settings", {}), args.out,
                      args.perf_md)
        return
    if not args.kiln:
        parser.error("--kiln is required (unless --report-only)")
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    if not precisions or any(p not in ("fp32", "fp16") for p in precisions):
        raise SystemExit("--precisions: a list of fp32, fp16")
    if args.iterations < 1 or args.warmup < 1:
        raise SystemExit("--iterations and --warmup must be at least 1")
    plan = [(net, batch, p) for net, batch in parse_rows(args.rows) for p in precisions]
    for net in sorted({net for net, _, _ in plan}):
        path = os.path.join(args.models_dir, NETS[net][0])
        if not os.path.isfile(path):
            raise SystemExit("no %s in --models-dir %s" % (NETS[net][0], args.models_dir))

    import torch
    if args.torch_device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("train_bench: PyTorch sees no CUDA device")
    os.makedirs(args.out, exist_ok=True)
    kiln = os.path.abspath(args.kiln)
    extra = shlex.split(args.kiln_args)
    env = environment(kiln, args.torch_device)
    import train_bench_torch as tbt
    settings = {"iterations": args.iterations, "warmup": args.warmup, "kiln_args": extra,
                "compile_mode": args.compile_mode,
                "compiled_warmup_min": max(args.warmup, tbt.MIN_COMPILED_WARMUP),
                "solver": "SGD lr 0.01, momentum 0.9, weight_decay 5e-4",
                "data": "N(0,1) images, integer labels in [0, 10)"}
    sink = StderrLines()
    sink.append("GPU %s, PyTorch %s, kiln %s, torch.compile %s; %d rows (%s)" % (
        env.get("gpu"), env.get("torch"), env["kiln_version"],
        "mode " + args.compile_mode if compile_mode_of(args) else "skipped", len(plan),
        ", ".join("%s b%d %s" % r for r in plan)))
    json_path = os.path.join(args.out, "train_bench.json")
    rows = []

    def save():
        tmp = json_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"environment": env, "argv": sys.argv, "settings": settings,
                       "rows": rows}, f, indent=1)
        os.replace(tmp, json_path)

    with Progress(len(plan), heartbeat_s=args.heartbeat, out=sink) as progress:
        for index, (net, batch, precision) in enumerate(plan):
            row = {"net": net, "batch": batch, "precision": precision}
            rows.append(row)
            progress.start_row(index + 1, "%s b%d %s (%d/%d rows done)"
                               % (net, batch, precision, index, len(plan)))
            try:
                run_row(row, args, kiln, extra, progress)
            except Exception as e:  # noqa: BLE001  (one bad row must not lose the others)
                row["error"] = "%s: %s" % (type(e).__name__, e)
                row["traceback"] = traceback.format_exc()
                progress.note("FAILED: %s" % row["error"])
            progress.end_row()
            save()
    elapsed = time.time() - _START
    sink.append("%d/%d rows done in %s; results in %s" % (len(rows), len(plan), clock(elapsed),
                                                          json_path))
    write_reports(rows, env, sys.argv, settings, args.out, args.perf_md)


if __name__ == "__main__":
    main()
