"""The graph builder and compiled engines: build op by op or import a Caffe model, compile with
options, run on NumPy arrays or on another library's GPU tensors without copies, time, save and
load plans, and read the fusion report and the memory plan."""
import collections
import json
import shutil
import subprocess
import types

import numpy as np

from . import _interop, _kiln
from ._device import compile_options
from ._errors import invalid

TensorInfo = collections.namedtuple("TensorInfo", "name dtype shape bytes")


def _attr(value):
    """A Python value in Kiln's text IR attribute syntax."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return text if any(c in text for c in ".eEn") else text + ".0"
    if isinstance(value, str):
        return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')
    if isinstance(value, (list, tuple)):
        return "[%s]" % ",".join(_attr(v) for v in value)
    raise invalid("attribute value %r (bool, int, float, str or a list of them)" % (value,))


class Value:
    """A value of a Graph under construction."""

    __slots__ = ("graph", "id")

    def __init__(self, graph, id_):
        self.graph, self.id = graph, id_

    def __repr__(self):
        return "<kiln.Value %d>" % self.id


class Graph:
    """A network built op by op. g.op("Convolution", [x, w, b], stride=[2], pad=[1]) or the same
    as g.Convolution(x, w, b, stride=[2], pad=[1]); `kiln ops` lists the ops and attributes.
    Shapes are inferred at once: a bad one raises KilnError from the call that made it."""

    def __init__(self):
        self._g = _kiln._Graph()

    def input(self, name, shape, dtype="float32"):
        return Value(self, self._g.input(name, [int(d) for d in shape], dtype))

    def constant(self, name, array):
        return Value(self, self._g.constant(name, np.asarray(array, dtype=np.float32)))

    def op(self, op, inputs, name="", **attrs):
        """Adds `op` on `inputs` (None skips an optional input); one Value, or a tuple when the
        op has several outputs."""
        ids = []
        for v in inputs:
            if v is None:
                continue
            if not isinstance(v, Value) or v.graph is not self:
                raise invalid("%s: input %r is not a value of this graph" % (op, v))
            ids.append(v.id)
        text = ", ".join("%s=%s" % (k, _attr(v)) for k, v in attrs.items())
        out = [Value(self, i) for i in self._g.op(op, ids, text, name)]
        return out[0] if len(out) == 1 else tuple(out)

    def output(self, name, value):
        self._g.output(name, value.id)

    def __getattr__(self, op):
        if not op[:1].isupper():
            raise AttributeError(op)
        return lambda *inputs, name="", **attrs: self.op(op, inputs, name, **attrs)

    @property
    def text(self):
        """The graph in Kiln's text IR."""
        return self._g.text()


class Report:
    """What the compiler made of a network (kiln compile --json, --why-not-fused): `steps`,
    `why_not_fused` and `memory` (the arena plan) as Python objects built from `json`. In Jupyter
    the report shows the fused graph (graphviz); report.memory shows the arena over time."""

    class _Memory:
        def __init__(self, fields, svg):
            self.__dict__.update(fields)
            self._svg = svg

        def _repr_svg_(self):
            return self._svg

        def __repr__(self):
            return "<kiln memory plan %s>" % {k: v for k, v in self.__dict__.items()
                                               if not k.startswith("_") and
                                               not isinstance(v, list)}

    def __init__(self, engine):
        self.json = json.loads(engine.report_json())
        self.dot = engine.graph_dot()

        # Records with the JSON's field names as attributes ("pass" too: getattr(r, "pass")).
        def objects(items):
            return [types.SimpleNamespace(**item) for item in items]

        self.steps = objects(self.json.get("steps", []))
        self.why_not_fused = objects(self.json.get("why_not_fused", []))
        memory = dict(self.json.get("memory", {}))
        memory["buffers"] = objects(memory.get("buffers", []))
        self.memory = Report._Memory(memory, engine.memory_svg())

    def svg(self):
        """The fused graph as SVG (graphviz's `dot`); KilnError when `dot` is missing."""
        dot = shutil.which("dot")
        if dot is None:
            raise invalid("Report.svg: graphviz's `dot` is not installed (apt install graphviz)")
        return subprocess.run([dot, "-Tsvg"], input=self.dot, capture_output=True, text=True,
                              check=True).stdout

    def _repr_svg_(self):
        return self.svg() if shutil.which("dot") else None

    def __repr__(self):
        return "<kiln report: %d steps, %d not fused>" % (len(self.steps),
                                                         len(self.why_not_fused))


class Context:
    """One thread's runs of an engine: its own activations (and CUDA stream)."""

    def __init__(self, engine):
        self.engine = engine
        self._c = engine._e.create_context()

    def run(self, **inputs):
        """Host arrays in (by input name), {output: NumPy array} out; synchronous."""
        for name, value in inputs.items():
            port = self.engine._port(name, True)
            array = np.ascontiguousarray(value, dtype=np.dtype(port.dtype)
                                         if port.dtype != "bfloat16" else np.uint16)
            self._c.set_input(name, array)
        self._c.run()
        batch = self._c.batch()
        out = {}
        for port in self.engine.outputs:
            shape = list(port.shape)
            if self.engine.max_batch and shape:
                shape[0] = batch
            out[port.name] = self._c.output(port.name, shape, port.dtype)
        return out

    def run_device(self, inputs, out=None, stream=None):
        """Arrays of another library in, the same kind out, no copies: every input by name (a
        torch.Tensor, CuPy array, any __cuda_array_interface__ or __dlpack__ array on the
        engine's device, or NumPy arrays for a CPU engine). Outputs are made like the first input
        unless given in `out`. Ordered on `stream` (default: the inputs' library's current
        stream, torch.cuda.current_stream(); 0 is the default stream), without waiting on the
        host."""
        refs = {}
        for name, value in inputs.items():
            refs[name] = self._check(_interop.describe(value, name),
                                     self.engine._port(name, True))
        if not refs:
            raise invalid("run_device: no inputs")
        first = next(iter(refs.values()))
        out = dict(out or {})
        for port in self.engine.outputs:
            if port.name not in out:
                out[port.name] = _interop.empty_like(first, port.shape, port.dtype)
        out_refs = {name: self._check(_interop.describe(value, name),
                                      self.engine._port(name, False))
                    for name, value in out.items()}
        if stream is None:
            stream = _interop.current_stream(first)
        elif int(stream) == 0 and first.device != "cpu":
            stream = _interop.CUDA_STREAM_LEGACY  # the default stream, not Kiln's own
        self._c.run_device({n: r.address for n, r in refs.items()},
                           {n: r.address for n, r in out_refs.items()}, int(stream))
        return out

    def _check(self, ref, port):
        if ref.dtype != port.dtype or tuple(ref.shape) != tuple(port.shape):
            raise invalid("'%s' is %s %s; the engine's is %s %s" % (
                port.name, ref.dtype, tuple(ref.shape), port.dtype, tuple(port.shape)))
        device = self.engine.device
        if ref.device != device:
            raise invalid("'%s' is on %s; the engine runs on %s" % (port.name, ref.device,
                                                                   device))
        return ref

    def synchronize(self):
        self._c.synchronize()

    def time(self, iterations=20, warmup=3):
        """Median milliseconds of one forward on the inputs of the last run."""
        return self._c.time(int(iterations), int(warmup))


class Engine:
    """A compiled network and its weights on its device, shared by its contexts."""

    def __init__(self, native):
        self._e = native
        self.inputs = [TensorInfo(**p) for p in native.inputs()]
        self.outputs = [TensorInfo(**p) for p in native.outputs()]
        self._default = None

    @staticmethod
    def from_caffe(prototxt, weights=None, device=None, **options):
        """A Caffe deploy net. Options: precision, layout, algo, optimize, batch, max_batch,
        workspace_limit (bytes), workspace_budget (factor), tuning_file."""
        return Engine(_kiln._Engine.from_caffe(str(prototxt), "" if weights is None else
                                               str(weights), compile_options(device, **options)))

    @staticmethod
    def from_graph(graph, device=None, **options):
        return Engine(_kiln._Engine.from_graph(graph._g, compile_options(device, **options)))

    @staticmethod
    def load(path, device=None):
        """A plan file Engine.save (or `kiln compile --save-plan`) wrote; measures nothing."""
        return Engine(_kiln._Engine.load(str(path), device or ""))

    def save(self, path, overwrite=False):
        self._e.save(str(path), overwrite)

    @property
    def device(self):
        index = self._e.cuda_device()
        return "cpu" if index < 0 else "cuda:%d" % index

    @property
    def max_batch(self):
        return self._e.max_batch()

    @property
    def weights_bytes(self):
        return self._e.weights_bytes()

    @property
    def context_bytes(self):
        return self._e.context_bytes()

    def describe(self):
        return self._e.describe()

    def report(self):
        return Report(self._e)

    def context(self):
        return Context(self)

    def _port(self, name, is_input):
        for port in self.inputs if is_input else self.outputs:
            if port.name == name:
                return port
        names = ", ".join(p.name for p in (self.inputs if is_input else self.outputs))
        raise invalid("the engine has no %s '%s' (it has: %s)" % (
            "input" if is_input else "output", name, names))

    def __call__(self, *args, **inputs):
        """Runs on a context of its own. NumPy in: NumPy out (run). Anything else (torch, CuPy,
        DLPack): the same kind out (run_device). One input may be given by position."""
        if args:
            if len(args) != 1 or len(self.inputs) != 1:
                raise invalid("Engine(): pass inputs by name (%s)" % ", ".join(
                    p.name for p in self.inputs))
            inputs[self.inputs[0].name] = args[0]
        if self._default is None:
            self._default = self.context()
        host = all(isinstance(v, np.ndarray) for v in inputs.values())
        outputs = (self._default.run(**inputs) if host else
                   self._default.run_device(inputs))
        return next(iter(outputs.values())) if len(outputs) == 1 else outputs

    def __repr__(self):
        return "<kiln.Engine %s>" % self.describe()
