// A Caffe net made trainable: the net imported for one phase, its learnable parameters turned
// from weights (Constant nodes) into graph inputs the trainer binds to its own buffers, and, for
// the TRAIN net, the backward nodes of every loss (engine/training/backward.h) with one output
// per parameter gradient. The TEST net shares the parameters by the same input names.
#ifndef KILN_ENGINE_TRAINING_TRAINING_GRAPH_H_
#define KILN_ENGINE_TRAINING_TRAINING_GRAPH_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/ir/host_tensor.h"
#include "passes/pass_manager.h"
#include "proto/caffe_model.h"

namespace kiln {

// One learnable parameter blob.
struct TrainableParam {
  std::string node;      // the Constant node it replaces (unique in the imported graph)
  std::string input;     // the graph input that now carries it: "param/<node>"
  std::string gradient;  // the graph output of its gradient: "grad/<node>" ("" in a TEST net or
                         // when no loss depends on it)
  std::string layer;     // the Caffe layer (the first, for a shared blob) and blob index
  int index = 0;
  std::vector<int64_t> caffe_shape;  // the shape a .caffemodel stores
  float lr_mult = 1, decay_mult = 1;
  HostTensor initial;  // its value at import (weights file, net file or filler)
};

// A statistic a training-mode BatchNorm keeps as Caffe does (mean, variance, their weight):
// not trained by the solver, but updated by every forward pass and shared with the TEST net.
struct RunningStat {
  std::string node;    // the Constant node it replaces
  std::string input;   // "param/<node>": the value before the pass
  std::string output;  // "stats/<node>": the value after it ("" in a TEST net)
  std::string layer;
  int index = 0;
  std::vector<int64_t> caffe_shape;
  HostTensor initial;
};

struct TrainingGraph {
  CaffeModel model;  // graph: forward (+ backward for TRAIN); the Constants of `params` are gone
  std::vector<TrainableParam> params;
  std::vector<RunningStat> running;
  // The graph's inputs fed from data layers (top names), and its loss outputs with weights.
  std::vector<std::string> data_inputs;
  std::vector<std::pair<std::string, double>> losses;
  // The graph input (one f32) every training-mode Dropout adds to its seed, so each iteration
  // draws new masks; "" when the net has none. The trainer feeds the pass number.
  std::string dropout_seed_input;
  // Every weight blob of the net that is not trained (BatchNorm statistics, lr_mult 0), by node,
  // so a snapshot can write the whole net.
  std::map<std::string, HostTensor> fixed;
};

// Promotes the learnable parameters of `model` (lr_mult != 0; a shared blob once) to graph
// inputs, and the statistics of training-mode BatchNorms to inputs that the BatchNorm updates
// (outputs "stats/<node>"). With `with_backward` (the TRAIN net), also adds the backward of every
// top whose loss_weight is non-zero, honouring propagate_down, and an output "grad/<node>" per
// parameter. `only` gives the node names to promote instead (a TEST net takes exactly the TRAIN
// net's parameters and statistics, as inputs; others keep their imported values).
// `loss_scale` multiplies the seed of backward (every loss weight), so 16-bit gradients keep
// their small values above f16's underflow; the trainer divides the gradients by it again.
// `passes`, when not null, runs the training forward pipeline (passes/training_passes.h:
// BatchNorm + Scale as one AffineBatchNorm, ReLUs folded in) with those options before backward
// is built, so the backward is the fused ops' own, and the backward pipeline (gradient sums
// folded into activation backwards) after.
absl::StatusOr<TrainingGraph> MakeTrainingGraph(CaffeModel model, bool with_backward,
                                                const std::vector<std::string>* only = nullptr,
                                                double loss_scale = 1.0,
                                                const PassManagerOptions* passes = nullptr);

}  // namespace kiln

#endif  // KILN_ENGINE_TRAINING_TRAINING_GRAPH_H_
