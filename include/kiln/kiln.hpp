// Kiln's C++ API: header-only, over the C API of kiln/kiln.h (docs/EMBEDDING.md).
//
// Everything here is inline and calls only the C functions, so a program built with any C++17
// compiler links against libkiln.so alone, and no C++ type of Kiln's crosses the library's
// boundary. The classes own their C handles (move-only, or shared where said). Every call that can
// fail returns a kiln::Status or a kiln::Result<T> carrying the library's message; none throws.
//
//   kiln::CompileOptions options;               // fusion on, device "auto"
//   auto engine = kiln::Engine::FromCaffe("lenet.prototxt", "lenet.caffemodel", options);
//   if (!engine.ok()) { std::cerr << engine.status().ToString() << "\n"; return 1; }
//   auto context = engine->CreateContext();     // one per thread; the weights stay shared
//   context->SetInput("data", pixels);          // std::vector<float> of the input's size
//   kiln::Status run = context->Run();
//   auto prob = context->Output<float>("prob");
#ifndef KILN_KILN_HPP_
#define KILN_KILN_HPP_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.h"

namespace kiln {
// The public API's own namespace inside kiln (kiln::Engine is kiln::api::Engine): its names
// never collide with the library's internals.
inline namespace api {

// The result of a call: OK, or a code (kiln_status) with the library's message.
class Status {
 public:
  Status() = default;
  Status(kiln_status code, std::string message) : code_(code), message_(std::move(message)) {}
  // The status of the C call that just returned `code` on this thread.
  static Status FromC(kiln_status code) {
    return code == KILN_OK ? Status() : Status(code, kiln_last_error());
  }
  bool ok() const { return code_ == KILN_OK; }
  kiln_status code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "INVALID_ARGUMENT: <message>".
  std::string ToString() const {
    return ok() ? "OK" : std::string(kiln_status_name(code_)) + ": " + message_;
  }

 private:
  kiln_status code_ = KILN_OK;
  std::string message_;
};

// A value or the Status saying why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)), has_value_(true) {}  // NOLINT: implicit on purpose
  Result(Status status) : status_(std::move(status)) {             // NOLINT
    if (status_.ok()) status_ = Status(KILN_INTERNAL, "a Result made from an OK status");
  }
  bool ok() const { return has_value_; }
  const Status& status() const { return status_; }
  // The value; only when ok().
  T& value() { return value_; }
  const T& value() const { return value_; }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }
  T& operator*() { return value_; }

 private:
  Status status_;
  T value_{};
  bool has_value_ = false;
};

// How an engine is compiled (kiln_compile_options; the defaults are kiln_compile_options_init's).
struct CompileOptions {
  std::string device = "auto";     // auto | cpu | reference | cuda | cuda:N
  std::string precision = "fp32";  // fp32 | tf32 | fp16 | bf16 (CUDA)
  std::string layout = "auto";     // auto | nchw | nhwc (CUDA)
  std::string algo = "heuristic";  // heuristic | measure
  bool optimize = true;            // the inference rewrites (fusion)
  int64_t batch = 0;               // Caffe models: the batch to compile for (0: the file's)
  int64_t max_batch = 0;           // Caffe models: any batch from 1 to this (0: one batch)
  int64_t workspace_limit = 0;     // the most workspace bytes one step may use (0: no limit)
  double workspace_budget = 0;     // the arena's budget, a factor >= 1 (0: Kiln's default)
  std::string tuning_file;         // with algo "measure": measured choices kept there ("": none)

  // The C struct; its strings point into this object.
  kiln_compile_options ToC() const {
    kiln_compile_options c;
    kiln_compile_options_init(&c);
    c.device = device.c_str();
    c.precision = precision.c_str();
    c.layout = layout.c_str();
    c.algo = algo.c_str();
    c.optimize = optimize ? 1 : 0;
    c.batch = batch;
    c.max_batch = max_batch;
    c.workspace_limit = workspace_limit;
    c.workspace_budget = workspace_budget;
    c.tuning_file = tuning_file.empty() ? nullptr : tuning_file.c_str();
    return c;
  }
};

// An input or output of an engine: dense, row-major.
struct TensorInfo {
  std::string name;
  kiln_dtype dtype = KILN_F32;
  std::vector<int64_t> dims;
  size_t bytes = 0;
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

namespace detail {

inline TensorInfo ToInfo(const kiln_tensor_info& c) {
  TensorInfo t;
  t.name = c.name;
  t.dtype = c.dtype;
  t.dims.assign(c.dims, c.dims + c.rank);
  t.bytes = c.bytes;
  return t;
}

// Attribute values in Kiln's text IR syntax (kiln_graph_op).
inline std::string Attr(int64_t v) { return std::to_string(v); }
inline std::string Attr(bool v) { return v ? "true" : "false"; }
inline std::string Attr(double v) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%.17g", v);
  std::string s = buffer;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // a float, not an int
  return s;
}
inline std::string Attr(const std::string& v) {
  std::string s = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') s += '\\';
    s += c;
  }
  return s + "\"";
}
inline std::string Attr(const char* v) { return Attr(std::string(v)); }
inline std::string Attr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}
inline std::string Attr(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + Attr(v[i]);
  return s + "]";
}

// "a=1, b=[2,3]" from name/value pairs already formatted.
class Attrs {
 public:
  template <typename T>
  Attrs& Set(const char* name, const T& value) {
    text_ += (text_.empty() ? "" : ", ") + std::string(name) + "=" + Attr(value);
    return *this;
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace detail

// A value of a graph under construction (kiln_value).
struct Value {
  kiln_value id = -1;
};

// Options of the typed helpers below; each field is the op's attribute of the same name, with
// Kiln's defaults (`kiln ops` and docs/EMBEDDING.md list them).
struct ConvolutionOptions {
  std::vector<int64_t> stride = {1}, pad = {0}, dilation = {1};
  int64_t group = 1;
};
struct PoolingOptions {
  std::string mode = "max";  // max | avg | avg_exclude_pad
  std::vector<int64_t> kernel, stride = {1}, pad = {0};
  bool global = false;
  std::string rounding = "floor";  // floor | ceil (Caffe's)
};
struct LrnOptions {
  std::string region = "across_channels";  // across_channels | within_channel
  int64_t local_size = 5;
  double alpha = 1.0, beta = 0.75, k = 1.0;
};
struct BatchNormOptions {
  double eps = 1e-5;
  bool use_global_stats = true;  // inference: the stored statistics
  double moving_average_fraction = 0.999;
};

// A network built op by op (kiln_graph). Every helper infers shapes at once: a bad shape or
// attribute is an error from the call that caused it, naming the node. Move-only.
class Graph {
 public:
  static Result<Graph> Create() {
    kiln_graph* g = nullptr;
    Status s = Status::FromC(kiln_graph_create(&g));
    if (!s.ok()) return s;
    return Graph(g);
  }
  Graph() = default;
  Graph(Graph&& other) noexcept : graph_(other.graph_) { other.graph_ = nullptr; }
  Graph& operator=(Graph&& other) noexcept {
    std::swap(graph_, other.graph_);
    return *this;
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() { kiln_graph_destroy(graph_); }
  const kiln_graph* c_handle() const { return graph_; }

  Result<Value> Input(const std::string& name, const std::vector<int64_t>& dims,
                      kiln_dtype dtype = KILN_F32) {
    Value v;
    Status s = Status::FromC(kiln_graph_input(graph_, name.c_str(), dtype,
                                              static_cast<int>(dims.size()), dims.data(), &v.id));
    if (!s.ok()) return s;
    return v;
  }
  // A weight tensor of f32 values (dense, row-major `dims`).
  Result<Value> Constant(const std::string& name, const std::vector<int64_t>& dims,
                         const std::vector<float>& values) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    if (static_cast<int64_t>(values.size()) != n) {
      return Status(KILN_INVALID_ARGUMENT, "Graph::Constant '" + name +
                                               "': " + std::to_string(values.size()) +
                                               " values for " + std::to_string(n) + " elements");
    }
    Value v;
    Status s = Status::FromC(kiln_graph_constant(graph_, name.c_str(), KILN_F32,
                                                 static_cast<int>(dims.size()), dims.data(),
                                                 values.data(), &v.id));
    if (!s.ok()) return s;
    return v;
  }
  Status Output(const std::string& name, Value v) {
    return Status::FromC(kiln_graph_output(graph_, name.c_str(), v.id));
  }
  // Any op by its name, `attributes` in Kiln's text IR syntax ("axis=1, log=false"); all its
  // outputs.
  Result<std::vector<Value>> Op(const std::string& op, const std::vector<Value>& inputs,
                                const std::string& attributes = "", const std::string& name = "") {
    std::vector<kiln_value> in;
    for (Value v : inputs) in.push_back(v.id);
    std::vector<kiln_value> out(16);
    int n = 0;
    Status s = Status::FromC(
        kiln_graph_op(graph_, op.c_str(), name.c_str(), static_cast<int>(in.size()), in.data(),
                      attributes.c_str(), static_cast<int>(out.size()), out.data(), &n));
    if (!s.ok()) return s;
    std::vector<Value> values(n);
    for (int i = 0; i < n; ++i) values[i].id = out[i];
    return values;
  }
  // The graph in Kiln's text IR.
  std::string Text() { return kiln_graph_text(graph_); }

  // ---- Typed helpers, one per op ----------------------------------------------------------
  // Convolution: x [N,C,...], filter [K,C/group,...], optional bias [K].
  Result<Value> Convolution(Value x, Value filter, const Value* bias,
                            const ConvolutionOptions& o = {}, const std::string& name = "") {
    return One("Convolution", Ins(x, filter, bias),
               detail::Attrs()
                   .Set("stride", o.stride)
                   .Set("pad", o.pad)
                   .Set("dilation", o.dilation)
                   .Set("group", o.group),
               name);
  }
  // Transposed convolution (Caffe's Deconvolution): filter [C, K/group, ...].
  Result<Value> Deconvolution(Value x, Value filter, const Value* bias,
                              const ConvolutionOptions& o = {}, const std::string& name = "") {
    return One("Deconvolution", Ins(x, filter, bias),
               detail::Attrs()
                   .Set("stride", o.stride)
                   .Set("pad", o.pad)
                   .Set("dilation", o.dilation)
                   .Set("group", o.group),
               name);
  }
  // y = x W^T + b over the dims from `axis` on (Caffe's InnerProduct); weight [K, features].
  Result<Value> InnerProduct(Value x, Value weight, const Value* bias, int64_t axis = 1,
                             const std::string& name = "") {
    return One("InnerProduct", Ins(x, weight, bias), detail::Attrs().Set("axis", axis), name);
  }
  Result<Value> Pooling(Value x, const PoolingOptions& o, const std::string& name = "") {
    return One("Pooling", {x},
               detail::Attrs()
                   .Set("mode", o.mode)
                   .Set("kernel", o.kernel)
                   .Set("stride", o.stride)
                   .Set("pad", o.pad)
                   .Set("global", o.global)
                   .Set("rounding", o.rounding),
               name);
  }
  Result<Value> LRN(Value x, const LrnOptions& o = {}, const std::string& name = "") {
    return One("LRN", {x},
               detail::Attrs()
                   .Set("region", o.region)
                   .Set("local_size", o.local_size)
                   .Set("alpha", o.alpha)
                   .Set("beta", o.beta)
                   .Set("k", o.k),
               name);
  }
  // Caffe's BatchNorm: x, mean, variance, scale_factor (the 3-blob form).
  Result<Value> BatchNorm(Value x, Value mean, Value variance, Value scale_factor,
                          const BatchNormOptions& o = {}, const std::string& name = "") {
    return One("BatchNorm", {x, mean, variance, scale_factor},
               detail::Attrs()
                   .Set("eps", o.eps)
                   .Set("use_global_stats", o.use_global_stats)
                   .Set("moving_average_fraction", o.moving_average_fraction),
               name);
  }
  // x * scale (+ bias), broadcast from `axis` over `num_axes` dims (Caffe's Scale).
  Result<Value> Scale(Value x, Value scale, const Value* bias, int64_t axis = 1,
                      int64_t num_axes = 1, const std::string& name = "") {
    return One("Scale", Ins(x, scale, bias),
               detail::Attrs().Set("axis", axis).Set("num_axes", num_axes), name);
  }
  Result<Value> Bias(Value x, Value bias, int64_t axis = 1, int64_t num_axes = 1,
                     const std::string& name = "") {
    return One("Bias", {x, bias}, detail::Attrs().Set("axis", axis).Set("num_axes", num_axes),
               name);
  }
  Result<Value> ReLU(Value x, double negative_slope = 0.0, const std::string& name = "") {
    return One("ReLU", {x}, detail::Attrs().Set("negative_slope", negative_slope), name);
  }
  // min(max(x, 0), ceiling): ReLU6 with the default.
  Result<Value> ClippedReLU(Value x, double ceiling = 6.0, const std::string& name = "") {
    return One("ClippedReLU", {x}, detail::Attrs().Set("ceiling", ceiling), name);
  }
  Result<Value> PReLU(Value x, Value slope, bool channel_shared = false,
                      const std::string& name = "") {
    return One("PReLU", {x, slope}, detail::Attrs().Set("channel_shared", channel_shared), name);
  }
  Result<Value> ELU(Value x, double alpha = 1.0, const std::string& name = "") {
    return One("ELU", {x}, detail::Attrs().Set("alpha", alpha), name);
  }
  Result<Value> Sigmoid(Value x, const std::string& name = "") {
    return One("Sigmoid", {x}, detail::Attrs(), name);
  }
  Result<Value> TanH(Value x, const std::string& name = "") {
    return One("TanH", {x}, detail::Attrs(), name);
  }
  Result<Value> AbsVal(Value x, const std::string& name = "") {
    return One("AbsVal", {x}, detail::Attrs(), name);
  }
  // (shift + scale * x) ^ power.
  Result<Value> Power(Value x, double power, double scale = 1.0, double shift = 0.0,
                      const std::string& name = "") {
    return One("Power", {x},
               detail::Attrs().Set("power", power).Set("scale", scale).Set("shift", shift), name);
  }
  // Identity at inference (an engine's optimizer removes it).
  Result<Value> Dropout(Value x, double ratio = 0.5, const std::string& name = "") {
    return One("Dropout", {x}, detail::Attrs().Set("ratio", ratio), name);
  }
  Result<Value> Softmax(Value x, int64_t axis = 1, bool log = false, const std::string& name = "") {
    return One("Softmax", {x}, detail::Attrs().Set("axis", axis).Set("log", log), name);
  }
  // sum (with `coeffs`), prod or max of the inputs.
  Result<Value> Eltwise(const std::vector<Value>& inputs, const std::string& operation = "sum",
                        const std::vector<double>& coeffs = {}, const std::string& name = "") {
    return One("Eltwise", inputs, detail::Attrs().Set("operation", operation).Set("coeffs", coeffs),
               name);
  }
  Result<Value> Concat(const std::vector<Value>& inputs, int64_t axis = 1,
                       const std::string& name = "") {
    return One("Concat", inputs, detail::Attrs().Set("axis", axis), name);
  }
  // Cuts x along `axis` at `slice_points` (or into `num_outputs` equal parts).
  Result<std::vector<Value>> Slice(Value x, int64_t axis, const std::vector<int64_t>& slice_points,
                                   int64_t num_outputs = 0, const std::string& name = "") {
    return Op("Slice", {x},
              detail::Attrs()
                  .Set("axis", axis)
                  .Set("slice_points", slice_points)
                  .Set("num_outputs", num_outputs)
                  .text(),
              name);
  }
  // `num_outputs` copies of x.
  Result<std::vector<Value>> Split(Value x, int64_t num_outputs = 2, const std::string& name = "") {
    return Op("Split", {x}, detail::Attrs().Set("num_outputs", num_outputs).text(), name);
  }
  Result<Value> Flatten(Value x, int64_t axis = 1, int64_t end_axis = -1,
                        const std::string& name = "") {
    return One("Flatten", {x}, detail::Attrs().Set("axis", axis).Set("end_axis", end_axis), name);
  }
  // Caffe's Reshape: 0 keeps a dim, -1 infers one.
  Result<Value> Reshape(Value x, const std::vector<int64_t>& shape, int64_t axis = 0,
                        int64_t num_axes = -1, const std::string& name = "") {
    return One("Reshape", {x},
               detail::Attrs().Set("shape", shape).Set("axis", axis).Set("num_axes", num_axes),
               name);
  }
  // x cropped to `reference`'s size from `axis` on, at `offset`.
  Result<Value> Crop(Value x, Value reference, int64_t axis = 2,
                     const std::vector<int64_t>& offset = {}, const std::string& name = "") {
    return One("Crop", {x, reference}, detail::Attrs().Set("axis", axis).Set("offset", offset),
               name);
  }
  // The same values in another dtype ("f32", "f16", "bf16", ...) and/or layout ("nchw", "nhwc").
  Result<Value> Convert(Value x, const std::string& dtype, const std::string& layout = "",
                        const std::string& name = "") {
    return One("Convert", {x}, detail::Attrs().Set("dtype", dtype).Set("layout", layout), name);
  }
  // Losses and metrics (training graphs; an engine computes their forward).
  Result<Value> SoftmaxWithLoss(Value logits, Value labels, int64_t axis = 1,
                                const std::string& name = "") {
    return One("SoftmaxWithLoss", {logits, labels}, detail::Attrs().Set("axis", axis), name);
  }
  Result<Value> Accuracy(Value scores, Value labels, int64_t top_k = 1,
                         const std::string& name = "") {
    return One("Accuracy", {scores, labels}, detail::Attrs().Set("top_k", top_k), name);
  }
  Result<Value> EuclideanLoss(Value a, Value b, const std::string& name = "") {
    return One("EuclideanLoss", {a, b}, detail::Attrs(), name);
  }
  Result<Value> SigmoidCrossEntropyLoss(Value logits, Value targets, const std::string& name = "") {
    return One("SigmoidCrossEntropyLoss", {logits, targets}, detail::Attrs(), name);
  }
  Result<Value> ContrastiveLoss(Value a, Value b, Value similar, double margin = 1.0,
                                const std::string& name = "") {
    return One("ContrastiveLoss", {a, b, similar}, detail::Attrs().Set("margin", margin), name);
  }

 private:
  explicit Graph(kiln_graph* graph) : graph_(graph) {}
  static std::vector<Value> Ins(Value a, Value b, const Value* optional) {
    std::vector<Value> v = {a, b};
    if (optional != nullptr) v.push_back(*optional);
    return v;
  }
  Result<Value> One(const char* op, const std::vector<Value>& inputs, const detail::Attrs& attrs,
                    const std::string& name) {
    Result<std::vector<Value>> out = Op(op, inputs, attrs.text(), name);
    if (!out.ok()) return out.status();
    if (out->size() != 1) {
      return Status(KILN_INTERNAL, std::string(op) + " made " + std::to_string(out->size()) +
                                       " outputs where one was expected");
    }
    return (*out)[0];
  }

  kiln_graph* graph_ = nullptr;
};

class Context;

// A compiled network and its weights on its device (kiln_engine). Copies share one engine
// (immutable, usable from any thread); it lives while a copy or a context of it does.
class Engine {
 public:
  static Result<Engine> FromCaffe(const std::string& prototxt, const std::string& caffemodel,
                                  const CompileOptions& options = {}) {
    const kiln_compile_options c = options.ToC();
    kiln_engine* e = nullptr;
    Status s = Status::FromC(kiln_engine_from_caffe(
        prototxt.c_str(), caffemodel.empty() ? nullptr : caffemodel.c_str(), &c, &e));
    if (!s.ok()) return s;
    return Engine(e);
  }
  static Result<Engine> FromGraph(const Graph& graph, const CompileOptions& options = {}) {
    const kiln_compile_options c = options.ToC();
    kiln_engine* e = nullptr;
    Status s = Status::FromC(kiln_engine_from_graph(graph.c_handle(), &c, &e));
    if (!s.ok()) return s;
    return Engine(e);
  }
  // A plan file written by Save (or `kiln compile --save-plan`); `device` "" keeps the saved
  // one, "cuda:N" picks another GPU of the same kind.
  static Result<Engine> Load(const std::string& path, const std::string& device = "") {
    kiln_compile_options c;
    kiln_compile_options_init(&c);
    c.device = device.empty() ? nullptr : device.c_str();
    kiln_engine* e = nullptr;
    Status s = Status::FromC(kiln_engine_load(path.c_str(), &c, &e));
    if (!s.ok()) return s;
    return Engine(e);
  }
  Engine() = default;

  // Writes the engine as a plan file; an existing file is replaced only with `overwrite`.
  Status Save(const std::string& path, bool overwrite = false) const {
    return Status::FromC(kiln_engine_save(engine_.get(), path.c_str(), overwrite ? 1 : 0));
  }

  std::vector<TensorInfo> Inputs() const { return Ports(true); }
  std::vector<TensorInfo> Outputs() const { return Ports(false); }
  std::string Describe() const { return kiln_engine_describe(engine_.get()); }
  // The CUDA device it runs on, -1 on the CPU.
  int CudaDevice() const { return kiln_engine_cuda_device(engine_.get()); }
  int64_t WeightsBytes() const { return kiln_engine_weights_bytes(engine_.get()); }
  int64_t ContextBytes() const { return kiln_engine_context_bytes(engine_.get()); }
  // The largest batch of a variable-batch engine, 0 for a fixed one.
  int64_t MaxBatch() const { return kiln_engine_max_batch(engine_.get()); }
  // A context for one thread: its own activations, the engine's weights.
  Result<Context> CreateContext() const;

  // What the compiler made of the network (kiln_engine_report_json): one JSON document with
  // the steps and the source layers each covers, the rewrites declined (why_not_fused) and the
  // memory plan; "" for an empty Engine.
  std::string ReportJson() const { return kiln_engine_report_json(engine_.get()); }
  // The plan as graphviz DOT text, fused kernels as clusters (`kiln dump --dot`).
  std::string GraphDot() const { return kiln_engine_graph_dot(engine_.get()); }
  // The activation arena over the steps as an SVG document (`kiln dump --memory`).
  std::string MemorySvg() const { return kiln_engine_memory_svg(engine_.get()); }

  kiln_engine* c_handle() const { return engine_.get(); }

 private:
  explicit Engine(kiln_engine* e) : engine_(e, kiln_engine_destroy) {}
  std::vector<TensorInfo> Ports(bool inputs) const {
    std::vector<TensorInfo> out;
    const int n =
        inputs ? kiln_engine_num_inputs(engine_.get()) : kiln_engine_num_outputs(engine_.get());
    for (int i = 0; i < n; ++i) {
      kiln_tensor_info info;
      const kiln_status s = inputs ? kiln_engine_input(engine_.get(), i, &info)
                                   : kiln_engine_output(engine_.get(), i, &info);
      if (s == KILN_OK) out.push_back(detail::ToInfo(info));
    }
    return out;
  }
  std::shared_ptr<kiln_engine> engine_;
};

// One thread's runs of an engine (kiln_context). Move-only.
class Context {
 public:
  Context() = default;
  Context(Context&& other) noexcept : context_(other.context_) { other.context_ = nullptr; }
  Context& operator=(Context&& other) noexcept {
    std::swap(context_, other.context_);
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() { kiln_context_destroy(context_); }

  // Host data in: exactly the input's elements, in its dtype.
  template <typename T>
  Status SetInput(const std::string& name, const std::vector<T>& values) {
    return Status::FromC(
        kiln_context_set_input(context_, name.c_str(), values.data(), values.size() * sizeof(T)));
  }
  Status SetInput(const std::string& name, const void* data, size_t bytes) {
    return Status::FromC(kiln_context_set_input(context_, name.c_str(), data, bytes));
  }
  // Runs on the inputs set; synchronous.
  Status Run() { return Status::FromC(kiln_context_run(context_)); }
  // The output `name` of the last Run, `count` elements of T (T the output's dtype).
  template <typename T>
  Result<std::vector<T>> Output(const std::string& name, size_t count) const {
    std::vector<T> values(count);
    Status s = Status::FromC(
        kiln_context_get_output(context_, name.c_str(), values.data(), count * sizeof(T)));
    if (!s.ok()) return s;
    return values;
  }
  // Device buffers the caller owns, ordered on the caller's CUDA stream (nullptr: the
  // context's own); returns once enqueued. See kiln_context_run_device.
  Status RunOnDevice(const std::map<std::string, const void*>& inputs,
                     const std::map<std::string, void*>& outputs, void* cuda_stream = nullptr) {
    std::vector<const char*> in_names, out_names;
    std::vector<const void*> in;
    std::vector<void*> out;
    for (const auto& [name, p] : inputs) {
      in_names.push_back(name.c_str());
      in.push_back(p);
    }
    for (const auto& [name, p] : outputs) {
      out_names.push_back(name.c_str());
      out.push_back(p);
    }
    return Status::FromC(kiln_context_run_device(
        context_, static_cast<int>(in.size()), in_names.data(), in.data(),
        static_cast<int>(out.size()), out_names.data(), out.data(), cuda_stream));
  }
  Status Synchronize() { return Status::FromC(kiln_context_synchronize(context_)); }
  // The batch of the last Run.
  int64_t Batch() const { return kiln_context_batch(context_); }
  // The median milliseconds of one forward on the inputs set, over `iterations` after a run and
  // `warmup` more (kiln_context_time).
  Result<double> Time(int iterations, int warmup = 3) {
    double ms = 0;
    Status s = Status::FromC(kiln_context_time(context_, iterations, warmup, &ms));
    if (!s.ok()) return s;
    return ms;
  }

 private:
  friend class Engine;
  explicit Context(kiln_context* c) : context_(c) {}
  kiln_context* context_ = nullptr;
};

inline Result<Context> Engine::CreateContext() const {
  kiln_context* c = nullptr;
  Status s = Status::FromC(kiln_context_create(engine_.get(), &c));
  if (!s.ok()) return s;
  return Context(c);
}

// A blob of a Net, or a parameter blob (kiln_blob_info): data and diff are the net's host
// memory, valid while the net lives (null for a trainer's parameters).
struct BlobInfo {
  std::string name;
  int index = 0;
  std::vector<int64_t> dims;
  size_t count = 0;
  float* data = nullptr;
  float* diff = nullptr;
};

namespace detail {
inline BlobInfo ToBlob(const kiln_blob_info& c) {
  BlobInfo b;
  b.name = c.name;
  b.index = c.index;
  b.dims.assign(c.dims, c.dims + c.rank);
  b.count = c.count;
  b.data = c.data;
  b.diff = c.diff;
  return b;
}
}  // namespace detail

// A layer of a Net: its name, type and number of parameter blobs.
struct LayerInfo {
  std::string name, type;
  int num_params = 0;
};

// A Caffe net as pycaffe shows it (kiln_net): every blob and parameter blob by name, forward
// and backward on demand. Move-only.
class Net {
 public:
  // `caffemodel` empty: the layers' fillers. options: device, precision, layout, algo, batch.
  static Result<Net> Create(const std::string& prototxt, const std::string& caffemodel,
                            bool train_phase = false, const CompileOptions& options = {}) {
    const kiln_compile_options c = options.ToC();
    kiln_net* n = nullptr;
    Status s = Status::FromC(
        kiln_net_create(prototxt.c_str(), caffemodel.empty() ? nullptr : caffemodel.c_str(),
                        train_phase ? KILN_PHASE_TRAIN : KILN_PHASE_TEST, &c, &n));
    if (!s.ok()) return s;
    return Net(n);
  }
  Net() = default;
  Net(Net&& other) noexcept : net_(other.net_) { other.net_ = nullptr; }
  Net& operator=(Net&& other) noexcept {
    std::swap(net_, other.net_);
    return *this;
  }
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;
  ~Net() { kiln_net_destroy(net_); }

  std::string Describe() const { return kiln_net_describe(net_); }
  std::vector<BlobInfo> Blobs() const {
    std::vector<BlobInfo> out;
    for (int i = 0; i < kiln_net_num_blobs(net_); ++i) {
      kiln_blob_info info;
      if (kiln_net_blob(net_, i, &info) == KILN_OK) out.push_back(detail::ToBlob(info));
    }
    return out;
  }
  std::vector<LayerInfo> Layers() const {
    std::vector<LayerInfo> out;
    for (int i = 0; i < kiln_net_num_layers(net_); ++i) {
      const char* name = nullptr;
      const char* type = nullptr;
      int n = 0;
      if (kiln_net_layer(net_, i, &name, &type, &n) == KILN_OK) out.push_back({name, type, n});
    }
    return out;
  }
  // Parameter blob `index` of the layer at `layer` (Layers()'s order).
  Result<BlobInfo> Param(int layer, int index) const {
    kiln_blob_info info;
    Status s = Status::FromC(kiln_net_param(net_, layer, index, &info));
    if (!s.ok()) return s;
    return detail::ToBlob(info);
  }
  std::vector<std::string> Inputs() const { return Names(kiln_net_input); }
  std::vector<std::string> FedInputs() const { return Names(kiln_net_fed_input); }
  std::vector<std::string> Outputs() const { return Names(kiln_net_output); }
  Status Forward() { return Status::FromC(kiln_net_forward(net_)); }
  Status Backward() { return Status::FromC(kiln_net_backward(net_)); }
  Status Save(const std::string& path, bool overwrite = false) const {
    return Status::FromC(kiln_net_save(net_, path.c_str(), overwrite ? 1 : 0));
  }
  Status CopyFrom(const std::string& caffemodel) {
    return Status::FromC(kiln_net_copy_from(net_, caffemodel.c_str()));
  }

 private:
  explicit Net(kiln_net* n) : net_(n) {}
  std::vector<std::string> Names(const char* (*at)(const kiln_net*, int)) const {
    std::vector<std::string> out;
    for (int i = 0; const char* name = at(net_, i); ++i) out.push_back(name);
    return out;
  }
  kiln_net* net_ = nullptr;
};

// Training with a Caffe solver file (kiln_trainer). Move-only.
class Trainer {
 public:
  // `caffemodel` empty: the net's fillers.
  static Result<Trainer> FromSolver(const std::string& solver, const std::string& caffemodel = "",
                                    const CompileOptions& options = {}) {
    CompileOptions training = options;
    training.optimize = false;  // the trainer picks its own rewrites
    const kiln_compile_options c = training.ToC();
    kiln_trainer* t = nullptr;
    Status s = Status::FromC(kiln_trainer_from_solver(
        solver.c_str(), caffemodel.empty() ? nullptr : caffemodel.c_str(), &c, &t));
    if (!s.ok()) return s;
    return Trainer(t);
  }
  // `solver_type` empty: the file's; else SGD | Nesterov | AdaGrad | RMSProp | AdaDelta | Adam.
  static Result<Trainer> Create(const std::string& solver, const std::string& solver_type,
                                const std::string& caffemodel = "",
                                const CompileOptions& options = {}) {
    CompileOptions training = options;
    training.optimize = false;
    const kiln_compile_options c = training.ToC();
    kiln_trainer_options o;
    kiln_trainer_options_init(&o);
    o.solver_type = solver_type.empty() ? nullptr : solver_type.c_str();
    o.caffemodel = caffemodel.empty() ? nullptr : caffemodel.c_str();
    o.compile = &c;
    kiln_trainer* t = nullptr;
    Status s = Status::FromC(kiln_trainer_create(solver.c_str(), &o, &t));
    if (!s.ok()) return s;
    return Trainer(t);
  }
  Trainer() = default;
  Trainer(Trainer&& other) noexcept : trainer_(other.trainer_) { other.trainer_ = nullptr; }
  Trainer& operator=(Trainer&& other) noexcept {
    std::swap(trainer_, other.trainer_);
    return *this;
  }
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;
  ~Trainer() { kiln_trainer_destroy(trainer_); }

  Status Step(int iterations = 1) { return Status::FromC(kiln_trainer_step(trainer_, iterations)); }
  int64_t Iteration() const { return kiln_trainer_iteration(trainer_); }
  double Loss() const { return kiln_trainer_loss(trainer_); }
  // prefix empty: the solver's snapshot_prefix.
  Status Snapshot(const std::string& prefix = "") {
    return Status::FromC(
        kiln_trainer_snapshot(trainer_, prefix.empty() ? nullptr : prefix.c_str()));
  }
  Status Restore(const std::string& solverstate) {
    return Status::FromC(kiln_trainer_restore(trainer_, solverstate.c_str()));
  }
  // The solver's settings (kiln_trainer_solver_json).
  std::string SolverJson() const { return kiln_trainer_solver_json(trainer_); }
  int NumTestNets() const { return kiln_trainer_num_test_nets(trainer_); }
  // {"output": mean, ...} over test net `net`'s test_iter batches.
  Result<std::string> Test(int net = 0) {
    const char* json = nullptr;
    Status s = Status::FromC(kiln_trainer_test(trainer_, net, &json));
    if (!s.ok()) return s;
    return std::string(json);
  }
  // The TRAIN net's parameter blobs (data and diff null: read them with GetParam).
  std::vector<BlobInfo> Params() const {
    std::vector<BlobInfo> out;
    for (int i = 0; i < kiln_trainer_num_params(trainer_); ++i) {
      kiln_blob_info info;
      if (kiln_trainer_param(trainer_, i, &info) == KILN_OK) out.push_back(detail::ToBlob(info));
    }
    return out;
  }
  Status GetParam(int index, float* data, size_t count) const {
    return Status::FromC(kiln_trainer_get_param(trainer_, index, data, count));
  }
  Status SetParam(int index, const float* data, size_t count) {
    return Status::FromC(kiln_trainer_set_param(trainer_, index, data, count));
  }

 private:
  explicit Trainer(kiln_trainer* t) : trainer_(t) {}
  kiln_trainer* trainer_ = nullptr;
};

}  // namespace api
}  // namespace kiln

#endif  // KILN_KILN_HPP_
