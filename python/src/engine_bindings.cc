// The builder, engines and contexts of kiln._kiln (over kiln.hpp's Graph, Engine and Context),
// and a reader of DLPack capsules so that arrays of other libraries can be bound without a copy.
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "module.h"

namespace py = pybind11;

namespace kiln_python {

namespace {

py::dtype NumpyType(kiln_dtype dtype) {
  switch (dtype) {
    case KILN_F32:
      return py::dtype("float32");
    case KILN_F16:
      return py::dtype("float16");
    case KILN_BF16:
      return py::dtype("uint16");  // NumPy has no bfloat16: the raw bits
    case KILN_I32:
      return py::dtype("int32");
    case KILN_U8:
      return py::dtype("uint8");
  }
  return py::dtype("uint8");
}

const char* DtypeName(kiln_dtype dtype) {
  switch (dtype) {
    case KILN_F32:
      return "float32";
    case KILN_F16:
      return "float16";
    case KILN_BF16:
      return "bfloat16";
    case KILN_I32:
      return "int32";
    case KILN_U8:
      return "uint8";
  }
  return "unknown";
}

kiln_dtype DtypeFromName(const std::string& name) {
  if (name == "float32") return KILN_F32;
  if (name == "float16") return KILN_F16;
  if (name == "bfloat16") return KILN_BF16;
  if (name == "int32") return KILN_I32;
  if (name == "uint8") return KILN_U8;
  throw py::value_error("dtype '" + name + "' (float32, float16, bfloat16, int32, uint8)");
}

py::list Ports(const std::vector<kiln::TensorInfo>& ports) {
  py::list out;
  for (const kiln::TensorInfo& t : ports) {
    py::dict d;
    d["name"] = t.name;
    d["dtype"] = DtypeName(t.dtype);
    d["shape"] = py::tuple(py::cast(t.dims));
    d["bytes"] = t.bytes;
    out.append(d);
  }
  return out;
}

// DLPack's C structures (the DLPack specification, v0.8 ABI), read only.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

// What a "dltensor" capsule describes, without consuming it: the producer keeps ownership, so
// the caller must keep the producing array alive while it uses the address.
py::dict ReadDlpack(const py::capsule& capsule) {
  if (std::strcmp(capsule.name(), "dltensor") != 0) {
    throw py::value_error(std::string("not an unused DLPack capsule (named '") + capsule.name() +
                          "')");
  }
  const auto* managed = static_cast<const DLManagedTensor*>(capsule.get_pointer());
  const DLTensor& t = managed->dl_tensor;
  py::dict d;
  d["address"] = reinterpret_cast<uintptr_t>(static_cast<const char*>(t.data) + t.byte_offset);
  d["device_type"] = t.device.device_type;
  d["device_id"] = t.device.device_id;
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  d["shape"] = py::tuple(py::cast(shape));
  if (t.strides != nullptr) {
    d["strides"] = py::tuple(py::cast(std::vector<int64_t>(t.strides, t.strides + t.ndim)));
  } else {
    d["strides"] = py::none();
  }
  d["code"] = t.dtype.code;
  d["bits"] = t.dtype.bits;
  d["lanes"] = t.dtype.lanes;
  return d;
}

void BindGraph(py::module_& m) {
  py::class_<kiln::Graph>(m, "_Graph")
      .def(py::init([] {
        kiln::Result<kiln::Graph> g = kiln::Graph::Create();
        if (!g.ok()) Raise(g.status());
        return std::make_unique<kiln::Graph>(std::move(*g));
      }))
      .def("input",
           [](kiln::Graph& g, const std::string& name, const std::vector<int64_t>& dims,
              const std::string& dtype) {
             kiln::Result<kiln::Value> v = g.Input(name, dims, DtypeFromName(dtype));
             if (!v.ok()) Raise(v.status());
             return v->id;
           })
      .def("constant",
           [](kiln::Graph& g, const std::string& name,
              py::array_t<float, py::array::c_style | py::array::forcecast> values) {
             std::vector<int64_t> dims(values.shape(), values.shape() + values.ndim());
             std::vector<float> data(values.data(), values.data() + values.size());
             kiln::Result<kiln::Value> v = g.Constant(name, dims, data);
             if (!v.ok()) Raise(v.status());
             return v->id;
           })
      .def("op",
           [](kiln::Graph& g, const std::string& op, const std::vector<int32_t>& inputs,
              const std::string& attributes, const std::string& name) {
             std::vector<kiln::Value> in;
             for (int32_t id : inputs) in.push_back(kiln::Value{id});
             kiln::Result<std::vector<kiln::Value>> out = g.Op(op, in, attributes, name);
             if (!out.ok()) Raise(out.status());
             std::vector<int32_t> ids;
             for (const kiln::Value& v : *out) ids.push_back(v.id);
             return ids;
           })
      .def("output", [](kiln::Graph& g, const std::string& name,
                        int32_t value) { Check(g.Output(name, kiln::Value{value})); })
      .def("text", &kiln::Graph::Text);
}

void BindEngine(py::module_& m) {
  py::class_<kiln::Engine>(m, "_Engine")
      .def_static(
          "from_caffe",
          [](const std::string& prototxt, const std::string& weights, const py::dict& options) {
            kiln::Result<kiln::Engine> e =
                kiln::Engine::FromCaffe(prototxt, weights, ToOptions(options));
            if (!e.ok()) Raise(e.status());
            return *e;
          })
      .def_static("from_graph",
                  [](const kiln::Graph& graph, const py::dict& options) {
                    kiln::Result<kiln::Engine> e =
                        kiln::Engine::FromGraph(graph, ToOptions(options));
                    if (!e.ok()) Raise(e.status());
                    return *e;
                  })
      .def_static("load",
                  [](const std::string& path, const std::string& device) {
                    kiln::Result<kiln::Engine> e = kiln::Engine::Load(path, device);
                    if (!e.ok()) Raise(e.status());
                    return *e;
                  })
      .def("save", [](const kiln::Engine& e, const std::string& path,
                      bool overwrite) { Check(e.Save(path, overwrite)); })
      .def("inputs", [](const kiln::Engine& e) { return Ports(e.Inputs()); })
      .def("outputs", [](const kiln::Engine& e) { return Ports(e.Outputs()); })
      .def("describe", &kiln::Engine::Describe)
      .def("cuda_device", &kiln::Engine::CudaDevice)
      .def("weights_bytes", &kiln::Engine::WeightsBytes)
      .def("context_bytes", &kiln::Engine::ContextBytes)
      .def("max_batch", &kiln::Engine::MaxBatch)
      .def("report_json", &kiln::Engine::ReportJson)
      .def("graph_dot", &kiln::Engine::GraphDot)
      .def("memory_svg", &kiln::Engine::MemorySvg)
      .def("create_context", [](const kiln::Engine& e) {
        kiln::Result<kiln::Context> c = e.CreateContext();
        if (!c.ok()) Raise(c.status());
        return std::make_unique<kiln::Context>(std::move(*c));
      });
}

void BindContext(py::module_& m) {
  py::class_<kiln::Context>(m, "_Context")
      .def("set_input",
           [](kiln::Context& c, const std::string& name, py::array values) {
             py::array dense = py::array::ensure(values, py::array::c_style);
             if (!dense) throw py::value_error("input '" + name + "' is not an array");
             Check(c.SetInput(name, dense.data(), static_cast<size_t>(dense.nbytes())));
           })
      .def("run",
           [](kiln::Context& c) {
             kiln::Status s;
             {
               py::gil_scoped_release release;
               s = c.Run();
             }
             Check(s);
           })
      .def("output",
           [](const kiln::Context& c, const std::string& name, const std::vector<int64_t>& dims,
              const std::string& dtype) {
             std::vector<py::ssize_t> shape(dims.begin(), dims.end());
             py::array out(NumpyType(DtypeFromName(dtype)), shape);
             std::vector<char> bytes(static_cast<size_t>(out.nbytes()));
             kiln::Result<std::vector<char>> got = c.Output<char>(name, bytes.size());
             if (!got.ok()) Raise(got.status());
             std::memcpy(out.mutable_data(), got->data(), got->size());
             return out;
           })
      .def("run_device",
           [](kiln::Context& c, const std::map<std::string, uintptr_t>& inputs,
              const std::map<std::string, uintptr_t>& outputs, uintptr_t stream) {
             std::map<std::string, const void*> in;
             std::map<std::string, void*> out;
             for (const auto& [name, p] : inputs) in[name] = reinterpret_cast<const void*>(p);
             for (const auto& [name, p] : outputs) out[name] = reinterpret_cast<void*>(p);
             kiln::Status s;
             {
               py::gil_scoped_release release;
               s = c.RunOnDevice(in, out, reinterpret_cast<void*>(stream));
             }
             Check(s);
           })
      .def("synchronize", [](kiln::Context& c) { Check(c.Synchronize()); })
      .def("batch", &kiln::Context::Batch)
      .def("time", [](kiln::Context& c, int iterations, int warmup) {
        kiln::Result<double> ms(0.0);
        {
          py::gil_scoped_release release;
          ms = c.Time(iterations, warmup);
        }
        if (!ms.ok()) Raise(ms.status());
        return *ms;
      });
}

}  // namespace

void BindGraphAndEngine(py::module_& m) {
  BindGraph(m);
  BindEngine(m);
  BindContext(m);
  m.def("read_dlpack", &ReadDlpack, py::arg("capsule"));
}

}  // namespace kiln_python
