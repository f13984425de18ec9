// Compile stage: the graph rewrites of passes/ (inference, memory, CUDA placement).
#include "base/status_macros.h"
#include "passes/inference_passes.h"
#include "passes/pass_manager.h"
#include "runtime/plan_builder.h"

namespace kiln {

absl::Status PlanBuilder::RunPipelines(CompileState& state) {
  const CompileOptions& options = state.options;
  if (options.optimize) {
    state.optimized = state.user_graph.Clone();
    PassManagerOptions pass_options;
    pass_options.disabled = options.disabled_passes;
    PassManager pipeline = MakeInferencePipeline(pass_options);
    KILN_RETURN_IF_ERROR(ValidatePassNames(options.disabled_passes));
    PassContext context;
    context.remarks = &state.plan->remarks_;
    KILN_RETURN_IF_ERROR(Annotate(pipeline.Run(*state.optimized, context).status(), "compile"));
    // After the pipeline, so the split convolutions carry their folded and fused epilogues.
    PassManager memory = MakeMemoryPipeline(pass_options, options.split_for_memory);
    KILN_RETURN_IF_ERROR(Annotate(memory.Run(*state.optimized, context).status(), "compile"));
  }
  state.plan->graph_ = state.source().Clone();
  return absl::OkStatus();
}

absl::Status PlanBuilder::RunCudaPlacement(CompileState& state) {
  if (!state.options.optimize) return absl::OkStatus();
  // The CUDA kernels write any strides, so Concat inputs can be written in place and a Crop can
  // write a Convert's order and dtype; both depend on the layout just chosen.
  PassManagerOptions placement_options;
  placement_options.disabled = state.options.disabled_passes;
  PassManager placement = MakeCudaPlacementPipeline(placement_options);
  PassContext context;
  context.remarks = &state.plan->remarks_;
  return Annotate(placement.Run(*state.cuda_graph, context).status(), "compile");
}

}  // namespace kiln
