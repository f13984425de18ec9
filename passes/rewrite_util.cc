#include "passes/rewrite_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

std::vector<std::string> NodeNames(const Graph& graph) {
  std::vector<std::string> names;
  for (const Node* n : graph.nodes()) names.push_back(n->name());
  return names;
}

int UseCount(const Graph& graph, Value value) {
  int count = static_cast<int>(graph.Uses(value).size());
  for (const GraphOutput& o : graph.outputs()) count += o.value == value ? 1 : 0;
  return count;
}

int64_t LargestActivationBytes(const Graph& graph) {
  int64_t largest = 0;
  for (const Node* n : graph.nodes()) {
    if (n->kind() == OpKind::kConstant) continue;
    for (const TensorType& t : n->output_types()) largest = std::max(largest, t.span_bytes());
  }
  return largest;
}

Node* SoleConsumer(const Graph& graph, Value value) {
  if (UseCount(graph, value) != 1) return nullptr;
  const auto uses = graph.Uses(value);
  return uses.empty() ? nullptr : uses[0].first;
}

const HostTensor* ConstantData(Value value) {
  return value.node != nullptr ? value.node->constant() : nullptr;
}

std::string UniqueName(const Graph& graph, const std::string& base) {
  std::string name = base;
  for (int i = 2; graph.FindNode(name) != nullptr; ++i) name = absl::StrCat(base, "/", i);
  return name;
}

absl::Status FinishFusion(Graph& graph, Value replaced, Node* replacement,
                          const std::string& final_name, const std::vector<const Node*>& absorbed) {
  std::vector<std::string> origins;
  for (const Node* n : absorbed) {
    origins.insert(origins.end(), n->origins().begin(), n->origins().end());
  }
  KILN_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(replaced, replacement->output(0)));
  // When the rewritten nodes were dead code, the replacement is too, and goes with them.
  const std::string temporary = replacement->name();
  graph.RemoveDeadNodes();
  replacement = graph.FindNode(temporary);
  if (replacement == nullptr) return absl::OkStatus();
  KILN_RETURN_IF_ERROR(graph.RenameNode(replacement, final_name));
  graph.SetOrigins(replacement, std::move(origins));
  return absl::OkStatus();
}

absl::Status ReplaceByConcat(Graph& graph, Node* replaced, std::vector<Value> parts, int64_t axis) {
  KILN_ASSIGN_OR_RETURN(Node * concat,
                        graph.AddNode("Concat", UniqueName(graph, replaced->name() + "/concat"),
                                      std::move(parts), {{"axis", AttrValue(axis)}}));
  // A copy: FinishFusion removes `replaced`, and its name with it, before renaming.
  const std::string name = replaced->name();
  return FinishFusion(graph, replaced->output(0), concat, name, {replaced});
}

}  // namespace kiln
