"""The PyTorch side of bench/graph_bench.py: one net timed eager, as a captured CUDA graph and
through torch.compile, on the GPU (or, for dry runs of the script, on the CPU).

`torch_row` builds the net from caffe_torch, converts it as a PyTorch user would for the
precision, runs it once for its output, measures its peak memory and times it eager and as a
CUDA graph; `compile_column` then times the same module under `torch.compile` (Inductor). A
failure of the CUDA graph or of torch.compile is recorded in the result (graph_error,
compile_error) and never loses the eager numbers.
"""

import gc
import statistics
import time
import traceback

import numpy as np
import torch

import caffe_torch as ct
from graph_bench_report import log

TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


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


def rel_l2(a, b):
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    denominator = np.linalg.norm(b)
    if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        return float("nan")
    if denominator == 0:
        return 0.0 if np.linalg.norm(a) == 0 else float("inf")
    return float(np.linalg.norm(a - b) / denominator)


def first_line(error, limit=400):
    """'Type: first non-empty line of the message', short enough for a table note."""
    lines = [s.strip() for s in str(error).splitlines() if s.strip()]
    message = lines[0] if lines else ""
    if message.endswith(":") and len(lines) > 1:  # "backend='inductor' raised:" + the cause
        message += " " + lines[1]
    text = "%s: %s" % (type(error).__name__, message)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ------------------------------------------------------------------------------------------------
# torch.compile
# ------------------------------------------------------------------------------------------------

def dynamo_counts():
    """{"graphs", "graph_breaks", "fxgraph_cache_hits"} from TorchDynamo's counters, or None
    where there is no Dynamo (PyTorch < 2.0)."""
    try:
        from torch._dynamo.utils import counters
    except Exception:  # noqa: BLE001
        return None
    try:
        return {"graphs": int(counters["stats"]["unique_graphs"]),
                "graph_breaks": int(sum(counters["graph_break"].values())),
                # Inductor's on-disk cache: a hit makes compile_s a warm-cache number
                "fxgraph_cache_hits": int(counters["inductor"]["fxgraph_cache_hit"])}
    except Exception:  # noqa: BLE001  (a renamed counter must not cost the column)
        return None


def reset_dynamo():
    """Forget every compiled frame. CaffeNet.forward is one code object for all nets, and Dynamo
    keeps a few compiled versions per code object before it falls back to eager for good, so
    every row starts from a clean cache."""
    dynamo = getattr(torch, "_dynamo", None)
    if dynamo is None:
        try:
            import torch._dynamo as dynamo  # noqa: F811
        except Exception:  # noqa: BLE001
            return
    try:
        dynamo.reset()
    except Exception:  # noqa: BLE001
        pass


def step_marker(mode):
    """torch.compiler.cudagraph_mark_step_begin for the modes that replay CUDA graphs (each call
    is a new step, whose outputs may overwrite the last one's), else a no-op."""
    if mode in ("reduce-overhead", "max-autotune"):
        mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
        if mark is not None:
            return mark
    return lambda: None


def warm_up_compiled(call, sync, warmup, graph_count, max_extra_calls=20, now=time.perf_counter):
    """Call the compiled module until compilation is done: the first call compiles; then keep
    calling until `warmup` calls in a row compiled nothing new (graph_count() did not grow; with
    no counter, `warmup` calls after the first), at most warmup + max_extra_calls calls after the
    first. The wall time of the calls that compiled is the compilation time."""
    start = now()
    call()
    sync()
    first = now() - start
    compile_s, compiling, calls, quiet = first, 1, 1, 0
    last = graph_count()
    while quiet < warmup and calls < 1 + warmup + max_extra_calls:
        start = now()
        call()
        sync()
        seconds = now() - start
        calls += 1
        count = graph_count()
        if count is not None and last is not None and count > last:
            compile_s += seconds
            compiling += 1
            quiet = 0
        else:
            quiet += 1
        last = count
    return {"compile_s": compile_s, "compile_first_call_s": first, "compile_warmup_calls": calls,
            "compile_compiling_calls": compiling, "compile_settled": quiet >= warmup}


def compile_column(net, x, eager_out, iterations, warmup, device="cuda", mode="default",
                   baseline=0, compile_fn=None, graph_count=None, max_extra_calls=20):
    """torch.compile(net) on input x: compilation time, median ms, peak memory, rel L2 against
    the eager output. Never raises: a failure (no torch.compile, no Triton, a compiler error, out
    of memory) is compile_error (first line) and compile_traceback."""
    result = {"compile_mode": mode or "default"}
    fn = compile_fn if compile_fn is not None else getattr(torch, "compile", None)
    if fn is None:
        result["compile_error"] = "torch.compile unavailable (PyTorch %s)" % torch.__version__
        return result
    if graph_count is None:
        def graph_count():
            counts = dynamo_counts()
            return None if counts is None else counts["graphs"]
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    compiled = None
    reset_dynamo()
    before = dynamo_counts()
    try:
        compiled = fn(net) if mode in (None, "", "default") else fn(net, mode=mode)
        mark = step_marker(mode)

        def call():
            mark()
            return compiled(x)

        # no_grad rather than the eager path's inference_mode: Inductor's supported inference
        # setting (inference_mode has open compile bugs); the forward computes the same thing.
        with torch.no_grad():
            result.update(warm_up_compiled(call, sync, warmup, graph_count, max_extra_calls))
            y = call()
            sync()
            result["compile_vs_eager_rel_l2"] = rel_l2(y.float().cpu().numpy(), eager_out)
            del y
            if cuda:
                torch.cuda.reset_peak_memory_stats()
                out = call()  # noqa: F841  (alive while the peak is read)
                sync()
                result["compile_peak_bytes"] = torch.cuda.max_memory_allocated() - baseline
                del out
                result["compile_ms"], result["compile_min_ms"] = cuda_median_ms(call, iterations)
            else:
                result["compile_ms"], result["compile_min_ms"] = cpu_median_ms(call, iterations)
        batch = x.shape[0]
        result["compile_images_per_s"] = batch * 1000.0 / result["compile_ms"]
        notes = []
        after = dynamo_counts()
        if before is not None and after is not None and compile_fn is None:
            result["compile_graphs"] = after["graphs"] - before["graphs"]
            result["compile_graph_breaks"] = after["graph_breaks"] - before["graph_breaks"]
            result["compile_cache_hits"] = (after["fxgraph_cache_hits"]
                                            - before["fxgraph_cache_hits"])
            if result["compile_graphs"] == 0:
                notes.append("Dynamo compiled no graph: the column timed eager code")
            elif result["compile_graph_breaks"]:
                notes.append("%d graphs, %d graph breaks" % (result["compile_graphs"],
                                                            result["compile_graph_breaks"]))
        if result.get("compile_cache_hits"):
            notes.append("%d graph(s) from Inductor's on-disk cache: compile s is warm"
                         % result["compile_cache_hits"])
        if not result.get("compile_settled", True):
            notes.append("still compiling after %d warm-up calls" % result["compile_warmup_calls"])
        if notes:
            result["compile_note"] = "; ".join(notes)
    except Exception as e:  # noqa: BLE001  (the column must not lose the row)
        result["compile_error"] = first_line(e)
        result["compile_traceback"] = traceback.format_exc()[-20000:]
        for key in ("compile_ms", "compile_min_ms", "compile_peak_bytes"):
            result.pop(key, None)
    finally:
        compiled = None  # noqa: F841  (drops the compiled module before the caches go)
        reset_dynamo()
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    return result


# ------------------------------------------------------------------------------------------------
# Eager and CUDA graph
# ------------------------------------------------------------------------------------------------

def torch_row(netdef, weights, x_np, precision, out_blob, iterations, warmup, device="cuda",
              compile_mode="default", compile_fn=None, step=None):
    """Build, run once (output), warm up, measure peak memory, time eager and CUDA graph, then
    (unless compile_mode is None) torch.compile. step(text) is told when torch.compile starts."""
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
    batch = x_np.shape[0]
    if device == "cpu":
        with torch.inference_mode():
            result["torch_out"] = net(x).float().numpy()
            result["eager_ms"], result["eager_min_ms"] = cpu_median_ms(lambda: net(x),
                                                                       iterations)
        result["eager_images_per_s"] = batch * 1000.0 / result["eager_ms"]
        result["graph_error"] = "no CUDA graph on the CPU (dry run)"
    else:
        _cuda_eager_and_graph(net, x, result, iterations, warmup, baseline)
        result["eager_images_per_s"] = batch * 1000.0 / result["eager_ms"]
        if result.get("graph_ms"):
            result["graph_images_per_s"] = batch * 1000.0 / result["graph_ms"]
    if compile_mode is not None:
        if step is not None:
            step("torch.compile (mode %s)" % compile_mode)
        result.update(compile_column(net, x, result["torch_out"], iterations, warmup, device,
                                     compile_mode, baseline, compile_fn))
    return result  # the caller frees the GPU memory once net and x are out of scope


def _cuda_eager_and_graph(net, x, result, iterations, warmup, baseline):
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
    gc.collect()
    torch.cuda.empty_cache()  # the graph's private pool, before torch.compile measures its peak
