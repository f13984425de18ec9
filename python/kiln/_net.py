"""pycaffe's Net over the library's kiln_net: every blob's data and diff, every layer's
parameters, forward and backward. Blob arrays are views of the net's own memory: writing into
net.blobs["data"].data[...] is what the next forward reads, as in pycaffe."""
from collections import OrderedDict

import numpy as np

from . import _kiln
from ._device import TEST, TRAIN, compile_options
from ._errors import BlobNotFound, invalid


class Blob:
    """A blob (or a parameter blob): .data and .diff are NumPy views of the net's memory."""

    __slots__ = ("name", "data", "diff")

    def __init__(self, name, data, diff):
        self.name = name
        self.data = data
        self.diff = diff

    @property
    def shape(self):
        return self.data.shape

    @property
    def count(self):
        return self.data.size

    def _dim(self, axis):
        return self.data.shape[axis] if self.data.ndim > axis else 1

    num = property(lambda self: self._dim(0))
    channels = property(lambda self: self._dim(1))
    height = property(lambda self: self._dim(2))
    width = property(lambda self: self._dim(3))

    def reshape(self, *shape):
        raise NotImplementedError(
            "Blob.reshape: Kiln compiles a net for its shapes; make the Net again with "
            "batch=N (or change the prototxt's Input shape)")

    def __repr__(self):
        return "<kiln.Blob %s %s>" % (self.name, tuple(self.data.shape))


class _Named(OrderedDict):
    """A name -> value dict whose missing names raise BlobNotFound naming what exists."""

    def __init__(self, what, items):
        super().__init__(items)
        self._what = what

    def __missing__(self, key):
        names = ", ".join(self.keys()) or "none"
        raise BlobNotFound("%s '%s' is not in the net (it has: %s)" % (self._what, key, names))


class Net:
    """A Caffe net as pycaffe's caffe.Net shows it.

    Net(prototxt, weights=None, phase=kiln.TEST, device=None, precision=None, batch=None,
        layout=None, algo=None) -- pycaffe's Net(prototxt, phase) and Net(prototxt, weights,
    phase) orders work too. device: "auto", "cpu", "cuda", "cuda:N" (default: set_device's, else
    "auto"); precision: fp32 | tf32 | fp16 | bf16 (CUDA); batch: the Input layers' first dim.
    """

    def __init__(self, prototxt, weights=None, phase=TEST, device=None, precision=None,
                 batch=None, layout=None, algo=None):
        if isinstance(weights, int) and not isinstance(weights, bool):  # Net(prototxt, phase)
            weights, phase = None, weights
        if phase not in (TEST, TRAIN):
            raise invalid("Net: phase must be kiln.TEST or kiln.TRAIN, not %r" % (phase,))
        options = compile_options(device, precision=precision, batch=batch, layout=layout,
                                  algo=algo)
        self._net = _kiln._Net(str(prototxt), "" if weights is None else str(weights),
                               phase == TRAIN, options)
        self.phase = phase
        self.blobs = _Named("blob", [(name, Blob(name, data, diff))
                                     for name, data, diff in self._net.blobs()])
        self._layer_names = []
        self.layer_types = []
        params = []
        for index, (name, kind, num_params) in enumerate(self._net.layers()):
            self._layer_names.append(name)
            self.layer_types.append(kind)
            if num_params:
                blobs = []
                for i in range(num_params):
                    data, diff = self._net.param(index, i)
                    blobs.append(Blob("%s[%d]" % (name, i), data, diff))
                params.append((name, blobs))
        self.params = _Named("layer with parameters", params)
        self.inputs = list(self._net.inputs())
        self.data_inputs = list(self._net.fed_inputs())  # filled by Data layers at forward
        self.outputs = list(self._net.outputs())

    @property
    def layer_names(self):
        return list(self._layer_names)

    def describe(self):
        """One line: file, phase, blobs, parameters, backend and precision."""
        return self._net.describe()

    def _set_inputs(self, arrays, diff=False):
        for name, value in arrays.items():
            blob = self.blobs[name]
            target = blob.diff if diff else blob.data
            value = np.asarray(value, dtype=np.float32)
            if value.shape != target.shape:
                raise invalid("Net: %s '%s' is %s; the blob is %s (make the Net with batch=%d "
                              "for another batch)" % ("diff" if diff else "input", name,
                                                      value.shape, target.shape,
                                                      value.shape[0] if value.ndim else 1))
            target[...] = value

    def forward(self, blobs=None, start=None, end=None, **inputs):
        """Runs the net (inputs given by name are copied into their blobs first) and returns
        {output: data} for the outputs and any names in `blobs`."""
        if start is not None or end is not None:
            raise NotImplementedError("Net.forward: start/end (partial passes) are not supported; "
                                      "every pass runs the whole net")
        self._set_inputs(inputs)
        self._net.forward()
        names = list(self.outputs) + [b for b in (blobs or []) if b not in self.outputs]
        return {name: self.blobs[name].data for name in names}

    def backward(self, diffs=None, start=None, end=None, **top_diffs):
        """The gradients of the net's losses for the last forward: every blob's and parameter's
        diff is set. Returns {input: diff} for the inputs and any names in `diffs`."""
        if start is not None or end is not None or top_diffs:
            raise NotImplementedError("Net.backward: start/end and given top diffs are not "
                                      "supported; backward starts from the losses")
        self._net.backward()
        names = list(self.inputs + self.data_inputs) + list(diffs or [])
        return {name: self.blobs[name].diff for name in names}

    def save(self, path, overwrite=False):
        """Writes the parameters as a .caffemodel. An existing file is replaced only with
        overwrite=True (pycaffe replaces it silently)."""
        self._net.save(str(path), overwrite)

    def copy_from(self, path):
        """Loads the blobs of the .caffemodel's layers of the same names (checked first)."""
        self._net.copy_from(str(path))

    def __repr__(self):
        return "<kiln.Net %s>" % self.describe()
