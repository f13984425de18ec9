// The kernel interface. A KernelFactory says whether it can implement a node (and why not) and
// creates a Kernel for it at plan time; the Kernel reports its workspace need and runs on
// pre-bound buffers. Run never allocates, synchronizes or copies between host and device.
#ifndef KILN_KERNELS_KERNEL_H_
#define KILN_KERNELS_KERNEL_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ir/graph.h"
#include "engine/ir/tensor_type.h"

namespace kiln {

// Where a kernel runs. kReference and kCpu both run on the host; kReference is the readable
// oracle, kCpu the fast path.
enum class Backend { kReference, kCpu, kCuda };

absl::string_view BackendName(Backend backend);

// A buffer and the type describing it (strides in elements).
struct TensorView {
  void* data = nullptr;
  TensorType type;
};

struct KernelArgs {
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  void* workspace = nullptr;  // At least WorkspaceBytes(), 256-byte aligned.
  size_t workspace_bytes = 0;
  void* stream = nullptr;       // cudaStream_t for CUDA kernels.
  void* blas_handle = nullptr;  // cublasHandle_t for CUDA kernels that call cuBLAS.
};

// A kernel prepared for one node. Immutable after creation, so one plan may run on several
// threads at once.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual size_t WorkspaceBytes() const { return 0; }
  virtual absl::Status Run(const KernelArgs& args) const = 0;
};

// The identity of a kernel: "<backend>.<op>.<dtype>.<layout>.<algorithm>", e.g.
// "cuda.convolution.f32.nchw.direct". layout is "any" for kernels that take any strides.
struct KernelKey {
  std::string op;
  Backend backend;
  std::string dtype;  // "f32", or "any" for kernels that convert.
  std::string layout;
  std::string algorithm;

  std::string Name() const;
};

struct KernelFactory {
  KernelKey key;
  // OK when this kernel can run `node`, else a status whose message says why not.
  std::function<absl::Status(const Node& node)> can_implement;
  std::function<absl::StatusOr<std::unique_ptr<Kernel>>(const Node& node)> create;
  // Higher wins when several kernels of one backend can implement a node.
  int priority = 0;
};

// OK when every input and output of `node` is dense row-major f32 (the contract of the CPU GEMM
// kernels and of the first CUDA kernels); Unimplemented naming the offending type otherwise.
absl::Status RequireDenseF32(const Node& node);

}  // namespace kiln

#endif  // KILN_KERNELS_KERNEL_H_
