"""The graph_bench.py half of bench/graph_bench_selftest.py (CPU only, no GPU, no kiln build).

* graph_bench_report.py: ratios, geometric means, both markdown tables, the summary lines, the
  short table, failure notes merged across rows, and the progress line's ETA and heartbeat on a
  fake clock;
* graph_bench_torch.py: the torch.compile column with a stand-in for torch.compile (warm-up until
  it compiles nothing new, compilation time apart from the timing, rel L2 against eager, the
  mode passed on), its error paths (torch.compile missing, as in PyTorch 1.x, or raising on the
  first call) and torch_row with it on the CPU;
* graph_bench.py end to end on the CPU against a stand-in `kiln` script (--torch-device cpu):
  both Kiln variants (--optimize off and on, each once per command), a stand-in torch.compile
  injected into the script's process, a failing kiln with --append, --no-compile;
  with --kiln PATH, also against a real kiln binary on the CPU (outputs must agree).
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import caffe_torch as ct  # noqa: E402
import graph_bench  # noqa: E402
import graph_bench_report as report  # noqa: E402
import graph_bench_torch as gbt  # noqa: E402

checks = [0]


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    checks[0] += 1


# ------------------------------------------------------------------------------------------------
# Tables, summary, progress
# ------------------------------------------------------------------------------------------------

def _row(net, precision, **values):
    row = {"net": net, "batch": 8, "precision": precision}
    row.update(values)
    return row


def test_report():
    mib = 2 ** 20
    rows = [
        _row("a", "fp32", kiln_unfused_ms=2.0, kiln_fused_ms=1.0, eager_ms=1.5, graph_ms=1.2,
             compile_ms=2.0, kiln_fused_images_per_s=8000.0, kiln_unfused_total_bytes=300 * mib,
             kiln_fused_total_bytes=100 * mib, torch_peak_bytes=200 * mib,
             compile_peak_bytes=150 * mib, kiln_unfused_rel_l2=1e-6, kiln_fused_rel_l2=2e-6,
             compile_vs_eager_rel_l2=3e-7, compile_s=61.0, kiln_fused_fused_groups=7),
        _row("a", "fp16", kiln_unfused_ms=1.0, kiln_fused_ms=0.5, eager_ms=0.5, compile_ms=0.25,
             kiln_fused_total_bytes=50 * mib, torch_peak_bytes=40 * mib,
             graph_error="capture failed"),
        _row("b", "fp32", kiln_fused_ms=None, kiln_fused_time_error="rc 1: boom", eager_ms=3.0,
             compile_error="BackendCompilerFailed: no triton"),
        _row("b", "fp16", kiln_unfused_ms=1.0, kiln_fused_ms=1.0, eager_ms=2.0,
             compile_error="BackendCompilerFailed: no triton"),
        _row("c", "fp32", eager_ms=1.0, compile_skipped=True),
    ]
    q = report.row_ratios(rows[0])
    check(q["eager_over_fused"] == 1.5 and q["eager_over_unfused"] == 0.75
          and q["compile_over_fused"] == 2.0 and q["fused_over_eager_memory"] == 0.5,
          "ratios %s" % q)
    check(report.ratio(1.0, 0) is None and report.ratio(None, 1.0) is None
          and report.ratio(float("nan"), 1.0) is None, "ratio of missing values")
    check(abs(report.geomean([2.0, 0.5, None, 8.0]) - 2.0) < 1e-12, "geomean")
    time_table, memory_table, notes = report.markdown_tables(rows)
    lines = time_table.splitlines()
    check(len(lines) == 7 and all(line.count("|") == 14 for line in lines),
          "time table: 13 columns, header, rule, 5 rows:\n" + time_table)
    check(all(line.count("|") == 14 for line in memory_table.splitlines()),
          "memory table: 13 columns:\n" + memory_table)
    cells = [c.strip() for c in lines[2].split("|")[1:-1]]
    check(cells[3:13] == ["2.00", "1.00", "1.50", "1.20", "2.00", "0.75", "**1.50**", "1.20",
                          "**2.00**", "8000"], "row a fp32 time cells %s" % cells)
    cells = [c.strip() for c in lines[3].split("|")[1:-1]]
    check(cells[6] == "FAIL" and cells[7] == "0.25" and cells[9] == "1.00"
          and cells[11] == "0.50", "row a fp16: graph FAIL, ratios %s" % cells)
    cells = [c.strip() for c in lines[4].split("|")[1:-1]]
    check(cells[4] == "FAIL" and cells[7] == "FAIL", "row b fp32: fused and compile FAIL: %s"
          % cells)
    cells = [c.strip() for c in lines[6].split("|")[1:-1]]
    check(cells[4] == "-" and cells[7] == "skip", "row c: compile skip: %s" % cells)
    cells = [c.strip() for c in memory_table.splitlines()[2].split("|")[1:-1]]
    check(cells[3:13] == ["300", "100", "200", "150", "0.50", "1.0e-06", "2.0e-06", "3.0e-07",
                          "61", "7"], "memory cells %s" % cells)
    check(report.markdown_tables([_row("d", "fp32", compile_s=1.25)])[1].count("| 1.2 |") == 1,
          "compile s under 10 with a decimal")
    same = [n for n in notes if "no triton" in n]
    check(len(same) == 1 and "b b8 fp32, b b8 fp16" in same[0],
          "one note for the same compile error on two rows: %s" % notes)
    check(any("kiln_fused_time_error: rc 1: boom" in n for n in notes), "kiln failure noted")
    summary = report.summary_lines(rows)
    check(summary[0] == "eager/fused >= 1.25 on every row (target): not met, 2 of 5 rows (2 rows "
          "without a value); geomean 1.442, min 1.000", "eager/fused summary: %s" % summary[0])
    check(summary[1] == "torch.compile/fused geomean >= 1.00 (target): met, 1.000 over 2 of 5 "
          "rows (1 rows >= 1.00)", "compile/fused geomean sqrt(2 * 0.5): %s" % summary[1])
    check(summary[2].startswith("eager/unfused >= 1.00 on every row (previous target): not met, "
                                "1 of 5 rows"), "eager/unfused summary: %s" % summary[2])
    check(summary[3] == "Kiln fused memory <= eager peak: 1 of 2 rows; geomean fused/eager 0.79",
          "memory summary: %s" % summary[3])
    everything = [_row("e", "fp32", kiln_fused_ms=1.0, eager_ms=1.3)]
    check(": met, 1 of 1 rows;" in report.summary_lines(everything)[0], "every row met")
    short = report.short_table(rows).splitlines()
    check(len(short) == 6 and "100/200" in short[1] and " skip " in short[5],
          "short table:\n" + "\n".join(short))
    legacy = report.markdown_tables([{"net": "old", "batch": 1, "precision": "fp32",
                                      "kiln_ms": 1.0, "rel_l2": 1e-6}])
    check(legacy[0].count("\n") == 2, "a row of an older graph_bench.json still prints")

    # Progress: ETA from finished rows, heartbeat only after heartbeat_s.
    now = [100.0]
    lines = []
    progress = report.Progress(4, heartbeat_s=30, now=lambda: now[0], out=lines)
    progress.start_row(1, "a b8 fp32")
    progress.step("kiln run")
    check(lines[-1] == "row 1/4 a b8 fp32: kiln run [ETA ?]", "first line: %r" % lines[-1])
    now[0] += 10
    progress.end_row()
    progress.start_row(2, "a b8 fp16")
    now[0] += 2
    progress.step("torch.compile (mode default)")
    check(lines[-1].endswith("[ETA 0:28]"), "ETA 10 s x 3 rows - 2 s: %r" % lines[-1])
    check(progress.heartbeat() is None, "no heartbeat before 30 s")
    now[0] += 95
    beat = progress.heartbeat()
    check(beat == "row 2/4 a b8 fp16: still torch.compile (mode default) (1:35) [ETA 0:00]",
          "heartbeat %r" % beat)
    check(report.clock(4000) == "1:06:40" and report.clock(None) == "?", "clock")
    with report.Progress(1, heartbeat_s=0.01, out=[]) as live:
        live.start_row(1, "x")
        live.step("waiting")
        time.sleep(0.2)
    check(len(live.out) >= 2 and "still waiting" in live.out[-1], "heartbeat thread: %s"
          % live.out)

    kept, dropped = graph_bench.without_optimize_flag(
        ["--algo", "measure", "--optimize", "off", "--optimize=on", "--layout", "nhwc"])
    check(kept == ["--algo", "measure", "--layout", "nhwc"]
          and dropped == ["--optimize", "off", "--optimize=on"], "--optimize dropped: %s" % kept)
    return ("graph_bench_report: ratios, geomeans, 2 tables x 13 columns (FAIL/skip cells, bold "
            "targets), merged notes, summary, short table, ETA/heartbeat; --optimize stripping")


# ------------------------------------------------------------------------------------------------
# torch.compile column with a stand-in compiler
# ------------------------------------------------------------------------------------------------

class FakeCompiler:
    """torch.compile's stand-in: the first call of a compiled module 'compiles' (sleeps); calls
    listed in recompile_at compile again. graph_count() counts the compilations, as Dynamo's
    unique_graphs counter does."""

    def __init__(self, delay=0.05, recompile_at=(), fail=None, scale=1.0):
        self.delay, self.recompile_at, self.fail, self.scale = delay, recompile_at, fail, scale
        self.modes, self.calls, self.graphs = [], 0, 0

    def __call__(self, module, mode=None):
        self.modes.append(mode)

        def compiled(*inputs):
            self.calls += 1
            if self.calls == 1 or self.calls in self.recompile_at:
                if self.fail:
                    raise RuntimeError(self.fail)
                time.sleep(self.delay)
                self.graphs += 1
            return module(*inputs) * self.scale
        return compiled

    def graph_count(self):
        return self.graphs


def test_compile_column(models_dir):
    calls = []
    count = iter([1, 1, 2, 2, 2, 2, 2])
    warm = gbt.warm_up_compiled(lambda: calls.append(1), lambda: None, 3, lambda: next(count))
    check(warm["compile_compiling_calls"] == 2 and warm["compile_warmup_calls"] == 6
          and warm["compile_settled"], "recompile on call 3, then 3 quiet calls: %s" % warm)
    calls.clear()
    grow = iter(range(1, 100))
    warm = gbt.warm_up_compiled(lambda: calls.append(1), lambda: None, 2, lambda: next(grow),
                                max_extra_calls=4)
    check(not warm["compile_settled"] and warm["compile_warmup_calls"] == 7,
          "a compiler that never settles is cut off: %s" % warm)
    warm = gbt.warm_up_compiled(lambda: None, lambda: None, 4, lambda: None)
    check(warm["compile_warmup_calls"] == 5, "no counter: first call + warmup")

    netdef = ct.load_net(os.path.join(models_dir, "lenet.prototxt"), batch=2)
    weights = ct.random_weights(ct.CaffeNet(netdef, init_weights=False), seed=2)
    net = ct.CaffeNet(netdef, weights).eval()
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((2, 1, 28, 28),
                                                                  dtype=np.float32))
    with torch.inference_mode():
        eager = net(x).numpy()
    fake = FakeCompiler(delay=0.1, recompile_at=(2,), scale=1.001)
    r = gbt.compile_column(net, x, eager, 3, 2, "cpu", "default", compile_fn=fake,
                           graph_count=fake.graph_count)
    check("compile_error" not in r, "fake compile failed: %s" % r.get("compile_traceback"))
    check(fake.modes == [None], "mode default is torch.compile's default: %s" % fake.modes)
    check(r["compile_s"] >= 0.2 and r["compile_compiling_calls"] == 2
          and r["compile_warmup_calls"] == 4, "compilation time of 2 compiling calls: %s" % r)
    check(r["compile_ms"] < 100 and r["compile_ms"] > 0, "timing excludes compilation: %s"
          % r["compile_ms"])
    check(abs(r["compile_vs_eager_rel_l2"] - 1e-3) < 1e-5, "rel L2 against eager %s"
          % r["compile_vs_eager_rel_l2"])
    check(r["compile_images_per_s"] == 2000.0 / r["compile_ms"], "images/s")
    fake = FakeCompiler(fail="BackendCompilerFailed: backend='inductor' raised:\n"
                             "RuntimeError: Cannot find a working triton installation.")
    r = gbt.compile_column(net, x, eager, 3, 2, "cpu", "reduce-overhead", compile_fn=fake)
    check(fake.modes == ["reduce-overhead"], "mode passed on")
    check(r["compile_error"] == "RuntimeError: BackendCompilerFailed: backend='inductor' "
          "raised: RuntimeError: Cannot find a working triton installation."
          and "compile_ms" not in r and "Traceback" in r["compile_traceback"],
          "compiler error recorded, not raised: %s" % r)
    saved = getattr(torch, "compile", None)
    torch.compile = None  # PyTorch 1.x has none; this machine may have either
    try:
        r = gbt.compile_column(net, x, eager, 3, 2, "cpu")
    finally:
        if saved is None:
            del torch.compile
        else:
            torch.compile = saved
    check(r["compile_error"].startswith("torch.compile unavailable"), "no torch.compile: %s" % r)

    dynamo = _check_dynamo_counters(net, x, eager)

    fake = FakeCompiler()
    steps = []
    r = gbt.torch_row(netdef, weights, x.numpy(), "fp32", netdef.last_top, 3, 2, "cpu",
                      compile_fn=fake, step=steps.append)
    check(r["eager_ms"] > 0 and r["compile_ms"] > 0 and r["compile_vs_eager_rel_l2"] == 0.0
          and steps == ["torch.compile (mode default)"], "torch_row with compile: %s" % steps)
    r = gbt.torch_row(netdef, weights, x.numpy(), "fp32", netdef.last_top, 3, 2, "cpu",
                      compile_mode=None, compile_fn=fake)
    check("compile_ms" not in r and "compile_error" not in r, "compile_mode None skips it")
    return ("torch.compile column (stand-in compiler): warm-up until settled, compilation time "
            "apart, rel L2 vs eager, mode passed on; compiler error and missing torch.compile "
            "recorded; %s (torch %s has torch.compile: %s)" % (
                dynamo, torch.__version__, saved is not None))


def _check_dynamo_counters(net, x, eager):
    """Where PyTorch has no Dynamo (1.x), a stand-in torch._dynamo with Dynamo's counters and
    reset(), and a torch.compile that counts as Dynamo does: the column reads graphs, graph
    breaks and Inductor cache hits from them, and resets Dynamo around each compile."""
    import collections
    import importlib
    import types
    try:
        importlib.import_module("torch._dynamo")
        return "real Dynamo present, counter stand-in not used"
    except ImportError:
        pass
    counters = collections.defaultdict(collections.Counter)
    resets = []
    dynamo = types.ModuleType("torch._dynamo")
    dynamo.utils = types.ModuleType("torch._dynamo.utils")
    dynamo.utils.counters = counters
    dynamo.reset = lambda: resets.append(1)

    def fake_compile(module):
        def compiled(*inputs):
            if not counters["stats"]["unique_graphs"]:
                counters["stats"]["unique_graphs"] += 1
                counters["graph_break"]["some reason"] += 2
                counters["inductor"]["fxgraph_cache_hit"] += 1
            return module(*inputs)
        return compiled

    saved = getattr(torch, "compile", None)
    sys.modules["torch._dynamo"], sys.modules["torch._dynamo.utils"] = dynamo, dynamo.utils
    torch._dynamo, torch.compile = dynamo, fake_compile
    try:
        counters["stats"]["unique_graphs"] = 0
        r = gbt.compile_column(net, x, eager, 3, 2, "cpu")
    finally:
        del sys.modules["torch._dynamo"], sys.modules["torch._dynamo.utils"], torch._dynamo
        if saved is None:
            del torch.compile
        else:
            torch.compile = saved
    check("compile_error" not in r, "compile with counters: %s" % r.get("compile_traceback"))
    check(r["compile_graphs"] == 1 and r["compile_graph_breaks"] == 2
          and r["compile_cache_hits"] == 1 and r["compile_compiling_calls"] == 1
          and r["compile_warmup_calls"] == 3 and len(resets) == 2,
          "counters read: %s, %d resets" % (r, len(resets)))
    check(r["compile_note"] == "1 graphs, 2 graph breaks; 1 graph(s) from Inductor's on-disk "
          "cache: compile s is warm", "compile note %r" % r["compile_note"])
    return "Dynamo counters (stand-in) read for graphs, breaks, cache hits"


# ------------------------------------------------------------------------------------------------
# graph_bench.py end to end on the CPU, with a stand-in kiln
# ------------------------------------------------------------------------------------------------

FAKE_KILN = r'''#!%(python)s
# A stand-in for the kiln CLI: `run` computes the output with caffe_torch, `time` prints JSON.
# --optimize on|off must come exactly once, as a separate word; "on" gives a faster, smaller plan
# with fused layer rows and an output a little further from PyTorch's.
import json, sys, time
import numpy as np
sys.path.insert(0, %(here)r)
import caffe_torch as ct

def flags(argv):
    out = {}
    i = 0
    while i < len(argv):
        out.setdefault(argv[i][2:], []).append(argv[i + 1])
        i += 2
    return out

cmd, rest = sys.argv[1], sys.argv[2:]
if cmd == "version":
    print("kiln fake 0.0"); sys.exit(0)
switches = [a for a in rest if a == "--json"]
f = flags([a for a in rest if a != "--json"])
if f.get("optimize") not in (["on"], ["off"]) or any(a.startswith("--optimize=") for a in rest):
    sys.exit("kiln: --optimize given %%s" %% f.get("optimize"))
fused = f["optimize"] == ["on"]
if cmd == "run":
    name, dims = f["input-shape"][0].split("=")
    netdef = ct.load_net(f["model"][0], input_shapes={name: [int(d) for d in dims.split(",")]})
    weights = ct.load_caffemodel(f["weights"][0])
    blob, path = f["output"][0].split("=")
    x = np.load(f["input"][0].split("=")[1])
    import torch
    with torch.inference_mode():
        y = ct.CaffeNet(netdef, weights, outputs=[blob]).eval()(torch.from_numpy(x))
    np.save(path, y.numpy() * np.float32(1 + (2e-6 if fused else 1e-6)))
    print("%%s -> %%s" %% (blob, path))
elif cmd == "time":
    print("kiln time: some log line first")
    batch = int(f["batch"][0])
    ms = 1.2 if fused else 1.5
    layers = [{"name": "conv1+relu1" if fused else "conv1", "type": "Convolution", "ms": 0.5}]
    print(json.dumps({"model": f["model"][0], "batch": batch, "precision": f["precision"][0],
                      "layout": "nchw", "device": "fake", "iterations": 3, "forward_ms": ms,
                      "images_per_s": batch / ms * 1e3,
                      "memory": {"weights_bytes": 1, "activations_bytes": 2,
                                 "workspace_bytes": 3,
                                 "total_bytes": (2 if fused else 3) << 20},
                      "layers": layers}))
'''

# graph_bench.py in a process whose torch.compile is a stand-in (PyTorch 1.x has none, and
# Inductor would need a compiler toolchain): it logs each compile's mode, scales outputs by 1.001.
FAKE_COMPILE_RUNNER = r'''
import os, runpy, sys, time
import torch

def fake_compile(module, mode=None):
    with open(os.environ["FAKE_COMPILE_LOG"], "a") as f:
        f.write("%%s\n" %% mode)
    state = {"calls": 0}
    def compiled(*inputs):
        state["calls"] += 1
        if state["calls"] == 1:
            time.sleep(0.05)
        return module(*inputs) * 1.001
    return compiled

torch.compile = fake_compile
sys.argv = [%(script)r] + sys.argv[1:]
runpy.run_path(%(script)r, run_name="__main__")
'''


def _rows(out):
    with open(os.path.join(out, "graph_bench.json")) as f:
        return json.load(f)["rows"]


def test_driver(models_dir):
    with tempfile.TemporaryDirectory() as tmp:
        kiln = os.path.join(tmp, "kiln")
        with open(kiln, "w") as f:
            f.write(FAKE_KILN % {"here": HERE, "python": sys.executable})
        os.chmod(kiln, 0o755)
        runner = os.path.join(tmp, "run_with_fake_compile.py")
        with open(runner, "w") as f:
            f.write(FAKE_COMPILE_RUNNER % {"script": os.path.join(HERE, "graph_bench.py")})
        compile_log = os.path.join(tmp, "compiles.txt")
        md = os.path.join(tmp, "PERF.md")
        with open(md, "w") as f:
            f.write("# Perf\n\nbefore\n\n<!-- graph-bench:begin -->\nold\n<!-- graph-bench:end -->"
                    "\n\nafter\n")
        out = os.path.join(tmp, "out")
        args = ["--kiln", kiln, "--models-dir", models_dir, "--out", out,
                "--rows", "lenet:3,mtcnn_det2_rnet:2", "--precisions", "fp32",
                "--iterations", "3", "--warmup", "1", "--perf-md", md, "--torch-device", "cpu",
                "--kiln-args", "--optimize=on --algo heuristic",
                "--compile-mode", "reduce-overhead",
                "--heartbeat", "0"]
        env = dict(os.environ, FAKE_COMPILE_LOG=compile_log)
        p = subprocess.run([sys.executable, runner] + args, capture_output=True, text=True,
                           timeout=600, env=env)
        check(p.returncode == 0, "graph_bench dry run failed:\n%s\n%s" % (p.stdout, p.stderr))
        rows = _rows(out)
        check(len(rows) == 2, "two rows")
        for row in rows:
            errors = {k: v for k, v in row.items()
                      if k.endswith("error") and k != "graph_error"}  # no CUDA graph on a CPU
            check(not errors, "errors in a good run: %s" % errors)
            check(row["kiln_unfused_ms"] == 1.5 and row["kiln_fused_ms"] == 1.2,
                  "both variants' kiln JSON parsed: %s" % row)
            check(row["kiln_unfused_total_bytes"] == 3 << 20
                  and row["kiln_fused_total_bytes"] == 2 << 20, "memory.total_bytes per variant")
            check(row["kiln_fused_fused_groups"] == 1 and row["kiln_unfused_fused_groups"] == 0,
                  "fused layer rows counted")
            check("--optimize off" in row["kiln_unfused_run_cmd"]
                  and "--optimize on" in row["kiln_fused_time_cmd"]
                  and "--optimize=on" not in row["kiln_fused_time_cmd"],
                  "--optimize set per variant, --kiln-args' one dropped")
            check(abs(row["kiln_unfused_rel_l2"] - 1e-6) < 3e-7
                  and abs(row["kiln_fused_rel_l2"] - 2e-6) < 3e-7
                  and abs(row["kiln_fused_vs_unfused_rel_l2"] - 1e-6) < 3e-7,
                  "rel L2 per variant: %s %s" % (row["kiln_unfused_rel_l2"],
                                                 row["kiln_fused_rel_l2"]))
            check(row.get("eager_ms", 0) > 0 and row.get("compile_ms", 0) > 0
                  and row["compile_mode"] == "reduce-overhead"
                  and abs(row["compile_vs_eager_rel_l2"] - 1e-3) < 1e-5
                  and row["compile_s"] >= 0.05, "torch.compile column: %s" % {
                      k: v for k, v in row.items() if k.startswith("compile")})
        with open(compile_log) as f:
            check(f.read().split() == ["reduce-overhead"] * 2, "one compile per row, mode passed")
        text = open(md).read()
        check(text.count("<!-- graph-bench:begin -->") == 1 and "old\n" not in text
              and text.startswith("# Perf") and text.rstrip().endswith("after"),
              "PERF.md section replaced in place")
        check("| Kiln fused ms |" in text and "| torch.compile ms |" in text
              and "torch.compile/fused geomean >= 1.00 (target): " in text
              and "mode='reduce-overhead'" in text, "PERF.md tables and summary")
        check("row 2/2 mtcnn_det2_rnet b2 fp32: torch.compile (mode reduce-overhead) [ETA "
              in p.stdout and "--kiln-args: dropped --optimize=on" in p.stdout,
              "progress lines:\n" + p.stdout)
        check(os.path.exists(os.path.join(out, "graph_bench.md")), "OUT/graph_bench.md")
        tail = p.stdout[p.stdout.rindex("\nnet "):].strip()
        check(tail.splitlines()[-4].startswith("eager/fused >= 1.25"), "summary last:\n" + tail)

        # --report-only: the same tables from graph_bench.json, with the first run's settings.
        md2 = os.path.join(tmp, "PERF2.md")
        p2 = subprocess.run([sys.executable, os.path.join(HERE, "graph_bench.py"), "--out", out,
                             "--report-only", "--perf-md", md2], capture_output=True, text=True,
                            timeout=120)
        check(p2.returncode == 0, "--report-only failed:\n" + p2.stderr)
        check(p2.stdout[p2.stdout.rindex("\nnet "):].strip() == tail, "same short table")
        text2 = open(md2).read()
        section = text[text.index("Times are"):text.index(report.END_MARK)]
        check(text2[text2.index("Times are"):text2.index(report.END_MARK)] == section
              and "--compile-mode reduce-overhead" in text2,
              "--report-only writes the same section, the run's command")

        # Again with this process's own torch (1.x: no torch.compile) and a failing kiln:
        # the run goes on, records both, and keeps the other row (--append).
        with open(kiln, "w") as f:
            f.write("#!/bin/sh\necho 'kiln: unknown flag --precision' >&2\nexit 1\n")
        args[args.index("--rows") + 1] = "lenet:3"
        script = [sys.executable, os.path.join(HERE, "graph_bench.py")]
        p = subprocess.run(script + args + ["--append"], capture_output=True, text=True,
                           timeout=600)
        check(p.returncode == 0, "graph_bench with a failing kiln must not crash:\n" + p.stderr)
        rows = _rows(out)
        check(len(rows) == 2 and "kiln_fused_time_error" in rows[1]
              and "kiln_unfused_run_error" in rows[1] and "compile_ms" in rows[0],
              "failure recorded, other row kept")
        check("FAIL" in p.stdout and "unknown flag" in p.stdout, "failure shown in the table")
        if getattr(torch, "compile", None) is None:
            check(rows[1]["compile_error"].startswith("torch.compile unavailable")
                  and rows[1]["eager_ms"] > 0, "no torch.compile: recorded, eager kept")
        else:
            check("compile_ms" in rows[1] or "compile_error" in rows[1], "real torch.compile")

        # --no-compile: the column says skip; --kiln-variants fused runs one variant.
        p = subprocess.run(script + args + ["--no-compile", "--kiln-variants", "fused"],
                           capture_output=True, text=True, timeout=600)
        check(p.returncode == 0, "--no-compile run failed:\n" + p.stderr)
        row = _rows(out)[0]
        check(row.get("compile_skipped") and "compile_error" not in row
              and "kiln_unfused_run_cmd" not in row, "--no-compile, one variant: %s" % row)
        check(" skip " in p.stdout, "skip in the short table")
    return ("graph_bench.py dry runs (CPU, stand-in kiln and torch.compile, failing kiln, "
            "--no-compile):\n" + textwrap.indent(tail, "  "))


def test_real_kiln(models_dir, kiln):
    """graph_bench.py with a real kiln binary, both on the CPU: Kiln reads our caffemodels and
    agrees with caffe_torch, fused and unfused (this checks the encoder, and both engines, end
    to end)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        cmd = [sys.executable, os.path.join(HERE, "graph_bench.py"), "--kiln", kiln,
               "--models-dir", models_dir, "--out", out,
               "--rows", "lenet:2,mtcnn_det2_rnet:2,resnet10_preact_cvgj:1",
               "--precisions", "fp32", "--iterations", "2", "--warmup", "1",
               "--torch-device", "cpu", "--kiln-device", "cpu", "--no-compile"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        check(p.returncode == 0, "graph_bench with %s failed:\n%s" % (kiln, p.stderr))
        rows = _rows(out)
        for row in rows:
            for variant in report.VARIANTS:
                value = row.get("kiln_%s_rel_l2" % variant)
                check(value is not None and value < 1e-4,
                      "%s: Kiln %s (CPU) vs caffe_torch rel L2 %s, errors %s" % (
                          row["net"], variant, value,
                          {k: v for k, v in row.items() if k.endswith("error")}))
    return "real kiln on the CPU agrees with caffe_torch (unfused / fused): " + ", ".join(
        "%s %.1e / %.1e" % (r["net"], r["kiln_unfused_rel_l2"], r["kiln_fused_rel_l2"])
        for r in rows)
