// Compile stage: the kernels. One buffer per value a step or the caller touches, and one step
// per compute node with its kernel chosen; after the memory stage, each chosen kernel built.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/plan_builder.h"

namespace kiln {

namespace {
bool IsGraphNode(const Node& n) {
  return n.kind() == OpKind::kParameter || n.kind() == OpKind::kConstant;
}
}  // namespace

absl::Status PlanBuilder::ChooseKernels(CompileState& state) {
  const CompileOptions& options = state.options;
  ExecutionPlan& plan = *state.plan;
  KILN_ASSIGN_OR_RETURN(state.order, plan.graph_->TopologicalOrder());
  for (Node* n : state.order) {
    if (!IsGraphNode(*n)) state.compute.push_back(n);
  }

  // Kernel options: math mode, algorithm choice, the tuning file.
  KernelOptions& kernel_options = state.kernel_options;
  kernel_options.allow_tf32 = options.precision == Precision::kTf32;
  kernel_options.measure_algorithms = options.algo == AlgoChoice::kMeasure;
  kernel_options.workspace_limit = options.workspace_limit;
  kernel_options.without_device = options.cuda_target.has_value();
  if (options.cuda_target.has_value()) {
    kernel_options.multiprocessors = options.cuda_target->multiprocessors;
  }
  plan.for_absent_device_ = options.cuda_target.has_value();
  if (state.backend == Backend::kCuda) {
    const CudaDeviceInfo& d =
        state.probe.devices[options.cuda_target.has_value() ? 0 : options.cuda_device];
    plan.cuda_device_ = options.cuda_target.has_value() ? 0 : options.cuda_device;
    kernel_options.device_name = absl::StrCat(d.name, " sm_", d.major, d.minor);
    if (kernel_options.measure_algorithms && !options.tuning_file.empty()) {
      if (options.tuning_file_is_cache) {
        state.tuning.LoadIfValid(options.tuning_file);  // damaged: everything is measured again
      } else {
        KILN_RETURN_IF_ERROR(Annotate(state.tuning.Load(options.tuning_file), "compile"));
      }
    }
    for (const auto& [key, value] : options.tuning_entries) state.tuning.Insert(key, value);
    kernel_options.tuning = &state.tuning;
  }

  // Buffers: one per value a step or the caller touches.
  auto add_buffer = [&](Value v, Arena arena) {
    state.buffer_of[v] = static_cast<int>(plan.buffers_.size());
    plan.buffers_.push_back({arena, 0, v.type().span_bytes(), v.type()});
  };
  for (Node* n : state.order) {
    for (int i = 0; i < n->num_outputs(); ++i) {
      add_buffer(n->output(i),
                 n->kind() == OpKind::kConstant ? Arena::kWeights : Arena::kActivations);
    }
  }
  for (Node* n : state.order) {
    if (n->kind() == OpKind::kConstant)
      plan.weights_.emplace_back(n, state.buffer_of[n->output(0)]);
    if (n->kind() == OpKind::kParameter) plan.inputs_[n->name()] = state.buffer_of[n->output(0)];
  }
  for (const GraphOutput& o : plan.graph_->outputs()) {
    plan.outputs_[o.name] = state.buffer_of[o.value];
  }

  for (Node* n : state.compute) KILN_RETURN_IF_ERROR(AddStep(state, n));
  return absl::OkStatus();
}

absl::Status PlanBuilder::AddStep(CompileState& state, Node* n) {
  ExecutionPlan& plan = *state.plan;
  // A CUDA plan's kernels were chosen with its backend (ChooseBackend); the others' now.
  auto picked = state.cuda_factories.find(n);
  absl::StatusOr<const KernelFactory*> factory =
      picked != state.cuda_factories.end() ? absl::StatusOr<const KernelFactory*>(picked->second)
                                           : state.kernels.Select(*n, state.backend);
  StepChoice chosen;
  chosen.may_choose_again = factory.ok();
  if (!factory.ok() && state.backend == Backend::kCpu) {
    factory = state.kernels.Select(*n, Backend::kReference);
  }
  if (!factory.ok()) return Annotate(factory.status(), "compile: kernel selection");
  chosen.factory = *factory;
  absl::StatusOr<KernelChoice> choice = (*factory)->choose(*n, state.kernel_options);
  if (!choice.ok()) {
    return Annotate(choice.status(), absl::StrCat("compile: preparing ", (*factory)->key.Name(),
                                                  " for node '", n->name(), "'"));
  }
  chosen.choice = *std::move(choice);
  PlanStep step;
  step.node = n;
  step.kernel_name = (*factory)->key.Name();
  step.workspace_bytes = chosen.choice.workspace_bytes;
  if (static_cast<int64_t>(step.workspace_bytes) > state.options.workspace_limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "compile: node '", n->name(), "' (", step.kernel_name, ") needs ", step.workspace_bytes,
        " workspace bytes, over the limit of ", state.options.workspace_limit));
  }
  step.description = chosen.choice.description;
  step.in_place_input = chosen.choice.in_place_input;
  const int aliased = chosen.choice.aliased_input;
  state.step_choices.push_back(std::move(chosen));
  for (const Value& v : n->inputs()) step.inputs.push_back(state.buffer_of[v]);
  for (int i = 0; i < n->num_outputs(); ++i) step.outputs.push_back(state.buffer_of[n->output(i)]);
  if (aliased >= 0) {
    // A view: the output shares the input's bytes (a weight stays in the weights arena).
    step.is_view = true;
    BufferAssignment& out = plan.buffers_[step.outputs[0]];
    out.alias_of = step.inputs[aliased];
    out.arena = plan.buffers_[out.alias_of].arena;
  }
  plan.workspace_bytes_ =
      std::max<int64_t>(plan.workspace_bytes_, static_cast<int64_t>(step.workspace_bytes));
  plan.steps_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status PlanBuilder::BuildKernels(CompileState& state) {
  std::vector<PlanStep>& steps = state.plan->steps_;
  for (size_t s = 0; s < steps.size(); ++s) {
    const StepChoice& chosen = state.step_choices[s];
    absl::StatusOr<std::unique_ptr<Kernel>> kernel =
        BuildChosen(*chosen.factory, *steps[s].node, chosen.choice);
    if (!kernel.ok()) {
      return Annotate(kernel.status(), absl::StrCat("compile: building ", steps[s].kernel_name,
                                                    " for node '", steps[s].node->name(), "'"));
    }
    steps[s].kernel = *std::move(kernel);
  }
  return absl::OkStatus();
}

}  // namespace kiln
