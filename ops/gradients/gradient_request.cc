#include "ops/gradients/gradient_request.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

AttrMap PickAttrs(const Node& node, std::initializer_list<const char*> names) {
  AttrMap out;
  for (const char* name : names) {
    auto it = node.attrs().find(name);
    if (it != node.attrs().end()) out.emplace(name, it->second);
  }
  return out;
}

absl::StatusOr<std::vector<Value>> AddGradientNodes(GraphBuilder& b, const Node& forward,
                                                    const std::string& suffix, absl::string_view op,
                                                    std::vector<Value> inputs,
                                                    const AttrMap& attrs) {
  std::string name = absl::StrCat(forward.name(), "/", suffix);
  // A forward graph may already hold a node of that name (a user's "conv1/grad"): count up.
  for (int i = 2; b.graph().FindNode(name) != nullptr; ++i) {
    name = absl::StrCat(forward.name(), "/", suffix, "_", i);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> out, b.Op(op, std::move(inputs), attrs, name));
  b.graph().SetOrigins(out[0].node, forward.origins());
  return out;
}

absl::StatusOr<Value> AddGradientNode(GraphBuilder& b, const Node& forward,
                                      const std::string& suffix, absl::string_view op,
                                      std::vector<Value> inputs, const AttrMap& attrs) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value> out,
                        AddGradientNodes(b, forward, suffix, op, std::move(inputs), attrs));
  return out[0];
}

absl::StatusOr<Value> SingleOutputGradient(const GradientRequest& request) {
  if (!request.has_output_grad(0)) {
    return absl::FailedPreconditionError(
        absl::StrCat("gradient of '", request.node->name(), "' asked with no output gradient"));
  }
  return request.output_grads[0];
}

absl::Status NoGradientFor(const Node& node, absl::string_view why) {
  return absl::UnimplementedError(
      absl::StrCat("gradient of '", node.name(), "' (", node.op(), "): ", why));
}

}  // namespace kiln
