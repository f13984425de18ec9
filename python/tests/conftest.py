"""Shared fixtures of the Python package's tests (run by tools/test.sh against the installed
package). KILN_CLI names the kiln binary; the Caffe files come from ../shared/models/caffe (or
KILN_CAFFE_MODELS)."""
import os
import shutil
import subprocess

import pytest

# The device the nets and engines of the tests run on: "cpu" in CI, "cuda" on a GPU machine
# (tools/gpu_check_python.sh). The DLPack tests bind torch CPU tensors and stay on the CPU.
DEVICE = os.environ.get("KILN_TEST_DEVICE", "cpu")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def caffe_models():
    given = os.environ.get("KILN_CAFFE_MODELS")
    return given or os.path.join(os.path.dirname(REPO), "shared", "models", "caffe")


@pytest.fixture(scope="session")
def models():
    folder = caffe_models()
    if not os.path.isfile(os.path.join(folder, "lenet_iter_10000.caffemodel")):
        pytest.skip("no Caffe models at %s (set KILN_CAFFE_MODELS)" % folder)
    return folder


@pytest.fixture(scope="session")
def kiln_cli():
    cli = os.environ.get("KILN_CLI") or shutil.which("kiln") or \
        os.path.join(REPO, "bazel-bin", "tools", "kiln")
    if not os.path.isfile(cli):
        pytest.skip("no kiln CLI (set KILN_CLI)")
    return cli


@pytest.fixture(scope="session")
def fashion_lmdbs(tmp_path_factory, kiln_cli):
    """Fashion-MNIST's train and test sets as LMDBs (kiln convert of Debian's IDX files)."""
    idx = os.environ.get("KILN_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
    if not os.path.isfile(os.path.join(idx, "train-images-idx3-ubyte.gz")):
        pytest.skip("no Fashion-MNIST at %s (tools/setup.sh installs it)" % idx)
    folder = tmp_path_factory.mktemp("fashion")
    for part, name in (("train", "train"), ("t10k", "test")):
        subprocess.run([kiln_cli, "convert", "--images", "%s/%s-images-idx3-ubyte.gz" % (idx, part),
                        "--labels", "%s/%s-labels-idx1-ubyte.gz" % (idx, part),
                        "--out", str(folder / ("fashion_mnist_%s_lmdb" % name))],
                       check=True, capture_output=True)
    return folder
