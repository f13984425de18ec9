// Internal to runtime/ (not in the library's hdrs): the compiler's stages. Compile runs them in
// order over one CompileState, each stage reading what the earlier ones left there; every stage
// is a static member of PlanBuilder, the friend of ExecutionPlan, so the plan stays immutable to
// everyone else while the stages fill it in. One file per stage:
//   compile_pipelines.cc  the inference and memory rewrites, the CUDA placement rewrites
//   compile_backend.cc    the CUDA probe, the CUDA graph (precision, layout), the backend
//   compile_kernels.cc    kernel options, one buffer per value, one step (kernel) per node
//   compile_lifetimes.cc  Concat placement, in-place outputs, buffer lifetimes, dying inputs
//   compile_memory.cc     the workspace budget, arena offsets, the tuning file, weights
#ifndef KILN_RUNTIME_PLAN_BUILDER_H_
#define KILN_RUNTIME_PLAN_BUILDER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/graph.h"
#include "kernels/kernel.h"
#include "kernels/kernel_registry.h"
#include "kernels/tuning_cache.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "runtime/execution_plan.h"
#include "runtime/memory_planner.h"

namespace kiln {

// What the stages hand on to each other. Lives on Compile's stack for the whole compile
// (kernel_options.tuning points into it).
// The kernel choice of one plan step (KernelFactory::choose).
struct StepChoice {
  const KernelFactory* factory = nullptr;
  KernelChoice choice;
  // The factory is the one KernelRegistry::Select picks for the plan's backend, so the memory
  // stage may ask it again under a smaller workspace; false for a CPU plan's step that fell
  // back to a reference kernel, which the budget leaves alone.
  bool may_choose_again = false;
};

struct CompileState {
  CompileState(const Graph& graph, const KernelRegistry& registry, const CompileOptions& opts)
      : user_graph(graph), kernels(registry), options(opts) {}

  const Graph& user_graph;
  const KernelRegistry& kernels;
  const CompileOptions& options;
  std::unique_ptr<ExecutionPlan> plan = std::make_unique<ExecutionPlan>();

  // Pipelines: the rewritten copy of the user's graph (null without CompileOptions::optimize).
  std::unique_ptr<Graph> optimized;
  // The graph the backend stage starts from: `optimized`, or the user's own.
  const Graph& source() const { return optimized != nullptr ? *optimized : user_graph; }

  // Backend: the GPU found (or the absent one planned for), the graph a CUDA plan would run
  // (null when CUDA is not usable), and the backend chosen.
  CudaProbe probe;
  std::unique_ptr<Graph> cuda_graph;
  Backend backend = Backend::kCpu;
  // With the CUDA backend, the kernel chosen for each node of the plan's graph while deciding
  // on CUDA, so the kernel stage creates them without choosing again.
  std::map<const Node*, const KernelFactory*> cuda_factories;

  // Kernels: the plan's graph in order, its compute nodes (no Parameters or Constants), the
  // options every kernel is prepared with, and the tuning file's choices.
  std::vector<Node*> order;
  std::vector<Node*> compute;
  KernelOptions kernel_options;
  TuningCache tuning;
  std::map<Value, int> buffer_of;
  // Per step: what was chosen for it, built into the step's kernel by BuildKernels once the
  // memory stage has settled every choice.
  std::vector<StepChoice> step_choices;

  // Lifetimes: one request per activation buffer with bytes of its own, in buffer order, and
  // the buffer each request is for.
  std::vector<BufferRequest> requests;
  std::vector<int> request_buffer;
};

class PlanBuilder {
 public:
  // Compile: the stages below, in order.
  static absl::StatusOr<std::unique_ptr<ExecutionPlan>> Build(const Graph& user_graph,
                                                              const KernelRegistry& kernels,
                                                              const CompileOptions& options);

 private:
  // compile_pipelines.cc
  // The inference rewrites and then the memory rewrites, on a copy (the caller's graph is never
  // changed), with CompileOptions::optimize; the plan's graph is then a copy of the result.
  static absl::Status RunPipelines(CompileState& state);
  // The CUDA placement rewrites on state.cuda_graph, with CompileOptions::optimize.
  static absl::Status RunCudaPlacement(CompileState& state);

  // compile_backend.cc
  // Checks CompileOptions::cuda_target and finds the GPU (state.probe).
  static absl::Status ProbeDevice(CompileState& state);
  // With a usable GPU: the graph a CUDA plan runs (state.cuda_graph), placement done.
  static absl::Status PrepareCudaGraph(CompileState& state);
  // The backend and why (CUDA when usable and every node has a CUDA kernel, as asked).
  static absl::Status ChooseBackend(CompileState& state);

  // compile_kernels.cc
  // The kernel options, one buffer per value, and one step per compute node with its kernel
  // chosen (not built yet).
  static absl::Status ChooseKernels(CompileState& state);
  static absl::Status AddStep(CompileState& state, Node* n);
  // Each step's kernel, built from the choice the memory stage kept.
  static absl::Status BuildKernels(CompileState& state);

  // compile_lifetimes.cc
  // Concat placement and in-place outputs (with memory reuse), then each activation buffer's
  // request: its bytes and the steps it lives over.
  static void PlanLifetimes(CompileState& state);
  static void PlaceConcatInputs(ExecutionPlan& plan);
  static void PlanInPlace(ExecutionPlan& plan);
  // For each step, whether its input 0 dies there with bytes of its own.
  static std::vector<bool> InputDiesAt(const ExecutionPlan& plan);

  // compile_memory.cc
  // The workspace budget, the activation arena's offsets, the tuning file, the weights arena.
  static absl::Status PlanArenas(CompileState& state);
  static void FitWorkspaces(ExecutionPlan& plan, const std::vector<BufferRequest>& requests,
                            int64_t budget, double max_slowdown, std::vector<StepChoice>& choices,
                            const KernelOptions& kernel_options);
  static void TryDeadBytes(ExecutionPlan& plan, int s, bool input_dies, int64_t live,
                           StepChoice& chosen, const KernelOptions& kernel_options);
  static void AssignOffsets(CompileState& state);
};

}  // namespace kiln

#endif  // KILN_RUNTIME_PLAN_BUILDER_H_
