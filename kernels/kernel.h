// The kernel interface. A KernelFactory says whether it can implement a node (and why not),
// chooses how it would run it under given options (the algorithm, and the workspace that
// needs) without building anything, and builds the Kernel for a choice. The planner weighs
// choices against its memory budget and builds each step's kernel once, from the choice it
// keeps (CUTLASS's get_workspace_size-before-initialize contract). A Kernel runs on pre-bound
// buffers: Run never allocates, synchronizes or copies between host and device.
#ifndef KILN_KERNELS_KERNEL_H_
#define KILN_KERNELS_KERNEL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph.h"
#include "ir/tensor_type.h"

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

// Objects a kernel keeps per ExecutionContext across runs (the primitive library's handle with
// its cuFFT plans, say). A context is used by one thread at a time, so this needs no lock; the
// kernel itself stays immutable and shareable between contexts.
class KernelResources {
 public:
  // The object stored under `key`, made by `make` on first use.
  template <typename T>
  absl::StatusOr<T*> GetOrCreate(const std::string& key,
                                 const std::function<absl::StatusOr<std::unique_ptr<T>>()>& make) {
    auto it = objects_.find(key);
    if (it != objects_.end()) return static_cast<T*>(it->second.get());
    absl::StatusOr<std::unique_ptr<T>> made = make();
    if (!made.ok()) return made.status();
    T* raw = made->get();
    objects_.emplace(key, std::shared_ptr<void>(std::move(*made)));
    return raw;
  }

 private:
  std::map<std::string, std::shared_ptr<void>> objects_;
};

struct KernelArgs {
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  void* workspace = nullptr;  // At least WorkspaceBytes(), 256-byte aligned.
  size_t workspace_bytes = 0;
  void* stream = nullptr;                // cudaStream_t for CUDA kernels.
  void* blas_handle = nullptr;           // cublasHandle_t for CUDA kernels that call cuBLAS.
  KernelResources* resources = nullptr;  // The running context's; never null from the executor.
};

class TuningCache;

// What the compiler tells every kernel it creates: the math mode, how to choose algorithms and
// the memory they may use.
struct KernelOptions {
  // f32 convolutions and inner products may run on TF32 tensor cores (10-bit mantissas, f32
  // accumulation), as PyTorch's allow_tf32.
  bool allow_tf32 = false;
  // Time every applicable algorithm on buffers of the node's shapes (as cudnnFind) instead of
  // trusting the heuristic's order.
  bool measure_algorithms = false;
  // Largest workspace one kernel may take.
  int64_t workspace_limit = std::numeric_limits<int64_t>::max();
  // Remembered algorithm choices (loaded from and saved to the tuning file); may be null.
  TuningCache* tuning = nullptr;
  // Whether new measurements go into `tuning`. Off for the compiler's re-choices under a memory
  // budget, whose workspace limit is the plan's, not the problem's: saved, they would replace
  // the problem's unbounded choice for every later plan.
  bool save_tuning = true;
  // Identifies the GPU in tuning keys ("NVIDIA H100 80GB HBM3 sm_90").
  std::string device_name;
  // The plan is for a GPU that is not here (CompileOptions::cuda_target): it is inspected, not
  // run. Choices that need the device to be sized are left out (the FFT convolution), and
  // kernels that ask the device what it has (Hopper's wgmma, clusters) find nothing.
  bool without_device = false;
  // With without_device: the absent GPU's SM count, which sizes grids and split-K workspaces.
  int multiprocessors = 0;
  // Set by the planner when it prepares a step again because its workspace would lift the
  // plan's peak: input 0 dies at this step (no later step reads its bytes; it is not a graph
  // input or output, and no other input shares them), so the kernel may use those bytes as
  // scratch once it has read what it needs from them, as well as the bytes of output 0 it has
  // not written yet. A kernel that can do its work in those bytes reports less workspace.
  bool input_dies_here = false;
};

// A kernel prepared for one node. Immutable after creation, so one plan may run on several
// threads at once.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual size_t WorkspaceBytes() const { return 0; }
  // When output 0 is only a different view of input i's bytes (Flatten and Reshape of a dense
  // tensor), i; the planner then gives the output the input's buffer and Run is never called.
  virtual int AliasedInput() const { return -1; }
  // When Run may write output 0 over input i's bytes (an element-wise op: each element is read
  // before the same thread writes it), i; the planner does so when input i dies at this step.
  virtual int InPlaceInput() const { return -1; }
  // What the kernel decided at creation (the algorithm a convolution chose, ...), for plan dumps.
  virtual std::string Describe() const { return ""; }
  // The time, in ms, that the choice took when it was measured at plan time (--algo measure);
  // negative when not measured. The compiler weighs workspace against it.
  virtual double MeasuredMs() const { return -1; }
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

// What a factory decided for one node under some KernelOptions, before any kernel exists.
struct KernelChoice {
  size_t workspace_bytes = 0;  // The built kernel's WorkspaceBytes().
  int aliased_input = -1;      // Its AliasedInput().
  int in_place_input = -1;     // Its InPlaceInput().
  std::string description;     // Its Describe().
  double measured_ms = -1;     // Its MeasuredMs().
  // The factory's own record of the decision (the algorithm, the prepared launch), handed back
  // to build; opaque to the planner. Null for kernels that decide nothing at plan time.
  std::shared_ptr<const void> decision;
};

// The choice of a kernel that decides nothing at plan time: what it needs follows from the
// node's types alone.
KernelChoice FixedChoice(size_t workspace_bytes = 0, int in_place_input = -1,
                         int aliased_input = -1);

struct KernelFactory {
  KernelKey key;
  // OK when this kernel can run `node`, else a status whose message says why not.
  std::function<absl::Status(const Node& node)> can_implement;
  // How this kernel would run `node` under `options`: the algorithm (measured, or taken from
  // options.tuning) and the workspace it needs. Builds nothing; the planner may ask again with
  // other options (a smaller workspace_limit, input_dies_here) and keep any one answer.
  std::function<absl::StatusOr<KernelChoice>(const Node& node, const KernelOptions& options)>
      choose;
  // The kernel for a choice `choose` made for `node`.
  std::function<absl::StatusOr<std::unique_ptr<Kernel>>(const Node& node,
                                                        const KernelChoice& choice)>
      build;
  // Higher wins when several kernels of one backend can implement a node.
  int priority = 0;
};

// factory.build, with the kernel checked against the choice it was built from: a kernel that
// needs other workspace than its factory said is an Internal error, not a buffer overrun.
absl::StatusOr<std::unique_ptr<Kernel>> BuildChosen(const KernelFactory& factory, const Node& node,
                                                    const KernelChoice& choice);
// Choose, then build.
absl::StatusOr<std::unique_ptr<Kernel>> CreateKernel(const KernelFactory& factory, const Node& node,
                                                     const KernelOptions& options);

// OK when every input and output of `node` is dense row-major f32 (the contract of the CPU GEMM
// kernels and of the first CUDA kernels); Unimplemented naming the offending type otherwise.
absl::Status RequireDenseF32(const Node& node);

}  // namespace kiln

#endif  // KILN_KERNELS_KERNEL_H_
