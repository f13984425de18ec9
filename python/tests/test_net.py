"""kiln.Net as pycaffe's caffe.Net: LeNet equals the CLI, blobs and params are views of the
net's memory, backward matches finite differences, save/copy_from, errors as exceptions."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import kiln
from conftest import DEVICE, REPO



@pytest.fixture
def tiny(tmp_path):
    """The C API test's small net (tests/api/testdata), copied where the test may write."""
    path = tmp_path / "tiny.prototxt"
    shutil.copy(os.path.join(REPO, "tests", "api", "testdata", "tiny_net.prototxt"), path)
    return str(path)


def lenet(models, **options):
    return kiln.Net(os.path.join(models, "lenet.prototxt"),
                    os.path.join(models, "lenet_iter_10000.caffemodel"), kiln.TEST,
                    device=DEVICE, **options)


def test_version_is_the_library_s():
    header = open(os.path.join(os.path.dirname(__file__), "..", "..", "include", "kiln",
                               "kiln.h")).read()
    parts = [line.split()[-1] for line in header.splitlines()
             if line.startswith("#define KILN_VERSION_")]
    assert kiln.__version__ == ".".join(parts[:3])


def test_lenet_forward_equals_the_cli(models, kiln_cli, tmp_path):
    net = lenet(models)  # the file's batch, 64, which `kiln run` takes
    images = np.random.default_rng(7).random((64, 1, 28, 28), dtype=np.float32)
    net.blobs["prob"].data[...] = np.nan  # poisoned: forward must write every value
    prob = net.forward(data=images)["prob"]
    np.save(tmp_path / "images.npy", images)
    subprocess.run([kiln_cli, "run", "--model", os.path.join(models, "lenet.prototxt"),
                    "--weights", os.path.join(models, "lenet_iter_10000.caffemodel"),
                    "--input", "data=%s" % (tmp_path / "images.npy"),
                    "--output", "prob=%s" % (tmp_path / "prob.npy"), "--device", "cpu"],
                   check=True, capture_output=True)
    cli = np.load(tmp_path / "prob.npy")
    assert prob.shape == cli.shape == (64, 10)
    assert np.max(np.abs(prob - cli)) < 1e-5
    assert np.allclose(prob.sum(axis=1), 1, atol=1e-5)


def test_blobs_and_params_are_views_of_the_net(models):
    net = lenet(models, batch=2)
    assert list(net.blobs)[0] == "data" and "conv1" in net.blobs and "prob" in net.blobs
    assert net.inputs == ["data"] and net.outputs == ["prob"]
    assert net.params["conv1"][0].data.shape == (20, 1, 5, 5)
    assert net.params["conv1"][1].data.shape == (20,)
    assert np.shares_memory(net.blobs["data"].data, net.blobs["data"].data)
    net.blobs["data"].data[...] = np.random.default_rng(1).random((2, 1, 28, 28))
    first = net.forward()["prob"].copy()
    # Changing the last layer's bias changes the answer; putting it back restores it.
    bias = net.params["ip2"][1].data
    saved = bias.copy()
    bias[...] = 0
    bias[3] = 100
    assert np.argmax(net.forward()["prob"], axis=1).tolist() == [3, 3]
    bias[...] = saved
    assert np.array_equal(net.forward()["prob"], first)


def test_backward_matches_finite_differences(tiny):
    net = kiln.Net(tiny, phase=kiln.TRAIN, device=DEVICE)
    rng = np.random.default_rng(3)
    net.blobs["data"].data[...] = rng.standard_normal((2, 3, 5, 5))
    net.blobs["target"].data[...] = rng.standard_normal((2, 4))
    loss = lambda: float(net.forward()["loss"])  # noqa: E731
    loss()
    grads = net.backward()
    assert set(grads) == {"data", "target"}
    assert net.blobs["loss"].diff[()] == 1.0
    eps = 1e-2
    for blob, index in ((net.params["conv"][0], (1, 2, 0, 1)), (net.params["ip"][0], (3, 5)),
                        (net.params["ip"][1], (2,)), (net.blobs["data"], (1, 0, 4, 4))):
        analytic = float(blob.diff[index])
        x = blob.data
        saved = x[index]
        x[index] = saved + eps
        up = loss()
        x[index] = saved - eps
        down = loss()
        x[index] = saved
        numeric = (up - down) / (2 * eps)
        assert abs(analytic - numeric) < 2e-2 * max(1.0, abs(numeric)), (blob.name, index)


def test_save_and_copy_from(tiny, tmp_path):
    net = kiln.Net(tiny, device=DEVICE)
    net.params["conv"][1].data[...] = 7.0
    path = str(tmp_path / "tiny.caffemodel")
    net.save(path)
    with pytest.raises(kiln.KilnError) as exists:
        net.save(path)
    assert exists.value.code == "ALREADY_EXISTS" and path in str(exists.value)
    net.save(path, overwrite=True)
    again = kiln.Net(tiny, path, kiln.TEST, device=DEVICE)
    assert np.all(again.params["conv"][1].data == 7.0)
    fresh = kiln.Net(tiny, device=DEVICE)
    fresh.copy_from(path)
    assert np.all(fresh.params["conv"][1].data == 7.0)
    # Never over the net's own prototxt, even when asked; the weights it came from, when asked.
    before = open(tiny).read()
    with pytest.raises(kiln.KilnError) as alias:
        again.save(tiny, overwrite=True)
    assert tiny in str(alias.value) and open(tiny).read() == before
    again.save(path, overwrite=True)
    with pytest.raises(kiln.KilnError):
        again.save(str(tmp_path), overwrite=True)  # a folder
    engine = kiln.Engine.from_caffe(tiny, path, device="cpu")
    with pytest.raises(kiln.KilnError):
        engine.save(path, overwrite=True)  # the engine's own weights
    assert open(tiny).read() == before


def test_errors_are_exceptions_with_the_library_s_message(models, tmp_path):
    bad = tmp_path / "bad.prototxt"
    bad.write_text('layer { name: "x" type: "Convolution" bottom: "nothing" top: "y" }')
    with pytest.raises(kiln.KilnError) as error:
        kiln.Net(str(bad), device=DEVICE)
    assert str(bad) in str(error.value)
    with pytest.raises(kiln.KilnError) as missing:
        kiln.Net(str(tmp_path / "absent.prototxt"))
    assert "absent.prototxt" in str(missing.value)
    net = lenet(models, batch=2)
    with pytest.raises(kiln.KilnError) as shape:
        net.forward(data=np.zeros((3, 1, 28, 28), np.float32))
    assert shape.value.code == "INVALID_ARGUMENT" and "(3, 1, 28, 28)" in str(shape.value)
    with pytest.raises(KeyError) as name:
        net.blobs["nonexistent"]
    assert isinstance(name.value, kiln.BlobNotFound) and "conv1" in str(name.value)
    with pytest.raises(kiln.KilnError) as no_loss:
        net.backward()
    assert no_loss.value.code == "FAILED_PRECONDITION"
    with pytest.raises(ValueError):
        kiln.Engine.from_caffe(os.path.join(models, "lenet.prototxt"), colour="blue")
    with pytest.raises(ValueError):
        kiln.set_device(-1)
