"""A Kiln-compiled ResNet-18 as the frozen feature extractor of a PyTorch training loop (GPU).

torch makes the images on the GPU, Kiln's engine turns them into features on torch's current
stream (no host copy, no synchronize), and a torch linear head learns a synthetic 10-class task
from them. The script checks what it claims and prints a table:
  1. the engine's output through torch tensors equals its output through NumPy (the host path);
  2. no host copy: the output tensor Kiln writes is the caller's (same address), the input is read
     in place, and the profiler sees no host<->device copy while Kiln runs;
  3. the synchronize-free loop (and the same loop on a side stream) gives exactly the losses of a
     loop that synchronizes after every Kiln call.

    python3 examples/python/torch_feature_extractor.py --prototxt resnet18_deploy.prototxt \
        [--weights resnet18.caffemodel] [--precision fp16] [--batch 32] [--steps 40]

Without --weights the ResNet gets He-initialised random weights (written with kiln.Net's params:
no trained ResNet-18 ships with the project).
"""
import argparse
import os
import tempfile
import time

import numpy as np
import torch

import kiln

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def random_weights(prototxt, path):
    """He-initialised convolutions and inner products, identity BatchNorm and Scale."""
    net = kiln.Net(prototxt, device="cpu", batch=1)
    rng = np.random.default_rng(1)
    for layer, kind in zip(net.layer_names, net.layer_types):
        if layer not in net.params:
            continue
        blobs = net.params[layer]
        if kind in ("Convolution", "InnerProduct"):
            w = blobs[0].data
            w[...] = rng.standard_normal(w.shape) * np.sqrt(2.0 / (w.size / w.shape[0]))
            for b in blobs[1:]:
                b.data[...] = 0
        elif kind == "BatchNorm":
            blobs[0].data[...] = 0
            blobs[1].data[...] = 1
            blobs[2].data[...] = 1
        elif kind == "Scale":
            blobs[0].data[...] = 1
            for b in blobs[1:]:
                b.data[...] = 0
    net.save(path, overwrite=True)


def batches(steps, batch, device, seed):
    """The synthetic task: class c brightens image band c; torch makes it on the GPU."""
    g = torch.Generator(device=device).manual_seed(seed)
    for _ in range(steps):
        labels = torch.randint(0, 10, (batch,), device=device, generator=g)
        images = torch.randn(batch, 3, 224, 224, device=device, generator=g) * 0.5
        rows = torch.arange(224, device=device).view(1, 1, 224, 1) // 23
        images += (rows == labels.view(-1, 1, 1, 1)).float() * 1.5
        yield images, labels


def train(engine, steps, batch, device, synchronize=False, side_stream=False):
    """The torch loop around Kiln's features; the losses stay on the GPU until the end."""
    torch.manual_seed(0)
    head = torch.nn.Linear(engine.outputs[0].shape[1], 10).to(device)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.01, momentum=0.9)
    stream = torch.cuda.Stream(device) if side_stream else torch.cuda.current_stream(device)
    losses = []
    with torch.cuda.stream(stream):
        for images, labels in batches(steps, batch, device, seed=7):
            features = engine(images)  # on `stream`, torch's current one
            if synchronize:
                torch.cuda.synchronize(device)
            # Log-probabilities, standardised per image: a well-scaled input for the head.
            f = torch.log(features.float() + 1e-4)
            f = (f - f.mean(dim=1, keepdim=True)) / (f.std(dim=1, keepdim=True) + 1e-5)
            logits = head(f)
            loss = torch.nn.functional.cross_entropy(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
    torch.cuda.synchronize(device)
    return torch.stack(losses).cpu()


def copies_during(fn):
    """The host<->device copies CUDA ran while fn ran (torch's profiler), or None."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        names = [e.name for e in prof.events()]
        return sum(1 for n in names if "HtoD" in n or "DtoH" in n)
    except Exception as error:  # noqa: BLE001 - a profiler that cannot run is reported, not fatal
        print("profiler unavailable: %s" % error)
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prototxt", default=os.path.join(
        os.path.dirname(REPO), "shared", "models", "caffe", "resnet18_deploy.prototxt"))
    parser.add_argument("--weights")
    parser.add_argument("--precision", default="fp16")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args()
    device = torch.device(args.device)
    rows = []

    weights = args.weights
    if weights is None:
        weights = os.path.join(tempfile.mkdtemp(), "resnet18_random.caffemodel")
        random_weights(args.prototxt, weights)
    start = time.time()
    engine = kiln.Engine.from_caffe(args.prototxt, weights, device=args.device,
                                    precision=args.precision, batch=args.batch)
    print(engine.describe(), "(compiled in %.1f s)" % (time.time() - start))
    name_in, name_out = engine.inputs[0].name, engine.outputs[0].name

    # 1. Torch in and out equals the host path.
    x = torch.randn(args.batch, 3, 224, 224, device=device)
    y = engine(x)
    host = engine.context().run(**{name_in: x.cpu().numpy()})[name_out]
    diff = float(np.abs(y.cpu().numpy() - host).max())
    rows.append(("torch tensor out, on %s" % y.device, isinstance(y, torch.Tensor) and
                 y.device == device, type(y).__name__))
    rows.append(("equals the NumPy path", diff == 0.0, "max |diff| %.3g" % diff))
    rows.append(("features finite", bool(torch.isfinite(y).all()),
                 "min %.3g, max %.3g" % (y.min(), y.max())))

    # 2. No host copy.
    context = engine.context()
    out = torch.empty_like(y)
    address = out.data_ptr()
    context.run_device({name_in: x}, out={name_out: out})
    torch.cuda.synchronize(device)
    rows.append(("output written in place", out.data_ptr() == address and torch.equal(out, y),
                 "address 0x%x" % address))
    x2 = x.clone()
    x2.mul_(0.5)  # the input read in place: a changed tensor gives a changed answer
    rows.append(("input read in place", not torch.equal(engine(x2), y), "changed input"))
    copies = copies_during(lambda: [context.run_device({name_in: x}, out={name_out: out})
                                    for _ in range(5)])
    rows.append(("no host<->device copy (profiler)", copies == 0,
                 "copies: %s" % ("n/a" if copies is None else copies)))

    # Other producers: a CuPy array (through __cuda_array_interface__, out as a CuPy array) and
    # an object that offers only __dlpack__ (read through the capsule, out= a torch tensor).
    try:
        import cupy
        got = engine(cupy.asarray(x))
        rows.append(("CuPy array in and out", isinstance(got, cupy.ndarray) and
                     bool(torch.equal(torch.as_tensor(got, device=device), y)),
                     type(got).__module__ + "." + type(got).__name__))
    except ImportError:
        rows.append(("CuPy array in and out", True, "CuPy not installed: skipped"))

    class DlpackOnly:
        def __init__(self, tensor):
            self.tensor = tensor

        def __dlpack__(self, stream=None):
            return self.tensor.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.tensor.__dlpack_device__()

    via_dlpack = torch.empty_like(y)
    context.run_device({name_in: DlpackOnly(x)}, out={name_out: via_dlpack})
    torch.cuda.synchronize(device)
    rows.append(("DLPack-only input", torch.equal(via_dlpack, y), "capsule read in place"))

    # 3. The synchronize-free pipeline gives the synchronized numbers.
    free = train(engine, args.steps, args.batch, device)
    synced = train(engine, args.steps, args.batch, device, synchronize=True)
    side = train(engine, args.steps, args.batch, device, side_stream=True)
    rows.append(("losses finite", bool(torch.isfinite(free).all()),
                 "loss %.3f -> %.3f" % (free[:5].mean(), free[-5:].mean())))
    rows.append(("sync-free losses == synchronized", torch.equal(free, synced),
                 "max |diff| %.3g" % (free - synced).abs().max()))
    rows.append(("side-stream losses == synchronized", torch.equal(side, synced),
                 "%d steps, max |diff| %.3g" % (args.steps, (side - synced).abs().max())))

    # Throughput of the feature extractor alone, on torch's stream.
    for _ in range(3):
        engine(x)
    torch.cuda.synchronize(device)
    start = time.time()
    for _ in range(20):
        engine(x)
    torch.cuda.synchronize(device)
    ms = (time.time() - start) / 20 * 1000
    rows.append(("features, %s b%d" % (args.precision, args.batch), True,
                 "%.2f ms, %.0f images/s" % (ms, args.batch / ms * 1000)))

    print("\n%-36s %-5s %s" % ("check", "ok", "detail"))
    for what, ok, detail in rows:
        print("%-36s %-5s %s" % (what, "PASS" if ok else "FAIL", detail))
    if not all(ok for _, ok, _ in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
