// Which prototxt layers a plan step stands for: a fused step covers several (its node's
// origins), a step the compiler added (a dtype/layout Convert) none, and then keeps its own name.
#ifndef KILN_TOOLS_PLAN_LAYERS_H_
#define KILN_TOOLS_PLAN_LAYERS_H_

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "frontends/caffe/caffe_model.h"

namespace kiln {

class LayerIndex {
 public:
  explicit LayerIndex(const CaffeModel& model);
  // The distinct layers of `node`'s origins, in order; {node.name()} when none is a layer's.
  std::vector<std::string> LayersOf(const Node& node) const;
  // The layer's Caffe type, or "" for a name that is not a layer.
  std::string TypeOf(const std::string& layer) const;

 private:
  std::map<std::string, std::string> layer_of_node_, type_of_layer_;
};

}  // namespace kiln

#endif  // KILN_TOOLS_PLAN_LAYERS_H_
