// kiln._kiln: the Python package's native module, pybind11 over Kiln's public C++ API
// (include/kiln/kiln.hpp). It adds no behaviour of its own: every call goes to libkiln.so, and a
// failed Status becomes kiln.KilnError carrying the library's message and code. The Pythonic
// layer (pycaffe-style Net and solvers, the builder's sugar, array interop) is in python/kiln/.
#include "module.h"

#include <pybind11/eval.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "kiln/kiln.hpp"

namespace py = pybind11;

namespace kiln_python {

namespace {

py::object g_error;  // kiln.KilnError, created at import

}  // namespace

[[noreturn]] void Raise(const kiln::Status& status) {
  py::object error = g_error(status.message(), std::string(kiln_status_name(status.code())));
  PyErr_SetObject(g_error.ptr(), error.ptr());
  throw py::error_already_set();
}

void Check(const kiln::Status& status) {
  if (!status.ok()) Raise(status);
}

kiln::CompileOptions ToOptions(const py::dict& options) {
  kiln::CompileOptions o;
  for (const auto& [key, value] : options) {
    const std::string name = py::str(key);
    if (value.is_none()) continue;
    if (name == "device") {
      o.device = py::str(value);
    } else if (name == "precision") {
      o.precision = py::str(value);
    } else if (name == "layout") {
      o.layout = py::str(value);
    } else if (name == "algo") {
      o.algo = py::str(value);
    } else if (name == "optimize") {
      o.optimize = value.cast<bool>();
    } else if (name == "batch") {
      o.batch = value.cast<int64_t>();
    } else if (name == "max_batch") {
      o.max_batch = value.cast<int64_t>();
    } else if (name == "workspace_limit") {
      o.workspace_limit = value.cast<int64_t>();
    } else if (name == "workspace_budget") {
      o.workspace_budget = value.cast<double>();
    } else if (name == "tuning_file") {
      o.tuning_file = py::str(value);
    } else {
      throw py::value_error("unknown compile option '" + name +
                            "' (device, precision, layout, algo, optimize, batch, max_batch, "
                            "workspace_limit, workspace_budget, tuning_file)");
    }
  }
  return o;
}

py::array_t<float> View(const kiln::BlobInfo& blob, float* data, py::handle owner) {
  std::vector<py::ssize_t> shape(blob.dims.begin(), blob.dims.end());
  return py::array_t<float>(shape, data, owner);
}

namespace {

py::dict BlobDict(const kiln::BlobInfo& b) {
  py::dict d;
  d["name"] = b.name;
  d["index"] = b.index;
  d["shape"] = py::tuple(py::cast(b.dims));
  d["count"] = b.count;
  return d;
}

void BindNet(py::module_& m) {
  py::class_<kiln::Net>(m, "_Net")
      .def(py::init([](const std::string& prototxt, const std::string& weights, bool train,
                       const py::dict& options) {
             kiln::Result<kiln::Net> net =
                 kiln::Net::Create(prototxt, weights, train, ToOptions(options));
             if (!net.ok()) Raise(net.status());
             return std::make_unique<kiln::Net>(std::move(*net));
           }),
           py::arg("prototxt"), py::arg("weights"), py::arg("train"), py::arg("options"))
      .def("describe", &kiln::Net::Describe)
      // (name, data view, diff view) per blob; the views keep the net alive.
      .def("blobs",
           [](py::object self) {
             kiln::Net& net = self.cast<kiln::Net&>();
             py::list out;
             for (const kiln::BlobInfo& b : net.Blobs()) {
               out.append(py::make_tuple(b.name, View(b, b.data, self), View(b, b.diff, self)));
             }
             return out;
           })
      .def("layers",
           [](const kiln::Net& net) {
             py::list out;
             for (const kiln::LayerInfo& l : net.Layers()) {
               out.append(py::make_tuple(l.name, l.type, l.num_params));
             }
             return out;
           })
      .def("param",
           [](py::object self, int layer, int index) {
             kiln::Result<kiln::BlobInfo> b = self.cast<kiln::Net&>().Param(layer, index);
             if (!b.ok()) Raise(b.status());
             return py::make_tuple(View(*b, b->data, self), View(*b, b->diff, self));
           })
      .def("inputs", &kiln::Net::Inputs)
      .def("fed_inputs", &kiln::Net::FedInputs)
      .def("outputs", &kiln::Net::Outputs)
      .def("forward",
           [](kiln::Net& net) {
             kiln::Status s;
             {
               py::gil_scoped_release release;
               s = net.Forward();
             }
             Check(s);
           })
      .def("backward",
           [](kiln::Net& net) {
             kiln::Status s;
             {
               py::gil_scoped_release release;
               s = net.Backward();
             }
             Check(s);
           })
      .def("save", [](const kiln::Net& net, const std::string& path,
                      bool overwrite) { Check(net.Save(path, overwrite)); })
      .def("copy_from", [](kiln::Net& net, const std::string& path) { Check(net.CopyFrom(path)); });
}

void BindTrainer(py::module_& m) {
  py::class_<kiln::Trainer>(m, "_Trainer")
      .def(py::init([](const std::string& solver, const std::string& type,
                       const std::string& weights, const py::dict& options) {
             kiln::Result<kiln::Trainer> t =
                 kiln::Trainer::Create(solver, type, weights, ToOptions(options));
             if (!t.ok()) Raise(t.status());
             return std::make_unique<kiln::Trainer>(std::move(*t));
           }),
           py::arg("solver"), py::arg("solver_type"), py::arg("weights"), py::arg("options"))
      .def("step",
           [](kiln::Trainer& t, int iterations) {
             kiln::Status s;
             {
               py::gil_scoped_release release;
               s = t.Step(iterations);
             }
             Check(s);
           })
      .def("iteration", &kiln::Trainer::Iteration)
      .def("loss", &kiln::Trainer::Loss)
      .def("snapshot",
           [](kiln::Trainer& t, const std::string& prefix) { Check(t.Snapshot(prefix)); })
      .def("restore", [](kiln::Trainer& t, const std::string& state) { Check(t.Restore(state)); })
      .def("solver_json", &kiln::Trainer::SolverJson)
      .def("num_test_nets", &kiln::Trainer::NumTestNets)
      .def("test",
           [](kiln::Trainer& t, int net) {
             kiln::Result<std::string> r("");
             {
               py::gil_scoped_release release;
               r = t.Test(net);
             }
             if (!r.ok()) Raise(r.status());
             return *r;
           })
      .def("params",
           [](const kiln::Trainer& t) {
             py::list out;
             for (const kiln::BlobInfo& b : t.Params()) out.append(BlobDict(b));
             return out;
           })
      .def("get_param",
           [](const kiln::Trainer& t, int index) {
             const std::vector<kiln::BlobInfo> params = t.Params();
             if (index < 0 || index >= static_cast<int>(params.size())) {
               throw py::index_error("parameter " + std::to_string(index));
             }
             std::vector<py::ssize_t> shape(params[index].dims.begin(), params[index].dims.end());
             py::array_t<float> out(shape);
             Check(t.GetParam(index, out.mutable_data(), params[index].count));
             return out;
           })
      .def("set_param", [](kiln::Trainer& t, int index,
                           py::array_t<float, py::array::c_style | py::array::forcecast> values) {
        Check(t.SetParam(index, values.data(), static_cast<size_t>(values.size())));
      });
}

}  // namespace

}  // namespace kiln_python

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's native module (pybind11 over include/kiln/kiln.hpp); use the kiln package.";
  // KilnError(message, code): a RuntimeError whose .code is the Status name.
  py::dict scope;
  scope["__builtins__"] = py::module_::import("builtins");
  py::exec(R"(
class KilnError(RuntimeError):
    """A Kiln call failed: str(e) is the library's message, e.code its status name."""
    def __init__(self, message, code="UNKNOWN"):
        super().__init__(message)
        self.code = code
)",
           scope);
  kiln_python::g_error = scope["KilnError"];
  kiln_python::g_error.attr("__module__") = "kiln";
  m.attr("KilnError") = kiln_python::g_error;
  m.def("version", [] { return std::string(kiln_version()); });
  m.def("cuda_device_count", [] { return kiln_cuda_device_count(); });
  kiln_python::BindNet(m);
  kiln_python::BindTrainer(m);
  kiln_python::BindGraphAndEngine(m);
}
