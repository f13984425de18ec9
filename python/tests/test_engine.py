"""The builder and engines from Python: a graph built op by op against NumPy, options, saved
plans, the report as objects and pictures, timing."""
import numpy as np
import pytest

import kiln
from conftest import DEVICE


def small_graph(rng):
    g = kiln.Graph()
    x = g.input("x", (4, 6))
    w = rng.standard_normal((3, 6)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    y = g.InnerProduct(x, g.constant("w", w), g.constant("b", b), axis=1, name="ip")
    g.output("prob", g.Softmax(g.ReLU(y), axis=1))
    return g, w, b


def reference(x, w, b):
    y = np.maximum(x @ w.T + b, 0)
    e = np.exp(y - y.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_a_built_graph_runs_as_numpy_says(tmp_path):
    rng = np.random.default_rng(0)
    g, w, b = small_graph(rng)
    assert "InnerProduct" in g.text
    engine = kiln.Engine.from_graph(g, device=DEVICE)
    assert engine.device == ("cpu" if DEVICE == "cpu" else "cuda:0")
    assert [p.name for p in engine.inputs] == ["x"] and engine.outputs[0].shape == (4, 3)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    prob = engine(x)
    assert np.max(np.abs(prob - reference(x, w, b))) < 1e-5
    # The same through a context, and a saved plan gives the same bits.
    context = engine.context()
    assert np.array_equal(context.run(x=x)["prob"], prob)
    assert context.time(iterations=3, warmup=1) > 0
    path = str(tmp_path / "small.kplan")
    engine.save(path)
    with pytest.raises(kiln.KilnError):
        engine.save(path)
    assert np.array_equal(kiln.Engine.load(path)(x), prob)


def test_builder_errors_name_the_op():
    g = kiln.Graph()
    x = g.input("x", (2, 3, 8, 8))
    with pytest.raises(kiln.KilnError) as bad:
        g.Pooling(x, mode="max", kernel=[9], stride=[1], name="too_big")
    assert "too_big" in str(bad.value)
    with pytest.raises(kiln.KilnError):
        g.op("NoSuchOp", [x])
    with pytest.raises(kiln.KilnError):
        g.op("ReLU", [kiln.Graph().input("y", (1,))])


def test_report_shows_steps_memory_and_why_not_fused(models):
    import os
    engine = kiln.Engine.from_caffe(os.path.join(models, "lenet.prototxt"),
                                    os.path.join(models, "lenet_iter_10000.caffemodel"),
                                    device=DEVICE, batch=8)
    report = engine.report()
    assert report.steps and report.json
    assert isinstance(report.why_not_fused, list)
    assert report.memory._repr_svg_().lstrip().startswith("<svg")
    assert report.dot.lstrip().startswith("digraph")
    svg = report._repr_svg_()
    assert svg is None or "<svg" in svg
