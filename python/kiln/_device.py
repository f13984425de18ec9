"""The device new nets, solvers and engines use unless given one (pycaffe's set_mode_*)."""
TEST = 0
TRAIN = 1

_state = {"device": "auto", "gpu": 0}


def set_device(index):
    """Use CUDA device `index` from now on (pycaffe's caffe.set_device; it also selects the GPU)."""
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ValueError("set_device: a GPU index (0, 1, ...), not %r" % (index,))
    _state["gpu"] = index
    _state["device"] = "cuda:%d" % index


def set_mode_gpu():
    """Run on the GPU chosen with set_device (GPU 0 by default)."""
    _state["device"] = "cuda:%d" % _state["gpu"]


def set_mode_cpu():
    """Run on the CPU."""
    _state["device"] = "cpu"


def default_device():
    """"auto" until set_device or set_mode_* chose: a GPU when one is usable, else the CPU."""
    return _state["device"]


def compile_options(device=None, **options):
    """The keyword options the native module takes, with the default device filled in."""
    options["device"] = device if device is not None else default_device()
    return {k: v for k, v in options.items() if v is not None}
