"""Progress lines, tables and the PERF.md section of bench/graph_bench.py.

Needs only numpy (no torch), so the self-test can check it on its own. A row is the dict that
graph_bench.py writes into graph_bench.json; the keys read here:

* Kiln, per variant V in ("unfused", "fused") (`kiln ... --optimize off|on`): kiln_V_ms,
  kiln_V_images_per_s, kiln_V_total_bytes (the plan's memory.total_bytes), kiln_V_rel_l2 (against
  PyTorch eager), kiln_V_fused_groups, kiln_V_{run,time,compare}_error;
* PyTorch eager and CUDA graph: eager_ms, graph_ms, torch_peak_bytes, torch_error, graph_error;
* torch.compile: compile_ms, compile_peak_bytes, compile_vs_eager_rel_l2, compile_s (compilation
  time, outside the timing), compile_error, compile_skipped;
* error: a failure of the row as a whole.
"""

import math
import os
import sys
import threading
import time

import numpy as np

BEGIN_MARK = "<!-- graph-bench:begin -->"
END_MARK = "<!-- graph-bench:end -->"
VARIANTS = ("unfused", "fused")  # kiln --optimize off, --optimize on
OPTIMIZE_FLAG = {"unfused": "off", "fused": "on"}
TARGET_EAGER_OVER_FUSED = 1.25    # eager_ms / kiln_fused_ms, every row
TARGET_COMPILE_OVER_FUSED = 1.0   # geometric mean of torch_compile_ms / kiln_fused_ms
TARGET_EAGER_OVER_UNFUSED = 1.0   # the previous issue's target, every row
ERROR_KEYS = ("error", "kiln_unfused_run_error", "kiln_unfused_time_error",
              "kiln_unfused_compare_error", "kiln_fused_run_error", "kiln_fused_time_error",
              "kiln_fused_compare_error", "torch_error", "graph_error", "compile_error",
              # rows of graph_bench.json files written before the fused/unfused split
              "kiln_run_error", "kiln_time_error", "compare_error",
              # not failures, but worth a line under the table
              "compile_note", "kiln_unfused_compare_note", "kiln_fused_compare_note")

_START = time.time()
_PRINT_LOCK = threading.Lock()


def log(message):
    with _PRINT_LOCK:
        print("[%7.1fs] %s" % (time.time() - _START, message), flush=True)


def clock(seconds):
    """90 -> '1:30', 4000 -> '1:06:40'."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = int(round(max(0.0, seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "%d:%02d:%02d" % (h, m, s) if h else "%d:%02d" % (m, s)


class Progress:
    """The live progress line: which row and step is running, how long it has run, and an ETA
    for the whole plan (mean time of the finished rows times the rows left, less the time spent
    in the current one). Every step() prints a line; while one step runs longer than
    heartbeat_s (torch.compile, `kiln time --algo measure`), a line saying so is printed every
    heartbeat_s, so a log that is being tailed never goes quiet for minutes."""

    def __init__(self, total, heartbeat_s=60.0, now=time.time, out=None):
        self.total, self.heartbeat_s, self.now, self.out = total, heartbeat_s, now, out
        self.row_seconds = []
        self.index, self.label, self.step_text = 0, "", ""
        self.row_start = self.step_start = None
        self._stop = threading.Event()
        self._thread = None

    def eta_s(self):
        if not self.row_seconds:
            return None
        mean = sum(self.row_seconds) / len(self.row_seconds)
        left = self.total - len(self.row_seconds)
        in_row = self.now() - self.row_start if self.row_start is not None else 0.0
        return max(0.0, mean * left - in_row)

    def where(self):
        return "row %d/%d %s" % (self.index, self.total, self.label)

    def _emit(self, message):
        if self.out is not None:
            self.out.append(message)
        else:
            log(message)

    def start_row(self, index, label):
        self.index, self.label = index, label
        self.row_start = self.step_start = self.now()
        self.step_text = ""

    def step(self, text):
        self.step_text, self.step_start = text, self.now()
        self._emit("%s: %s [ETA %s]" % (self.where(), text, clock(self.eta_s())))

    def note(self, text):
        """A line about the current row that does not start a new step."""
        self._emit("%s: %s" % (self.where(), text))

    def end_row(self):
        if self.row_start is not None:
            self.row_seconds.append(self.now() - self.row_start)
        self.row_start = None
        self.step_text = ""

    def heartbeat(self):
        """One 'still running' line if the current step has run past heartbeat_s; returns it."""
        if not self.step_text or self.step_start is None:
            return None
        running = self.now() - self.step_start
        if running < self.heartbeat_s:
            return None
        line = "%s: still %s (%s) [ETA %s]" % (self.where(), self.step_text, clock(running),
                                               clock(self.eta_s()))
        self._emit(line)
        return line

    def __enter__(self):
        if self.heartbeat_s and self.heartbeat_s > 0:
            def beat():
                while not self._stop.wait(self.heartbeat_s):
                    self.heartbeat()
            self._thread = threading.Thread(target=beat, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        return False


# ------------------------------------------------------------------------------------------------
# Numbers
# ------------------------------------------------------------------------------------------------

def fmt(value, pattern, missing="-"):
    if value is None:
        return missing
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return pattern % value


def ratio(numerator, denominator):
    """numerator / denominator, or None when either is missing, zero or not finite."""
    try:
        numerator, denominator = float(numerator), float(denominator)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(numerator) and math.isfinite(denominator)) or numerator <= 0 \
            or denominator <= 0:
        return None
    return numerator / denominator


def geomean(values):
    values = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def mib(value):
    return value / 2.0 ** 20 if value else None


def row_ratios(r):
    """The ratios the targets are stated in (time ratios above 1: Kiln faster; the memory ratio
    below 1: Kiln smaller)."""
    fused, unfused = r.get("kiln_fused_ms"), r.get("kiln_unfused_ms")
    return {
        "eager_over_unfused": ratio(r.get("eager_ms"), unfused),
        "eager_over_fused": ratio(r.get("eager_ms"), fused),
        "graph_over_fused": ratio(r.get("graph_ms"), fused),
        "compile_over_fused": ratio(r.get("compile_ms"), fused),
        "fused_over_eager_memory": ratio(r.get("kiln_fused_total_bytes"),
                                         r.get("torch_peak_bytes")),
    }


def missing_ms(r, key, error_keys):
    """'FAIL' when one of error_keys is set on the row, 'skip' for a skipped column, else '-'."""
    if key == "compile_ms" and r.get("compile_skipped"):
        return "skip"
    return "FAIL" if any(r.get(k) for k in error_keys) or r.get("error") else "-"


def _ms(r, key, *error_keys):
    return fmt(r.get(key), "%.2f", missing_ms(r, key, error_keys))


def _bold_if(value, target, pattern="%.2f"):
    text = fmt(value, pattern)
    return "**%s**" % text if value is not None and value >= target else text


# ------------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------------

TIME_HEAD = ("| net | batch | precision | Kiln unfused ms | Kiln fused ms | torch eager ms "
             "| torch CUDA-graph ms | torch.compile ms | eager/unfused | eager/fused "
             "| graph/fused | compile/fused | Kiln fused img/s |")
MEMORY_HEAD = ("| net | batch | precision | Kiln unfused MiB | Kiln fused MiB | eager MiB "
               "| compile MiB | fused/eager MiB | rel L2 unfused | rel L2 fused "
               "| rel L2 compile | compile s | fused groups |")


def markdown_tables(rows):
    """(time table, memory/agreement table, failure notes), all markdown."""
    time_lines = [TIME_HEAD, "|" + "---|" * (TIME_HEAD.count("|") - 1)]
    memory_lines = [MEMORY_HEAD, "|" + "---|" * (MEMORY_HEAD.count("|") - 1)]
    for r in rows:
        q = row_ratios(r)
        key = "| %s | %d | %s |" % (r["net"], r["batch"], r["precision"])
        time_lines.append("%s %s |" % (key, " | ".join((
            _ms(r, "kiln_unfused_ms", "kiln_unfused_time_error"),
            _ms(r, "kiln_fused_ms", "kiln_fused_time_error"),
            _ms(r, "eager_ms", "torch_error"),
            _ms(r, "graph_ms", "torch_error", "graph_error"),
            _ms(r, "compile_ms", "torch_error", "compile_error"),
            _bold_if(q["eager_over_unfused"], TARGET_EAGER_OVER_UNFUSED),
            _bold_if(q["eager_over_fused"], TARGET_EAGER_OVER_FUSED),
            fmt(q["graph_over_fused"], "%.2f"),
            _bold_if(q["compile_over_fused"], TARGET_COMPILE_OVER_FUSED),
            fmt(r.get("kiln_fused_images_per_s"), "%.0f")))))
        memory_lines.append("%s %s |" % (key, " | ".join((
            fmt(mib(r.get("kiln_unfused_total_bytes")), "%.0f"),
            fmt(mib(r.get("kiln_fused_total_bytes")), "%.0f"),
            fmt(mib(r.get("torch_peak_bytes")), "%.0f"),
            fmt(mib(r.get("compile_peak_bytes")), "%.0f"),
            fmt(q["fused_over_eager_memory"], "%.2f"),
            fmt(r.get("kiln_unfused_rel_l2"), "%.1e"),
            fmt(r.get("kiln_fused_rel_l2"), "%.1e"),
            fmt(r.get("compile_vs_eager_rel_l2"), "%.1e"),
            fmt(r.get("compile_s"), "%.0f" if (r.get("compile_s") or 0) >= 10 else "%.1f"),
            fmt(r.get("kiln_fused_fused_groups"), "%d")))))
    return "\n".join(time_lines), "\n".join(memory_lines), failure_notes(rows)


def failure_notes(rows):
    """One line per distinct (key, message): the same torch.compile error on twelve rows is one
    line naming the twelve rows."""
    notes = {}
    for r in rows:
        for key in ERROR_KEYS:
            if r.get(key):
                lines = [s for s in str(r[key]).strip().splitlines() if s.strip()]
                message = lines[-1] if lines else "?"
                if len(message) > 300:
                    message = message[:297] + "..."
                notes.setdefault((key, message), []).append(
                    "%s b%d %s" % (r["net"], r["batch"], r["precision"]))
    return ["- %s: %s: %s" % (", ".join(where), key, message)
            for (key, message), where in notes.items()]


def summary_lines(rows):
    """The targets, one line each: met or not, how many rows meet them, the geometric means. A
    row without the value (a failure) counts against an every-row target."""
    ratios = [row_ratios(r) for r in rows]
    total = len(rows)

    def values(name):
        return [q[name] for q in ratios if q[name] is not None]

    def every_row(name, target, label):
        v = values(name)
        met = sum(1 for x in v if x >= target)
        missing = " (%d rows without a value)" % (total - len(v)) if len(v) < total else ""
        return ("%s >= %.2f on every row (%s): %s, %d of %d rows%s; geomean %s, min %s" % (
            name_of[name], target, label, "met" if total and met == total else "not met", met,
            total, missing, fmt(geomean(v), "%.3f"), fmt(min(v) if v else None, "%.3f")))

    name_of = {"eager_over_fused": "eager/fused", "eager_over_unfused": "eager/unfused"}
    lines = [every_row("eager_over_fused", TARGET_EAGER_OVER_FUSED, "target")]
    v = values("compile_over_fused")
    g = geomean(v)
    lines.append("torch.compile/fused geomean >= %.2f (target): %s, %s over %d of %d rows "
                 "(%d rows >= %.2f)" % (
                     TARGET_COMPILE_OVER_FUSED,
                     "no value" if g is None else ("met" if g >= TARGET_COMPILE_OVER_FUSED
                                                   else "not met"),
                     fmt(g, "%.3f"), len(v), total,
                     sum(1 for x in v if x >= TARGET_COMPILE_OVER_FUSED),
                     TARGET_COMPILE_OVER_FUSED))
    lines.append(every_row("eager_over_unfused", TARGET_EAGER_OVER_UNFUSED, "previous target"))
    v = values("fused_over_eager_memory")
    lines.append("Kiln fused memory <= eager peak: %d of %d rows; geomean fused/eager %s"
                 % (sum(1 for x in v if x <= 1.0), len(v), fmt(geomean(v), "%.2f")))
    return lines


def short_table(rows):
    """A plain-text table for the end of the log (stdout), one line per row."""
    head = ("%-13s %4s %-5s %8s %8s %8s %8s %8s %6s %6s %6s %11s %8s" % (
        "net", "b", "prec", "unfused", "fused", "eager", "graph", "compile", "e/u", "e/f",
        "c/f", "MiB f/eager", "relL2 f"))
    lines = [head]
    for r in rows:
        q = row_ratios(r)
        lines.append("%-13s %4d %-5s %8s %8s %8s %8s %8s %6s %6s %6s %11s %8s" % (
            r["net"][:13], r["batch"], r["precision"],
            _ms(r, "kiln_unfused_ms", "kiln_unfused_time_error"),
            _ms(r, "kiln_fused_ms", "kiln_fused_time_error"),
            _ms(r, "eager_ms", "torch_error"),
            _ms(r, "graph_ms", "torch_error", "graph_error"),
            _ms(r, "compile_ms", "torch_error", "compile_error"),
            fmt(q["eager_over_unfused"], "%.2f"), fmt(q["eager_over_fused"], "%.2f"),
            fmt(q["compile_over_fused"], "%.2f"),
            "%s/%s" % (fmt(mib(r.get("kiln_fused_total_bytes")), "%.0f"),
                       fmt(mib(r.get("torch_peak_bytes")), "%.0f")),
            fmt(r.get("kiln_fused_rel_l2"), "%.1e")))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# The PERF.md section
# ------------------------------------------------------------------------------------------------

def perf_section(env, argv, iterations, warmup, compile_mode, weights_note, rows):
    time_table, memory_table, notes = markdown_tables(rows)
    section = [
        BEGIN_MARK,
        "### Whole nets: Kiln graph engine (fused and unfused) vs PyTorch eager, CUDA graph and "
        "torch.compile (`bench/graph_bench.py`)",
        "",
        "Run %s UTC on %s (driver %s), PyTorch %s, CUDA %s, cuDNN %s, Triton %s. Command: `%s`."
        % (env.get("date_utc"), env.get("gpu"), env.get("driver", "?"), env.get("torch"),
           env.get("cuda"), env.get("cudnn"), env.get("triton", "-"),
           " ".join(_quote(a) for a in argv)),
        "",
        "Times are medians over %d iterations after %d warm-up ones. Kiln: `kiln time` (whole "
        "forward, un-instrumented; a replayed CUDA graph where Kiln captured one, see "
        "`kiln_fused_cuda_graph` in graph_bench.json, so graph/fused is the like-for-like "
        "ratio), once with `--optimize off` (unfused: the imported graph as it is) and once with "
        "`--optimize on` (fused: BatchNorm folding, conv + residual + ReLU epilogues, Dropout "
        "removed, in-place memory planning). PyTorch: CUDA events around each eager forward, "
        "each replay of the captured CUDA graph, and each call of `torch.compile(model%s)` "
        "(Inductor; warmed up until it compiled nothing new, compilation time in `compile s`, "
        "not in its ms); cudnn.benchmark on; fp16 uses `model.half()` and channels_last in all "
        "three. Time ratios are PyTorch ms / Kiln ms (> 1: Kiln faster); targets: eager/fused "
        ">= %.2f on every row, the geometric mean of compile/fused >= %.2f (bold: met). Kiln "
        "MiB: weights + activations + workspace of the plan (`memory.total_bytes`); eager and "
        "compile MiB: `max_memory_allocated` over one forward, weights included; fused/eager "
        "MiB < 1: Kiln smaller. rel L2 = ||torch - kiln|| / ||kiln|| on the top of the last "
        "layer for each Kiln variant against PyTorch eager, and ||compile - eager|| / ||eager|| "
        "for torch.compile; same weights (%s) and the same N(0,1) input. fused groups: rows of "
        "`kiln time` that name more than one layer. FAIL: see the notes under the tables; "
        "skip: run with --no-compile."
        % (iterations, warmup, "" if compile_mode in (None, "default")
           else ", mode=%r" % compile_mode, TARGET_EAGER_OVER_FUSED, TARGET_COMPILE_OVER_FUSED,
           weights_note),
        "",
        time_table,
        "",
    ]
    section += ["- " + line for line in summary_lines(rows)]
    section += ["", memory_table]
    if notes:
        section += ["", "Failures and notes:", ""] + notes
    section.append(END_MARK)
    return "\n".join(section) + "\n"


def _quote(arg):
    import shlex
    return shlex.quote(arg)


def replace_section(path, text, begin_mark=BEGIN_MARK, end_mark=END_MARK):
    """Put text between the markers of path (replacing what is there), or append it. The
    markers default to graph-bench's; bench/train_bench.py passes its own."""
    old = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
    begin, end = old.find(begin_mark), old.find(end_mark)
    if begin >= 0 and end > begin:
        end_line = old.find("\n", end)
        end_line = len(old) if end_line < 0 else end_line + 1
        new = old[:begin] + text + old[end_line:]
    else:
        new = old + ("\n" if old and not old.endswith("\n") else "") + ("\n" if old else "") + text
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)


def print_report(rows, markdown_path=None, out=sys.stdout):
    """OUT/graph_bench.md, then the end of the log: both markdown tables, failures, then the
    short table and the summary last (so that `tail -25` of the log shows them)."""
    time_table, memory_table, notes = markdown_tables(rows)
    summary = summary_lines(rows)
    if markdown_path:
        try:
            with open(markdown_path, "w", encoding="utf-8") as f:
                f.write("\n".join([time_table, ""] + ["- " + s for s in summary]
                                  + ["", memory_table] + ([""] + notes if notes else [])) + "\n")
        except OSError as e:  # --report-only on a folder fetched read-only
            log("could not write %s: %s" % (markdown_path, e))
    text = [time_table, "", memory_table]
    if notes:
        text += ["", "Failures and notes:"] + notes
    text += ["", short_table(rows), ""] + summary
    with _PRINT_LOCK:
        out.write("\n" + "\n".join(text) + "\n")
        out.flush()
