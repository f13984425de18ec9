// Compile stage: buffer lifetimes. Which buffers share bytes (Concat inputs placed in their
// output, in-place outputs), and over which steps each activation buffer with bytes of its own
// lives: the requests the memory stage places.
#include <algorithm>
#include <map>
#include <set>

#include "runtime/plan_builder.h"

namespace kiln {

namespace {

// The root buffers the caller reads or writes: graph inputs and outputs, never shared.
std::set<int> ExternalBuffers(const ExecutionPlan& plan) {
  std::set<int> external;
  for (const auto* ports : {&plan.inputs(), &plan.outputs()}) {
    for (const auto& [name, b] : *ports) external.insert(plan.RootBuffer(b));
  }
  return external;
}

// The last step reading each root buffer (views and placed Concat inputs count as their root).
std::map<int, int> LastReads(const ExecutionPlan& plan) {
  std::map<int, int> last_read;
  for (int s = 0; s < static_cast<int>(plan.steps().size()); ++s) {
    for (int b : plan.steps()[s].inputs) last_read[plan.RootBuffer(b)] = s;
  }
  return last_read;
}

}  // namespace

void PlanBuilder::PlanLifetimes(CompileState& state) {
  const CompileOptions& options = state.options;
  ExecutionPlan& plan = *state.plan;
  // Without reuse every activation keeps its own bytes, in-place outputs included.
  if (options.reuse_activation_memory) PlaceConcatInputs(plan);
  if (options.in_place && options.reuse_activation_memory) PlanInPlace(plan);

  // Activations live from the step that writes them to the last step that reads them; inputs
  // from the start to their last reader, outputs to the end.
  const int end = static_cast<int>(plan.steps_.size());
  std::vector<BufferRequest>& requests = state.requests;
  std::map<int, int> request_of;
  plan.device_bound_io_ = options.device_bound_io;
  std::set<int> bound_outside;  // caller-owned: no arena bytes (device_bound_io)
  if (options.device_bound_io) bound_outside = ExternalBuffers(plan);
  for (size_t b = 0; b < plan.buffers_.size(); ++b) {
    if (plan.buffers_[b].arena != Arena::kActivations || plan.buffers_[b].alias_of >= 0 ||
        bound_outside.count(static_cast<int>(b))) {
      continue;
    }
    request_of[static_cast<int>(b)] = static_cast<int>(requests.size());
    requests.push_back({plan.buffers_[b].bytes, 0, 0});
    state.request_buffer.push_back(static_cast<int>(b));
  }
  // A view's uses count as uses of the buffer it views.
  auto request = [&](int b) -> BufferRequest* {
    auto it = request_of.find(plan.RootBuffer(b));
    return it == request_of.end() ? nullptr : &requests[it->second];
  };
  // A buffer lives from the first step writing any part of it (an in-place output or a Concat
  // input placed inside it writes through an alias).
  for (BufferRequest& r : requests) r.first_step = r.last_step = end;
  for (int s = 0; s < end; ++s) {
    if (plan.steps_[s].is_view) continue;
    for (int b : plan.steps_[s].outputs) {
      if (BufferRequest* r = request(b)) r->first_step = std::min(r->first_step, s);
    }
  }
  // An input is staged into the arena before the first step and is dead after its last reader,
  // so later values may take its bytes (the caller's own tensor is never touched).
  for (const auto& [name, b] : plan.inputs_) {
    if (BufferRequest* r = request(b)) r->first_step = 0;
  }
  for (BufferRequest& r : requests) r.last_step = r.first_step;
  for (int s = 0; s < end; ++s) {
    const PlanStep& step = plan.steps_[s];
    const std::vector<int>& shape_only = step.node->def().shape_only_inputs;
    for (int i = 0; i < static_cast<int>(step.inputs.size()); ++i) {
      // A Crop's reference gives only its shape: its bytes may die before the Crop runs
      // (FCN-8s's 11 MiB input, which the final Crop names, then leaves the peak).
      if (std::find(shape_only.begin(), shape_only.end(), i) != shape_only.end()) continue;
      if (BufferRequest* r = request(step.inputs[i])) r->last_step = std::max(r->last_step, s);
    }
    for (int b : step.outputs) {
      if (BufferRequest* r = request(b)) r->last_step = std::max(r->last_step, s);
    }
  }
  for (const auto& [name, b] : plan.outputs_) {
    if (BufferRequest* r = request(b)) r->last_step = end;
  }
}

// A Concat whose inputs all have its output's strides (passes/place_concat_inputs) runs
// nothing: each input's buffer becomes the range of the output at its offset along the axis.
void PlanBuilder::PlaceConcatInputs(ExecutionPlan& plan) {
  const std::set<int> external = ExternalBuffers(plan);
  std::set<int> written;  // buffers a running step writes (not views of others)
  for (const PlanStep& step : plan.steps_) {
    if (!step.is_view) written.insert(step.outputs.begin(), step.outputs.end());
  }
  for (PlanStep& step : plan.steps_) {
    if (step.is_view || step.node->kind() != OpKind::kConcat) continue;
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
void PlanBuilder::PlanInPlace(ExecutionPlan& plan) {
  const std::set<int> external = ExternalBuffers(plan);
  std::map<int, int> last_read = LastReads(plan);
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

// For each step, whether its input 0 dies there with bytes of its own: a root buffer in the
// activation arena, not a graph input or output, read by no later step (views and placed
// Concat inputs count as their root) and by no other input of the step, and the step's output
// 0 is a root buffer too (not written over the input, nor placed inside another buffer).
std::vector<bool> PlanBuilder::InputDiesAt(const ExecutionPlan& plan) {
  const int steps = static_cast<int>(plan.steps_.size());
  std::vector<bool> dies(steps, false);
  const std::set<int> external = ExternalBuffers(plan);
  std::map<int, int> last_read = LastReads(plan);
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

}  // namespace kiln
