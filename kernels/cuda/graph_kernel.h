// The frame every CUDA graph kernel shares. A graph kernel is a thin adapter: at plan time it
// turns a node's types and attributes into the primitive library's descriptors (kiln::dnn) and
// decides its workspace; at run time it calls the primitive on the context's handle. The
// adapters live here, one file per op family, apart from the cuDNN-like library in kernels/cuda.
//
// Dtypes: every adapter takes f32, f16 and bf16 data (the key's dtype is "any"); math is f32
// inside the primitives. Layouts: any strides the primitive accepts (NCHW, NHWC, sub-regions).
#ifndef KILN_KERNELS_CUDA_GRAPH_KERNEL_H_
#define KILN_KERNELS_CUDA_GRAPH_KERNEL_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/descriptors.h"
#include "ir/graph.h"
#include "kernels/dnn_plans/tensor.h"
#include "kernels/kernel.h"
#include "kernels/kernel_registry.h"

namespace kiln {
namespace cuda_graph {

// The primitive library's descriptor of a value's type, and a descriptor with a unit dim
// inserted: kernels/dnn_plans/tensor.h, shared with the reference kernels.
using dnn_plans::DescriptorOf;
using dnn_plans::WithUnitDim;

// The running context's primitive handle, bound to the args' stream and cuBLAS handle; made on
// first use and kept in the context's KernelResources (so cuFFT plans survive between runs).
absl::StatusOr<dnn::Handle*> HandleOf(const KernelArgs& args);

// What a prepared node does at run time, on the context's handle.
using RunFn = std::function<absl::Status(dnn::Handle& handle, const KernelArgs& args)>;

struct PreparedKernel {
  RunFn run;                   // Unused when aliased_input >= 0.
  size_t workspace_bytes = 0;  // Asked for at plan time; args.workspace holds at least this.
  int aliased_input = -1;      // Output 0 is input i's bytes seen differently: no work at all.
  int in_place_input = -1;     // run may write output 0 over input i (Kernel::InPlaceInput).
  std::string description;     // What was chosen at plan time, for plan dumps ("algo=fft").
  double measured_ms = -1;     // The choice's measured time (Kernel::MeasuredMs), or negative.
};

// The primitive descriptors refuse zero-sized dims, and an empty output needs no work: such a
// node gets a kernel that does nothing.
bool OutputIsEmpty(const Node& node);
PreparedKernel NothingToDo();

// The launchers' storage for a value's dtype: f16 and bf16 as themselves, anything else as f32
// (the index inputs the precision pass keeps f32 among them).
inline cuda::Storage StorageOf(DataType t) {
  return t == DataType::kF16    ? cuda::Storage::kF16
         : t == DataType::kBF16 ? cuda::Storage::kBF16
                                : cuda::Storage::kF32;
}

// `bytes` rounded up to the 256-byte alignment every slice of a workspace keeps.
inline size_t AlignedBytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Unimplemented naming the op and the first input or output that is not packed row-major: the
// check of the adapters whose primitives see their tensors as plain rows (RNN, Embed, Tile,
// Reduction).
absl::Status RequirePacked(const Node& node);

using CheckFn = std::function<absl::Status(const Node& node)>;
using PrepareFn =
    std::function<absl::StatusOr<PreparedKernel>(const Node& node, const KernelOptions& options)>;

// OK when every input and output is f32, f16 or bf16 (the data types the adapters take);
// Unimplemented naming the first other one. Ops with label inputs check those themselves and
// pass `skip_input` to exempt them.
absl::Status RequireFloatData(const Node& node, int skip_input = -1);

// Registers "cuda.<op>.any.<layout>.<algorithm>". CanImplement runs RequireFloatData (unless
// `check_dtypes` is false) and then `check`; creating the kernel runs `prepare`.
absl::Status RegisterGraphKernel(KernelRegistry& registry, const std::string& op,
                                 const std::string& layout, const std::string& algorithm,
                                 CheckFn check, PrepareFn prepare, int priority = 0,
                                 bool check_dtypes = true);

// `count` f32 ones followed by `count` zeros in device memory, owned by one context: the
// identity parameters of the per-feature affine kernel (BatchNorm, Scale, the convolution's
// bias + ReLU pass).
class IdentityParams {
 public:
  static absl::StatusOr<std::unique_ptr<IdentityParams>> Create(int64_t count);
  ~IdentityParams();
  IdentityParams(const IdentityParams&) = delete;
  IdentityParams& operator=(const IdentityParams&) = delete;
  const float* ones() const { return data_; }
  const float* zeros() const { return data_ + count_; }

 private:
  IdentityParams(float* data, int64_t count) : data_(data), count_(count) {}
  float* data_;
  int64_t count_;
};
// The running context's identity parameters for `count` features, made on first use.
absl::StatusOr<const IdentityParams*> IdentityFor(const KernelArgs& a, int64_t count);

// f32 values fixed at plan time (coefficients computed from a node's constants) in device
// memory, owned by one context and uploaded on its first run, like IdentityParams.
class DeviceFloats {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceFloats>> Create(const std::vector<float>& host);
  ~DeviceFloats();
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  const float* data() const { return data_; }

 private:
  explicit DeviceFloats(float* data) : data_(data) {}
  float* data_;
};
// The running context's copy of `host` under `key` (unique to the prepared kernel), made on
// first use.
absl::StatusOr<const DeviceFloats*> DeviceFloatsFor(const KernelArgs& a, const std::string& key,
                                                    const std::vector<float>& host);

// The number of streaming multiprocessors of the current device (1 when it cannot be read).
int CurrentDeviceMultiprocessors();

}  // namespace cuda_graph
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_GRAPH_KERNEL_H_
