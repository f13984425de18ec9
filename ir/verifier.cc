#include "ir/verifier.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

absl::Status VerifyNode(const Graph& graph, const Node& node) {
  const std::string where = absl::StrCat("verify: node '", node.name(), "' (", node.op(), ")");
  auto registered = graph.registry().Find(node.op());
  if (!registered.ok() || *registered != &node.def()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": op is not in the graph's registry"));
  }
  std::vector<TensorType> input_types;
  for (int i = 0; i < node.num_inputs(); ++i) {
    const Value& v = node.input(i);
    if (v.node == nullptr || graph.FindNode(v.node->name()) != v.node) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": input ", i, " refers to a node outside the graph"));
    }
    if (v.index < 0 || v.index >= v.node->num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": input ", i, " reads output ",
                                                     v.index, " of '", v.node->name(),
                                                     "', which has ", v.node->num_outputs()));
    }
    input_types.push_back(v.type());
  }
  if (node.kind() == OpKind::kConstant) {
    if (node.constant() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": constant has no data"));
    }
    if (node.num_outputs() != 1 || node.constant()->type() != node.output_types()[0]) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": data type ",
                                                     node.constant()->type().ToString(),
                                                     " differs from the output type"));
    }
    if (node.constant()->size_bytes() < node.constant()->type().span_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": data is smaller than its type"));
    }
  }
  auto normalized = NormalizeAttrs(node.def(), node.attrs());
  if (!normalized.ok()) return Annotate(normalized.status(), where);
  auto types = InferNodeTypes(node.def(), input_types, *normalized);
  if (!types.ok()) return Annotate(types.status(), where);
  // Outputs a pass gave other strides keep them (Graph::SetOutputStrides).
  for (int i = 0; i < node.num_outputs() && i < static_cast<int>(types->size()); ++i) {
    const TensorType& stored = node.output_types()[i];
    if (node.HasStridedOutput(i) && stored.dtype() == (*types)[i].dtype() &&
        stored.dims() == (*types)[i].dims()) {
      (*types)[i] = stored;
    }
  }
  if (*types != node.output_types()) {
    std::string stored, inferred;
    for (const auto& t : node.output_types()) absl::StrAppend(&stored, t.ToString(), " ");
    for (const auto& t : *types) absl::StrAppend(&inferred, t.ToString(), " ");
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": stored output types ", stored, "differ from inferred ", inferred));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyGraph(const Graph& graph) {
  std::set<std::string> names;
  for (const Node* node : graph.nodes()) {
    if (!names.insert(node->name()).second || graph.FindNode(node->name()) != node) {
      return absl::InvalidArgumentError(
          absl::StrCat("verify: node name '", node->name(), "' is not unique"));
    }
    KILN_RETURN_IF_ERROR(VerifyNode(graph, *node));
  }
  auto order = graph.TopologicalOrder();
  if (!order.ok()) return Annotate(order.status(), "verify");
  std::set<std::string> output_names;
  for (const GraphOutput& o : graph.outputs()) {
    if (!output_names.insert(o.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("verify: graph output '", o.name, "' appears twice"));
    }
    if (o.value.node == nullptr || graph.FindNode(o.value.node->name()) != o.value.node ||
        o.value.index < 0 || o.value.index >= o.value.node->num_outputs()) {
      return absl::InvalidArgumentError(
          absl::StrCat("verify: graph output '", o.name, "' refers to no value of the graph"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
