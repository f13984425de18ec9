"""The PyTorch side of bench/train_bench.py: one training step of a Caffe TRAIN net, eager and
under torch.compile.

`torch_train_row` builds the net with caffe_torch_train, on synthetic data (N(0,1) images,
integer labels in [0, 10)), and times the step a PyTorch user writes:

    optimizer.zero_grad(set_to_none=True)
    loss = net(images, labels)             # fp16: under torch.autocast(float16)
    loss.backward()                        # fp16: scaler.scale(loss).backward()
    optimizer.step()                       # fp16: scaler.step(optimizer); scaler.update()

with torch.optim.SGD(lr=0.01, momentum=0.9, weight_decay=5e-4) (Caffe's solver settings for
these nets). fp32: TF32 off. fp16: mixed precision, the model's weights stay f32 (the master
copy), activations f16 under autocast, a GradScaler, channels_last model and input.
cudnn.benchmark on. Median of per-step CUDA-event times after the warm-up steps; peak memory is
torch.cuda.max_memory_allocated() over the timed steps, with the stats reset after the warm-up
(weights, gradients, momentum and inputs are resident then and count; nothing is subtracted).

`compiled_train_row` times the same step with the module under `torch.compile(net, mode=...)`
(Dynamo + Inductor compile the forward and, through AOTAutograd, the backward); zero_grad, the
GradScaler and the SGD step stay eager as above, so the two sides differ only in the module. The
first steps compile: they run in the warm-up, which goes on until max(warmup, 3) steps in a row
compiled nothing new, and their wall time is reported apart (compiled_compile_s,
compiled_first_step_s). A failure there (no torch.compile as in PyTorch 1.x, no Triton or C++
compiler, a compiler error, out of memory) is compiled_error, never an exception.
"""

import gc
import os
import sys
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import caffe_torch_train as ctt  # noqa: E402  (the path must be set first)
import graph_bench_torch as gbt  # noqa: E402
from graph_bench_torch import cpu_median_ms, cuda_median_ms, set_torch_precision  # noqa: E402

SOLVER = {"lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4}
LABEL_CLASSES = 10
DATA_SEED = 12345
PRECISIONS = ("fp32", "fp16")
# torch.compile's first steps are slow (Dynamo traces, Inductor generates and autotunes code, the
# backward compiles at the first backward, reduce-overhead records its CUDA graphs on the 2nd-3rd
# call): the compiled side's warm-up is never shorter than this many steps after compilation.
MIN_COMPILED_WARMUP = 3


def synthetic_batch(shapes, seed=DATA_SEED):
    """{top: numpy array}: N(0,1) float32 for the image top (the first), integer labels in
    [0, LABEL_CLASSES) for every other top of the data layer."""
    rng = np.random.default_rng(seed)
    batch = {}
    for i, (name, shape) in enumerate(shapes):
        if i == 0:
            batch[name] = rng.standard_normal(shape, dtype=np.float32)
        else:
            batch[name] = rng.integers(0, LABEL_CLASSES, size=shape, dtype=np.int64)
    return batch


def make_scaler(device):
    """The GradScaler of mixed precision; on the CPU (dry runs) a disabled one, which passes
    scale/step/update through."""
    enabled = device == "cuda"
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        return amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def make_step(net, optimizer, inputs, precision, device, scaler=None, keep=None):
    """The training step as a closure; keep["loss"] gets each step's (detached) loss."""
    if precision == "fp32":
        def step():
            optimizer.zero_grad(set_to_none=True)
            loss = net(*inputs)
            loss.backward()
            optimizer.step()
            if keep is not None:
                keep["loss"] = loss.detach()
        return step
    # CPU autocast has no float16 kernels: dry runs use bfloat16 for the same code path.
    dtype = torch.float16 if device == "cuda" else torch.bfloat16

    def amp_step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=dtype):
            loss = net(*inputs)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if keep is not None:
            keep["loss"] = loss.detach()
    return amp_step


def build(prototxt, shapes, precision, device, seed=1):
    """(net, optimizer, inputs, scaler) on the device, ready for make_step."""
    if precision not in PRECISIONS:
        raise ValueError("precision %s: one of %s" % (precision, ", ".join(PRECISIONS)))
    torch.manual_seed(seed)
    netdef = ctt.train_netdef(prototxt, dict(shapes))
    net = ctt.CaffeTrainNet(netdef).train()
    batch = synthetic_batch(shapes)
    inputs = [torch.from_numpy(batch[name]) for name, _ in netdef.inputs]
    net = net.to(device)
    inputs = [x.to(device) for x in inputs]
    if precision == "fp16":
        net = net.to(memory_format=torch.channels_last)
        inputs = [x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
                  for x in inputs]
    optimizer = torch.optim.SGD(net.parameters(), **SOLVER)
    scaler = make_scaler(device) if precision == "fp16" else None
    return net, optimizer, inputs, scaler


def torch_train_row(prototxt, shapes, precision, iterations, warmup, device="cuda"):
    """Time one training step of the net; returns the row's torch_* values.

    ``shapes`` is [(top, shape)] of the data layer's tops, image first. Everything this function
    puts on the device is freed when it returns (the caller runs gc and empties the cache).
    """
    cuda = device == "cuda"
    result = {"torch_settings": set_torch_precision("fp32")}  # TF32 off for both precisions
    if cuda:
        gc.collect()
        torch.cuda.empty_cache()
        # Should be 0: what an earlier row left is not this row's, and is not subtracted.
        result["torch_leftover_bytes"] = torch.cuda.memory_allocated()
    net, optimizer, inputs, scaler = build(prototxt, shapes, precision, device)
    keep = {}
    step = make_step(net, optimizer, inputs, precision, device, scaler, keep)
    result["torch_params"] = int(sum(p.numel() for p in net.parameters()))
    if precision == "fp16":
        result["torch_settings"] += (", autocast float16 + GradScaler, f32 weights, channels_last"
                                     if cuda else ", CPU dry run: autocast bfloat16, no scaler")

    # The first step runs with per-blob shape checks against Caffe's rules.
    net.check_shapes = True
    step()
    net.check_shapes = False
    result["torch_loss_first"] = float(keep["loss"])
    for _ in range(max(0, warmup - 1)):
        step()
    time_steps(result, "torch_", step, iterations, cuda, scaler, keep, shapes[0][1][0])
    return result


def time_steps(result, prefix, step, iterations, cuda, scaler, keep, batch):
    """The timed part, after the warm-up, for either side (`prefix` "torch_" or "compiled_"):
    the median step, peak and resident memory, the last loss, the GradScaler's scale before and
    after, images/s."""
    if scaler is not None and scaler.is_enabled():
        result[prefix + "amp_scale_before"] = float(scaler.get_scale())
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        result[prefix + "resident_bytes"] = torch.cuda.memory_allocated()
        result[prefix + "step_ms"], result[prefix + "min_ms"] = cuda_median_ms(step, iterations)
        result[prefix + "peak_bytes"] = torch.cuda.max_memory_allocated()
    else:
        result[prefix + "step_ms"], result[prefix + "min_ms"] = cpu_median_ms(step, iterations)
    result[prefix + "loss_last"] = float(keep["loss"])
    if scaler is not None and scaler.is_enabled():
        # A scale that fell during the timed steps means some of them skipped the update.
        result[prefix + "amp_scale_after"] = float(scaler.get_scale())
    result[prefix + "images_per_s"] = batch * 1000.0 / result[prefix + "step_ms"]


def compiled_train_row(prototxt, shapes, precision, iterations, warmup, device="cuda",
                       mode="default", compile_fn=None, graph_count=None, max_extra_steps=20):
    """Time the training step with the module under torch.compile; returns the row's compiled_*
    values. Never raises: a failure is compiled_error (its first line) and compiled_traceback,
    without timings.

    mode "default" calls torch.compile(net) (no mode argument), any other mode is passed on.
    compile_fn and graph_count stand in for torch.compile and Dynamo's graph counter (the CPU
    self test has neither in PyTorch 1.x). Like torch_train_row, everything this puts on the
    device is freed when it returns; Dynamo is reset before and after, since CaffeNet.forward is
    one code object for every net and Dynamo gives up compiling it after a few versions.
    """
    result = {"compiled_mode": mode or "default"}
    fn = compile_fn if compile_fn is not None else getattr(torch, "compile", None)
    if fn is None:
        result["compiled_error"] = "torch.compile unavailable (PyTorch %s)" % torch.__version__
        return result
    if graph_count is None:
        def graph_count():
            counts = gbt.dynamo_counts()
            return None if counts is None else counts["graphs"]
    cuda = device == "cuda"
    gbt.reset_dynamo()
    before = gbt.dynamo_counts()
    try:
        _time_compiled(result, fn, graph_count, prototxt, shapes, precision, iterations, warmup,
                       device, mode, max_extra_steps)
        notes = []
        after = gbt.dynamo_counts()
        if before is not None and after is not None and compile_fn is None:
            result["compiled_graphs"] = after["graphs"] - before["graphs"]
            result["compiled_graph_breaks"] = after["graph_breaks"] - before["graph_breaks"]
            result["compiled_cache_hits"] = (after["fxgraph_cache_hits"]
                                             - before["fxgraph_cache_hits"])
            if result["compiled_graphs"] == 0:
                notes.append("Dynamo compiled no graph: the column timed eager code")
            elif result["compiled_graph_breaks"]:
                notes.append("%d graphs, %d graph breaks" % (result["compiled_graphs"],
                                                            result["compiled_graph_breaks"]))
        if result.get("compiled_cache_hits"):
            notes.append("%d graph(s) from Inductor's on-disk cache: compile s is warm"
                         % result["compiled_cache_hits"])
        if not result.get("compiled_settled", True):
            notes.append("still compiling after %d warm-up steps"
                         % result["compiled_warmup_steps"])
        if notes:
            result["compiled_note"] = "; ".join(notes)
    except Exception as e:  # noqa: BLE001  (the compiled side must not lose the row)
        result["compiled_error"] = gbt.first_line(e)
        result["compiled_traceback"] = traceback.format_exc()[-20000:]
        for key in ("compiled_step_ms", "compiled_min_ms", "compiled_peak_bytes",
                    "compiled_images_per_s"):
            result.pop(key, None)
    finally:
        # The compiled module, its CUDA graph pools and caches go before the next row.
        gbt.reset_dynamo()
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    return result


def _time_compiled(result, fn, graph_count, prototxt, shapes, precision, iterations, warmup,
                   device, mode, max_extra_steps):
    """compiled_train_row's work, in a frame of its own: the net, the optimizer and the compiled
    module are gone once it returns or raises."""
    cuda = device == "cuda"
    result["compiled_settings"] = set_torch_precision("fp32")  # TF32 off, as eager
    if cuda:
        gc.collect()
        torch.cuda.empty_cache()
        result["compiled_leftover_bytes"] = torch.cuda.memory_allocated()
    net, optimizer, inputs, scaler = build(prototxt, shapes, precision, device)
    compiled = fn(net) if mode in (None, "", "default") else fn(net, mode=mode)
    keep = {}
    inner = make_step(compiled, optimizer, inputs, precision, device, scaler, keep)
    # reduce-overhead replays CUDA graphs: each step is a new one, whose outputs may overwrite
    # the last one's (a no-op for the other modes).
    mark = gbt.step_marker(mode)

    def step():
        mark()
        inner()

    def warm_step():
        step()
        if "compiled_loss_first" not in result:
            result["compiled_loss_first"] = float(keep["loss"])

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    warm = gbt.warm_up_compiled(warm_step, sync, max(warmup, MIN_COMPILED_WARMUP), graph_count,
                                max_extra_steps)
    result.update({"compiled_compile_s": warm["compile_s"],
                   "compiled_first_step_s": warm["compile_first_call_s"],
                   "compiled_warmup_steps": warm["compile_warmup_calls"],
                   "compiled_compiling_steps": warm["compile_compiling_calls"],
                   "compiled_settled": warm["compile_settled"]})
    time_steps(result, "compiled_", step, iterations, cuda, scaler, keep, shapes[0][1][0])
