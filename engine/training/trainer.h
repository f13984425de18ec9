// The Trainer: Caffe's Solver on Kiln's graph engine. It compiles the TRAIN net (forward and
// backward as one plan) and each TEST net, owns the learnable parameters, their gradients and
// the solver's history in device memory (the plans read and write them in place: no copies), feeds
// the data layers from their databases (data/batch_source.h, read ahead on a thread), and applies
// Caffe's update rules (kernels/dnn/solver_update.h) with its learning-rate schedule, weight decay,
// lr/decay multipliers, iter_size accumulation and gradient clipping. Snapshots are a .caffemodel
// and a .solverstate in Caffe's formats; Restore continues from one as Caffe's --snapshot does.
#ifndef KILN_ENGINE_TRAINING_TRAINER_H_
#define KILN_ENGINE_TRAINING_TRAINER_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/compiler.h"
#include "engine/training/training_net.h"
#include "proto/solver.h"

namespace kiln {

// Device memory a trainer holds, by role.
struct TrainerMemory {
  int64_t weights = 0;      // the plans' constant weights (non-trained blobs)
  int64_t optimizer = 0;    // trained parameters, their gradients, histories, accumulators
  int64_t activations = 0;  // the plans' activation arenas (with step workspaces when planned in)
  int64_t workspace = 0;    // the plans' separate workspace arenas
  int64_t io = 0;           // data inputs and the nets' outputs
  int64_t total() const { return weights + optimizer + activations + workspace + io; }
};

// Caffe's `caffe test`: the TEST phase of `net` with the weights of options.weights, for
// `iterations` batches of its data layers; the mean of each scalar output.
absl::StatusOr<std::vector<NetOutput>> TestNet(const caffe::NetParameter& net, int iterations,
                                               const TrainerOptions& options);

class Trainer {
 public:
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const SolverConfig& solver,
                                                         const TrainerOptions& options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One solver iteration: iter_size forward/backward passes, then the update. With
  // `read_loss` false the loss is not copied back (no wait for the device: benchmarking).
  absl::Status Step(bool read_loss = true);
  // `iterations` steps after `warmup` ones, timed on the device between steps: the median
  // milliseconds of one step (no loss read back).
  absl::StatusOr<double> TimeSteps(int iterations, int warmup = 3);
  TrainerMemory Memory() const;
  // One instrumented pass of the TRAIN plan on the inputs of the last step (no CUDA graph):
  // each plan step's device milliseconds with its node's op and name (forward and backward).
  struct StepTime {
    std::string op, node;
    std::string description;  // what the kernel chose at plan time ("algo=...")
    std::string shape;        // the step's first input type, for reports
    double ms = 0;
  };
  absl::StatusOr<std::vector<StepTime>> ProfilePass();
  // One pass of TEST net `net` over its test_iter batches, with the current parameters.
  absl::StatusOr<std::vector<NetOutput>> Test(int net = 0);
  int num_test_nets() const { return static_cast<int>(tests_.size()); }

  int64_t iter() const { return iter_; }
  // The weighted loss of the last iteration, and Caffe's smoothed loss (average_loss).
  double last_loss() const { return last_loss_; }
  double smoothed_loss() const;
  // The learning rate the last update used.
  double last_rate() const { return last_rate_; }
  // Images one iteration consumes (batch x iter_size).
  int64_t images_per_iteration() const { return images_per_iteration_; }
  // "cuda (NVIDIA H100 ...), precision fp32" or "cpu (...)".
  const std::string& backend_description() const { return backend_; }

  // Writes <prefix>_iter_<N>.caffemodel and .solverstate; returns their paths.
  absl::StatusOr<std::pair<std::string, std::string>> Snapshot(const std::string& prefix);
  // Continues from a .solverstate (and the .caffemodel it names, unless `weights_path` is given).
  // With a GradientSync every rank must call it (the parameters are then shared from rank 0).
  absl::Status Restore(const std::string& solverstate_path, const std::string& weights_path = "");

  // The current parameters as a Caffe net of the TRAIN net's layers (for --weights elsewhere).
  absl::StatusOr<caffe::NetParameter> WeightsAsNet() const;

 private:
  Trainer() = default;
  absl::Status Update();
  // With a GradientSync: places the gradients the update reads in the sync's block.
  absl::Status BindGradientSync(bool accumulate);
  absl::Status ShareParameters();

  SolverConfig solver_;
  std::unique_ptr<TrainingNet> train_;
  std::vector<std::unique_ptr<TrainingNet>> tests_;
  // Per trained parameter: its bytes, gradient (bound as the plan's output), accumulator (iter_size
  // > 1) and histories, all in the TRAIN context's device memory.
  struct ParamState {
    int64_t count = 0;
    void* value = nullptr;
    void* grad = nullptr;
    void* accum = nullptr;
    void* scratch = nullptr;  // the accumulating step's momentum buffer (iter_size > 1)
    void* history[2] = {nullptr, nullptr};
  };
  std::vector<ParamState> state_;
  // Per running statistic (training-mode BatchNorm): its value and the buffer the plan writes
  // the updated value to, copied back after each pass.
  struct StatState {
    int64_t count = 0;
    void* value = nullptr;
    void* next = nullptr;
  };
  std::vector<StatState> stats_;
  int history_count_ = 1;
  double loss_scale_ = 1.0;
  int64_t iter_ = 0;
  double last_loss_ = 0, last_rate_ = 0;
  std::vector<double> recent_losses_;
  int64_t images_per_iteration_ = 0;
  std::string backend_;
  void* norm_scratch_ = nullptr;  // one double, for clip_gradients on CUDA
  // Data-parallel training (TrainerOptions::gradient_sync); null for one process.
  GradientSync* sync_ = nullptr;
  void* gradient_block_ = nullptr;  // the sync's layout of the gradients, owned here
  int64_t gradient_block_bytes_ = 0;
};

}  // namespace kiln

#endif  // KILN_ENGINE_TRAINING_TRAINER_H_
