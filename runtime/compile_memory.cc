// Compile stage: memory. The workspace budget (kernels chosen again with less workspace), the
// offsets of the activation arena (with each step's workspace in it), the tuning file written
// back, and the weights arena.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/plan_builder.h"

namespace kiln {

absl::Status PlanBuilder::PlanArenas(CompileState& state) {
  const CompileOptions& options = state.options;
  ExecutionPlan& plan = *state.plan;
  std::vector<BufferRequest>& requests = state.requests;
  const int end = static_cast<int>(plan.steps_.size());
  // What the activations alone need, reported beside Caffe's allocation.
  plan.planned_activation_bytes_ =
      PlanMemory(requests, options.reuse_activation_memory).arena_bytes;
  // Each step's workspace lives only during its step, so it can take the bytes of activations
  // that are dead then: one arena whose peak is the largest (live activations + workspace)
  // over the steps, as a caching allocator would reach, instead of the sum of the two peaks.
  std::vector<int> workspace_step;
  if (options.workspace_in_activation_arena) {
    if (options.workspace_peak_slack >= 0) {
      const int64_t budget =
          plan.planned_activation_bytes_ +
          static_cast<int64_t>(options.workspace_peak_slack * plan.planned_activation_bytes_);
      FitWorkspaces(plan, requests, budget, options.workspace_budget_max_slowdown,
                    state.step_choices, state.kernel_options);
    }
    for (int s = 0; s < end; ++s) {
      const PlanStep& step = plan.steps_[s];
      if (step.is_view || step.workspace_bytes == 0) continue;
      requests.push_back({static_cast<int64_t>(step.workspace_bytes), s, s});
      workspace_step.push_back(s);
    }
  }
  MemoryPlan memory = PlanMemory(requests, options.reuse_activation_memory);
  const std::vector<int>& request_buffer = state.request_buffer;
  for (size_t r = 0; r < request_buffer.size(); ++r) {
    plan.buffers_[request_buffer[r]].offset = memory.offsets[r];
  }
  for (size_t w = 0; w < workspace_step.size(); ++w) {
    plan.steps_[workspace_step[w]].workspace_offset = memory.offsets[request_buffer.size() + w];
  }
  plan.activations_bytes_ = memory.arena_bytes;
  plan.largest_step_workspace_ = plan.workspace_bytes_;
  if (options.workspace_in_activation_arena) plan.workspace_bytes_ = 0;
  const KernelOptions& kernel_options = state.kernel_options;
  if (kernel_options.tuning != nullptr && kernel_options.measure_algorithms &&
      !options.tuning_file.empty() && state.tuning.dirty()) {
    if (options.tuning_file_is_cache) {
      // Best effort: a cache that cannot be written only means measuring again next time.
      state.tuning.SaveMerged(options.tuning_file).IgnoreError();
    } else {
      KILN_RETURN_IF_ERROR(Annotate(state.tuning.Save(options.tuning_file), "compile"));
    }
  }
  plan.tuning_entries_ = state.tuning.Entries();
  AssignOffsets(state);
  return absl::OkStatus();
}

// The weights arena, in the weights' order, and every alias at its root's offset.
void PlanBuilder::AssignOffsets(CompileState& state) {
  ExecutionPlan& plan = *state.plan;
  for (const auto& [node, b] : plan.weights_) {
    plan.buffers_[b].offset = plan.weights_bytes_;
    plan.weights_bytes_ +=
        (plan.buffers_[b].bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  }
  for (size_t b = 0; b < plan.buffers_.size(); ++b) {
    BufferAssignment& a = plan.buffers_[b];
    if (a.alias_of >= 0) {
      a.offset = plan.buffers_[plan.RootBuffer(static_cast<int>(b))].offset +
                 plan.OffsetInRoot(static_cast<int>(b));
    }
  }
}

// A step whose workspace would raise the arena above `budget` (CompileOptions::
// workspace_peak_slack) asks its factory again, with the bytes the budget leaves free while it
// runs as its workspace limit: an algorithm within them, measured when measuring. The new choice
// is kept when it fits and, with max_slowdown >= 0, when the measured time it adds keeps the
// added total within max_slowdown of the plan's measured time. The description names what the
// unbounded choice was. Only choices change here; kernels are built afterwards (BuildKernels).
void PlanBuilder::FitWorkspaces(ExecutionPlan& plan, const std::vector<BufferRequest>& requests,
                                int64_t budget, double max_slowdown,
                                std::vector<StepChoice>& choices,
                                const KernelOptions& kernel_options) {
  const int steps = static_cast<int>(plan.steps_.size());
  std::vector<int64_t> live(steps + 1, 0);
  for (const BufferRequest& r : requests) {
    for (int s = r.first_step; s <= r.last_step && s <= steps; ++s) live[s] += r.bytes;
  }
  double measured = 0;
  for (int s = 0; s < steps; ++s) {
    const double ms = choices[s].choice.measured_ms;
    if (!plan.steps_[s].is_view && ms > 0) measured += ms;
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
    StepChoice& chosen = choices[s];
    TryDeadBytes(plan, s, input_dies[s], live[s], chosen, kernel_options);
    const int64_t free_bytes = std::max<int64_t>(0, budget - live[s]);
    const double before = step.is_view ? -1 : chosen.choice.measured_ms;
    if (!step.is_view && static_cast<int64_t>(step.workspace_bytes) > free_bytes &&
        (max_slowdown < 0 || before >= 0) && chosen.may_choose_again) {
      KernelOptions bounded = kernel_options;
      bounded.workspace_limit = std::min(kernel_options.workspace_limit, free_bytes);
      bounded.save_tuning = false;
      absl::StatusOr<KernelChoice> choice = chosen.factory->choose(*step.node, bounded);
      bool keep = choice.ok() && static_cast<int64_t>(choice->workspace_bytes) <= free_bytes &&
                  choice->in_place_input == step.in_place_input && choice->aliased_input < 0;
      const double after = choice.ok() ? choice->measured_ms : -1;
      const bool timed = before >= 0 && after >= 0;
      const double cost = timed ? std::max(0.0, after - before) : 0;
      if (keep && max_slowdown >= 0) keep = timed && added + cost <= allowance;
      if (keep) {
        added += cost;
        ++plan.budget_rechosen_steps_;
        if (!timed) untimed = true;
        step.description =
            absl::StrCat(choice->description, " (within the ", free_bytes,
                         " bytes the memory budget leaves; unbounded: ", step.description, " with ",
                         step.workspace_bytes, " workspace bytes)");
        step.workspace_bytes = choice->workspace_bytes;
        chosen.choice = *std::move(choice);
      }
    }
    plan.workspace_bytes_ =
        std::max<int64_t>(plan.workspace_bytes_, static_cast<int64_t>(step.workspace_bytes));
  }
  plan.budget_added_ms_ = untimed ? -1 : added;
}

// A step whose workspace lifts the arena above the activations' own peak and whose input 0
// dies there (InputDiesAt) asks its factory again with KernelOptions::input_dies_here: a
// kernel that can keep its scratch in that input's bytes and in its output's unwritten ones
// (the CUDA convolution, in two parts of the batch) then needs less workspace for the same
// algorithm. Kept only when it needs less and, measured, takes no longer (within the 5% that
// measurements wander); the workspace budget then sees the smaller need. This is what took
// FCN-8s's unfused fp32 plan under PyTorch eager's memory (conv1_2's 108 MiB Winograd
// workspace at the step where conv1_1's and its own 476 MiB outputs peak).
void PlanBuilder::TryDeadBytes(ExecutionPlan& plan, int s, bool input_dies, int64_t live,
                               StepChoice& chosen, const KernelOptions& kernel_options) {
  PlanStep& step = plan.steps_[s];
  if (!input_dies || step.workspace_bytes == 0 || !chosen.may_choose_again ||
      live + static_cast<int64_t>(step.workspace_bytes) <= plan.planned_activation_bytes_) {
    return;
  }
  KernelOptions dying = kernel_options;
  dying.input_dies_here = true;
  dying.save_tuning = false;
  absl::StatusOr<KernelChoice> choice = chosen.factory->choose(*step.node, dying);
  if (!choice.ok() || choice->workspace_bytes >= step.workspace_bytes ||
      choice->in_place_input != step.in_place_input || choice->aliased_input >= 0) {
    return;
  }
  const double before = chosen.choice.measured_ms, after = choice->measured_ms;
  if ((before >= 0) != (after >= 0) || (before >= 0 && after > 1.05 * before)) return;
  step.description = choice->description;
  step.workspace_bytes = choice->workspace_bytes;
  chosen.choice = *std::move(choice);
}

}  // namespace kiln
