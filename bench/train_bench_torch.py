"""The PyTorch side of bench/train_bench.py: one training step of a Caffe TRAIN net, eager.

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
"""

import gc
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import caffe_torch_train as ctt  # noqa: E402  (the path must be set first)
from graph_bench_torch import cpu_median_ms, cuda_median_ms, set_torch_precision  # noqa: E402

SOLVER = {"lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4}
LABEL_CLASSES = 10
DATA_SEED = 12345
PRECISIONS = ("fp32", "fp16")


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
    if scaler is not None and scaler.is_enabled():
        result["torch_amp_scale_before"] = float(scaler.get_scale())
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        result["torch_resident_bytes"] = torch.cuda.memory_allocated()
        result["torch_step_ms"], result["torch_min_ms"] = cuda_median_ms(step, iterations)
        result["torch_peak_bytes"] = torch.cuda.max_memory_allocated()
    else:
        result["torch_step_ms"], result["torch_min_ms"] = cpu_median_ms(step, iterations)
    result["torch_loss_last"] = float(keep["loss"])
    if scaler is not None and scaler.is_enabled():
        # A scale that fell during the timed steps means some of them skipped the update.
        result["torch_amp_scale_after"] = float(scaler.get_scale())
    result["torch_images_per_s"] = shapes[0][1][0] * 1000.0 / result["torch_step_ms"]
    return result
