#!/usr/bin/env python3
"""CPU-only self test of bench/train_bench.py, train_bench_torch.py and caffe_torch_train.py.

    python3 bench/train_bench_selftest.py [--models-dir ../shared/models/caffe] [--kiln PATH]

It checks, without a GPU (needs numpy and torch, e.g. Debian's python3-torch):
* the TRAIN-net builder: the three benchmark prototxts lose their Data and Accuracy layers, take
  data and label as inputs, run a shape-checked step; SoftmaxWithLoss against a numpy cross
  entropy (every normalization, ignore_label, axis, loss_weight), Dropout on in train mode,
  BatchNorm's momentum and the frozen (use_global_stats) case, the errors;
* the training step: one step is exactly Caffe's SGD update (momentum, weight decay) of the
  gradient at the old weights, the loss falls over steps on the fixed batch, fp32 and the mixed
  precision path (bfloat16 autocast on the CPU);
* the compiled step (train_bench_torch.compiled_train_row) through a stand-in torch.compile:
  warm-up until max(warmup, 3) steps compile nothing, compilation time apart, the same first loss
  as eager, the mode passed on; a compiler error and a PyTorch without torch.compile recorded;
* the report: kiln's JSON among log lines, the kiln command, the verdict (time, memory, both,
  missing numbers; compiled/Kiln where the compiled side ran), the table's cells (FAIL, '-', n/a;
  9 columns, 11 with the compiled side), the summary, the notes (kiln's stderr tail, GradScaler,
  leftover memory, torch.compile n/a), the section put between the markers of a copy of
  docs/PERF.md;
* train_bench.py end to end on the CPU (--torch-device cpu) against a stand-in `kiln` that checks
  the exact command-line interface: rows, JSON rewritten after every row, progress lines with ETA
  on stderr, a kiln that fails and one that hangs recorded with their stderr, a PyTorch failure
  recorded, --report-only, the compiled side with a stand-in torch.compile put into the script's
  process, then with this torch's own (1.x: n/a in the row and the table, the run goes on), and
  --compile-mode none; with --kiln PATH, also a real kiln (`--kiln-args "--device cpu"`).
Exits non-zero on the first failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import caffe_torch_train as ctt  # noqa: E402
import train_bench as tb  # noqa: E402
import train_bench_torch as tbt  # noqa: E402

DEFAULT_MODELS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "models", "caffe"))
REPO = os.path.dirname(HERE)
from selftest_checks import check, checks_passed  # noqa: E402
import train_bench_report_selftest as report_selftest  # noqa: E402


# ------------------------------------------------------------------------------------------------
# The TRAIN-net builder
# ------------------------------------------------------------------------------------------------

def test_deploy_to_train(models_dir):
    """deploy_to_train.py on the shared ResNet-18 deploy file: a Data layer for the image and the
    label, SoftmaxWithLoss on the scores in place of the Softmax, BatchNorm on batch statistics;
    the PyTorch side builds it; an existing output is not written over."""
    import deploy_to_train as dtt
    with open(os.path.join(models_dir, "resnet18_deploy.prototxt")) as f:
        text = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "resnet18_train.prototxt")
        with open(path, "w") as f:
            f.write(dtt.convert(text))
        with open(path) as f:
            converted = f.read()
        check("use_global_stats: true" not in converted, "deploy_to_train: global stats kept")
        netdef = ctt.train_netdef(path, {"data": (2, 3, 224, 224), "label": (2,)})
        kinds = [layer.type for layer in netdef.layers]
        check(kinds[-1] == "SoftmaxWithLoss" and "Softmax" not in kinds
              and "Input" not in kinds, "deploy_to_train: layers %s" % kinds[-3:])
        model = ctt.CaffeTrainNet(netdef).train()
        loss = model(torch.zeros(2, 3, 224, 224), torch.zeros(2, dtype=torch.int64))
        check(bool(torch.isfinite(loss)), "deploy_to_train: loss %s" % loss)
        again = subprocess.run([sys.executable, os.path.join(HERE, "deploy_to_train.py"),
                                os.path.join(models_dir, "resnet18_deploy.prototxt"), path],
                               capture_output=True, text=True)
        check(again.returncode != 0 and "exists" in again.stderr,
              "deploy_to_train: refuses to write over %s" % again.stderr.strip())
    return "resnet18_deploy -> train: %d layers, loss %.3f" % (len(kinds), float(loss))

def test_train_nets(models_dir):
    lines = []
    # The shared nets (the public ones are checked through deploy_to_train below).
    for net in ("lenet", "caffenet", "resnet18"):
        name, chw = tb.NETS[net]
        start = time.time()
        prototxt = os.path.join(models_dir, name)
        shapes = tb.data_shapes(prototxt, chw, 2)
        check(shapes == [("data", [2] + list(chw)), ("label", [2])], "%s shapes %s"
              % (net, shapes))
        netdef = ctt.train_netdef(prototxt, dict(shapes))
        kinds = [layer.type for layer in netdef.layers]
        check(netdef.inputs == shapes, "%s: data layer tops are the inputs: %s"
              % (net, netdef.inputs))
        check("Data" not in kinds and "Accuracy" not in kinds
              and kinds[-1] == "SoftmaxWithLoss", "%s: layers %s" % (net, kinds))
        model = ctt.CaffeTrainNet(netdef).train()
        check(model.loss_weights == {"loss": 1.0}, "%s loss weights" % net)
        dropouts = [m for m in model.modules() if isinstance(m, torch.nn.Dropout)]
        check(all(m.training for m in dropouts) and len(dropouts) == (2 if net == "caffenet"
                                                                       else 0),
              "%s: Dropout in train mode" % net)
        bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
        check(len(bns) == (21 if net == "resnet18" else 0)
              and all(m.training and m.affine and abs(m.momentum - 0.1) < 1e-9 for m in bns),
              "%s: BN+Scale fused, train mode, momentum 1 - 0.9: %d" % (net, len(bns)))
        batch = tbt.synthetic_batch(shapes)
        check(batch["label"].dtype == np.int64 and batch["label"].min() >= 0
              and batch["label"].max() < 10, "labels in [0, 10)")
        logits = {}
        last_ip = [s for s in model._steps if s.type == "InnerProduct"][-1]
        last_ip.module.register_forward_hook(lambda m, i, o: logits.setdefault("y", o))
        model.check_shapes = True
        loss = model(torch.from_numpy(batch["data"]), torch.from_numpy(batch["label"]))
        check(loss.dim() == 0 and torch.isfinite(loss).item(), "%s: scalar loss" % net)
        y = logits["y"].detach().double().numpy()
        e = np.exp(y - y.max(axis=1, keepdims=True))
        want = -np.mean(np.log(e[np.arange(2), batch["label"]] / e.sum(axis=1)))
        check(abs(float(loss) - want) < 1e-5 * max(1.0, want), "%s: loss %s vs numpy %s"
              % (net, float(loss), want))
        loss.backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None]
        check(not missing, "%s: parameters without a gradient: %s" % (net, missing))
        lines.append("  %-9s %-28s -> %d steps, %d parameters, loss %.3f (%.1fs)" % (
            net, name, len(model._steps), sum(p.numel() for p in model.parameters()),
            float(loss), time.time() - start))
    return "TRAIN nets (batch 2, shape-checked, loss = numpy cross entropy, all grads):\n" + \
        "\n".join(lines)


LOSS_NET = """
name: "losses"
layer { name: "in" type: "Data" top: "x" top: "lab" include { phase: TRAIN }
        data_param { source: "/nonexistent" batch_size: 3 } }
layer { name: "in" type: "Data" top: "x" top: "lab" include { phase: TEST } }
layer { name: "bn" type: "BatchNorm" bottom: "x" top: "bn"
        batch_norm_param { moving_average_fraction: 0.75 } }
layer { name: "frozen" type: "BatchNorm" bottom: "bn" top: "f"
        batch_norm_param { use_global_stats: true } }
layer { name: "drop" type: "Dropout" bottom: "f" top: "d" dropout_param { dropout_ratio: 0.5 } }
layer { name: "score" type: "Convolution" bottom: "d" top: "score"
        convolution_param { num_output: 5 kernel_size: 1 } }
layer { name: "acc" type: "Accuracy" bottom: "score" bottom: "lab" top: "acc" }
layer { name: "valid" type: "SoftmaxWithLoss" bottom: "score" bottom: "lab" top: "valid"
        loss_param { ignore_label: 2 } }
layer { name: "full" type: "SoftmaxWithLoss" bottom: "score" bottom: "lab" top: "full"
        loss_weight: 2 loss_param { ignore_label: 2 normalization: FULL } }
layer { name: "batch" type: "SoftmaxWithLoss" bottom: "score" bottom: "lab" top: "batch"
        loss_weight: 0.5 loss_param { normalize: false } }
layer { name: "none" type: "SoftmaxWithLoss" bottom: "score" bottom: "lab" top: "none"
        loss_param { normalization: NONE } }
"""


def _nll(score, label, ignore=None):
    """Per-position negative log-probability (numpy), axis 1 the classes; None where ignored."""
    s = score.astype(np.float64)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    n, _, h, w = s.shape
    out = []
    for i in range(n):
        for y in range(h):
            for x in range(w):
                k = int(label[i, y, x])
                out.append(None if k == ignore else -np.log(p[i, k, y, x]))
    return out


def test_loss_semantics():
    shapes = {"x": (3, 4, 2, 2), "lab": (3, 2, 2)}
    netdef = ctt.train_netdef(LOSS_NET, shapes)
    check([n for n, _ in netdef.inputs] == ["x", "lab"]
          and "Accuracy" not in [layer.type for layer in netdef.layers], "inputs, no Accuracy")
    net = ctt.CaffeTrainNet(netdef).train()
    check(net.loss_weights == {"valid": 1.0, "full": 2.0, "batch": 0.5, "none": 1.0},
          "loss_weight defaults and given: %s" % net.loss_weights)
    bn, frozen = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    check(abs(bn.momentum - 0.25) < 1e-12 and bn.training, "momentum = 1 - fraction")
    check(net.frozen_batchnorm == ["frozen"] and not frozen.training,
          "use_global_stats: true stays in eval mode after train()")
    rng = np.random.default_rng(7)
    x = torch.from_numpy(rng.standard_normal(shapes["x"], dtype=np.float32))
    lab = torch.from_numpy(rng.integers(0, 5, shapes["lab"]).astype(np.float32))  # Caffe: float
    lab[0, 0, 0] = 2  # at least one ignored position
    scores = {}
    net.layers["score"].register_forward_hook(lambda m, i, o: scores.__setitem__("s", o))
    outputs = ctt.ct.CaffeNet.forward(net, x, lab)  # every loss top, before the weighting
    s = scores["s"].detach().numpy()
    with_ignore = _nll(s, lab.numpy(), ignore=2)
    every = _nll(s, lab.numpy())
    kept = [v for v in with_ignore if v is not None]
    want = {"valid": sum(kept) / len(kept), "full": sum(kept) / len(with_ignore),
            "batch": sum(every) / 3, "none": sum(every)}
    got = dict(zip(net.output_names, [float(t) for t in outputs]))
    for name, value in want.items():
        check(abs(got[name] - value) < 1e-5 * max(1.0, value), "%s: %s vs numpy %s"
              % (name, got[name], value))
    drop = net.layers["drop"]
    check(drop.training, "Dropout in train mode")
    probe = torch.ones(1000)
    check(0.3 < float((drop(probe) == 0).float().mean()) < 0.7, "Dropout drops about half")
    net.eval()
    total = float(net(x, lab))
    net.train()
    check(not frozen.training, "train() keeps the frozen BatchNorm in eval")
    # eval: Dropout off; BatchNorm uses its running averages (updated once above, fraction 0.75).
    outputs = ctt.ct.CaffeNet.forward(net.eval(), x, lab)
    check(abs(total - sum(net.loss_weights[n] * float(t) for n, t in
                          zip(net.output_names, outputs))) < 1e-5,
          "forward is the sum of loss_weight x loss")
    for text, error in (("layer { name: 'd' type: 'Data' top: 'data' top: 'label' }\n"
                         "layer { name: 'l' type: 'SoftmaxWithLoss' bottom: 'data' "
                         "bottom: 'label' top: 'l' }", "top 'label' needs a shape"),
                        ("layer { name: 'd' type: 'Data' top: 'data' }\n"
                         "layer { name: 'l' type: 'EuclideanLoss' bottom: 'data' "
                         "bottom: 'data' top: 'l' loss_weight: 1 }", "'EuclideanLoss'"),
                        ("layer { name: 'd' type: 'Data' top: 'data' }\n"
                         "layer { name: 'r' type: 'ReLU' bottom: 'data' top: 'r' }",
                         "has no loss")):
        try:
            ctt.CaffeTrainNet(ctt.train_netdef(text, {"data": (2, 3)}))
        except (ValueError, NotImplementedError) as e:
            check(error in str(e), "error %r lacks %r" % (str(e), error))
        else:
            raise AssertionError("accepted: %s" % text)
    return ("SoftmaxWithLoss vs numpy (VALID with ignore_label, FULL, BATCH_SIZE via normalize: "
            "false, NONE, spatial, float labels), loss_weight sum, BN momentum, frozen BN, "
            "Dropout, 3 errors")


# ------------------------------------------------------------------------------------------------
# The training step
# ------------------------------------------------------------------------------------------------

def test_train_step(models_dir):
    prototxt = os.path.join(models_dir, "lenet_train_test.prototxt")
    shapes = tb.data_shapes(prototxt, (1, 28, 28), 4)
    net, optimizer, inputs, scaler = tbt.build(prototxt, shapes, "fp32", "cpu")
    check(scaler is None and optimizer.defaults["lr"] == 0.01
          and optimizer.defaults["momentum"] == 0.9
          and optimizer.defaults["weight_decay"] == 5e-4, "SGD settings %s" % optimizer.defaults)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    step = tbt.make_step(net, optimizer, inputs, "fp32", "cpu")
    step()
    after = {n: p.detach().clone() for n, p in net.named_parameters()}
    # The gradient at the old weights, on a copy: Caffe's first update is lr * (g + wd * w).
    with torch.no_grad():
        for n, p in net.named_parameters():
            p.copy_(before[n])
    net.zero_grad(set_to_none=True)
    net(*inputs).backward()
    worst = 0.0
    for n, p in net.named_parameters():
        want = before[n] - 0.01 * (p.grad + 5e-4 * before[n])
        worst = max(worst, float((after[n] - want).abs().max()))
    check(worst < 1e-6, "one step = w - lr (g + wd w): max error %g" % worst)
    check(any(p.grad is not None for p in net.parameters()), "grads kept until the next step")
    step()
    check(all(p.grad is not None for p in net.parameters()), "zero_grad(set_to_none) then grads")
    results = {}
    for precision in ("fp32", "fp16"):
        r = tbt.torch_train_row(prototxt, shapes, precision, 5, 3, "cpu")
        check(r["torch_step_ms"] > 0 and r["torch_params"] == 431080
              and r["torch_images_per_s"] == 4000.0 / r["torch_step_ms"], "%s row %s"
              % (precision, r))
        check(r["torch_loss_last"] < r["torch_loss_first"], "%s: loss falls on a fixed batch: %s"
              % (precision, r))
        check("allow_tf32=False" in r["torch_settings"] or "ieee" in r["torch_settings"],
              "TF32 off: %s" % r["torch_settings"])
        results[precision] = r
    check("bfloat16" in results["fp16"]["torch_settings"], "CPU dry run of the fp16 path")
    try:
        tbt.torch_train_row(prototxt, shapes, "bf16", 1, 1, "cpu")
    except ValueError as e:
        check("fp32, fp16" in str(e), "unknown precision message")
    return ("training step: one step = Caffe's SGD update (max error %.1e), loss falls over 8 "
            "steps (fp32 %.3f -> %.3f, fp16 path %.3f -> %.3f)" % (
                worst, results["fp32"]["torch_loss_first"], results["fp32"]["torch_loss_last"],
                results["fp16"]["torch_loss_first"], results["fp16"]["torch_loss_last"]))


class FakeCompiler:
    """torch.compile's stand-in for the training step (PyTorch 1.x has none, and a real one on
    the CPU takes minutes): the first call of a compiled module 'compiles' (sleeps), calls listed
    in recompile_at compile again, fail raises there; the module's loss and its autograd graph
    pass through untouched. graph_count() counts compilations, as Dynamo's unique_graphs does."""

    def __init__(self, delay=0.05, recompile_at=(), fail=None):
        self.delay, self.recompile_at, self.fail = delay, recompile_at, fail
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
            return module(*inputs)
        return compiled

    def graph_count(self):
        return self.graphs


def test_compiled_step(models_dir):
    prototxt = os.path.join(models_dir, "lenet_train_test.prototxt")
    shapes = tb.data_shapes(prototxt, (1, 28, 28), 4)
    eager = tbt.torch_train_row(prototxt, shapes, "fp32", 3, 2, "cpu")
    fake = FakeCompiler(delay=0.2, recompile_at=(2,))
    r = tbt.compiled_train_row(prototxt, shapes, "fp32", 3, 2, "cpu", "default",
                               compile_fn=fake, graph_count=fake.graph_count)
    check("compiled_error" not in r, "fake compile failed: %s" % r.get("compiled_traceback"))
    check(fake.modes == [None] and r["compiled_mode"] == "default",
          "mode default is torch.compile's default: %s" % fake.modes)
    # Step 1 compiles, step 2 compiles again, then max(warmup 2, 3) = 3 quiet steps.
    check(r["compiled_compiling_steps"] == 2 and r["compiled_warmup_steps"] == 5
          and r["compiled_settled"] and r["compiled_compile_s"] >= 0.4
          and 0.2 <= r["compiled_first_step_s"] <= r["compiled_compile_s"],
          "warm-up until 3 steps compiled nothing, compilation time apart: %s" % r)
    check(0 < r["compiled_step_ms"] < 200 and r["compiled_min_ms"] <= r["compiled_step_ms"]
          and r["compiled_images_per_s"] == 4000.0 / r["compiled_step_ms"]
          and fake.calls == 5 + 3, "timed steps exclude compilation: %s" % r)
    check(r["compiled_loss_first"] == eager["torch_loss_first"]
          and r["compiled_loss_last"] < r["compiled_loss_first"],
          "same net, weights and batch as eager; the loss falls: %s" % r)
    check("compiled_note" not in r and "compiled_graphs" not in r,
          "no Dynamo counters read with a stand-in compiler")

    fake = FakeCompiler()
    r16 = tbt.compiled_train_row(prototxt, shapes, "fp16", 3, 1, "cpu", "reduce-overhead",
                                 compile_fn=fake, graph_count=fake.graph_count)
    check("compiled_error" not in r16 and fake.modes == ["reduce-overhead"]
          and r16["compiled_warmup_steps"] == 4 and r16["compiled_step_ms"] > 0,
          "fp16 path (bfloat16 autocast on the CPU), mode passed on: %s %s" % (fake.modes, r16))

    fake = FakeCompiler(fail="BackendCompilerFailed: backend='inductor' raised:\n"
                             "RuntimeError: Cannot find a working triton installation.")
    bad = tbt.compiled_train_row(prototxt, shapes, "fp32", 3, 2, "cpu",
                                 "max-autotune-no-cudagraphs", compile_fn=fake)
    check(bad["compiled_error"] == "RuntimeError: BackendCompilerFailed: backend='inductor' "
          "raised: RuntimeError: Cannot find a working triton installation."
          and "Traceback" in bad["compiled_traceback"] and "compiled_step_ms" not in bad
          and bad["compiled_mode"] == "max-autotune-no-cudagraphs",
          "compiler error recorded, not raised: %s" % bad)

    saved = getattr(torch, "compile", None)
    torch.compile = None  # PyTorch 1.x has none; this machine may have either
    try:
        missing = tbt.compiled_train_row(prototxt, shapes, "fp32", 3, 2, "cpu")
    finally:
        if saved is None:
            del torch.compile
        else:
            torch.compile = saved
    check(missing == {"compiled_mode": "default", "compiled_error": "torch.compile unavailable "
                      "(PyTorch %s)" % torch.__version__}, "no torch.compile: %s" % missing)
    return ("compiled step (stand-in compiler): warm-up until max(warmup, 3) steps compile "
            "nothing (5 steps, 2 compiling, %.1fs apart), same first loss as eager (%.3f), fp16 "
            "path, mode passed on; compiler error and missing torch.compile recorded (torch %s "
            "has torch.compile: %s)" % (r["compiled_compile_s"], r["compiled_loss_first"],
                                        torch.__version__, saved is not None))


# ------------------------------------------------------------------------------------------------
# train_bench.py end to end, CPU, with a stand-in kiln
# ------------------------------------------------------------------------------------------------

FAKE_KILN = r'''#!%(python)s
# A stand-in for `kiln time --train ... --json` that insists on the interface train_bench.py was
# written against, logs how many rows OUT/train_bench.json held when it was called, and fails
# (caffenet fp32), hangs (caffenet fp16) or answers with log lines around its JSON.
import json, os, sys, time
args = sys.argv[1:]
if args == ["version"]:
    print("kiln fake 1.0"); sys.exit(0)
def fail(message):
    sys.exit("fake kiln: " + message)
if args[:1] != ["time"] or args[-1] != "--json" or "--train" not in args:
    fail("want time ... --train ... --json, got %%s" %% args)
rest = [a for a in args[1:-1] if a != "--train"]
flags = {}
for key, value in zip(rest[::2], rest[1::2]):
    if not key.startswith("--"):
        fail("odd arguments %%s" %% rest)
    flags.setdefault(key[2:], []).append(value)
if sorted(flags) != ["algo", "input-shape", "iterations", "model", "precision", "tuning-file"]:
    fail("flags %%s" %% sorted(flags))
shapes = dict(s.split("=") for s in flags["input-shape"])
data = [int(d) for d in shapes["data"].split(",")]
if len(data) != 4 or shapes["label"] != str(data[0]) or not os.path.isfile(flags["model"][0]):
    fail("input shapes %%s" %% shapes)
if flags["precision"][0] not in ("fp32", "fp16") or flags["iterations"] != ["3"]:
    fail("precision/iterations %%s" %% flags)
out = os.environ["FAKE_KILN_OUT"]
rows = 0
if os.path.exists(os.path.join(out, "train_bench.json")):
    rows = len(json.load(open(os.path.join(out, "train_bench.json")))["rows"])
with open(os.environ["FAKE_KILN_LOG"], "a") as f:
    f.write("%%d %%s %%s\n" %% (rows, os.path.basename(flags["model"][0]), flags["precision"][0]))
if "caffenet" in flags["model"][0]:
    if flags["precision"][0] == "fp32":
        sys.stderr.write("kiln time: compiling...\nkiln time: train: CUDA error: out of memory "
                         "(cudaMalloc of 4 GiB)\n")
        sys.exit(3)
    sys.stderr.write("kiln time: measuring algorithms...\n"); sys.stderr.flush()
    time.sleep(60)
print("kiln time: compiling the training plan")
print(json.dumps({"train_step_ms": 0.25 if flags["precision"][0] == "fp16" else 0.5,
                  "images_per_second": data[0] / 0.5e-3, "memory": {
                      "weights_bytes": 1, "optimizer_bytes": 2, "activations_bytes": 3,
                      "workspace_bytes": 4, "total_bytes": 3 << 20},
                  "backend": "cuda", "precision": flags["precision"][0],
                  "layers": [{"name": "conv1"}]}, indent=1))
print("kiln time: done")
'''


FAKE_COMPILE_RUNNER = r'''
# train_bench.py with a stand-in torch.compile put into its process (torch 1.x has none; a real
# one on the CPU takes minutes): it logs each compile's mode, and the first step of a compiled
# module 'compiles' (sleeps); the loss and its autograd graph pass through.
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
        return module(*inputs)
    return compiled

torch.compile = fake_compile
sys.argv = [%(script)r] + sys.argv[1:]
runpy.run_path(%(script)r, run_name="__main__")
'''


def _run(args, env=None, timeout=600, runner=None):
    """train_bench.py ARGS in a new process; through `runner` (FAKE_COMPILE_RUNNER) if given."""
    script = runner or os.path.join(HERE, "train_bench.py")
    return subprocess.run([sys.executable, script] + args,
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_driver(models_dir):
    with tempfile.TemporaryDirectory() as tmp:
        kiln = os.path.join(tmp, "kiln")
        with open(kiln, "w") as f:
            f.write(FAKE_KILN % {"python": sys.executable})
        os.chmod(kiln, 0o755)
        runner = os.path.join(tmp, "run_with_fake_compile.py")
        with open(runner, "w") as f:
            f.write(FAKE_COMPILE_RUNNER % {"script": os.path.join(HERE, "train_bench.py")})
        compile_log = os.path.join(tmp, "compiles.txt")
        out, log = os.path.join(tmp, "out"), os.path.join(tmp, "kiln_calls.txt")
        perf = os.path.join(tmp, "PERF.md")
        with open(perf, "w") as f:
            f.write("# Perf\n\nbefore\n\n%s\nNot run yet.\n%s\n\nafter\n"
                    % (tb.BEGIN_MARK, tb.END_MARK))
        env = dict(os.environ, FAKE_KILN_OUT=out, FAKE_KILN_LOG=log,
                   FAKE_COMPILE_LOG=compile_log)
        args = ["--kiln", kiln, "--models-dir", models_dir, "--out", out,
                "--rows", "lenet:4,caffenet:2", "--precisions", "fp32,fp16",
                "--iterations", "3", "--warmup", "2", "--torch-device", "cpu",
                "--kiln-args", "--algo measure --tuning-file '%s'" % os.path.join(tmp, "t t.txt"),
                "--timeout", "3", "--heartbeat", "0", "--perf-md", perf]
        start = time.time()
        p = _run(args + ["--compile-mode", "reduce-overhead"], env, runner=runner)
        seconds = time.time() - start
        check(p.returncode == 0, "train_bench dry run failed:\n%s\n%s" % (p.stdout, p.stderr))
        calls = open(log).read().split("\n")[:-1]
        check(calls == ["0 lenet_train_test.prototxt fp32", "1 lenet_train_test.prototxt fp16",
                        "2 caffenet_train_val.prototxt fp32",
                        "3 caffenet_train_val.prototxt fp16"],
              "one kiln call per row, train_bench.json rewritten after every row: %s" % calls)
        with open(os.path.join(out, "train_bench.json")) as f:
            data = json.load(f)
        rows = data["rows"]
        check([(r["net"], r["batch"], r["precision"]) for r in rows]
              == [("lenet", 4, "fp32"), ("lenet", 4, "fp16"), ("caffenet", 2, "fp32"),
                  ("caffenet", 2, "fp16")], "row order")
        for r in rows[:2]:
            check(r["kiln_step_ms"] == (0.5 if r["precision"] == "fp32" else 0.25)
                  and r["kiln_total_bytes"] == 3 << 20 and r["kiln_backend"] == "cuda"
                  and r["kiln_memory"]["optimizer_bytes"] == 2 and "kiln_error" not in r
                  and "kiln_note" not in r, "kiln's JSON parsed: %s" % r)
            check(r["torch_step_ms"] > 0 and r["torch_loss_last"] < r["torch_loss_first"]
                  and "torch_error" not in r, "PyTorch step: %s" % r)
            check(r["inputs"] == {"data": [4, 1, 28, 28], "label": [4]}, "inputs %s"
                  % r["inputs"])
        for r in rows:
            # No graph counter (1.x) or Dynamo's that a stand-in never moves: the first step
            # compiles, then max(--warmup 2, 3) steps.
            check(r["compiled_mode"] == "reduce-overhead" and r["compiled_step_ms"] > 0
                  and r["compiled_compile_s"] >= 0.05 and r["compiled_warmup_steps"] == 4
                  and r["compiled_loss_last"] < r["compiled_loss_first"]
                  and "compiled_error" not in r, "compiled side: %s" % {
                      k: v for k, v in r.items() if k.startswith("compiled")})
        with open(compile_log) as f:
            check(f.read().split() == ["reduce-overhead"] * 4, "one compile per row, mode passed")
        check(data["settings"]["compile_mode"] == "reduce-overhead"
              and data["settings"]["compiled_warmup_min"] == 3, "settings %s" % data["settings"])
        check(rows[2]["kiln_error"] == "rc 3" and "out of memory" in rows[2]["kiln_stderr_tail"]
              and rows[2]["torch_step_ms"] > 0, "failing kiln recorded, PyTorch still ran")
        check(rows[3]["kiln_error"] == "rc 124" and "measuring algorithms" in
              rows[3]["kiln_stderr_tail"] and "timed out after 3" in rows[3]["kiln_stderr_tail"],
              "hanging kiln recorded with its stderr: %s" % rows[3].get("kiln_stderr_tail"))
        check("--tuning-file" in rows[0]["kiln_cmd"] and "'" in rows[0]["kiln_cmd"],
              "--kiln-args passed on, quoted: %s" % rows[0]["kiln_cmd"])
        check(data["settings"]["iterations"] == 3 and data["environment"]["kiln_version"]
              == "kiln fake 1.0", "settings and environment")
        err = p.stderr
        check("row 2/4 lenet b4 fp16 (1/4 rows done): kiln time --train --precision fp16 [ETA "
              in err and "row 1/4 lenet b4 fp32 (0/4 rows done): kiln time --train --precision "
              "fp32 [ETA ?]" in err and "4/4 rows done in" in err
              and "kiln failed (rc 3): kiln time: train: CUDA error: out of memory" in err
              and "row 1/4 lenet b4 fp32 (0/4 rows done): torch.compile (mode reduce-overhead) "
              "train step [ETA" in err and "torch.compile mode reduce-overhead; 4 rows" in err,
              "progress lines on stderr:\n" + err)
        check(tb.COMPILED_TABLE_HEADER in p.stdout and "[ETA" not in p.stdout,
              "table on stdout only")
        md = open(os.path.join(out, "train_bench.md")).read()
        text = open(perf).read()
        check(md.strip() in text and text.startswith("# Perf\n\nbefore\n\n" + tb.BEGIN_MARK)
              and text.endswith(tb.END_MARK + "\n\nafter\n") and "Not run yet" not in text,
              "--perf-md section replaced:\n" + text)
        check("| caffenet | 2 | fp32 | FAIL |" in md and "| lenet | 4 | fp16 | 0.250 |" in md
              and "timed out after 3" in md and "- torch.compile (mode reduce-overhead) "
              "compilation" in md and "(torch.compile mode reduce-overhead: after the steps "
              "that compiled and at least 3 more)" in text, "markdown:\n" + md)

        # --report-only: the same section again from train_bench.json.
        perf2 = os.path.join(tmp, "PERF2.md")
        shutil.copy(os.path.join(REPO, "docs", "PERF.md"), perf2)
        p2 = _run(["--out", out, "--report-only", "--perf-md", perf2])
        check(p2.returncode == 0, "--report-only failed:\n" + p2.stderr)
        section = text[text.index(tb.BEGIN_MARK):text.index(tb.END_MARK)]
        text2 = open(perf2).read()
        check(text2[text2.index(tb.BEGIN_MARK):text2.index(tb.END_MARK)] == section,
              "--report-only writes the same section with the run's command")

        # A PyTorch failure (an unsupported layer) is recorded; kiln's numbers stay.
        broken = os.path.join(tmp, "models")
        os.makedirs(broken)
        text = open(os.path.join(models_dir, "resnet18_train.prototxt")).read()
        text = text.replace('type: "Pooling"', 'type: "SPP"', 1)
        with open(os.path.join(broken, "resnet18_train.prototxt"), "w") as f:
            f.write(text)
        out3 = os.path.join(tmp, "out3")
        env["FAKE_KILN_OUT"] = out3
        args3 = args[:]
        for flag, value in (("--models-dir", broken), ("--out", out3), ("--rows", "resnet18:2"),
                            ("--precisions", "fp32")):
            args3[args3.index(flag) + 1] = value
        args3 = args3[:args3.index("--perf-md")]
        p3 = _run(args3, env)
        check(p3.returncode == 0, "run with a failing PyTorch side crashed:\n" + p3.stderr)
        with open(os.path.join(out3, "train_bench.json")) as f:
            row = json.load(f)["rows"][0]
        check("'SPP' is not supported" in row.get("torch_error", "")
              and "Traceback" in row["torch_traceback"] and row["kiln_step_ms"] == 0.5,
              "PyTorch failure recorded: %s" % row.get("torch_error"))
        check(row["compiled_mode"] == "default"
              and row["compiled_error"] == "not run (PyTorch eager failed)",
              "compiled side not run after eager failed: %s" % row.get("compiled_error"))
        check("PyTorch failed: NotImplementedError" in p3.stdout, "failure under the table")

        # This process's own torch (1.x: no torch.compile; 2.x: a real compile on the CPU, which
        # may work or fail): recorded, never fatal, eager and kiln kept.
        out4 = os.path.join(tmp, "out4")
        env["FAKE_KILN_OUT"] = out4
        args4 = args[:args.index("--perf-md")]
        for flag, value in (("--out", out4), ("--rows", "lenet:4"), ("--precisions", "fp32")):
            args4[args4.index(flag) + 1] = value
        p4 = _run(args4, env)
        check(p4.returncode == 0, "run with this torch's torch.compile crashed:\n" + p4.stderr)
        with open(os.path.join(out4, "train_bench.json")) as f:
            row = json.load(f)["rows"][0]
        check(row["compiled_mode"] == "default" and row["torch_step_ms"] > 0
              and row["kiln_step_ms"] == 0.5, "default mode, other sides kept: %s" % row)
        if getattr(torch, "compile", None) is None:
            check(row["compiled_error"] == "torch.compile unavailable (PyTorch %s)"
                  % torch.__version__ and "compiled_step_ms" not in row
                  and "| lenet | 4 | fp32 | 0.500 |" in p4.stdout and " | n/a | - | " in p4.stdout
                  and "torch.compile (mode default) n/a: torch.compile unavailable" in p4.stdout
                  and "torch.compile n/a: torch.compile unavailable" in p4.stderr,
                  "no torch.compile: n/a in the row, the table and the notes:\n" + p4.stdout)
            verdict = "n/a (torch %s has no torch.compile)" % torch.__version__
        else:
            check("compiled_step_ms" in row or "compiled_error" in row, "real torch.compile")
            verdict = "real torch.compile: %s" % (row.get("compiled_error") or "%.2f ms"
                                                  % row["compiled_step_ms"])

        # --compile-mode none: no compiled side, the 9-column table as before.
        p5 = _run(args4 + ["--compile-mode", "none"], env)
        check(p5.returncode == 0, "--compile-mode none failed:\n" + p5.stderr)
        with open(os.path.join(out4, "train_bench.json")) as f:
            data5 = json.load(f)
        check(not [k for k in data5["rows"][0] if k.startswith("compiled")]
              and data5["settings"]["compile_mode"] == "none"
              and tb.TABLE_HEADER in p5.stdout and "compiled" not in p5.stdout
              and "torch.compile skipped" in p5.stderr, "--compile-mode none:\n" + p5.stdout)
        bad = _run(args4 + ["--compile-mode", "fast"], env)
        check(bad.returncode == 2 and "invalid choice: 'fast'" in bad.stderr,
              "unknown --compile-mode refused: %s" % bad.stderr)
    return ("train_bench.py dry runs (CPU, stand-in kiln and torch.compile %.0fs; this torch's "
            "torch.compile: %s; --compile-mode none):\n  %s" % (
                seconds, verdict, "\n  ".join(md.strip().splitlines())))


def test_real_kiln(models_dir, kiln):
    """train_bench.py with a real kiln binary on the CPU (lenet only): kiln's JSON parses."""
    with tempfile.TemporaryDirectory() as tmp:
        p = _run(["--kiln", kiln, "--models-dir", models_dir, "--out", tmp, "--rows", "lenet:2",
                  "--precisions", "fp32", "--iterations", "2", "--warmup", "1",
                  "--torch-device", "cpu", "--kiln-args", "--device cpu", "--heartbeat", "0"],
                 timeout=900)
        check(p.returncode == 0, "train_bench with %s failed:\n%s" % (kiln, p.stderr))
        with open(os.path.join(tmp, "train_bench.json")) as f:
            row = json.load(f)["rows"][0]
        check(row.get("kiln_step_ms") and row.get("kiln_total_bytes"),
              "real kiln's row: %s" % {k: v for k, v in row.items() if k.startswith("kiln")})
    return "real kiln on the CPU: lenet b2 step %.2f ms, %.1f MiB" % (
        row["kiln_step_ms"], row["kiln_total_bytes"] / 2.0 ** 20)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", default=DEFAULT_MODELS)
    parser.add_argument("--kiln", help="also run train_bench.py on the CPU with this kiln")
    args = parser.parse_args()
    torch.manual_seed(0)
    start = time.time()
    steps = [("train nets", lambda: test_train_nets(args.models_dir)),
             ("deploy to train", lambda: test_deploy_to_train(args.models_dir)),
             ("loss semantics", test_loss_semantics),
             ("train step", lambda: test_train_step(args.models_dir)),
             ("compiled step", lambda: test_compiled_step(args.models_dir)),
             ("report", report_selftest.test_report),
             ("report with torch.compile", report_selftest.test_report_compiled),
             ("driver", lambda: test_driver(args.models_dir))]
    if args.kiln:
        steps.append(("real kiln", lambda: test_real_kiln(args.models_dir,
                                                          os.path.abspath(args.kiln))))
    for _, fn in steps:
        t = time.time()
        summary = fn()
        print("ok  %s [%.1fs]" % (summary, time.time() - t), flush=True)
    print("train_bench_selftest: all %d checks passed in %.1fs (torch %s, numpy %s)"
          % (checks_passed(), time.time() - start, torch.__version__, np.__version__), flush=True)


if __name__ == "__main__":
    main()
