// GradientSync: the hook through which data-parallel training (engine/distributed) joins a
// Trainer, without the Trainer knowing about communicators. A Trainer given one (TrainerOptions::
// gradient_sync) keeps the gradients the update reads in one block laid out by the sync, lets it
// make every rank's parameters equal before the first step, and calls it between backward and the
// update, where the sync leaves the sum over the ranks in the gradients; the Trainer then divides
// by gradient_divisor() together with iter_size and the loss scale (Caffe sums the solvers'
// gradients and scales them by 1/solver_count before the update, which is the same).
//
// Without a GradientSync (the default) the Trainer behaves exactly as before.
#ifndef KILN_ENGINE_TRAINING_GRADIENT_SYNC_H_
#define KILN_ENGINE_TRAINING_GRADIENT_SYNC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/device.h"

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
  // Trainer::Step, after the passes and before clipping and the update: the gradients become
  // their sum over the ranks; the BatchNorm statistics may be averaged (the sync's option).
  virtual absl::Status ReduceGradients(Device& device) = 0;
  virtual absl::Status ReduceStatistics(Device& device,
                                        const std::vector<DeviceSpan>& statistics) = 0;
  // What the summed gradients are divided by (the number of ranks).
  virtual int gradient_divisor() const = 0;
};

}  // namespace kiln

#endif  // KILN_ENGINE_TRAINING_GRADIENT_SYNC_H_
