"""pycaffe's solvers over the library's kiln_trainer: step, solve (tests and snapshots as the
solver file says, with a progress bar), snapshot and restore; solver.net.params reads and writes
the weights being trained."""
import json

import numpy as np

from . import _kiln
from ._device import compile_options
from ._errors import BlobNotFound
from ._progress import Progress


class _TrainerParam:
    """A parameter blob of the solver's TRAIN net: .data is read from the trainer when first
    asked after a step; changes written into it go back before the next step."""

    def __init__(self, solver, index, info):
        self._solver, self._index = solver, index
        self.name = "%s[%d]" % (info["name"], info["index"])
        self._shape = tuple(info["shape"])
        self._data = self._read = None
        self._stamp = -1

    @property
    def shape(self):
        return self._shape

    @property
    def data(self):
        if self._stamp != self._solver._stamp:
            self._data = self._solver._trainer.get_param(self._index)
            self._read = self._data.copy()
            self._stamp = self._solver._stamp
        return self._data

    @data.setter
    def data(self, value):
        self.data[...] = value

    def _flush(self):
        if self._stamp == self._solver._stamp and not np.array_equal(self._data, self._read):
            self._solver._trainer.set_param(self._index, self._data)
            self._read = self._data.copy()

    def __repr__(self):
        return "<kiln solver parameter %s %s>" % (self.name, self._shape)


class _SolverNet:
    """solver.net and solver.test_nets[i]: the parameters (shared by every net of the solver),
    and for the TRAIN net the last iteration's loss as blobs["loss"]."""

    def __init__(self, solver, params, index=None):
        self._solver, self.params, self._index = solver, params, index

    @property
    def blobs(self):
        from ._net import Blob, _Named
        loss = np.array(self._solver.loss, dtype=np.float32)
        return _Named("blob", [("loss", Blob("loss", loss, np.ones_like(loss)))])

    def test(self):
        """This test net over its test_iter batches: {output: mean} (Caffe's Solver::Test)."""
        if self._index is None:
            raise NotImplementedError("solver.net.test(): test the test nets (solver.test(i))")
        return self._solver.test(self._index)


class Solver:
    """A Caffe solver file trained by Kiln (pycaffe's caffe.get_solver / SGDSolver, ...).

    Solver(solver_file, weights=None, device=None, precision=None, layout=None, algo=None):
    weights is a .caffemodel to start from (Caffe's --weights)."""

    _type = ""  # "" keeps the file's `type`

    def __init__(self, solver_file, weights=None, device=None, precision=None, layout=None,
                 algo=None):
        options = compile_options(device, precision=precision, layout=layout, algo=algo)
        self._trainer = _kiln._Trainer(str(solver_file), self._type,
                                       "" if weights is None else str(weights), options)
        self.param = json.loads(self._trainer.solver_json())
        self._stamp = 0
        params = {}
        self._params = []
        for i, info in enumerate(self._trainer.params()):
            p = _TrainerParam(self, i, info)
            params.setdefault(info["name"], []).append(p)
            self._params.append(p)
        from ._net import _Named
        named = _Named("layer with parameters", params.items())
        self.net = _SolverNet(self, named)
        self.test_nets = [_SolverNet(self, named, i)
                          for i in range(self._trainer.num_test_nets())]

    @property
    def iter(self):
        return self._trainer.iteration()

    @property
    def loss(self):
        """The TRAIN net's loss at the last iteration (the weighted sum of its losses)."""
        return self._trainer.loss()

    def _changed(self):
        self._stamp += 1

    def step(self, iters=1):
        """Runs `iters` iterations (forward, backward, update); no tests, no snapshots."""
        for p in self._params:
            p._flush()
        try:
            self._trainer.step(int(iters))
        finally:
            self._changed()

    def test(self, net=0):
        """Test net `net` over its test_iter batches on the current weights: {output: mean}."""
        for p in self._params:
            p._flush()
        return json.loads(self._trainer.test(net))

    def snapshot(self, prefix=None):
        """Writes <prefix>_iter_N.caffemodel and .solverstate (prefix: the solver's)."""
        for p in self._params:
            p._flush()
        self._trainer.snapshot("" if prefix is None else str(prefix))

    def restore(self, solverstate):
        """Continues from a .solverstate (weights, history and data position)."""
        self._trainer.restore(str(solverstate))
        self._changed()

    def solve(self, resume=None, progress=True):
        """Trains to max_iter as `caffe train` does: tests every test_interval (and first, with
        test_initialization), snapshots every `snapshot` iterations and at the end. Returns the
        last test results ({net index: {output: mean}})."""
        if resume is not None:
            self.restore(resume)
        p = self.param
        total = p["max_iter"]
        bar = Progress(total, self.iter, "iteration", enabled=progress)
        results = {}

        def run_tests():
            for i in range(len(self.test_nets)):
                results[i] = self.test(i)
                bar.write("iteration %d, test net %d: %s" % (self.iter, i, ", ".join(
                    "%s = %.4g" % kv for kv in results[i].items())))

        try:
            if self.test_nets and p["test_interval"] > 0 and p["test_initialization"] and \
                    self.iter == 0:
                run_tests()
            start = self.iter
            while self.iter < total:
                chunk = total - self.iter
                for every in (p["test_interval"], p["snapshot"], p["display"]):
                    if every > 0:
                        chunk = min(chunk, every - self.iter % every)
                self.step(chunk)
                bar.update(chunk, self.loss)
                if p["snapshot"] > 0 and self.iter % p["snapshot"] == 0 and self.iter < total:
                    self.snapshot()
                if self.test_nets and p["test_interval"] > 0 and \
                        self.iter % p["test_interval"] == 0:
                    run_tests()
            if self.iter > start:  # Caffe's snapshot_after_train, and a last test
                self.snapshot()
                if self.test_nets and (p["test_interval"] <= 0 or
                                       total % p["test_interval"] != 0):
                    run_tests()
        finally:
            bar.close()
        return results


def _typed(name, type_name):
    cls = type(name, (Solver,), {"_type": type_name})
    cls.__doc__ = "A %s solver, whatever the file's type says (pycaffe's caffe.%s)." % (
        type_name, name)
    return cls


SGDSolver = _typed("SGDSolver", "SGD")
NesterovSolver = _typed("NesterovSolver", "Nesterov")
AdaGradSolver = _typed("AdaGradSolver", "AdaGrad")
RMSPropSolver = _typed("RMSPropSolver", "RMSProp")
AdaDeltaSolver = _typed("AdaDeltaSolver", "AdaDelta")
AdamSolver = _typed("AdamSolver", "Adam")


def get_solver(solver_file, **options):
    """The solver of the file's own `type` (pycaffe's caffe.get_solver)."""
    return Solver(solver_file, **options)


__all__ = ["Solver", "SGDSolver", "NesterovSolver", "AdaGradSolver", "RMSPropSolver",
           "AdaDeltaSolver", "AdamSolver", "get_solver", "BlobNotFound"]
