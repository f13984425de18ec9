"""Zero-copy exchange on the CPU (CI): torch tensors in through DLPack, torch tensors out, the
caller's output memory written in place. The GPU variant is examples/python/ on the device."""
import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")


def engine_and_input():
    rng = np.random.default_rng(5)
    g = kiln.Graph()
    x = g.input("x", (2, 8))
    w = g.constant("w", rng.standard_normal((4, 8)).astype(np.float32))
    g.output("y", g.TanH(g.InnerProduct(x, w, None, axis=1)))
    return kiln.Engine.from_graph(g, device="cpu"), rng.standard_normal((2, 8)).astype(np.float32)


def test_torch_in_torch_out_without_copies():
    engine, x = engine_and_input()
    expected = engine(x)
    tx = torch.from_numpy(x.copy())
    out = engine(tx)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 4)
    assert np.max(np.abs(out.numpy() - expected)) < 1e-6
    # The output memory the caller gives is the memory Kiln writes: same address after the run.
    given = torch.full((2, 4), float("nan"))
    address = given.data_ptr()
    result = engine.context().run_device({"x": tx}, out={"y": given})
    assert result["y"] is given and given.data_ptr() == address
    assert np.max(np.abs(given.numpy() - expected)) < 1e-6
    # The input was read in place: changing it changes the answer.
    tx.mul_(-1)
    assert np.max(np.abs(engine(tx).numpy() + expected)) < 1e-6


def test_wrong_arrays_are_refused():
    engine, x = engine_and_input()
    with pytest.raises(kiln.KilnError):
        engine(torch.zeros((3, 8)))
    with pytest.raises(kiln.KilnError):
        engine(torch.zeros((2, 8), dtype=torch.float64))
    with pytest.raises(kiln.KilnError):
        engine(torch.zeros((8, 2)).t())  # strided
    with pytest.raises(kiln.KilnError):
        engine("not an array")
