// The Trainer: trains any trainable graph (training/trainable_graph.h) with an optimizer
// (training/optimizer.h) on batches from BatchSources. It owns the learnable parameters, their
// gradients and the optimizer's history in device memory (the plan reads and writes them in
// place: no copies), runs iter_size forward/backward passes per iteration, clips, and applies
// the update rule (dnn/solver_update.h) with the learning-rate schedule and the per-parameter
// lr/decay multipliers; evaluation nets share its parameters. With a GradientSync
// (training/gradient_sync.h) the gradients are summed over data-parallel ranks before each
// update. Caffe's solver (frontends/caffe/training/solver_trainer.h) is one frontend of it.
#ifndef KILN_TRAINING_TRAINER_H_
#define KILN_TRAINING_TRAINER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/host_tensor.h"
#include "runtime/compiler.h"
#include "training/optimizer.h"
#include "training/progress.h"
#include "training/training_net.h"

namespace kiln {

class GradientSync;  // training/gradient_sync.h

struct TrainingOptions {
  // Backend, precision, layout, algorithm choice of every plan. The inference rewrites are
  // never run on training plans; `compile.optimize` runs the training forward rewrites instead
  // (passes/training_passes.h), minus `compile.disabled_passes`.
  CompileOptions compile;
  // Seeds the data order, crops and mirrors, and synthetic data.
  uint64_t data_seed = 1;
  // Static loss scaling: backward starts from loss weight x this, and the update divides the
  // gradients by it before anything else (clipping included), so only the rounding of 16-bit
  // gradients changes. 1: none.
  double loss_scale = 1.0;
  // Data-parallel training (distributed/): the training net's sources read shard `data_shard`
  // of `data_shards` of their stream, and `gradient_sync` (not owned, outliving the Trainer)
  // sums the gradients over the ranks before every update. The defaults: one process.
  int data_shard = 0;
  int data_shards = 1;
  GradientSync* gradient_sync = nullptr;
};

// Device memory a trainer holds, by role.
struct TrainerMemory {
  int64_t weights = 0;      // the plans' constant weights (non-trained blobs)
  int64_t optimizer = 0;    // trained parameters, their gradients, histories, accumulators
  int64_t activations = 0;  // the plans' activation arenas (with step workspaces when planned in)
  int64_t workspace = 0;    // the plans' separate workspace arenas
  int64_t io = 0;           // data inputs and the nets' outputs
  int64_t total() const { return weights + optimizer + activations + workspace + io; }
};

// InvalidArgument when the loss scale or the data shard cannot be used.
absl::Status CheckTrainingOptions(const TrainingOptions& options);

class Trainer {
 public:
  // `train` must have been made with backward; `evaluations` without, taking `train`'s
  // parameters and statistics (TrainableGraphOptions::only). Checks `options` and `optimizer`.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      std::unique_ptr<TrainingNet> train, std::vector<std::unique_ptr<TrainingNet>> evaluations,
      const OptimizerConfig& optimizer, const TrainingOptions& options);
  virtual ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One iteration: iter_size forward/backward passes, then the update. With `read_loss` false
  // the loss is not copied back (no wait for the device: benchmarking). A pass whose loss is not
  // finite (read_loss, no gradient sync) stops the step before it changes any statistic,
  // gradient or parameter: FailedPrecondition, and diverged() is true, so the state can still
  // be saved as the last good one.
  absl::Status Step(bool read_loss = true);
  bool diverged() const { return diverged_; }
  // `iterations` steps after `warmup` ones, timed on the device between steps: the median
  // milliseconds of one step (no loss read back).
  absl::StatusOr<double> TimeSteps(int iterations, int warmup = 3);
  TrainerMemory Memory() const;
  // One instrumented pass of the training plan on the inputs of the last step (no CUDA graph):
  // each plan step's device milliseconds with its node's op and name (forward and backward).
  struct StepTime {
    std::string op, node;
    std::string description;  // what the kernel chose at plan time ("algo=...")
    std::string shape;        // the step's first input type, for reports
    double ms = 0;
  };
  absl::StatusOr<std::vector<StepTime>> ProfilePass();
  // One pass of evaluation net `net` over its test_iter batches, with the current parameters.
  absl::StatusOr<std::vector<NetOutput>> Test(int net = 0);
  int num_test_nets() const { return static_cast<int>(tests_.size()); }

  // The current value of every trained parameter and running statistic, by node name.
  absl::StatusOr<std::map<std::string, HostTensor>> ReadWeights() const;

  int64_t iter() const { return iter_; }
  // Where the run stands beyond the parameters and histories (training/progress.h).
  absl::StatusOr<TrainingProgress> Progress() const;
  // Puts every net's pass count, every source and every carried state where `progress` says
  // (the iteration is set apart, with the histories). FailedPrecondition naming the net and feed
  // when the progress is for other nets, feeds or states, or a source cannot be repositioned; a
  // feed recorded as -1 (no count kept) is left where it is, and a progress without carried
  // states (an older snapshot) or a data-parallel run restarts them at zeros. A trainer without
  // test nets (a data-parallel rank other than 0) restores the trained net's progress and
  // ignores the recorded test nets'.
  absl::Status RestoreProgress(const TrainingProgress& progress);
  // The weighted loss of the last iteration, and the smoothed loss (average_loss iterations).
  double last_loss() const { return last_loss_; }
  double smoothed_loss() const;
  // The learning rate the last update used.
  double last_rate() const { return last_rate_; }
  // Examples one iteration consumes (batch x iter_size).
  int64_t images_per_iteration() const { return images_per_iteration_; }
  // "cuda (NVIDIA H100 ...), precision fp32" or "cpu (...)".
  const std::string& backend_description() const { return backend_; }

 protected:
  Trainer() = default;
  // Takes the nets, allocates the parameter state and joins the gradient sync.
  absl::Status Init(std::unique_ptr<TrainingNet> train,
                    std::vector<std::unique_ptr<TrainingNet>> evaluations,
                    const OptimizerConfig& optimizer, const TrainingOptions& options);
  // With a GradientSync: rank 0's parameters and statistics to every rank.
  absl::Status ShareParameters();

  // Per trained parameter: its bytes, gradient (bound as the plan's output), accumulator
  // (iter_size > 1) and histories, all in the training context's device memory.
  struct ParamState {
    int64_t count = 0;
    void* value = nullptr;
    void* grad = nullptr;
    void* accum = nullptr;
    void* scratch = nullptr;  // the accumulating step's momentum buffer (iter_size > 1)
    void* history[2] = {nullptr, nullptr};
  };
  // Per running statistic (training-mode BatchNorm): its value and the buffer the plan writes
  // the updated value to, copied back after each pass.
  struct StatState {
    int64_t count = 0;
    void* value = nullptr;
    void* next = nullptr;
  };

  OptimizerConfig optimizer_;
  std::unique_ptr<TrainingNet> train_;
  std::vector<std::unique_ptr<TrainingNet>> tests_;
  std::vector<ParamState> state_;
  std::vector<StatState> stats_;
  int history_count_ = 1;
  int64_t iter_ = 0;
  GradientSync* sync_ = nullptr;

 private:
  absl::Status AllocateState(bool accumulate);
  absl::Status Accumulate(int pass);
  absl::Status Update();
  // With a GradientSync: places the gradients the update reads in the sync's block.
  absl::Status BindGradientSync(bool accumulate);

  double loss_scale_ = 1.0;
  bool diverged_ = false;
  double last_loss_ = 0, last_rate_ = 0;
  std::vector<double> recent_losses_;
  int64_t images_per_iteration_ = 0;
  std::string backend_;
  void* norm_scratch_ = nullptr;    // one double, for clip_gradients on CUDA
  void* gradient_block_ = nullptr;  // the sync's layout of the gradients, owned here
  int64_t gradient_block_bytes_ = 0;
};

}  // namespace kiln

#endif  // KILN_TRAINING_TRAINER_H_
