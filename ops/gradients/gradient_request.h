// What a gradient builder (OpDef::gradient) is asked: the forward node, the gradient reaching
// each of its outputs, and which of its inputs need one. The helpers below are shared by the
// builders of every op family.
#ifndef KILN_OPS_GRADIENTS_GRADIENT_REQUEST_H_
#define KILN_OPS_GRADIENTS_GRADIENT_REQUEST_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph.h"
#include "ir/graph_builder.h"

namespace kiln {

struct GradientRequest {
  const Node* node = nullptr;
  // dL/d(output i), or a null Value when no gradient reaches output i.
  std::vector<Value> output_grads;
  // For a loss output the objective uses directly: its weight (Caffe's loss_weight), which is
  // the constant dL/d(output); 0 for other outputs.
  std::vector<double> loss_weights;
  // Whether input i needs a gradient (some parameter lies behind it and propagate_down allows).
  std::vector<bool> needs_grad;

  bool has_output_grad(int i) const { return output_grads[i].node != nullptr; }
};

// Output `i` of a forward node the builder reads (Node::output is not const).
inline Value OutputOf(const Node& node, int i = 0) { return Value{const_cast<Node*>(&node), i}; }

// A null Value: "no gradient".
inline Value NoGradient() { return Value{}; }

// The node's attributes named in `names` (all present after normalization).
AttrMap PickAttrs(const Node& node, std::initializer_list<const char*> names);

// Adds one backward node named "<forward name>/<suffix>" whose origin is the forward node, so
// `kiln time` reports backward time under the forward layer.
absl::StatusOr<Value> AddGradientNode(GraphBuilder& b, const Node& forward,
                                      const std::string& suffix, absl::string_view op,
                                      std::vector<Value> inputs, const AttrMap& attrs);
// The same for an op with several outputs.
absl::StatusOr<std::vector<Value>> AddGradientNodes(GraphBuilder& b, const Node& forward,
                                                    const std::string& suffix, absl::string_view op,
                                                    std::vector<Value> inputs,
                                                    const AttrMap& attrs);

// The one output gradient of a single-output op; FailedPrecondition if the request has none
// (the backward builder never asks then).
absl::StatusOr<Value> SingleOutputGradient(const GradientRequest& request);

// Unimplemented naming the node and what its gradient lacks.
absl::Status NoGradientFor(const Node& node, absl::string_view why);

}  // namespace kiln

#endif  // KILN_OPS_GRADIENTS_GRADIENT_REQUEST_H_
