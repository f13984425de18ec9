// One compiled net of a solver (the TRAIN net or a TEST net): its trainable graph, plan and
// context, the data sources feeding its data layers (Data, ImageData) and the device buffers of
// its data inputs and outputs. The Trainer (trainer.h) owns the parameters, gradients and
// statistics these nets read and write; `kiln test` uses one alone (TestNet).
#ifndef KILN_ENGINE_TRAINING_TRAINING_NET_H_
#define KILN_ENGINE_TRAINING_TRAINING_NET_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch_source.h"
#include "engine/runtime/compiler.h"
#include "engine/runtime/executor.h"
#include "engine/training/training_graph.h"
#include "proto/solver.h"

namespace kiln {

class GradientSync;  // engine/training/gradient_sync.h

struct TrainerOptions {
  // Backend, precision, layout, algorithm choice of every plan (the CLI's flags). The inference
  // rewrites are never run on training plans; `compile.optimize` runs the training forward
  // rewrites instead (passes/training_passes.h), minus `compile.disabled_passes`.
  CompileOptions compile;
  // Seeds the data order, crops and mirrors; the solver's random_seed (when >= 0) seeds fillers.
  uint64_t data_seed = 1;
  // Initial weights (Caffe's --weights: layers matched by name); null: the nets' fillers.
  const caffe::NetParameter* weights = nullptr;
  // Relative data sources are looked up from the working directory first (Caffe's rule), then
  // from this folder (the solver file's).
  std::string solver_dir;
  // Benchmarking: the data layers' tops get these shapes and fixed random contents (images
  // N(0,1), labels in [0, 10)) instead of reading their databases.
  std::map<std::string, std::vector<int64_t>> synthetic_data;
  // Static loss scaling: backward starts from loss_weight x this, and the solver divides the
  // gradients by it before anything else (clipping included), so only the rounding of 16-bit
  // gradients changes. 1: none (Caffe).
  double loss_scale = 1.0;
  // Data-parallel training (engine/distributed): the TRAIN net's Data layers read shard
  // `data_shard` of `data_shards` of their stream (positions data_shard + k * data_shards, as
  // Caffe's solvers do; TEST nets read everything), and `gradient_sync` (not owned, outliving
  // the Trainer) sums the gradients over the ranks before every update. The defaults: one
  // process, and the Trainer as without them.
  int data_shard = 0;
  int data_shards = 1;
  GradientSync* gradient_sync = nullptr;
};

// One output of a net (mean over the batches of a test pass), as Caffe reports it.
struct NetOutput {
  std::string name;
  double value = 0;
  double loss_weight = 0;  // non-zero for a loss
};

// A compiled net, its context, the data sources feeding it and the device buffers of its data
// inputs and outputs (the parameters and gradients belong to the Trainer).
struct TrainingNet {
  TrainingGraph tg;
  std::unique_ptr<ExecutionPlan> plan;
  std::unique_ptr<ExecutionContext> ctx;
  struct Source {
    std::unique_ptr<BatchSource> source;
    std::string data, label;  // graph input names of its tops ("" when absent)
  };
  std::vector<Source> sources;
  std::map<std::string, void*> data_buffers;    // graph input -> device buffer
  std::map<std::string, void*> output_buffers;  // graph output -> device buffer (no gradients)
  // One float, the pass number, for training Dropouts (also in data_buffers, which owns it).
  void* dropout_seed = nullptr;
  float* seed_staging = nullptr;
  int64_t passes = 0;
  int test_iter = 0;
  Batch batch;

  ~TrainingNet();
  // Reads one batch from every source into the data buffers (and the next dropout seed).
  absl::Status Feed();
  // One scalar output's value (f32), read back to the host.
  absl::StatusOr<double> ReadScalar(const std::string& name);
};

// Imports, makes trainable (with backward when `backward`), compiles and sets up one net of a
// solver; its data layers (Data, ImageData) are opened (or made synthetic,
// TrainerOptions::synthetic_data) first so their tops get shapes. `only` as in MakeTrainingGraph.
absl::StatusOr<std::unique_ptr<TrainingNet>> LoadTrainingNet(const SolverNet& spec,
                                                             caffe::Phase phase,
                                                             const TrainerOptions& options,
                                                             uint64_t fill_seed, bool backward,
                                                             const std::vector<std::string>* only);

// test_iter batches through a TEST net: the mean of each scalar output (Caffe's test outputs).
absl::StatusOr<std::vector<NetOutput>> RunTestPasses(TrainingNet& net,
                                                     std::map<std::string, const void*> inputs);

}  // namespace kiln

#endif  // KILN_ENGINE_TRAINING_TRAINING_NET_H_
