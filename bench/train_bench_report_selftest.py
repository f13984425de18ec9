#!/usr/bin/env python3
"""The report half of bench/train_bench_selftest.py (which runs it): train_bench.py's parsing of
kiln's JSON, the kiln command, the verdicts, the table's cells (FAIL, '-', n/a; 9 columns, 11 with
the compiled side), the summary, the notes and the PERF.md section, on made-up rows. No GPU, no
kiln, no torch needed."""

import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import train_bench as tb  # noqa: E402
from selftest_checks import check  # noqa: E402


# ------------------------------------------------------------------------------------------------
# The report
# ------------------------------------------------------------------------------------------------

MIB = 2 ** 20


def _row(net, precision, **values):
    row = {"net": net, "batch": 64, "precision": precision}
    row.update(values)
    return row


def test_report():
    answer = {"train_step_ms": 2.5, "images_per_second": 25600.0, "backend": "cuda",
              "memory": {"weights_bytes": 1, "optimizer_bytes": 2, "activations_bytes": 3,
                         "workspace_bytes": 4, "total_bytes": 10},
              "precision": "fp16", "layers": [{"name": "conv1"}]}
    text = ("kiln time: compiling {not json}\n{\"forward_ms\": 3}\n%s\ndone\n"
            % json.dumps(answer, indent=1))
    report = tb.parse_kiln_json(text)
    check(report["train_step_ms"] == 2.5 and report["memory"]["total_bytes"] == 10,
          "kiln JSON among log lines")
    check(tb.parse_kiln_json("{\"forward_ms\": 1}") is None, "an inference report is no step")
    check(tb.number({"a": {"b": "3"}}, "a", "b") == 3.0 and tb.number({"a": True}, "a") is None
          and tb.number({}, "x") is None, "number()")
    cmd = tb.kiln_command("/k", "/m.prototxt", [("data", [8, 3, 4, 4]), ("label", [8])], "fp16",
                          30, ["--algo", "measure", "--tuning-file", "T"])
    check(cmd == ["/k", "time", "--model", "/m.prototxt", "--train", "--input-shape",
                  "data=8,3,4,4", "--input-shape", "label=8", "--precision", "fp16",
                  "--iterations", "30", "--algo", "measure", "--tuning-file", "T", "--json"],
          "kiln command %s" % cmd)
    check(tb.parse_rows("lenet:64, caffenet:128") == [("lenet", 64), ("caffenet", 128)],
          "--rows")
    for bad in ("lenet", "lenet:0", "vgg:8"):
        try:
            tb.parse_rows(bad)
        except SystemExit:
            check(True, "--rows refused %r" % bad)
        else:
            raise AssertionError("--rows accepted %r" % bad)

    rows = [
        _row("a", "fp32", kiln_step_ms=8.0, torch_step_ms=10.0, kiln_total_bytes=100 * MIB,
             torch_peak_bytes=200 * MIB),                           # met
        _row("a", "fp16", kiln_step_ms=9.0, torch_step_ms=10.0, kiln_total_bytes=5 * MIB,
             torch_peak_bytes=int(6.5 * MIB), torch_amp_scale_before=65536.0,
             torch_amp_scale_after=32768.0),                        # time missed
        _row("b", "fp32", kiln_step_ms=0.5, torch_step_ms=1.0, kiln_total_bytes=300 * MIB,
             torch_peak_bytes=200 * MIB, torch_leftover_bytes=MIB),  # memory missed
        _row("b", "fp16", kiln_step_ms=2.0, torch_step_ms=1.0, kiln_total_bytes=300 * MIB,
             torch_peak_bytes=200 * MIB, kiln_note="kiln ran on backend cpu"),  # both
        _row("c", "fp32", kiln_error="rc 1", kiln_stderr_tail="line 1\nline 2\nline 3\n"
             "kiln: CUDA error: out of memory", torch_step_ms=4.0, torch_peak_bytes=50 * MIB),
        _row("c", "fp16", kiln_step_ms=1.0, kiln_total_bytes=MIB,
             torch_error="RuntimeError: boom"),
        _row("d", "fp32", error="ValueError: no data layer"),
    ]
    verdicts = [tb.row_verdict(r) for r in rows]
    check(verdicts[0] == (1.25, True, []), "exactly 0.8x and less memory: met %s"
          % (verdicts[0],))
    check(verdicts[1][1:] == (False, ["time"]) and verdicts[2][1:] == (False, ["memory"])
          and verdicts[3][1:] == (False, ["time", "memory"]), "misses %s" % verdicts[1:4])
    check(all(v[1] is None for v in verdicts[4:]), "no verdict without both numbers")
    table = tb.markdown_table(rows).splitlines()
    check(table[0] == tb.TABLE_HEADER and len(table) == 9
          and all(line.count("|") == 10 for line in table), "9 columns:\n" + "\n".join(table))
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in table[2:]]
    check(cells[0] == ["a", "64", "fp32", "8.00", "10.00", "1.25", "100", "200", "**yes**"],
          "row a fp32 %s" % cells[0])
    check(cells[1][3:] == ["9.00", "10.00", "1.11", "5.0", "6.5", "no (time)"],
          "row a fp16 %s" % cells[1])
    check(cells[2][3:] == ["0.500", "1.00", "2.00", "300", "200", "no (memory)"],
          "row b fp32 %s" % cells[2])
    check(cells[3][8] == "no (time, memory)", "row b fp16 %s" % cells[3])
    check(cells[4][3:] == ["FAIL", "4.00", "-", "FAIL", "50", "-"], "kiln failed %s" % cells[4])
    check(cells[5][3:] == ["1.00", "FAIL", "-", "1.0", "FAIL", "-"], "torch failed %s"
          % cells[5])
    check(cells[6][3:] == ["FAIL", "FAIL", "-", "FAIL", "FAIL", "-"], "row failed %s" % cells[6])
    summary = tb.summary_line(rows)
    check(summary.startswith("Target (Kiln step <= 0.8x PyTorch eager, Kiln memory <= PyTorch "
                             "peak): met on 1 of 7 rows (3 without both numbers); geometric "
                             "mean of eager/Kiln 1.09"), summary)
    notes = tb.row_notes(rows)
    check(len(notes) == 6, "notes:\n" + "\n".join(notes))
    check("c b64 fp32: kiln failed (rc 1): line 2; line 3; kiln: CUDA error: out of memory"
          in notes[3], "kiln stderr tail in the notes: %s" % notes[3])
    check("scale fell from 65536 to 32768" in notes[0] and "1.0 MiB of an earlier row" in notes[1]
          and "backend cpu" in notes[2] and "PyTorch failed: RuntimeError: boom" in notes[4]
          and "row failed: ValueError" in notes[5], "notes:\n" + "\n".join(notes))

    with tempfile.TemporaryDirectory() as tmp:
        perf = os.path.join(tmp, "PERF.md")
        shutil.copy(os.path.join(REPO, "docs", "PERF.md"), perf)
        original = open(perf).read()
        check(original.count(tb.BEGIN_MARK) == 1 and original.count(tb.END_MARK) == 1
              and original.index("### Training step vs PyTorch eager (issue 17)")
              < original.index(tb.BEGIN_MARK) < original.index(tb.END_MARK),
              "docs/PERF.md has the issue-17 heading, then one pair of markers")
        env = {"date_utc": "2026-01-02 03:04", "gpu": "H100", "torch": "2.x", "kiln_version": "k"}
        section = tb.perf_section(env, ["train_bench.py", "--rows", "a:64"],
                                  {"iterations": 30, "warmup": 10}, rows)
        for _ in range(2):  # twice: the second replaces the first
            tb.replace_section(perf, section)
        new = open(perf).read()
        begin, end = original.index(tb.BEGIN_MARK), original.index(tb.END_MARK)
        end = original.index("\n", end) + 1
        check(new == original[:begin] + section + original[end:],
              "only the text between the markers changed")
        check("median of 30 timed steps after 10 warm-up steps" in section
              and "`train_bench.py --rows a:64`" in section and tb.TABLE_HEADER in section
              and "### Whole networks with the graph compiler" in new, "section text")
    return ("report: kiln JSON among log lines, kiln command, --rows, verdicts (met at exactly "
            "0.8x, time, memory, both, none), 9-column table with FAIL and '-', summary, 6 notes "
            "(stderr tail, GradScaler, leftover, backend, PyTorch, row), docs/PERF.md section "
            "replaced twice between its markers")


def test_report_compiled():
    """The report with a compiled side: two columns more, its n/a, its verdict and notes."""
    ok = {"kiln_total_bytes": 100 * MIB, "torch_peak_bytes": 200 * MIB}
    rows = [
        _row("a", "fp32", kiln_step_ms=8.0, torch_step_ms=10.0, compiled_mode="default",
             compiled_step_ms=9.0, compiled_compile_s=42.0, **ok),       # met
        _row("a", "fp16", kiln_step_ms=8.0, torch_step_ms=10.0, compiled_mode="default",
             compiled_step_ms=6.0, compiled_compile_s=61.0,
             compiled_note="3 graphs, 2 graph breaks", compiled_amp_scale_before=65536.0,
             compiled_amp_scale_after=32768.0, **ok),                    # compiled missed
        _row("b", "fp32", kiln_step_ms=8.0, torch_step_ms=10.0, compiled_mode="default",
             compiled_error="torch.compile unavailable (PyTorch 1.13.0)", **ok),  # eager only
        _row("b", "fp16", kiln_step_ms=9.0, torch_step_ms=10.0, kiln_total_bytes=300 * MIB,
             torch_peak_bytes=200 * MIB, compiled_mode="default", compiled_step_ms=8.0),
        _row("c", "fp32", kiln_error="rc 1", torch_step_ms=4.0, torch_peak_bytes=50 * MIB,
             compiled_mode="default", compiled_step_ms=3.0),
        _row("c", "fp16", kiln_step_ms=1.0, kiln_total_bytes=MIB, torch_error="RuntimeError: x",
             compiled_mode="default", compiled_error="not run (PyTorch eager failed)"),
        _row("d", "fp32", error="ValueError: no data layer"),
        _row("e", "fp32", kiln_step_ms=0.5, torch_step_ms=1.0, **ok),  # a row without the side
    ]
    verdicts = [tb.row_verdict(r) for r in rows]
    check(verdicts[0] == (1.25, True, []) and verdicts[1] == (1.25, False, ["compiled"])
          and verdicts[2] == (1.25, True, []) and verdicts[3][1:] == (False, ["time", "memory",
                                                                              "compiled"])
          and all(v[1] is None for v in verdicts[4:7]) and verdicts[7] == (2.0, True, []),
          "compiled/Kiln >= 1.0 required where it ran: %s" % verdicts)
    check(tb.compiled_ratio(rows[0]) == 9.0 / 8.0 and tb.compiled_ratio(rows[2]) is None
          and tb.compiled_ratio(rows[4]) is None, "compiled/Kiln ratio")
    table = tb.markdown_table(rows).splitlines()
    check(table[0] == tb.COMPILED_TABLE_HEADER and table[1] == tb.COMPILED_TABLE_RULE
          and len(table) == 10 and all(line.count("|") == 12 for line in table),
          "11 columns:\n" + "\n".join(table))
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in table[2:]]
    check(cells[0][3:] == ["8.00", "10.00", "1.25", "9.00", "1.12", "100", "200", "**yes**"],
          "met with compiled: %s" % cells[0])
    check(cells[1][6:] == ["6.00", "0.75", "100", "200", "no (compiled)"], "compiled missed %s"
          % cells[1])
    check(cells[2][6:] == ["n/a", "-", "100", "200", "**yes**"], "compile n/a %s" % cells[2])
    check(cells[3][10] == "no (time, memory, compiled)", "all missed %s" % cells[3])
    check(cells[4][3:] == ["FAIL", "4.00", "-", "3.00", "-", "FAIL", "50", "-"]
          and cells[5][6:8] == ["n/a", "-"] and cells[6][3:] == ["FAIL"] * 2 + ["-", "FAIL", "-"]
          + ["FAIL"] * 2 + ["-"] and cells[7][6:] == ["-", "-", "100", "200", "**yes**"],
          "failures and a row without a compiled side: %s" % cells[4:])
    summary = tb.summary_line(rows)
    check(summary == "Target (Kiln step <= 0.8x PyTorch eager, Kiln memory <= PyTorch peak, "
          "Kiln step <= 1.0x torch.compile's (mode default) where it ran): met on 3 of 8 rows "
          "(3 without both numbers); geometric mean of eager/Kiln 1.34 (target >= 1.25 on every "
          "row); geometric mean of compiled/Kiln 0.91 (target >= 1.00 where it ran; 3 of 8 rows "
          "with both numbers).", summary)
    check(tb.compile_times_line(rows) == "torch.compile (mode default) compilation, the wall "
          "time of the warm-up steps that compiled (not in the step times): a b64 fp32 42.0 s, "
          "a b64 fp16 61.0 s." and tb.compile_times_line(rows[2:]) is None, "compile times")
    notes = tb.row_notes(rows)
    check(len(notes) == 7 and notes[0] == "- a b64 fp16: torch.compile: 3 graphs, 2 graph breaks"
          and "compiled side's GradScaler scale fell from 65536 to 32768" in notes[1]
          and notes[2] == "- b b64 fp32: torch.compile (mode default) n/a: torch.compile "
          "unavailable (PyTorch 1.13.0)" and notes[5] == "- c b64 fp16: torch.compile (mode "
          "default) n/a: not run (PyTorch eager failed)", "notes:\n" + "\n".join(notes))
    text = tb.report_text(rows)
    check(text.splitlines()[12].startswith("- torch.compile (mode default) compilation"),
          "compile times under the summary:\n" + text)
    env = {"date_utc": "2026-01-02 03:04", "gpu": "H100", "torch": "2.x", "kiln_version": "k"}
    section = tb.perf_section(env, ["train_bench.py"], {"iterations": 30, "warmup": 10,
                                                        "compile_mode": "reduce-overhead",
                                                        "compiled_warmup_min": 10}, rows)
    check("median of 30 timed steps after 10 warm-up steps (torch.compile mode reduce-overhead: "
          "after the steps that compiled and at least 10 more). Command" in section
          and tb.COMPILED_TABLE_HEADER in section, "section with the compiled side")
    section = tb.perf_section(env, ["train_bench.py"], {"iterations": 30, "warmup": 10,
                                                        "compile_mode": "none"}, rows[7:])
    check("after 10 warm-up steps. Command" in section and tb.TABLE_HEADER in section,
          "--compile-mode none: the section and table as before")
    return ("report with torch.compile: 11-column table (n/a, FAIL, '-'), compiled/Kiln >= 1.0 in "
            "the verdict where it ran, summary, compile times, 4 compiled notes, PERF.md run line")
