#include "tools/plan_layers.h"

#include <algorithm>

namespace kiln {

LayerIndex::LayerIndex(const CaffeModel& model) {
  for (const CaffeLayer& layer : model.layers) {
    for (const std::string& node : layer.nodes) layer_of_node_[node] = layer.name;
    type_of_layer_[layer.name] = layer.type;
  }
}

std::vector<std::string> LayerIndex::LayersOf(const Node& node) const {
  std::vector<std::string> layers;
  for (const std::string& origin : node.origins()) {
    auto it = layer_of_node_.find(origin);
    if (it == layer_of_node_.end()) continue;
    if (std::find(layers.begin(), layers.end(), it->second) == layers.end()) {
      layers.push_back(it->second);
    }
  }
  if (layers.empty()) layers.push_back(node.name());
  return layers;
}

std::string LayerIndex::TypeOf(const std::string& layer) const {
  auto it = type_of_layer_.find(layer);
  return it == type_of_layer_.end() ? "" : it->second;
}

}  // namespace kiln
