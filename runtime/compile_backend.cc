// Compile stage: the backend. A CUDA plan first gets the precision and layout asked for, so the
// kernels are looked up for the types they will really see; the kernels found then are kept for
// the kernel stage.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ir/verifier.h"
#include "passes/precision_layout.h"
#include "runtime/plan_builder.h"

namespace kiln {

namespace {

bool UsesChannelsLast(LayoutChoice layout, Precision precision) {
  if (layout == LayoutChoice::kNhwc) return true;
  if (layout != LayoutChoice::kAuto) return false;
  return precision == Precision::kTf32 || precision == Precision::kFp16 ||
         precision == Precision::kBf16;
}

absl::string_view LayoutName(LayoutChoice layout, Precision precision) {
  if (layout == LayoutChoice::kAsGraph) return "as graph";
  return UsesChannelsLast(layout, precision) ? "nhwc" : "nchw";
}

// The graph a CUDA plan runs: the source with the requested precision and layout applied.
absl::StatusOr<std::unique_ptr<Graph>> CudaGraphFor(const Graph& source,
                                                    const CompileOptions& options) {
  if (options.precision == Precision::kAsGraph && options.layout == LayoutChoice::kAsGraph) {
    return source.Clone();
  }
  PlanTypes types;
  switch (options.precision) {
    case Precision::kFp16:
      types.dtype = DataType::kF16;
      break;
    case Precision::kBf16:
      types.dtype = DataType::kBF16;
      break;
    default:
      types.dtype = DataType::kF32;
  }
  types.channels_last = UsesChannelsLast(options.layout, options.precision);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, ApplyPrecisionAndLayout(source, types));
  KILN_RETURN_IF_ERROR(Annotate(VerifyGraph(*g), "compile: after precision/layout"));
  return g;
}

// The nodes that become steps, in order (Parameters and Constants are buffers, not steps).
absl::StatusOr<std::vector<Node*>> ComputeNodes(const Graph& g) {
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.TopologicalOrder());
  std::vector<Node*> compute;
  for (Node* n : order) {
    if (n->kind() != OpKind::kParameter && n->kind() != OpKind::kConstant) compute.push_back(n);
  }
  return compute;
}

}  // namespace

absl::Status PlanBuilder::ProbeDevice(CompileState& state) {
  const CompileOptions& options = state.options;
  if (options.cuda_target.has_value() &&
      (options.backend != BackendChoice::kCuda || options.algo == AlgoChoice::kMeasure)) {
    return absl::InvalidArgumentError(
        "compile: a plan for an absent GPU (cuda_target) needs the cuda backend and the "
        "heuristic algorithm choice");
  }
  if (options.cuda_target.has_value()) {
    // The kernels ask the device here what it has (wgmma, clusters): with a GPU present they
    // would plan for it, not for the target.
    if (ProbeCuda().usable) {
      return absl::FailedPreconditionError(
          "compile: cuda_target plans for a GPU that is not here, and this machine has one: "
          "plan on it instead");
    }
    state.probe.usable = true;
    state.probe.devices = {*options.cuda_target};
  } else if (options.backend == BackendChoice::kAuto || options.backend == BackendChoice::kCuda) {
    state.probe = ProbeCuda();
    if (state.probe.usable) {
      // The kernels ask the current device what it has, and kMeasure times on it.
      const absl::Status selected = SelectCudaDevice(options.cuda_device);
      if (!selected.ok()) return Annotate(selected, "compile");
    } else if (options.cuda_device != 0 && options.backend == BackendChoice::kCuda) {
      return absl::UnavailableError(
          absl::StrCat("compile: cuda:", options.cuda_device,
                       " asked for, but CUDA is not usable: ", state.probe.reason));
    }
  }
  return absl::OkStatus();
}

absl::Status PlanBuilder::PrepareCudaGraph(CompileState& state) {
  if (!state.probe.usable) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(state.cuda_graph, CudaGraphFor(state.source(), state.options));
  return RunCudaPlacement(state);
}

absl::Status PlanBuilder::ChooseBackend(CompileState& state) {
  const CompileOptions& options = state.options;
  ExecutionPlan& plan = *state.plan;
  std::vector<Node*> cuda_compute;
  if (state.cuda_graph != nullptr) {
    KILN_ASSIGN_OR_RETURN(cuda_compute, ComputeNodes(*state.cuda_graph));
  }
  state.backend = Backend::kCpu;
  std::string reason;
  if (options.backend == BackendChoice::kReference) {
    state.backend = Backend::kReference;
    reason = "reference backend requested";
  } else if (options.backend == BackendChoice::kCpu) {
    reason = "cpu backend requested";
  } else {
    const CudaProbe& probe = state.probe;
    absl::Status cuda_ok = probe.usable ? absl::OkStatus() : absl::UnavailableError(probe.reason);
    for (const Node* n : cuda_compute) {
      if (!cuda_ok.ok()) break;
      absl::StatusOr<const KernelFactory*> factory = state.kernels.Select(*n, Backend::kCuda);
      cuda_ok = factory.status();
      if (factory.ok()) state.cuda_factories[n] = *factory;
    }
    if (cuda_ok.ok()) {
      state.backend = Backend::kCuda;
      const int gpu = options.cuda_target.has_value() ? 0 : options.cuda_device;
      reason = absl::StrCat("cuda:", gpu, " ", probe.devices[gpu].name);
      plan.graph_ = std::move(state.cuda_graph);
      plan.precision_ = std::string(PrecisionName(options.precision));
      plan.layout_ = std::string(LayoutName(options.layout, options.precision));
    } else if (options.backend == BackendChoice::kCuda) {
      return Annotate(cuda_ok, "compile: kernel selection");
    } else {
      state.cuda_factories.clear();  // for nodes of a graph the plan does not run
      reason = absl::StrCat("cuda not used (", cuda_ok.message(), "); running on the cpu");
    }
  }
  plan.backend_ = state.backend;
  const bool asked_types =
      (options.precision != Precision::kAsGraph && options.precision != Precision::kFp32) ||
      options.layout == LayoutChoice::kNhwc;
  if (state.backend != Backend::kCuda && asked_types) {
    absl::StrAppend(&reason,
                    "; precision and layout apply to CUDA plans, this one runs the "
                    "graph's own types");
  }
  plan.backend_reason_ = reason;
  return absl::OkStatus();
}

}  // namespace kiln
