// The shared pieces of the training tests: small LMDBs and solvers written to the scratch
// folder, a Trainer made as `kiln train` makes it, and the small convolutional net the snapshot
// and resume tests train.
#ifndef KILN_TESTS_TRAINING_TRAINER_FIXTURES_H_
#define KILN_TESTS_TRAINING_TRAINER_FIXTURES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe.pb.h"
#include "frontends/caffe/solver.h"
#include "frontends/caffe/training/solver_trainer.h"

namespace kiln {

// Writes an LMDB of `records` Datums made by `make(i)` into the scratch folder; returns its path.
std::string WriteDb(const std::string& name, int records,
                    const std::function<caffe::Datum(int)>& make);

// Writes `net` and `solver` (whose `net:` names the net file) to the scratch folder and loads the
// solver as `kiln train` does.
absl::StatusOr<SolverConfig> WriteAndLoadSolver(const std::string& name, const std::string& net,
                                                const std::string& solver);

// A CPU-or-GPU Trainer for `solver` with the scratch folder as the solver's folder.
absl::StatusOr<std::unique_ptr<SolverTrainer>> MakeTrainer(const SolverConfig& solver,
                                                           double loss_scale = 1.0,
                                                           bool optimize = false);

// The blob values of layer `layer` in a WeightsAsNet result.
std::vector<std::vector<float>> Blobs(const caffe::NetParameter& net, const std::string& layer);

// The batch of ResumeNet's data layer; ResumeDb holds 10 batches.
constexpr int kResumeBatch = 32;

// 320 random 1x8x8 images with labels 0..2, written once per process (a later test must not
// rewrite a database an open Trainer reads).
std::string ResumeDb();

// A small convolutional classifier; the bias's lr_mult 2 and the decay make every rule of the
// update matter. `batch_norm` puts a BatchNorm layer between the convolution and its ReLU.
std::string ResumeNet(const std::string& source, bool batch_norm = false, bool with_scale = false);

}  // namespace kiln

#endif  // KILN_TESTS_TRAINING_TRAINER_FIXTURES_H_
