// Compile: the stages of runtime/plan_builder.h in order, and the plan's printing.
#include "runtime/compiler.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "ir/verifier.h"
#include "runtime/plan_builder.h"

namespace kiln {

absl::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kAsGraph:
      return "as graph";
    case Precision::kFp32:
      return "fp32";
    case Precision::kTf32:
      return "tf32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<ExecutionPlan>> PlanBuilder::Build(const Graph& user_graph,
                                                                  const KernelRegistry& kernels,
                                                                  const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(Annotate(VerifyGraph(user_graph), "compile"));
  if (user_graph.outputs().empty()) {
    return absl::InvalidArgumentError("compile: the graph has no outputs");
  }
  CompileState state(user_graph, kernels, options);
  KILN_RETURN_IF_ERROR(RunPipelines(state));
  KILN_RETURN_IF_ERROR(ProbeDevice(state));
  KILN_RETURN_IF_ERROR(PrepareCudaGraph(state));
  KILN_RETURN_IF_ERROR(ChooseBackend(state));
  KILN_RETURN_IF_ERROR(ChooseKernels(state));
  PlanLifetimes(state);
  KILN_RETURN_IF_ERROR(PlanArenas(state));
  KILN_RETURN_IF_ERROR(BuildKernels(state));
  return std::move(state.plan);
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "tf32") return Precision::kTf32;
  if (name == "fp16") return Precision::kFp16;
  if (name == "bf16") return Precision::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("precision '", name, "': use fp32, tf32, fp16 or bf16"));
}

absl::StatusOr<LayoutChoice> ParseLayoutChoice(absl::string_view name) {
  if (name == "nchw") return LayoutChoice::kNchw;
  if (name == "nhwc") return LayoutChoice::kNhwc;
  if (name == "auto") return LayoutChoice::kAuto;
  return absl::InvalidArgumentError(absl::StrCat("layout '", name, "': use nchw, nhwc or auto"));
}

absl::StatusOr<AlgoChoice> ParseAlgoChoice(absl::string_view name) {
  if (name == "heuristic") return AlgoChoice::kHeuristic;
  if (name == "measure") return AlgoChoice::kMeasure;
  return absl::InvalidArgumentError(absl::StrCat("algo '", name, "': use heuristic or measure"));
}

absl::Status ParseDeviceChoice(absl::string_view name, CompileOptions& options) {
  options.cuda_device = 0;
  if (name == "auto") {
    options.backend = BackendChoice::kAuto;
  } else if (name == "cuda") {
    options.backend = BackendChoice::kCuda;
  } else if (name == "cpu") {
    options.backend = BackendChoice::kCpu;
  } else if (name == "reference") {
    options.backend = BackendChoice::kReference;
  } else if (absl::StartsWith(name, "cuda:") &&
             absl::SimpleAtoi(name.substr(5), &options.cuda_device) && options.cuda_device >= 0) {
    options.backend = BackendChoice::kCuda;
  } else {
    options.cuda_device = 0;
    return absl::InvalidArgumentError(
        absl::StrCat("device '", name, "': use auto, cuda, cuda:N, cpu or reference"));
  }
  return absl::OkStatus();
}

absl::Status SetWorkspaceBudget(double factor, CompileOptions& options) {
  if (!(factor >= 1.0) || factor > 1e6) {
    return absl::InvalidArgumentError(
        "expected a factor of at least 1 (the arena's budget over the activations' own peak, "
        "e.g. 1.125)");
  }
  options.workspace_peak_slack = factor - 1.0;
  options.workspace_budget_max_slowdown = -1;  // asked for: whatever it costs
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ExecutionPlan>> Compile(const Graph& graph,
                                                       const KernelRegistry& kernels,
                                                       const CompileOptions& options) {
  return PlanBuilder::Build(graph, kernels, options);
}

std::string BudgetSummary(const ExecutionPlan& plan) {
  std::string added = plan.budget_added_ms() < 0
                          ? std::string("an unmeasured time")
                          : absl::StrFormat("%.3f ms", plan.budget_added_ms());
  return absl::StrFormat(
      "workspace budget: %d step(s) re-chosen with less workspace, adding %s to the %.3f ms "
      "measured",
      plan.budget_rechosen_steps(), added, plan.measured_ms());
}

std::string ExecutionPlan::ToString() const {
  std::string out = absl::StrFormat(
      "plan: backend %s (%s), precision %s, layout %s\narenas: weights %d B, activations %d B, "
      "workspace %d B\n",
      BackendName(backend_), backend_reason_, precision_, layout_, weights_bytes_,
      activations_bytes_, workspace_bytes_);
  if (budget_rechosen_steps_ > 0) {
    absl::StrAppend(&out, BudgetSummary(*this), "\n");
  }
  auto buffer = [&](int b) {
    const BufferAssignment& a = buffers_[b];
    return absl::StrFormat("%s@%s+%d%s", a.type.ToString(), a.arena == Arena::kWeights ? "w" : "a",
                           a.offset, a.alias_of >= 0 ? " (view)" : "");
  };
  for (const auto& [name, b] : inputs_)
    absl::StrAppend(&out, "input ", name, ": ", buffer(b), "\n");
  for (size_t i = 0; i < steps_.size(); ++i) {
    const PlanStep& s = steps_[i];
    std::vector<std::string> ins, outs;
    for (int b : s.inputs) ins.push_back(buffer(b));
    for (int b : s.outputs) outs.push_back(buffer(b));
    absl::StrAppend(&out, absl::StrFormat("step %d: %s '%s' [%s%s%s] (%s) -> (%s) ws=%d\n", i,
                                          s.node->op(), s.node->name(), s.kernel_name,
                                          s.description.empty() ? "" : " " + s.description,
                                          s.in_place ? " in-place" : "", absl::StrJoin(ins, ", "),
                                          absl::StrJoin(outs, ", "), s.workspace_bytes));
  }
  for (const auto& [name, b] : outputs_)
    absl::StrAppend(&out, "output ", name, ": ", buffer(b), "\n");
  return out;
}

}  // namespace kiln
