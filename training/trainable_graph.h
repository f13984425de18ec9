// A forward graph made trainable: chosen weights (Constant nodes) become graph inputs the
// trainer binds to its own buffers, the statistics of training-mode BatchNorms become inputs
// the BatchNorm also outputs updated, training Dropouts read a per-pass seed, and, with
// backward, every loss's backward is added (training/backward.h) with one output per
// parameter gradient. It knows nothing of where the graph came from: the C++ builder and the
// Caffe frontend (frontends/caffe/training/trainable_caffe_net.h) both describe their parameters
// and losses with the specs below.
#ifndef KILN_TRAINING_TRAINABLE_GRAPH_H_
#define KILN_TRAINING_TRAINABLE_GRAPH_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "passes/pass_manager.h"

namespace kiln {

// One weight of the forward graph that may be trained: a Constant node.
struct ParamSpec {
  std::string node;       // the Constant node
  bool learnable = true;  // false: never trained (it may still be a BatchNorm statistic)
  float lr_mult = 1, decay_mult = 1;
  // Where the frontend keeps it (Caffe: layer name, blob index and blob shape); carried along
  // for snapshots, unused here.
  std::string layer;
  int index = 0;
  std::vector<int64_t> stored_shape;
};

// One loss term: a scalar value of the forward graph, its weight, the name it is reported by.
struct LossSpec {
  Value value;
  std::string name;
  double weight = 1;
};

struct TrainableGraphOptions {
  // Add the backward of the losses and the gradient outputs (a TRAIN graph); false: forward
  // only (an evaluation graph sharing another's parameters).
  bool with_backward = true;
  // When set, exactly these nodes become parameter inputs (an evaluation graph takes the
  // training graph's parameters and statistics by node name); others keep their values.
  const std::vector<std::string>* only = nullptr;
  // Multiplies the seed of backward (every loss weight), so 16-bit gradients keep their small
  // values above f16's underflow; the trainer divides the gradients by it again.
  double loss_scale = 1.0;
  // When not null, the training forward pipeline (passes/training_passes.h) runs with these
  // options before backward is built, and the backward pipeline after.
  const PassManagerOptions* passes = nullptr;
  // Per node name: which of its inputs backward reaches (Caffe's propagate_down).
  std::map<std::string, std::vector<bool>> propagate_down;
  // Weights that are neither trained nor statistics become graph inputs too (in `params`, with
  // no gradient), so the caller can change any weight between runs (pycaffe's net.params);
  // false: they stay Constants (TrainableGraph::fixed).
  bool every_param_an_input = false;
  // With backward: graph outputs or inputs (by name) whose gradient is also output, under the
  // paired name (pycaffe's blob diffs). An output no loss depends on gets no gradient output.
  std::vector<std::pair<std::string, std::string>> output_gradients;
  // State carried from one pass to the next (a recurrent layer's final h and c becoming the next
  // pass's initial state, as Caffe's LSTM and RNN layers do): pairs of (graph input, graph
  // output of the same type). Not differentiated (backpropagation stops at the pass's start).
  std::vector<std::pair<std::string, std::string>> carried_states;
};

// One trained parameter.
struct TrainableParam {
  std::string node;      // the Constant node it replaces (unique in the forward graph)
  std::string input;     // the graph input that now carries it: "param/<node>"
  std::string gradient;  // the graph output of its gradient: "grad/<node>" ("" without
                         // backward, or when no loss depends on it)
  std::string layer;     // ParamSpec's layer, index and stored shape
  int index = 0;
  std::vector<int64_t> caffe_shape;
  float lr_mult = 1, decay_mult = 1;
  HostTensor initial;  // its value in the forward graph
};

// A statistic a training-mode BatchNorm keeps (mean, variance, their weight): not trained by
// the optimizer, but updated by every forward pass and shared with evaluation graphs.
struct RunningStat {
  std::string node;    // the Constant node it replaces
  std::string input;   // "param/<node>": the value before the pass
  std::string output;  // "stats/<node>": the value after it ("" without backward)
  std::string layer;
  int index = 0;
  std::vector<int64_t> caffe_shape;
  HostTensor initial;
};

// A value one pass leaves for the next of the same net (TrainableGraphOptions::carried_states);
// it starts at zeros, and each net (the trained one, every evaluation net) keeps its own.
struct CarriedState {
  std::string input;   // the graph input the pass reads it from
  std::string output;  // the graph output the pass writes its next value to
};

struct TrainableGraph {
  std::unique_ptr<Graph> graph;  // forward (+ backward); the Constants of `params` are gone
  std::vector<TrainableParam> params;
  std::vector<RunningStat> running;
  std::vector<CarriedState> carried;
  // The graph inputs fed with data each pass, and the loss outputs with their weights.
  std::vector<std::string> data_inputs;
  std::vector<std::pair<std::string, double>> losses;
  // The graph input (one f32) every training-mode Dropout adds to its seed, so each pass draws
  // new masks; "" when the graph has none. The trainer feeds the pass number.
  std::string dropout_seed_input;
  // Every weight of `params` specs that is not trained (BatchNorm statistics without backward,
  // lr_mult 0), by node, so a snapshot can write every weight.
  std::map<std::string, HostTensor> fixed;
  // TrainableGraphOptions::output_gradients that got one: output name -> gradient output name.
  std::map<std::string, std::string> output_gradients;
};

// Makes `graph` trainable. `params` lists the candidate weights (a shared weight once);
// `losses` must not be empty with backward; `data_inputs` names the graph inputs fed each pass.
absl::StatusOr<TrainableGraph> MakeTrainableGraph(std::unique_ptr<Graph> graph,
                                                  const std::vector<ParamSpec>& params,
                                                  const std::vector<LossSpec>& losses,
                                                  std::vector<std::string> data_inputs,
                                                  const TrainableGraphOptions& options);

// Every Constant of `graph` with f32 values as a learnable ParamSpec (lr and decay mult 1), in
// the graph's order: what a builder-made graph trains by default.
std::vector<ParamSpec> ConstantsAsParams(const Graph& graph);

}  // namespace kiln

#endif  // KILN_TRAINING_TRAINABLE_GRAPH_H_
