#include "runtime/compiler.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ir/verifier.h"
#include "runtime/device.h"
#include "runtime/memory_planner.h"
#include "base/status_macros.h"
#include "kernels/tuning_cache.h"
#include "passes/inference_passes.h"
#include "passes/precision_layout.h"

namespace kiln {

namespace {
bool IsGraphNode(const Node& n) { return n.op() == "Parameter" || n.op() == "Constant"; }

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
}  // namespace

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

// Builds a plan; a friend of ExecutionPlan so the plan stays immutable to everyone else.
class PlanBuilder {
 public:
  static absl::StatusOr<std::unique_ptr<ExecutionPlan>> Build(const Graph& user_graph,
                                                              const KernelRegistry& kernels,
                                                              const CompileOptions& options) {
    KILN_RETURN_IF_ERROR(Annotate(VerifyGraph(user_graph), "compile"));
    if (user_graph.outputs().empty()) {
      return absl::InvalidArgumentError("compile: the graph has no outputs");
    }
    auto plan = std::make_unique<ExecutionPlan>();
    // Stage: the inference rewrites, on a copy (the caller's graph is never changed).
    std::unique_ptr<Graph> optimized;
    if (options.optimize) {
      optimized = user_graph.Clone();
      PassManagerOptions pass_options;
      pass_options.disabled = options.disabled_passes;
      PassManager pipeline = MakeInferencePipeline(pass_options);
      for (const std::string& name : options.disabled_passes) {
        std::vector<std::string> known = pipeline.PassNames();
        known.push_back("place_concat_inputs");
        known.push_back("fold_convert_into_crop");
        known.push_back("split_rows_for_memory");
        known.push_back("split_for_memory");
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "compile: no pass named '", name, "'; passes: ", absl::StrJoin(known, ", ")));
        }
      }
      PassContext context;
      context.remarks = &plan->remarks_;
      KILN_RETURN_IF_ERROR(Annotate(pipeline.Run(*optimized, context).status(), "compile"));
      // After the pipeline, so the split convolutions carry their folded and fused epilogues.
      // Bands of rows cost (almost) no speed, so every optimized plan takes them; slices of
      // channels cost some, so only plans that ask for the smallest memory do.
      PassManager memory(pass_options);
      memory.Add(MakeSplitRowsForMemoryPass());
      if (options.split_for_memory) memory.Add(MakeSplitForMemoryPass());
      KILN_RETURN_IF_ERROR(Annotate(memory.Run(*optimized, context).status(), "compile"));
    }
    const Graph& source = optimized != nullptr ? *optimized : user_graph;
    plan->graph_ = source.Clone();

    // Stage: backend choice. A CUDA plan first gets the precision and layout asked for, so the
    // kernels are looked up for the types they will really see.
    std::unique_ptr<Graph> cuda_graph;
    if (options.cuda_target.has_value() &&
        (options.backend != BackendChoice::kCuda || options.algo == AlgoChoice::kMeasure)) {
      return absl::InvalidArgumentError(
          "compile: a plan for an absent GPU (cuda_target) needs the cuda backend and the "
          "heuristic algorithm choice");
    }
    CudaProbe probe;
    if (options.cuda_target.has_value()) {
      // The kernels ask the device here what it has (wgmma, clusters): with a GPU present they
      // would plan for it, not for the target.
      if (ProbeCuda().usable) {
        return absl::FailedPreconditionError(
            "compile: cuda_target plans for a GPU that is not here, and this machine has one: "
            "plan on it instead");
      }
      probe.usable = true;
      probe.devices = {*options.cuda_target};
    } else if (options.backend == BackendChoice::kAuto || options.backend == BackendChoice::kCuda) {
      probe = ProbeCuda();
    }
    if (probe.usable) {
      KILN_ASSIGN_OR_RETURN(cuda_graph, CudaGraphFor(source, options));
      if (options.optimize) {
        // The CUDA kernels write any strides, so Concat inputs can be written in place and a
        // Crop can write a Convert's order and dtype; both depend on the layout just chosen.
        PassManagerOptions placement_options;
        placement_options.disabled = options.disabled_passes;
        PassManager placement(placement_options);
        placement.Add(MakePlaceConcatInputsPass());
        placement.Add(MakeFoldConvertIntoCropPass());
        PassContext context;
        context.remarks = &plan->remarks_;
        KILN_RETURN_IF_ERROR(Annotate(placement.Run(*cuda_graph, context).status(), "compile"));
      }
    }
    std::vector<Node*> compute;
    auto compute_nodes = [&](const Graph& g) -> absl::Status {
      compute.clear();
      KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.TopologicalOrder());
      for (Node* n : order) {
        if (!IsGraphNode(*n)) compute.push_back(n);
      }
      return absl::OkStatus();
    };
    if (cuda_graph != nullptr) KILN_RETURN_IF_ERROR(compute_nodes(*cuda_graph));
    Backend backend = Backend::kCpu;
    std::string reason;
    if (options.backend == BackendChoice::kReference) {
      backend = Backend::kReference;
      reason = "reference backend requested";
    } else if (options.backend == BackendChoice::kCpu) {
      reason = "cpu backend requested";
    } else {
      absl::Status cuda_ok = probe.usable ? absl::OkStatus() : absl::UnavailableError(probe.reason);
      for (const Node* n : compute) {
        if (!cuda_ok.ok()) break;
        cuda_ok = kernels.Select(*n, Backend::kCuda).status();
      }
      if (cuda_ok.ok()) {
        backend = Backend::kCuda;
        reason = absl::StrCat("cuda: ", probe.devices[0].name);
        plan->graph_ = std::move(cuda_graph);
        plan->precision_ = std::string(PrecisionName(options.precision));
        plan->layout_ = std::string(LayoutName(options.layout, options.precision));
      } else if (options.backend == BackendChoice::kCuda) {
        return Annotate(cuda_ok, "compile: kernel selection");
      } else {
        reason = absl::StrCat("cuda not used (", cuda_ok.message(), "); running on the cpu");
      }
    }
    plan->backend_ = backend;
    plan->backend_reason_ = reason;
    const bool asked_types =
        (options.precision != Precision::kAsGraph && options.precision != Precision::kFp32) ||
        options.layout == LayoutChoice::kNhwc;
    if (backend != Backend::kCuda && asked_types) {
      absl::StrAppend(&reason,
                      "; precision and layout apply to CUDA plans, this one runs the "
                      "graph's own types");
      plan->backend_reason_ = reason;
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, plan->graph_->TopologicalOrder());
    KILN_RETURN_IF_ERROR(compute_nodes(*plan->graph_));

    // Kernel options: math mode, algorithm choice, the tuning file.
    KernelOptions kernel_options;
    kernel_options.allow_tf32 = options.precision == Precision::kTf32;
    kernel_options.measure_algorithms = options.algo == AlgoChoice::kMeasure;
    kernel_options.workspace_limit = options.workspace_limit;
    kernel_options.without_device = options.cuda_target.has_value();
    if (options.cuda_target.has_value()) {
      kernel_options.multiprocessors = options.cuda_target->multiprocessors;
    }
    plan->for_absent_device_ = options.cuda_target.has_value();
    TuningCache tuning;
    if (backend == Backend::kCuda) {
      const CudaDeviceInfo& d = probe.devices[0];
      kernel_options.device_name = absl::StrCat(d.name, " sm_", d.major, d.minor);
      if (kernel_options.measure_algorithms && !options.tuning_file.empty()) {
        KILN_RETURN_IF_ERROR(Annotate(tuning.Load(options.tuning_file), "compile"));
      }
      kernel_options.tuning = &tuning;
    }

    // Stage: buffers. One per value a step or the caller touches.
    std::map<Value, int> buffer_of;
    auto add_buffer = [&](Value v, Arena arena) {
      buffer_of[v] = static_cast<int>(plan->buffers_.size());
      plan->buffers_.push_back({arena, 0, v.type().span_bytes(), v.type()});
    };
    for (Node* n : order) {
      for (int i = 0; i < n->num_outputs(); ++i) {
        add_buffer(n->output(i), n->op() == "Constant" ? Arena::kWeights : Arena::kActivations);
      }
    }
    for (Node* n : order) {
      if (n->op() == "Constant") plan->weights_.emplace_back(n, buffer_of[n->output(0)]);
      if (n->op() == "Parameter") plan->inputs_[n->name()] = buffer_of[n->output(0)];
    }
    for (const GraphOutput& o : plan->graph_->outputs())
      plan->outputs_[o.name] = buffer_of[o.value];

    for (Node* n : compute) {
      const Backend kernel_backend = backend;
      absl::StatusOr<const KernelFactory*> factory = kernels.Select(*n, kernel_backend);
      if (!factory.ok() && backend == Backend::kCpu) {
        factory = kernels.Select(*n, Backend::kReference);
      }
      if (!factory.ok()) return Annotate(factory.status(), "compile: kernel selection");
      auto kernel = (*factory)->create(*n, kernel_options);
      if (!kernel.ok()) {
        return Annotate(kernel.status(), absl::StrCat("compile: preparing ", (*factory)->key.Name(),
                                                      " for node '", n->name(), "'"));
      }
      PlanStep step;
      step.node = n;
      step.kernel_name = (*factory)->key.Name();
      step.workspace_bytes = (*kernel)->WorkspaceBytes();
      if (static_cast<int64_t>(step.workspace_bytes) > options.workspace_limit) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "compile: node '", n->name(), "' (", step.kernel_name, ") needs ", step.workspace_bytes,
            " workspace bytes, over the limit of ", options.workspace_limit));
      }
      step.description = (*kernel)->Describe();
      step.in_place_input = (*kernel)->InPlaceInput();
      const int aliased = (*kernel)->AliasedInput();
      step.kernel = *std::move(kernel);
      for (const Value& v : n->inputs()) step.inputs.push_back(buffer_of[v]);
      for (int i = 0; i < n->num_outputs(); ++i) step.outputs.push_back(buffer_of[n->output(i)]);
      if (aliased >= 0) {
        // A view: the output shares the input's bytes (a weight stays in the weights arena).
        step.is_view = true;
        BufferAssignment& out = plan->buffers_[step.outputs[0]];
        out.alias_of = step.inputs[aliased];
        out.arena = plan->buffers_[out.alias_of].arena;
      }
      plan->workspace_bytes_ =
          std::max<int64_t>(plan->workspace_bytes_, static_cast<int64_t>(step.workspace_bytes));
      plan->steps_.push_back(std::move(step));
    }

    // Without reuse every activation keeps its own bytes, in-place outputs included.
    if (options.reuse_activation_memory) PlaceConcatInputs(*plan);
    if (options.in_place && options.reuse_activation_memory) PlanInPlace(*plan);

    // Stage: memory planning. Activations live from the step that writes them to the last step
    // that reads them; inputs from the start to their last reader, outputs to the end.
    const int end = static_cast<int>(plan->steps_.size());
    std::vector<BufferRequest> requests;
    std::vector<int> request_buffer;
    std::map<int, int> request_of;
    plan->device_bound_io_ = options.device_bound_io;
    std::set<int> bound_outside;  // caller-owned: no arena bytes (device_bound_io)
    if (options.device_bound_io) {
      for (const auto* ports : {&plan->inputs_, &plan->outputs_}) {
        for (const auto& [name, b] : *ports) bound_outside.insert(plan->RootBuffer(b));
      }
    }
    for (size_t b = 0; b < plan->buffers_.size(); ++b) {
      if (plan->buffers_[b].arena != Arena::kActivations || plan->buffers_[b].alias_of >= 0 ||
          bound_outside.count(static_cast<int>(b))) {
        continue;
      }
      request_of[static_cast<int>(b)] = static_cast<int>(requests.size());
      requests.push_back({plan->buffers_[b].bytes, 0, 0});
      request_buffer.push_back(static_cast<int>(b));
    }
    // A view's uses count as uses of the buffer it views.
    const ExecutionPlan& built = *plan;
    auto request = [&](int b) -> BufferRequest* {
      auto it = request_of.find(built.RootBuffer(b));
      return it == request_of.end() ? nullptr : &requests[it->second];
    };
    // A buffer lives from the first step writing any part of it (an in-place output or a
    // Concat input placed inside it writes through an alias).
    for (BufferRequest& r : requests) r.first_step = r.last_step = end;
    for (int s = 0; s < end; ++s) {
      if (plan->steps_[s].is_view) continue;
      for (int b : plan->steps_[s].outputs) {
        if (BufferRequest* r = request(b)) r->first_step = std::min(r->first_step, s);
      }
    }
    // An input is staged into the arena before the first step and is dead after its last
    // reader, so later values may take its bytes (the caller's own tensor is never touched).
    for (const auto& [name, b] : plan->inputs_) {
      if (BufferRequest* r = request(b)) r->first_step = 0;
    }
    for (BufferRequest& r : requests) r.last_step = r.first_step;
    for (int s = 0; s < end; ++s) {
      const PlanStep& step = plan->steps_[s];
      const std::vector<int>& shape_only = step.node->def().shape_only_inputs;
      for (int i = 0; i < static_cast<int>(step.inputs.size()); ++i) {
        // A Crop's reference gives only its shape: its bytes may die before the Crop runs
        // (FCN-8s's 11 MiB input, which the final Crop names, then leaves the peak).
        if (std::find(shape_only.begin(), shape_only.end(), i) != shape_only.end()) continue;
        if (BufferRequest* r = request(step.inputs[i])) r->last_step = std::max(r->last_step, s);
      }
      for (int b : plan->steps_[s].outputs) {
        if (BufferRequest* r = request(b)) r->last_step = std::max(r->last_step, s);
      }
    }
    for (const auto& [name, b] : plan->outputs_) {
      if (BufferRequest* r = request(b)) r->last_step = end;
    }
    // What the activations alone need, reported beside Caffe's allocation.
    plan->planned_activation_bytes_ =
        PlanMemory(requests, options.reuse_activation_memory).arena_bytes;
    // Each step's workspace lives only during its step, so it can take the bytes of activations
    // that are dead then: one arena whose peak is the largest (live activations + workspace)
    // over the steps, as a caching allocator would reach, instead of the sum of the two peaks.
    std::vector<int> workspace_step;
    if (options.workspace_in_activation_arena) {
      if (options.workspace_peak_slack >= 0) {
        const int64_t budget =
            plan->planned_activation_bytes_ +
            static_cast<int64_t>(options.workspace_peak_slack * plan->planned_activation_bytes_);
        KILN_RETURN_IF_ERROR(FitWorkspaces(*plan, requests, budget,
                                           options.workspace_budget_max_slowdown, kernels, backend,
                                           kernel_options));
      }
      for (int s = 0; s < end; ++s) {
        const PlanStep& step = plan->steps_[s];
        if (step.is_view || step.workspace_bytes == 0) continue;
        requests.push_back({static_cast<int64_t>(step.workspace_bytes), s, s});
        workspace_step.push_back(s);
      }
    }
    MemoryPlan memory = PlanMemory(requests, options.reuse_activation_memory);
    for (size_t r = 0; r < request_buffer.size(); ++r) {
      plan->buffers_[request_buffer[r]].offset = memory.offsets[r];
    }
    for (size_t w = 0; w < workspace_step.size(); ++w) {
      plan->steps_[workspace_step[w]].workspace_offset = memory.offsets[request_buffer.size() + w];
    }
    plan->activations_bytes_ = memory.arena_bytes;
    plan->largest_step_workspace_ = plan->workspace_bytes_;
    if (options.workspace_in_activation_arena) plan->workspace_bytes_ = 0;
    if (kernel_options.tuning != nullptr && kernel_options.measure_algorithms &&
        !options.tuning_file.empty() && tuning.dirty()) {
      KILN_RETURN_IF_ERROR(Annotate(tuning.Save(options.tuning_file), "compile"));
    }
    for (const auto& [node, b] : plan->weights_) {
      plan->buffers_[b].offset = plan->weights_bytes_;
      plan->weights_bytes_ +=
          (plan->buffers_[b].bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    }
    for (size_t b = 0; b < plan->buffers_.size(); ++b) {
      BufferAssignment& a = plan->buffers_[b];
      if (a.alias_of >= 0) {
        a.offset = plan->buffers_[plan->RootBuffer(static_cast<int>(b))].offset +
                   plan->OffsetInRoot(static_cast<int>(b));
      }
    }
    return plan;
  }

 private:
  // A Concat whose inputs all have its output's strides (passes/place_concat_inputs) runs
  // nothing: each input's buffer becomes the range of the output at its offset along the axis.
  static void PlaceConcatInputs(ExecutionPlan& plan) {
    std::set<int> external;
    for (const auto* ports : {&plan.inputs_, &plan.outputs_}) {
      for (const auto& [name, b] : *ports) external.insert(plan.RootBuffer(b));
    }
    std::set<int> written;  // buffers a running step writes (not views of others)
    for (const PlanStep& step : plan.steps_) {
      if (!step.is_view) written.insert(step.outputs.begin(), step.outputs.end());
    }
    for (PlanStep& step : plan.steps_) {
      if (step.is_view || step.node->op() != "Concat") continue;
      const BufferAssignment& out = plan.buffers_[step.outputs[0]];
      const int axis = static_cast<int>(step.node->GetInt("axis")) < 0
                           ? static_cast<int>(step.node->GetInt("axis")) + out.type.rank()
                           : static_cast<int>(step.node->GetInt("axis"));
      std::set<int> seen;
      bool placeable = true;
      for (int b : step.inputs) {
        const BufferAssignment& in = plan.buffers_[b];
        placeable = placeable && in.alias_of < 0 && written.count(b) && !external.count(b) &&
                    seen.insert(b).second && in.arena == Arena::kActivations &&
                    in.type.dtype() == out.type.dtype() && in.type.strides() == out.type.strides();
      }
      if (!placeable) continue;
      step.is_view = true;
      const int64_t element = static_cast<int64_t>(DataTypeSize(out.type.dtype()));
      int64_t along = 0;
      for (int b : step.inputs) {
        BufferAssignment& in = plan.buffers_[b];
        in.alias_of = step.outputs[0];
        in.alias_byte_offset = along * out.type.stride(axis) * element;
        along += in.type.dim(axis);
      }
    }
  }

  // Element-wise steps write their output over an input whose last reader they are: the output
  // buffer becomes an alias of the input's, as a view does, but the step still runs. Graph
  // inputs and outputs and weights are never overwritten or shared this way.
  // A step whose workspace would raise the arena above `budget` (CompileOptions::
  // workspace_peak_slack) gets its kernel prepared again with the bytes the budget leaves free
  // while it runs as its workspace limit: an algorithm within them, measured when measuring.
  // Kept when one fits and, with max_slowdown >= 0, when the measured time it adds keeps the
  // added total within max_slowdown of the plan's measured time. The description names what
  // the unbounded choice was.
  static absl::Status FitWorkspaces(ExecutionPlan& plan, const std::vector<BufferRequest>& requests,
                                    int64_t budget, double max_slowdown,
                                    const KernelRegistry& kernels, Backend backend,
                                    const KernelOptions& kernel_options) {
    const int steps = static_cast<int>(plan.steps_.size());
    std::vector<int64_t> live(steps + 1, 0);
    for (const BufferRequest& r : requests) {
      for (int s = r.first_step; s <= r.last_step && s <= steps; ++s) live[s] += r.bytes;
    }
    double measured = 0;
    for (const PlanStep& step : plan.steps_) {
      if (!step.is_view && step.kernel->MeasuredMs() > 0) measured += step.kernel->MeasuredMs();
    }
    const double allowance = max_slowdown * measured;
    double added = 0;
    bool untimed = false;
    plan.measured_ms_ = measured;
    plan.budget_rechosen_steps_ = 0;
    plan.workspace_bytes_ = 0;
    const std::vector<bool> input_dies = InputDiesAt(plan);
    for (int s = 0; s < steps; ++s) {
      PlanStep& step = plan.steps_[s];
      TryDeadBytes(plan, s, input_dies[s], live[s], kernels, backend, kernel_options);
      const int64_t free_bytes = std::max<int64_t>(0, budget - live[s]);
      const double before = step.is_view ? -1 : step.kernel->MeasuredMs();
      if (!step.is_view && static_cast<int64_t>(step.workspace_bytes) > free_bytes &&
          (max_slowdown < 0 || before >= 0)) {
        absl::StatusOr<const KernelFactory*> factory = kernels.Select(*step.node, backend);
        KernelOptions bounded = kernel_options;
        bounded.workspace_limit = std::min(kernel_options.workspace_limit, free_bytes);
        bounded.save_tuning = false;
        absl::StatusOr<std::unique_ptr<Kernel>> kernel =
            factory.ok() ? (*factory)->create(*step.node, bounded)
                         : absl::StatusOr<std::unique_ptr<Kernel>>(factory.status());
        bool keep =
            kernel.ok() && static_cast<int64_t>((*kernel)->WorkspaceBytes()) <= free_bytes &&
            (*kernel)->InPlaceInput() == step.in_place_input && (*kernel)->AliasedInput() < 0;
        const double after = kernel.ok() ? (*kernel)->MeasuredMs() : -1;
        const bool timed = before >= 0 && after >= 0;
        const double cost = timed ? std::max(0.0, after - before) : 0;
        if (keep && max_slowdown >= 0) keep = timed && added + cost <= allowance;
        if (keep) {
          added += cost;
          ++plan.budget_rechosen_steps_;
          if (!timed) untimed = true;
          step.description =
              absl::StrCat((*kernel)->Describe(), " (within the ", free_bytes,
                           " bytes the memory budget leaves; unbounded: ", step.description,
                           " with ", step.workspace_bytes, " workspace bytes)");
          step.workspace_bytes = (*kernel)->WorkspaceBytes();
          step.kernel = *std::move(kernel);
        }
      }
      plan.workspace_bytes_ =
          std::max<int64_t>(plan.workspace_bytes_, static_cast<int64_t>(step.workspace_bytes));
    }
    plan.budget_added_ms_ = untimed ? -1 : added;
    return absl::OkStatus();
  }

  // For each step, whether its input 0 dies there with bytes of its own: a root buffer in the
  // activation arena, not a graph input or output, read by no later step (views and placed
  // Concat inputs count as their root) and by no other input of the step, and the step's output
  // 0 is a root buffer too (not written over the input, nor placed inside another buffer).
  static std::vector<bool> InputDiesAt(const ExecutionPlan& plan) {
    const int steps = static_cast<int>(plan.steps_.size());
    std::vector<bool> dies(steps, false);
    std::set<int> external;
    for (const auto* ports : {&plan.inputs_, &plan.outputs_}) {
      for (const auto& [name, b] : *ports) external.insert(plan.RootBuffer(b));
    }
    std::map<int, int> last_read;
    for (int s = 0; s < steps; ++s) {
      for (int b : plan.steps_[s].inputs) last_read[plan.RootBuffer(b)] = s;
    }
    for (int s = 0; s < steps; ++s) {
      const PlanStep& step = plan.steps_[s];
      if (step.is_view || step.in_place || step.inputs.empty() || step.outputs.empty()) continue;
      // x may be an alias of all of its root's bytes (an in-place ReLU's output, a view).
      int x = step.inputs[0];
      bool whole = true;
      for (int b = x; plan.buffers_[b].alias_of >= 0; b = plan.buffers_[b].alias_of) {
        whole = whole && plan.buffers_[b].alias_byte_offset == 0;
      }
      x = plan.RootBuffer(x);
      whole = whole && plan.buffers_[step.inputs[0]].bytes == plan.buffers_[x].bytes;
      const int y = step.outputs[0];
      const BufferAssignment& xb = plan.buffers_[x];
      const BufferAssignment& yb = plan.buffers_[y];
      if (!whole || yb.alias_of >= 0 || xb.arena != Arena::kActivations ||
          yb.arena != Arena::kActivations || external.count(x) || external.count(y) ||
          last_read[x] != s) {
        continue;
      }
      bool shared = false;
      for (size_t j = 1; j < step.inputs.size(); ++j) {
        shared = shared || plan.RootBuffer(step.inputs[j]) == x;
      }
      dies[s] = !shared;
    }
    return dies;
  }

  // A step whose workspace lifts the arena above the activations' own peak and whose input 0
  // dies there (InputDiesAt) is prepared again with KernelOptions::input_dies_here: a kernel
  // that can keep its scratch in that input's bytes and in its output's unwritten ones (the
  // CUDA convolution, in two parts of the batch) then needs less workspace for the same
  // algorithm. Kept only when it needs less and, measured, takes no longer (within the 5%
  // that measurements wander); the workspace budget below then sees the smaller need. This is
  // what took FCN-8s's unfused fp32 plan under PyTorch eager's memory (conv1_2's 108 MiB
  // Winograd workspace at the step where conv1_1's and its own 476 MiB outputs peak).
  static void TryDeadBytes(ExecutionPlan& plan, int s, bool input_dies, int64_t live,
                           const KernelRegistry& kernels, Backend backend,
                           const KernelOptions& kernel_options) {
    PlanStep& step = plan.steps_[s];
    if (!input_dies || step.workspace_bytes == 0 ||
        live + static_cast<int64_t>(step.workspace_bytes) <= plan.planned_activation_bytes_) {
      return;
    }
    absl::StatusOr<const KernelFactory*> factory = kernels.Select(*step.node, backend);
    if (!factory.ok()) return;
    KernelOptions dying = kernel_options;
    dying.input_dies_here = true;
    dying.save_tuning = false;
    absl::StatusOr<std::unique_ptr<Kernel>> kernel = (*factory)->create(*step.node, dying);
    if (!kernel.ok() || (*kernel)->WorkspaceBytes() >= step.workspace_bytes ||
        (*kernel)->InPlaceInput() != step.in_place_input || (*kernel)->AliasedInput() >= 0) {
      return;
    }
    const double before = step.kernel->MeasuredMs(), after = (*kernel)->MeasuredMs();
    if ((before >= 0) != (after >= 0) || (before >= 0 && after > 1.05 * before)) return;
    step.description = (*kernel)->Describe();
    step.workspace_bytes = (*kernel)->WorkspaceBytes();
    step.kernel = *std::move(kernel);
  }

  static void PlanInPlace(ExecutionPlan& plan) {
    std::set<int> external;
    for (const auto* ports : {&plan.inputs_, &plan.outputs_}) {
      for (const auto& [name, b] : *ports) external.insert(plan.RootBuffer(b));
    }
    // The last step reading each root buffer (views count as their root).
    std::map<int, int> last_read;
    for (int s = 0; s < static_cast<int>(plan.steps_.size()); ++s) {
      for (int b : plan.steps_[s].inputs) last_read[plan.RootBuffer(b)] = s;
    }
    for (int s = 0; s < static_cast<int>(plan.steps_.size()); ++s) {
      PlanStep& step = plan.steps_[s];
      const int i = step.in_place_input;
      if (step.is_view || i < 0 || i >= static_cast<int>(step.inputs.size())) continue;
      const int in_root = plan.RootBuffer(step.inputs[i]);
      const int out = step.outputs[0];
      BufferAssignment& o = plan.buffers_[out];
      const BufferAssignment& in = plan.buffers_[in_root];
      if (in.arena != Arena::kActivations || external.count(in_root) || external.count(out) ||
          last_read[in_root] != s || o.alias_of >= 0 || !(o.type == in.type) ||
          !(plan.buffers_[step.inputs[i]].type == o.type)) {
        continue;
      }
      // Another input in the same bytes (a convolution reading x with x as its residual too)
      // would be read where the step already wrote.
      bool shared = false;
      for (size_t j = 0; j < step.inputs.size(); ++j) {
        shared = shared || (static_cast<int>(j) != i && plan.RootBuffer(step.inputs[j]) == in_root);
      }
      if (shared) continue;
      o.alias_of = in_root;
      step.in_place = true;
      auto later = last_read.find(out);
      if (later != last_read.end()) last_read[in_root] = later->second;
    }
  }

  // The graph a CUDA plan runs: the source with the requested precision and layout applied.
  static absl::StatusOr<std::unique_ptr<Graph>> CudaGraphFor(const Graph& source,
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
};

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
