// A Caffe net made trainable: the generic MakeTrainableGraph (training/trainable_graph.h) with
// the parameters, losses, data inputs and propagate_down a Caffe net declares. The TEST net
// shares the parameters by the same input names.
#ifndef KILN_FRONTENDS_CAFFE_TRAINING_TRAINABLE_CAFFE_NET_H_
#define KILN_FRONTENDS_CAFFE_TRAINING_TRAINABLE_CAFFE_NET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "frontends/caffe/caffe_model.h"
#include "passes/pass_manager.h"
#include "training/trainable_graph.h"

namespace kiln {

// Promotes the learnable parameters of `model` (lr_mult != 0; a shared blob once) to graph
// inputs, and the statistics of training-mode BatchNorms to inputs that the BatchNorm updates
// (outputs "stats/<node>"). With `with_backward` (the TRAIN net), also adds the backward of every
// top whose loss_weight is non-zero, honouring propagate_down, and an output "grad/<node>" per
// parameter. `only`, `loss_scale` and `passes` as in TrainableGraphOptions. The graph moves out
// of `model`; the rest of `model` (layers, params, inputs) stays for snapshots.
absl::StatusOr<TrainableGraph> MakeTrainingGraph(CaffeModel& model, bool with_backward,
                                                 const std::vector<std::string>* only = nullptr,
                                                 double loss_scale = 1.0,
                                                 const PassManagerOptions* passes = nullptr);

// The same with every TrainableGraphOptions field as given (propagate_down is the net's).
absl::StatusOr<TrainableGraph> MakeTrainingGraph(CaffeModel& model, TrainableGraphOptions options);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_TRAINING_TRAINABLE_CAFFE_NET_H_
