// GradientSync: the hook through which data-parallel training (engine/distributed) joins a
// Trainer, without the Trainer knowing about communicators. A Trainer given one (TrainerOptions::
// gradient_sync) keeps the gradients the update reads in one block laid out by the sync, lets it
// make every rank's parameters equal before the first step, and calls it between backward and the
// update, where the sync leaves the sum over the ranks in the gradients; the Trainer then divides
// by gradient_divisor() together with iter_size and the loss scale (Caffe sums the solvers'
// gradients and scales them by 1/solver_count before the update, which is the same).
//
// A sync may also act during backward (ActsDuringBackward): the Trainer then runs the last
// forward/backward pass of each step with a StepObserver (engine/runtime/executor.h) and tells it
// each plan step as soon as it has been enqueued, so it can start reducing the gradients already
// written while backward goes on (docs/DISTRIBUTED.md, "Gradient buckets and overlap").
//
// Without a GradientSync (the default) the Trainer behaves exactly as before.
#ifndef KILN_TRAINING_GRADIENT_SYNC_H_
#define KILN_TRAINING_GRADIENT_SYNC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/device.h"

namespace kiln {

// One trained parameter's gradient, as the update reads it (f32).
struct GradientSlot {
  std::string node;   // the parameter's node
  int64_t count = 0;  // f32 elements
  // The TRAIN plan's step that writes it (its backward position); -1 when no step does (no loss
  // reaches the parameter) or when the update reads an accumulator filled after each pass
  // (iter_size > 1).
  int produced_at = -1;
};

// Where the trainer puts the gradients: one device block of `total_bytes`, gradient i at
// `offsets[i]` (256-byte aligned); the trainer zeroes the block once.
struct GradientLayout {
  int64_t total_bytes = 0;
  std::vector<int64_t> offsets;
};

// A device buffer of f32 values the sync may read and write (parameters, statistics).
struct DeviceSpan {
  float* data = nullptr;
  int64_t count = 0;
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;

  // Trainer::Create: the layout of the gradient block for `slots` (in parameter order).
  virtual absl::StatusOr<GradientLayout> PlanGradients(const std::vector<GradientSlot>& slots) = 0;
  // Trainer::Create: the block, allocated on `device` and zeroed; kept until the Trainer dies.
  virtual absl::Status BindGradients(Device& device, void* block) = 0;
  // End of Trainer::Create and Restore: make the parameters and statistics every rank's equal
  // (Caffe copies the root solver's). A collective: every rank calls it.
  virtual absl::Status ShareParameters(Device& device, const std::vector<DeviceSpan>& parameters,
                                       const std::vector<DeviceSpan>& statistics) = 0;
  // Whether OnStepEnqueued should be called. Asked at every step, after PlanGradients. False (the
  // default): the Trainer runs its plan as without a sync (a CUDA graph where it can).
  virtual bool ActsDuringBackward() const { return false; }
  // Trainer::Step, while ActsDuringBackward(), during the last forward/backward pass of the step
  // only (the one after which the gradients the update reads are final): TRAIN plan step `step`
  // has just been enqueued on device.stream(), every step in order. The gradient of a slot whose
  // produced_at is <= `step` has been written by the work enqueued so far; the sync may enqueue
  // work that reads it on its own stream, ordered after device.stream() with an event, and must
  // leave device.stream() ordered after that work again by the end of ReduceGradients. An error
  // stops the step.
  virtual absl::Status OnStepEnqueued(Device& device, int step) { return absl::OkStatus(); }
  // The steps OnStepEnqueued must hear of (ascending); empty: every step. Naming them lets the
  // plan run the stretches between them from captured CUDA graphs (StepObserver::call_after)
  // instead of launching every step from the host.
  virtual std::vector<int> ObservedSteps() const { return {}; }
  // Trainer::Step, after the passes and before clipping and the update: the gradients become
  // their sum over the ranks (including what OnStepEnqueued started), and the work enqueued on
  // device.stream() afterwards sees them; the BatchNorm statistics may be averaged (the sync's
  // option; called just before ReduceGradients). Both may return before the collectives have
  // run: the device orders the later work after them, and FinishStep waits for them.
  virtual absl::Status ReduceGradients(Device& device) = 0;
  virtual absl::Status ReduceStatistics(Device& device,
                                        const std::vector<DeviceSpan>& statistics) = 0;
  // Trainer::Step, once the update has been enqueued, and before anything the host reads back
  // after ReduceGradients (the clipping norm): waits, bounded by the sync's timeout, for the
  // step's collectives, so a dead peer surfaces as this step's error instead of a hang in a later
  // host wait. Waiting only here, not in ReduceGradients, lets the update be enqueued while the
  // last all-reduces run. A second call in the same step returns at once.
  virtual absl::Status FinishStep(Device& device) { return absl::OkStatus(); }
  // What the summed gradients are divided by (the number of ranks).
  virtual int gradient_divisor() const = 0;
};

}  // namespace kiln

#endif  // KILN_TRAINING_GRADIENT_SYNC_H_
