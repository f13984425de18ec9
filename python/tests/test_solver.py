"""kiln's solvers as pycaffe's: LeNet on Fashion-MNIST trains (the loss falls, the test accuracy
rises), parameters read and written between steps, typed solvers, solve with snapshots and a
restore that continues exactly."""
import os
import shutil

import numpy as np
import pytest

import kiln

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOLVER = """net: "lenet_train_test.prototxt"
test_iter: 10
test_interval: {test_interval}
base_lr: 0.01
momentum: 0.9
weight_decay: 0.0005
lr_policy: "inv"
gamma: 0.0001
power: 0.75
display: 50
max_iter: {max_iter}
snapshot: {snapshot}
snapshot_prefix: "{prefix}"
random_seed: 1
type: "SGD"
"""


def write_solver(folder, fashion, max_iter=300, snapshot=0, test_interval=1000):
    for name in ("train", "test"):
        link = folder / ("fashion_mnist_%s_lmdb" % name)
        if not link.exists():
            os.symlink(fashion / ("fashion_mnist_%s_lmdb" % name), link)
    shutil.copy(os.path.join(REPO, "examples", "fashion_mnist", "lenet_train_test.prototxt"),
                folder / "lenet_train_test.prototxt")
    path = folder / "solver.prototxt"
    path.write_text(SOLVER.format(max_iter=max_iter, snapshot=snapshot,
                                  test_interval=test_interval, prefix=folder / "lenet"))
    return str(path)


def test_lenet_trains_and_the_loss_falls(fashion_lmdbs, tmp_path):
    solver = kiln.SGDSolver(write_solver(tmp_path, fashion_lmdbs), device="cpu")
    assert solver.param["type"] == "SGD" and solver.param["max_iter"] == 300
    before = solver.test(0)
    losses = []
    for _ in range(300):
        solver.step(1)
        losses.append(solver.loss)
    assert solver.iter == 300
    first, last = np.mean(losses[:20]), np.mean(losses[-20:])
    assert last < 0.6 * first, (first, last)
    after = solver.test(0)
    assert after["accuracy"] > 0.6 and after["accuracy"] > before["accuracy"] + 0.3, after
    assert solver.net.blobs["loss"].data == np.float32(solver.loss)


def test_parameters_are_read_and_written_between_steps(fashion_lmdbs, tmp_path):
    solver = kiln.SGDSolver(write_solver(tmp_path, fashion_lmdbs), device="cpu")
    conv1 = solver.net.params["conv1"][0]
    assert conv1.data.shape == (20, 1, 5, 5)
    start = conv1.data.copy()
    solver.step(2)
    assert not np.array_equal(conv1.data, start)  # trained
    conv1.data[...] = 0  # written back before the next step
    solver.net.params["ip2"][1].data[...] = 0
    solver.step(1)
    # One step of SGD from zero weights moves them by lr * gradient only: small.
    assert 0 < np.abs(conv1.data).max() < 0.1
    assert solver.test_nets[0].params is solver.net.params


def test_typed_solvers_override_the_file(fashion_lmdbs, tmp_path):
    adam = kiln.AdamSolver(write_solver(tmp_path, fashion_lmdbs), device="cpu")
    assert adam.param["type"] == "Adam"
    assert kiln.get_solver(write_solver(tmp_path, fashion_lmdbs), device="cpu").param["type"] \
        == "SGD"
    with pytest.raises(kiln.KilnError):
        kiln.SGDSolver(str(tmp_path / "absent_solver.prototxt"))


def test_solve_snapshots_and_restore_continues_exactly(fashion_lmdbs, tmp_path, capsys):
    path = write_solver(tmp_path, fashion_lmdbs, max_iter=40, snapshot=20, test_interval=20)
    straight = kiln.SGDSolver(path, device="cpu")
    results = straight.solve()
    assert straight.iter == 40 and 0 in results and "accuracy" in results[0]
    assert os.path.isfile(tmp_path / "lenet_iter_20.solverstate")
    assert os.path.isfile(tmp_path / "lenet_iter_40.caffemodel")
    resumed = kiln.SGDSolver(path, device="cpu")
    resumed.restore(str(tmp_path / "lenet_iter_20.solverstate"))
    assert resumed.iter == 20
    resumed.step(20)
    for layer in ("conv1", "ip2"):
        assert np.array_equal(resumed.net.params[layer][0].data,
                              straight.net.params[layer][0].data), layer
