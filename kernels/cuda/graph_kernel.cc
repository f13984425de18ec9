#include "kernels/cuda/graph_kernel.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {
namespace cuda_graph {

namespace {

class PrimitiveKernel : public Kernel {
 public:
  PrimitiveKernel(std::string name, PreparedKernel prepared)
      : name_(std::move(name)), prepared_(std::move(prepared)) {}
  size_t WorkspaceBytes() const override { return prepared_.workspace_bytes; }
  int AliasedInput() const override { return prepared_.aliased_input; }
  int InPlaceInput() const override { return prepared_.in_place_input; }
  std::string Describe() const override { return prepared_.description; }
  double MeasuredMs() const override { return prepared_.measured_ms; }
  absl::Status Run(const KernelArgs& args) const override {
    if (prepared_.aliased_input >= 0) return absl::OkStatus();
    if (args.workspace_bytes < prepared_.workspace_bytes) {
      return absl::InternalError(absl::StrCat(name_, ": given ", args.workspace_bytes,
                                              " workspace bytes, prepared for ",
                                              prepared_.workspace_bytes));
    }
    KILN_ASSIGN_OR_RETURN(dnn::Handle * handle, HandleOf(args));
    return prepared_.run(*handle, args);
  }

 private:
  std::string name_;
  PreparedKernel prepared_;
};

bool IsFloatData(DataType t) {
  return t == DataType::kF32 || t == DataType::kF16 || t == DataType::kBF16;
}

}  // namespace

int CurrentDeviceMultiprocessors() {
  int device = 0, sms = 1;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();  // no device here: the count only tunes grid sizes
    return 1;
  }
  return sms;
}

absl::StatusOr<dnn::Handle*> HandleOf(const KernelArgs& args) {
  if (args.resources == nullptr) {
    return absl::FailedPreconditionError("cuda graph kernel run without a context's resources");
  }
  KILN_ASSIGN_OR_RETURN(dnn::Handle * handle,
                        args.resources->GetOrCreate<dnn::Handle>(
                            "dnn.handle", [&]() -> absl::StatusOr<std::unique_ptr<dnn::Handle>> {
                              return std::make_unique<dnn::Handle>(args.stream, args.blas_handle,
                                                                   CurrentDeviceMultiprocessors());
                            }));
  if (handle->stream() != args.stream) KILN_RETURN_IF_ERROR(handle->SetStream(args.stream));
  return handle;
}

absl::Status RequireFloatData(const Node& node, int skip_input) {
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (i == skip_input) continue;
    const TensorType& t = node.input(i).type();
    if (!IsFloatData(t.dtype())) {
      return absl::UnimplementedError(
          absl::StrCat("input ", i, " is ", t.ToString(), "; the CUDA kernels take f32/f16/bf16"));
    }
  }
  for (const TensorType& t : node.output_types()) {
    if (!IsFloatData(t.dtype())) {
      return absl::UnimplementedError(
          absl::StrCat("output ", t.ToString(), " is not f32/f16/bf16"));
    }
  }
  return absl::OkStatus();
}

absl::Status RegisterGraphKernel(KernelRegistry& registry, const std::string& op,
                                 const std::string& layout, const std::string& algorithm,
                                 CheckFn check, PrepareFn prepare, int priority,
                                 bool check_dtypes) {
  KernelFactory f;
  f.key = {op, Backend::kCuda, "any", layout, algorithm};
  f.priority = priority;
  f.can_implement = [check, check_dtypes](const Node& node) -> absl::Status {
    if (check_dtypes) KILN_RETURN_IF_ERROR(RequireFloatData(node));
    return check ? check(node) : absl::OkStatus();
  };
  const std::string name = f.key.Name();
  // Preparing is the choice: it picks the algorithm, sizes the workspace and captures the
  // launch, all on the host. The kernel built from it only holds the prepared launch.
  f.choose = [prepare, name](const Node& node,
                             const KernelOptions& options) -> absl::StatusOr<KernelChoice> {
    KILN_ASSIGN_OR_RETURN(PreparedKernel prepared, prepare(node, options));
    if (!prepared.run && prepared.aliased_input < 0) {
      return absl::InternalError(absl::StrCat(name, ": prepared without a run function"));
    }
    KernelChoice choice;
    choice.workspace_bytes = prepared.workspace_bytes;
    choice.aliased_input = prepared.aliased_input;
    choice.in_place_input = prepared.in_place_input;
    choice.description = prepared.description;
    choice.measured_ms = prepared.measured_ms;
    choice.decision = std::make_shared<const PreparedKernel>(std::move(prepared));
    return choice;
  };
  f.build = [name](const Node&,
                   const KernelChoice& choice) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    const auto* prepared = static_cast<const PreparedKernel*>(choice.decision.get());
    if (prepared == nullptr) {
      return absl::InternalError(absl::StrCat(name, ": built from a choice it did not make"));
    }
    return std::unique_ptr<Kernel>(new PrimitiveKernel(name, *prepared));
  };
  return registry.Register(std::move(f));
}

absl::StatusOr<std::unique_ptr<IdentityParams>> IdentityParams::Create(int64_t count) {
  std::vector<float> host(2 * count, 0.0f);
  std::fill(host.begin(), host.begin() + count, 1.0f);
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, host.size() * sizeof(float));
  if (e == cudaSuccess) {
    e = cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (p != nullptr) cudaFree(p);
    const std::string what =
        absl::StrCat("cuda identity parameters (", count, " features): ", cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? absl::ResourceExhaustedError(what)
                                          : absl::InternalError(what);
  }
  return std::unique_ptr<IdentityParams>(new IdentityParams(static_cast<float*>(p), count));
}

IdentityParams::~IdentityParams() { cudaFree(data_); }

absl::StatusOr<std::unique_ptr<DeviceFloats>> DeviceFloats::Create(const std::vector<float>& host) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, std::max<size_t>(1, host.size()) * sizeof(float));
  if (e == cudaSuccess && !host.empty()) {
    e = cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (p != nullptr) cudaFree(p);
    const std::string what = absl::StrCat("cuda plan-time constants (", host.size(),
                                          " floats): ", cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? absl::ResourceExhaustedError(what)
                                          : absl::InternalError(what);
  }
  return std::unique_ptr<DeviceFloats>(new DeviceFloats(static_cast<float*>(p)));
}

DeviceFloats::~DeviceFloats() { cudaFree(data_); }

absl::StatusOr<const DeviceFloats*> DeviceFloatsFor(const KernelArgs& a, const std::string& key,
                                                    const std::vector<float>& host) {
  if (a.resources == nullptr) {
    return absl::FailedPreconditionError("cuda plan-time constants: run without context resources");
  }
  return a.resources->GetOrCreate<DeviceFloats>(key,
                                                [&host]() { return DeviceFloats::Create(host); });
}

absl::StatusOr<const IdentityParams*> IdentityFor(const KernelArgs& a, int64_t count) {
  if (a.resources == nullptr) {
    return absl::FailedPreconditionError("cuda identity parameters: run without context resources");
  }
  return a.resources->GetOrCreate<IdentityParams>(
      absl::StrCat("batchnorm.identity.", count),
      [count]() { return IdentityParams::Create(count); });
}

bool OutputIsEmpty(const Node& node) { return node.output_types()[0].num_elements() == 0; }

PreparedKernel NothingToDo() {
  PreparedKernel k;
  k.run = [](dnn::Handle&, const KernelArgs&) { return absl::OkStatus(); };
  k.description = "empty";
  return k;
}

absl::Status RequirePacked(const Node& node) {
  for (const Value& v : node.inputs()) {
    if (!v.type().IsContiguous()) {
      return absl::UnimplementedError(
          absl::StrCat("cuda ", node.op(), ": input ", v.type().ToString(), " is not packed"));
    }
  }
  for (const TensorType& t : node.output_types()) {
    if (!t.IsContiguous()) {
      return absl::UnimplementedError(
          absl::StrCat("cuda ", node.op(), ": output ", t.ToString(), " is not packed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace cuda_graph
}  // namespace kiln
