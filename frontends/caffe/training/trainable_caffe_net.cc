#include "frontends/caffe/training/trainable_caffe_net.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

absl::StatusOr<TrainableGraph> MakeTrainingGraph(CaffeModel& model, bool with_backward,
                                                 const std::vector<std::string>* only,
                                                 double loss_scale,
                                                 const PassManagerOptions* passes) {
  TrainableGraphOptions options;
  options.with_backward = with_backward;
  options.only = only;
  options.loss_scale = loss_scale;
  options.passes = passes;
  return MakeTrainingGraph(model, std::move(options));
}

absl::StatusOr<TrainableGraph> MakeTrainingGraph(CaffeModel& model, TrainableGraphOptions options) {
  std::vector<ParamSpec> params;
  for (const CaffeParam& p : model.params) {
    ParamSpec spec;
    spec.node = p.node;
    spec.learnable = p.learnable;
    spec.lr_mult = p.lr_mult;
    spec.decay_mult = p.decay_mult;
    spec.layer = p.layer;
    spec.index = p.index;
    spec.stored_shape = p.shape;
    params.push_back(std::move(spec));
  }
  std::vector<LossSpec> losses;
  for (const CaffeLayer& layer : model.layers) {
    for (const CaffeTop& top : layer.tops) {
      if (top.loss_weight != 0.0f) losses.push_back({top.value, top.blob, top.loss_weight});
    }
  }
  if (options.with_backward && losses.empty()) {
    return absl::InvalidArgumentError(
        "training: the TRAIN net has no loss (no top with a non-zero loss_weight)");
  }
  for (const caffe::LayerParameter& layer : model.net.layer()) {
    if (layer.propagate_down_size() == 0) continue;
    const CaffeLayer* record = model.FindLayer(layer.name());
    if (record == nullptr || record->nodes.empty()) continue;
    options.propagate_down[record->nodes[0]] =
        std::vector<bool>(layer.propagate_down().begin(), layer.propagate_down().end());
  }
  std::vector<std::string> data_inputs;
  for (const CaffeInput& in : model.inputs) data_inputs.push_back(in.name);
  // The recurrent layers' state, when the import made it a graph input and output.
  options.carried_states = model.carried_states;
  return MakeTrainableGraph(std::move(model.graph), params, losses, std::move(data_inputs),
                            options);
}

}  // namespace kiln
