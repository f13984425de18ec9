"""Arrays of other libraries bound without copies: anything with __cuda_array_interface__
(PyTorch, CuPy, Numba), with __dlpack__ (PyTorch, CuPy, JAX, NumPy >= 1.22), or a NumPy array.
The outputs are made by the inputs' own library (torch.empty, cupy.empty, numpy.empty) on the
same device, so a torch.Tensor in gives a torch.Tensor out."""
import numpy as np

from . import _kiln
from ._errors import invalid

_TYPESTR = {"<f4": "float32", "<f2": "float16", "<i4": "int32", "|u1": "uint8"}
_DLPACK_FLOAT, _DLPACK_INT, _DLPACK_UINT, _DLPACK_BFLOAT = 2, 0, 1, 4
_DLPACK_CPU, _DLPACK_CUDA = 1, 2


class ArrayRef:
    """Where an array's memory is: address, shape, dtype, device ("cpu" or "cuda:N") and the
    library it came from; `keep` holds what must stay alive while the address is used."""

    def __init__(self, array, address, shape, dtype, device, library, keep=()):
        self.array, self.address, self.shape, self.dtype = array, address, tuple(shape), dtype
        self.device, self.library, self.keep = device, library, keep


def _library(array):
    module = type(array).__module__.split(".")[0]
    return module if module in ("torch", "cupy", "numpy", "jax", "jaxlib") else "other"


def _contiguous(shape, strides, itemsize):
    if strides is None:
        return True
    expected = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim != 1 and stride != expected:
            return False
        expected *= dim
    return True


def _cuda_index(array):
    device = getattr(array, "device", None)
    index = getattr(device, "index", None)
    if index is None:
        index = getattr(device, "id", None)
    return 0 if index is None else int(index)


def describe(array, name):
    """The ArrayRef of `array` (input or output `name`); a strided array is refused."""
    if isinstance(array, np.ndarray):
        if not array.flags.c_contiguous:
            raise invalid("'%s': a strided NumPy array; pass np.ascontiguousarray(x)" % name)
        dtype = _TYPESTR.get(array.dtype.str)
        return ArrayRef(array, array.ctypes.data, array.shape, dtype, "cpu", "numpy")
    cai = getattr(array, "__cuda_array_interface__", None)
    if cai is not None:
        itemsize = int(cai["typestr"][2:])
        if not _contiguous(cai["shape"], cai.get("strides"), itemsize):
            raise invalid("'%s': a strided GPU array; pass a contiguous one (.contiguous())" %
                          name)
        return ArrayRef(array, int(cai["data"][0]), cai["shape"], _TYPESTR.get(cai["typestr"]),
                        "cuda:%d" % _cuda_index(array), _library(array))
    if hasattr(array, "__dlpack__"):
        capsule = array.__dlpack__()
        info = _kiln.read_dlpack(capsule)
        code, bits = info["code"], info["bits"]
        dtype = {(_DLPACK_FLOAT, 32): "float32", (_DLPACK_FLOAT, 16): "float16",
                 (_DLPACK_BFLOAT, 16): "bfloat16", (_DLPACK_INT, 32): "int32",
                 (_DLPACK_UINT, 8): "uint8"}.get((code, bits))
        strides = info["strides"]
        if strides is not None and not _contiguous(info["shape"], strides, 1):
            raise invalid("'%s': a strided DLPack tensor; pass a contiguous one" % name)
        if info["device_type"] == _DLPACK_CPU:
            device = "cpu"
        elif info["device_type"] == _DLPACK_CUDA:
            device = "cuda:%d" % info["device_id"]
        else:
            raise invalid("'%s': DLPack device type %d (Kiln takes CPU and CUDA memory)" %
                          (name, info["device_type"]))
        return ArrayRef(array, info["address"], info["shape"], dtype, device, _library(array),
                        keep=(capsule,))
    raise invalid("'%s': %s is not an array Kiln can bind (NumPy, __cuda_array_interface__ or "
                  "__dlpack__)" % (name, type(array).__name__))


def empty_like(ref, shape, dtype):
    """A new array of `ref`'s library and device."""
    if ref.library == "torch":
        import torch
        kinds = {"float32": torch.float32, "float16": torch.float16,
                 "bfloat16": torch.bfloat16, "int32": torch.int32, "uint8": torch.uint8}
        return torch.empty(tuple(shape), dtype=kinds[dtype], device=ref.array.device)
    if ref.library == "cupy":
        import cupy
        with cupy.cuda.Device(_cuda_index(ref.array)):
            return cupy.empty(tuple(shape), dtype=dtype)
    if ref.device == "cpu":
        if dtype == "bfloat16":
            return np.empty(tuple(shape), dtype=np.uint16)
        return np.empty(tuple(shape), dtype=dtype)
    raise invalid("outputs for %s arrays on %s: pass out={name: array}" % (ref.library,
                                                                         ref.device))


# cudaStreamLegacy: the default stream that a library's stream "0" means. Kiln's C API reads a
# NULL stream as "the context's own", which would leave the run unordered with the caller's work.
CUDA_STREAM_LEGACY = 1


def current_stream(ref):
    """The stream the caller's library is ordering its work on (the default stream when it is
    on that, or when the library is not known)."""
    if ref.device == "cpu":
        return 0
    stream = 0
    if ref.library == "torch":
        import torch
        stream = torch.cuda.current_stream(ref.array.device).cuda_stream
    elif ref.library == "cupy":
        import cupy
        stream = cupy.cuda.get_current_stream().ptr
    return stream or CUDA_STREAM_LEGACY
