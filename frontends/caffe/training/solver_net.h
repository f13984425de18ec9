// One net of a Caffe solver (the TRAIN net or a TEST net) on the training engine: imported for
// its phase, made trainable (trainable_caffe_net.h), its Data and ImageData layers opened as batch
// sources, and compiled (training/training_net.h). `kiln test` uses one alone (TestNet).
#ifndef KILN_FRONTENDS_CAFFE_TRAINING_SOLVER_NET_H_
#define KILN_FRONTENDS_CAFFE_TRAINING_SOLVER_NET_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe_model.h"
#include "frontends/caffe/solver.h"
#include "training/trainer.h"
#include "training/training_net.h"

namespace kiln {

// The generic training options plus what a Caffe solver run needs.
struct TrainerOptions : TrainingOptions {
  // Initial weights (Caffe's --weights: layers matched by name); null: the nets' fillers.
  const caffe::NetParameter* weights = nullptr;
  // Relative data sources are looked up from the working directory first (Caffe's rule), then
  // from this folder (the solver file's).
  std::string solver_dir;
  // Benchmarking: the data layers' tops get these shapes and fixed random contents (images
  // N(0,1), labels in [0, 10)) instead of reading their databases.
  std::map<std::string, std::vector<int64_t>> synthetic_data;
  // The batches of each MemoryData layer, by layer name: a function making its source (called
  // once per net that has the layer, so a TRAIN and a TEST net each get their own). The source
  // gives the layer's declared [batch_size, channels, height, width] and, with a second top,
  // [batch_size] labels (a MemoryBatchSource over the caller's arrays, for instance).
  std::map<std::string, std::function<absl::StatusOr<std::unique_ptr<BatchSource>>()>> memory_data;
};

// Opens the data layers (Data, ImageData, MemoryData) of `filtered` (upgraded and filtered for
// its state) as batch sources, or makes them synthetic (TrainerOptions::synthetic_data), and
// records their tops' shapes in import.input_shapes. Each feed's inputs are the tops' blob names.
absl::StatusOr<std::vector<NetFeed>> OpenDataFeeds(const caffe::NetParameter& filtered,
                                                   caffe::Phase phase,
                                                   const TrainerOptions& options,
                                                   CaffeImportOptions& import);

// Imports, makes trainable (with backward when `backward`), compiles and sets up one net of a
// solver; its data layers (Data, ImageData) are opened (or made synthetic,
// TrainerOptions::synthetic_data) first so their tops get shapes. `only` as in
// TrainableGraphOptions. `model`, when not null, receives the imported net's description
// (layers, params, inputs; its graph is the net's).
absl::StatusOr<std::unique_ptr<TrainingNet>> LoadTrainingNet(
    const SolverNet& spec, caffe::Phase phase, const TrainerOptions& options, uint64_t fill_seed,
    bool backward, const std::vector<std::string>* only, CaffeModel* model = nullptr);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_TRAINING_SOLVER_NET_H_
