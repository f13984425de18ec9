"""Kiln from Python: pycaffe-style nets and solvers, the graph builder and compiled engines.

    import kiln
    net = kiln.Net("lenet.prototxt", "lenet.caffemodel", kiln.TEST)
    net.blobs["data"].data[...] = images
    prob = net.forward()["prob"]

    solver = kiln.SGDSolver("lenet_solver.prototxt")
    solver.solve()                      # a progress bar; tests and snapshots as the file says

    engine = kiln.Engine.from_caffe("resnet18.prototxt", "resnet18.caffemodel", precision="fp16")
    features = engine(torch_images)     # a torch.Tensor in, one out: same GPU, no host copy

docs/PYTHON.md is the guide, with a pycaffe-to-Kiln table.
"""
from . import _kiln
from ._device import TEST, TRAIN, set_device, set_mode_cpu, set_mode_gpu
from ._engine import Context, Engine, Graph, Report
from ._errors import KilnError, BlobNotFound
from ._net import Blob, Net
from ._solver import (AdaDeltaSolver, AdaGradSolver, AdamSolver, NesterovSolver, RMSPropSolver,
                      SGDSolver, Solver, get_solver)

__version__ = _kiln.version()


def cuda_device_count():
    """The CUDA devices Kiln can use (0 on a machine without a usable GPU)."""
    return _kiln.cuda_device_count()


__all__ = [
    "AdaDeltaSolver", "AdaGradSolver", "AdamSolver", "Blob", "BlobNotFound", "Context", "Engine",
    "Graph", "KilnError", "NesterovSolver", "Net", "RMSPropSolver", "Report", "SGDSolver",
    "Solver", "TEST", "TRAIN", "cuda_device_count", "get_solver", "set_device", "set_mode_cpu",
    "set_mode_gpu",
]
