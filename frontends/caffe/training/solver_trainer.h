// Caffe's Solver on the training engine: a Trainer (training/trainer.h) made from a solver file.
// It imports the TRAIN net (forward and backward as one plan) and each TEST net, feeds their
// data layers from their databases (frontends/caffe/data, read ahead on a thread), takes the
// update rule and learning-rate schedule from the SolverParameter, and writes and reads
// snapshots as a .caffemodel and a .solverstate in Caffe's formats (Restore continues from one
// as Caffe's --snapshot does).
#ifndef KILN_FRONTENDS_CAFFE_TRAINING_SOLVER_TRAINER_H_
#define KILN_FRONTENDS_CAFFE_TRAINING_SOLVER_TRAINER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe_model.h"
#include "frontends/caffe/solver.h"
#include "frontends/caffe/training/solver_net.h"
#include "training/trainer.h"

namespace kiln {

// Caffe's `caffe test`: the TEST phase of `net` with the weights of options.weights, for
// `iterations` batches of its data layers; the mean of each scalar output.
absl::StatusOr<std::vector<NetOutput>> TestNet(const caffe::NetParameter& net, int iterations,
                                               const TrainerOptions& options);

class SolverTrainer : public Trainer {
 public:
  static absl::StatusOr<std::unique_ptr<SolverTrainer>> Create(const SolverConfig& solver,
                                                               const TrainerOptions& options);

  // Writes <prefix>_iter_<N>.caffemodel and .solverstate; returns their paths.
  absl::StatusOr<std::pair<std::string, std::string>> Snapshot(const std::string& prefix);
  // Continues from a .solverstate (and the .caffemodel it names, unless `weights_path` is given).
  // With a GradientSync every rank must call it (the parameters are then shared from rank 0).
  // A state with Kiln's data position (SolverStateData::progress) continues the data layers and
  // the dropout masks where they stood, so the run goes on exactly as if it had not stopped.
  absl::Status Restore(const std::string& solverstate_path, const std::string& weights_path = "");
  // After Restore: what the user should know about it ("" when nothing), e.g. that a Caffe
  // snapshot carries no data position.
  const std::string& restore_note() const { return restore_note_; }
  // The current parameters as a Caffe net of the TRAIN net's layers (for --weights elsewhere).
  absl::StatusOr<caffe::NetParameter> WeightsAsNet() const;

  // One parameter blob of the TRAIN net, in its layers' order (pycaffe's solver.net.params):
  // read and written between iterations by `node` (shared blobs share it).
  struct ParamBlob {
    std::string layer;
    int index = 0;
    std::vector<int64_t> shape;  // Caffe's
    std::string node;
  };
  std::vector<ParamBlob> ParamBlobs() const;
  absl::StatusOr<std::vector<float>> ReadParam(const std::string& node) const;
  // FailedPrecondition for a blob compiled into the plan (lr_mult 0, not a statistic).
  absl::Status WriteParam(const std::string& node, const std::vector<float>& values);

 private:
  SolverTrainer() = default;
  // The device buffer holding parameter `node` and its element count; null for a fixed one.
  absl::StatusOr<std::pair<void*, int64_t>> ParamBuffer(const std::string& node) const;

  SolverConfig solver_;
  CaffeModel train_model_;  // the TRAIN net's layers and blobs (its graph is the plan's)
  std::string restore_note_;
};

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_TRAINING_SOLVER_TRAINER_H_
