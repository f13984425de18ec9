// One compiled net of a training run (the net the optimizer trains, or an evaluation net that
// shares its parameters): its trainable graph, plan and context, the batch sources feeding its
// data inputs, and the device buffers of those inputs and of its outputs. The Trainer
// (training/trainer.h) owns the parameters, gradients and statistics the plan reads and writes.
#ifndef KILN_TRAINING_TRAINING_NET_H_
#define KILN_TRAINING_TRAINING_NET_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "training/batch_source.h"
#include "training/trainable_graph.h"

namespace kiln {

// A source and the graph inputs its batch values go to, in BatchDims order ("" skips one). A
// null source is synthetic data for benchmarks: the inputs are filled once (as
// synthetic_indices_only says) and never read again.
struct NetFeed {
  std::unique_ptr<BatchSource> source;
  std::vector<std::string> inputs;
  // Without a source the inputs are synthetic: N(0, 1) for the first and the integers 0..9 for
  // the others, or 0..9 for every one when this is set (the tops of an HDF5Data layer, which in
  // recurrent nets are mostly indices and markers that an Embed or a loss would refuse as noise).
  bool synthetic_indices_only = false;
};

// One output of a net (mean over the batches of an evaluation pass).
struct NetOutput {
  std::string name;
  double value = 0;
  double loss_weight = 0;  // non-zero for a loss
};

struct TrainingNet {
  TrainableGraph tg;
  std::unique_ptr<ExecutionPlan> plan;
  std::unique_ptr<ExecutionContext> ctx;
  std::vector<NetFeed> feeds;
  std::map<std::string, void*> data_buffers;     // graph input -> device buffer
  std::map<std::string, int64_t> data_elements;  // fed graph input -> f32 values it holds
  std::map<std::string, void*> output_buffers;   // graph output -> device buffer (no gradients)
  // One float, the pass number, for training Dropouts (also in data_buffers, which owns it).
  void* dropout_seed = nullptr;
  float* seed_staging = nullptr;
  int64_t passes = 0;
  // Per tg.carried: the buffer its input reads (also in data_buffers, which owns it; zeros at
  // first) and its size. CarryState() copies each pass's output into it.
  std::vector<std::pair<void*, int64_t>> carried;
  int test_iter = 0;                      // batches of one evaluation pass
  std::vector<std::vector<float>> batch;  // the host side of the last batch

  ~TrainingNet();
  // Reads one batch from every source into the data buffers (and the next dropout seed).
  absl::Status Feed();
  // One scalar output's value (f32), read back to the host.
  absl::StatusOr<double> ReadScalar(const std::string& name);
  // After a pass: each carried state's output becomes the next pass's input (on the stream,
  // behind the pass).
  absl::Status CarryState();
  // The carried states' values, on the host (f32, in tg.carried's order), and setting them
  // (a snapshot's): InvalidArgument naming the state when a size differs.
  absl::StatusOr<std::vector<std::vector<float>>> ReadCarriedState();
  absl::Status WriteCarriedState(const std::vector<std::vector<float>>& values);
};

// Compiles `tg` (device-bound: the caller binds parameters, gradients and data) and allocates
// its data and output buffers. The inputs of `feeds` must be graph inputs of f32 and the
// sources' shapes. `what` names the net in errors ("TRAIN net (lenet.prototxt)").
absl::StatusOr<std::unique_ptr<TrainingNet>> CompileTrainingNet(TrainableGraph tg,
                                                                std::vector<NetFeed> feeds,
                                                                const CompileOptions& compile,
                                                                uint64_t synthetic_seed,
                                                                const std::string& what);

// test_iter batches through an evaluation net: the mean of each scalar output. `inputs` binds
// the parameters (the training net's buffers).
absl::StatusOr<std::vector<NetOutput>> RunEvaluation(TrainingNet& net,
                                                     std::map<std::string, const void*> inputs);

}  // namespace kiln

#endif  // KILN_TRAINING_TRAINING_NET_H_
