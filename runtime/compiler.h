// Compile: Graph -> ExecutionPlan, in stages that fail separately (verify, order, backend and
// kernel selection, memory planning), each error prefixed with its stage.
#ifndef KILN_RUNTIME_COMPILER_H_
#define KILN_RUNTIME_COMPILER_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/kernel_registry.h"
#include "runtime/device.h"
#include "runtime/execution_plan.h"

namespace kiln {

enum class BackendChoice {
  kAuto,       // CUDA when a GPU is usable and every node has a CUDA kernel, else CPU.
  kCuda,       // CUDA or an error.
  kCpu,        // Host: the fast CPU kernel where one applies, the reference kernel elsewhere.
  kReference,  // Host, reference kernels only (the oracle).
};

// The dtype a CUDA plan computes in. kAsGraph keeps the graph's own types (what one-op kernel
// tests want); the others are the CLI's --precision.
enum class Precision {
  kAsGraph,
  kFp32,  // strict IEEE f32 products
  kTf32,  // f32 data, TF32 tensor-core products in convolution and inner product
  kFp16,  // f16 activations and weights, f32 accumulation
  kBf16,  // bf16 activations and weights, f32 accumulation
};

// The memory order of a CUDA plan's 4-d/5-d activations. kAuto is NHWC where the tensor-core
// kernels want it (TF32, f16, bf16) and NCHW for strict f32.
enum class LayoutChoice { kAsGraph, kNchw, kNhwc, kAuto };

// How convolution algorithms are chosen at compile time.
enum class AlgoChoice {
  kHeuristic,  // the primitive library's predicted order
  kMeasure,    // every applicable algorithm timed (as cudnnFind), remembered in the tuning file
};

// The name a plan reports (ExecutionPlan::precision()): "fp32", ..., "as graph".
absl::string_view PrecisionName(Precision p);

struct CompileOptions {
  BackendChoice backend = BackendChoice::kAuto;
  // The GPU a CUDA plan is for: its kernels are chosen (and with kMeasure timed) there, and
  // every ExecutionContext of the plan runs there (ExecutionPlan::cuda_device()).
  int cuda_device = 0;
  // CUDA plans only (the CPU backends run the graph as it is, f32 row-major, and say so).
  Precision precision = Precision::kAsGraph;
  LayoutChoice layout = LayoutChoice::kAsGraph;
  AlgoChoice algo = AlgoChoice::kHeuristic;
  // With kMeasure: measured choices are read from and written back to this file ("" = none).
  std::string tuning_file;
  // The tuning file is a cache Kiln keeps for itself (the CLI's default, under ~/.cache/kiln):
  // a damaged one is measured again instead of failing the compile, the choices are merged with
  // what other processes saved to it since, and a save that fails costs only a later measuring.
  bool tuning_file_is_cache = false;
  // With kMeasure: choices already measured (a saved plan's, runtime/plan_file.h), used before
  // the tuning file's and before measuring anything.
  std::map<std::string, std::string> tuning_entries;
  // Plan for this GPU on a machine that has none (with kCuda): a plan to inspect (steps,
  // kernels, memory), such as CI's checks of CUDA plans; ExecutionContext refuses to run it,
  // and Compile refuses it where a GPU is usable. Choices that need the device are left out
  // (KernelOptions::without_device: no FFT convolutions, no Hopper wgmma or clusters), so its
  // kernels and workspaces are not a real GPU plan's; the steps, the in-place decisions and the
  // planned activations are. Not with AlgoChoice::kMeasure.
  std::optional<CudaDeviceInfo> cuda_target;
  // Largest workspace any step may use; a step needing more is ResourceExhausted.
  int64_t workspace_limit = std::numeric_limits<int64_t>::max();
  // Debug switch: give every activation its own memory.
  bool reuse_activation_memory = true;
  // Debug switch: let an element-wise step write its output over an input that dies there.
  bool in_place = true;
  // Place each step's workspace in the activation arena, live during that step only (peak
  // memory is then the largest live set plus its step's workspace); false: one separate
  // workspace arena shared by all steps, sized by the largest.
  bool workspace_in_activation_arena = true;
  // With workspace_in_activation_arena and a slack >= 0: a budget for the arena of
  // (1 + workspace_peak_slack) times what the activations alone need. A step whose workspace
  // would lift the arena above it is prepared again with the bytes the budget leaves free
  // during that step as its workspace limit (an algorithm within them, when one exists). The
  // new choice is kept only while the time the re-choices add, by their measured times
  // (Kernel::MeasuredMs, --algo measure), stays within workspace_budget_max_slowdown of the
  // plan's measured time in all; without measured times nothing is re-chosen. A negative
  // slowdown bound takes every re-choice (`--workspace-budget FACTOR` asks for that); a
  // negative slack turns the budget off. Measured on an H100 (docs/PERF.md): the budget alone
  // took ResNet-18's training peak under PyTorch's for +0.15 ms, but cost CaffeNet's FFT layers
  // 8 ms; the time bound keeps the first and refuses the second.
  double workspace_peak_slack = 0.125;
  double workspace_budget_max_slowdown = 0.02;
  // Every graph input and output is bound by the caller (ExecutionContext::RunOnDevice): they
  // take no bytes of the activation arena and no staging memory, and Run with host tensors is
  // refused. The trainer's plans, whose parameters and gradients live in its own buffers.
  bool device_bound_io = false;
  // Run the inference rewrites (passes/inference_passes.h) before anything else: Dropout
  // removed, BatchNorm folded, convolution epilogues fused. Off by default in the library, so a
  // plan's steps are the caller's nodes; the CLI turns it on.
  bool optimize = false;
  // With optimize: also run the memory rewrites that cost speed ("split_for_memory": the
  // convolution before a pooling at the network's peak runs in slices of its output channels).
  // The CLI's `--optimize memory`.
  bool split_for_memory = false;
  // Passes (by name) the optimizer skips.
  std::set<std::string> disabled_passes;
};

// The names of the choices above, as the CLI's flags and the public API spell them;
// InvalidArgument listing the accepted names.
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);        // fp32|tf32|fp16|bf16
absl::StatusOr<LayoutChoice> ParseLayoutChoice(absl::string_view name);  // nchw|nhwc|auto
absl::StatusOr<AlgoChoice> ParseAlgoChoice(absl::string_view name);      // heuristic|measure
// auto|cuda|cuda:N|cpu|reference into options.backend and options.cuda_device.
absl::Status ParseDeviceChoice(absl::string_view name, CompileOptions& options);
// The arena's workspace budget asked for as a factor over the activations' own peak (the CLI's
// --workspace-budget, kiln_compile_options.workspace_budget): at least 1 (and at most 1e6); sets
// workspace_peak_slack to factor - 1 and takes every re-choice, whatever it costs
// (workspace_budget_max_slowdown -1). InvalidArgument, saying what is expected, otherwise.
absl::Status SetWorkspaceBudget(double factor, CompileOptions& options);

absl::StatusOr<std::unique_ptr<ExecutionPlan>> Compile(const Graph& graph,
                                                       const KernelRegistry& kernels,
                                                       const CompileOptions& options = {});

}  // namespace kiln

#endif  // KILN_RUNTIME_COMPILER_H_
