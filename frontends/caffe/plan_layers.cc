#include "frontends/caffe/plan_layers.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace kiln {

LayerIndex CaffeLayerIndex(const CaffeModel& model) {
  std::map<std::string, std::string> layer_of_node, type_of_layer;
  for (const CaffeLayer& layer : model.layers) {
    for (const std::string& node : layer.nodes) layer_of_node[node] = layer.name;
    type_of_layer[layer.name] = layer.type;
  }
  return LayerIndex(std::move(layer_of_node), std::move(type_of_layer));
}

int64_t CaffeActivationBytes(const CaffeModel& model) {
  std::map<std::string, int64_t> blobs;
  for (const CaffeInput& input : model.inputs) {
    const Node* node = model.graph->FindNode(input.node);
    if (node != nullptr) blobs[input.name] = node->output_types()[0].num_elements() * 4;
  }
  for (const CaffeLayer& layer : model.layers) {
    for (const CaffeTop& top : layer.tops) {
      if (top.value.node == nullptr) continue;
      blobs[top.blob] = std::max(blobs[top.blob], top.value.type().num_elements() * 4);
    }
  }
  int64_t total = 0;
  for (const auto& [name, bytes] : blobs) total += bytes;
  return total;
}

}  // namespace kiln
