#include "engine/runtime/compiler.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/ir/verifier.h"
#include "engine/runtime/device.h"
#include "engine/runtime/memory_planner.h"
#include "engine/status_macros.h"

namespace kiln {

namespace {
bool IsGraphNode(const Node& n) { return n.op() == "Parameter" || n.op() == "Constant"; }
}  // namespace

// Builds a plan; a friend of ExecutionPlan so the plan stays immutable to everyone else.
class PlanBuilder {
 public:
  static absl::StatusOr<std::unique_ptr<ExecutionPlan>> Build(const Graph& source,
                                                              const KernelRegistry& kernels,
                                                              const CompileOptions& options) {
    KILN_RETURN_IF_ERROR(Annotate(VerifyGraph(source), "compile"));
    if (source.outputs().empty()) {
      return absl::InvalidArgumentError("compile: the graph has no outputs");
    }
    auto plan = std::make_unique<ExecutionPlan>();
    plan->graph_ = source.Clone();
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, plan->graph_->TopologicalOrder());

    // Stage: backend and kernel selection.
    std::vector<Node*> compute;
    for (Node* n : order) {
      if (!IsGraphNode(*n)) compute.push_back(n);
    }
    Backend backend = Backend::kCpu;
    std::string reason;
    if (options.backend == BackendChoice::kReference) {
      backend = Backend::kReference;
      reason = "reference backend requested";
    } else if (options.backend == BackendChoice::kCpu) {
      reason = "cpu backend requested";
    } else {
      const CudaProbe probe = ProbeCuda();
      absl::Status cuda_ok = probe.usable ? absl::OkStatus() : absl::UnavailableError(probe.reason);
      for (const Node* n : compute) {
        if (!cuda_ok.ok()) break;
        cuda_ok = kernels.Select(*n, Backend::kCuda).status();
      }
      if (cuda_ok.ok()) {
        backend = Backend::kCuda;
        reason = absl::StrCat("cuda: ", probe.devices[0].name);
      } else if (options.backend == BackendChoice::kCuda) {
        return Annotate(cuda_ok, "compile: kernel selection");
      } else {
        reason = absl::StrCat("cuda not used (", cuda_ok.message(), "); running on the cpu");
      }
    }
    plan->backend_ = backend;
    plan->backend_reason_ = reason;

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
      auto kernel = (*factory)->create(*n);
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
      step.kernel = *std::move(kernel);
      for (const Value& v : n->inputs()) step.inputs.push_back(buffer_of[v]);
      for (int i = 0; i < n->num_outputs(); ++i) step.outputs.push_back(buffer_of[n->output(i)]);
      plan->workspace_bytes_ =
          std::max<int64_t>(plan->workspace_bytes_, static_cast<int64_t>(step.workspace_bytes));
      plan->steps_.push_back(std::move(step));
    }

    // Stage: memory planning. Activations live from the step that writes them to the last step
    // that reads them; inputs from the start, outputs to the end.
    const int end = static_cast<int>(plan->steps_.size());
    std::vector<BufferRequest> requests;
    std::vector<int> request_buffer;
    std::map<int, int> request_of;
    for (size_t b = 0; b < plan->buffers_.size(); ++b) {
      if (plan->buffers_[b].arena != Arena::kActivations) continue;
      request_of[static_cast<int>(b)] = static_cast<int>(requests.size());
      requests.push_back({plan->buffers_[b].bytes, 0, 0});
      request_buffer.push_back(static_cast<int>(b));
    }
    for (int s = 0; s < end; ++s) {
      for (int b : plan->steps_[s].outputs) requests[request_of[b]].first_step = s;
      for (int b : plan->steps_[s].outputs) requests[request_of[b]].last_step = s;
    }
    for (int s = 0; s < end; ++s) {
      for (int b : plan->steps_[s].inputs) {
        if (request_of.count(b)) {
          BufferRequest& r = requests[request_of[b]];
          r.last_step = std::max(r.last_step, s);
        }
      }
    }
    for (const auto& [name, b] : plan->outputs_) {
      if (request_of.count(b)) requests[request_of[b]].last_step = end;
    }
    MemoryPlan memory = PlanMemory(requests, options.reuse_activation_memory);
    for (size_t r = 0; r < requests.size(); ++r) {
      plan->buffers_[request_buffer[r]].offset = memory.offsets[r];
    }
    plan->activations_bytes_ = memory.arena_bytes;
    for (const auto& [node, b] : plan->weights_) {
      plan->buffers_[b].offset = plan->weights_bytes_;
      plan->weights_bytes_ +=
          (plan->buffers_[b].bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    }
    return plan;
  }
};

absl::StatusOr<std::unique_ptr<ExecutionPlan>> Compile(const Graph& graph,
                                                       const KernelRegistry& kernels,
                                                       const CompileOptions& options) {
  return PlanBuilder::Build(graph, kernels, options);
}

std::string ExecutionPlan::ToString() const {
  std::string out = absl::StrFormat(
      "plan: backend %s (%s)\narenas: weights %d B, activations %d B, workspace %d B\n",
      BackendName(backend_), backend_reason_, weights_bytes_, activations_bytes_, workspace_bytes_);
  auto buffer = [&](int b) {
    const BufferAssignment& a = buffers_[b];
    return absl::StrFormat("%s@%s+%d", a.type.ToString(), a.arena == Arena::kWeights ? "w" : "a",
                           a.offset);
  };
  for (const auto& [name, b] : inputs_)
    absl::StrAppend(&out, "input ", name, ": ", buffer(b), "\n");
  for (size_t i = 0; i < steps_.size(); ++i) {
    const PlanStep& s = steps_[i];
    std::vector<std::string> ins, outs;
    for (int b : s.inputs) ins.push_back(buffer(b));
    for (int b : s.outputs) outs.push_back(buffer(b));
    absl::StrAppend(&out,
                    absl::StrFormat("step %d: %s '%s' [%s] (%s) -> (%s) ws=%d\n", i, s.node->op(),
                                    s.node->name(), s.kernel_name, absl::StrJoin(ins, ", "),
                                    absl::StrJoin(outs, ", "), s.workspace_bytes));
  }
  for (const auto& [name, b] : outputs_)
    absl::StrAppend(&out, "output ", name, ": ", buffer(b), "\n");
  return out;
}

}  // namespace kiln
