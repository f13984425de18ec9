// Small helpers the rewrites share: use counts that include graph outputs, constant lookup, and
// the replace-then-clean-up step every fusion ends with.
#ifndef KILN_PASSES_REWRITE_UTIL_H_
#define KILN_PASSES_REWRITE_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/graph.h"

namespace kiln {

// The names of the graph's nodes in creation order. Rewrites iterate over these rather than
// Node pointers, since a rewrite removes nodes.
std::vector<std::string> NodeNames(const Graph& graph);
// Node inputs plus graph outputs that read `value`.
int UseCount(const Graph& graph, Value value);
// The single node reading `value`, or null when it has other readers or is a graph output.
Node* SoleConsumer(const Graph& graph, Value value);
// The bytes of the graph's largest activation (any node's output but a Constant's): the memory
// passes split only what is near it.
int64_t LargestActivationBytes(const Graph& graph);
// The data behind `value` when a Constant node produces it, else null.
const HostTensor* ConstantData(Value value);
// `base`, or `base` with "/2", "/3", ... appended, whichever no node uses yet.
std::string UniqueName(const Graph& graph, const std::string& base);
// Points every use of `replaced` at `replacement`'s output 0, removes what became dead, then
// gives `replacement` the name `final_name` and the union of `absorbed` nodes' origins.
absl::Status FinishFusion(Graph& graph, Value replaced, Node* replacement,
                          const std::string& final_name, const std::vector<const Node*>& absorbed);

// The end of a split (passes/split_*_for_memory.cc): a Concat of `parts` along `axis` takes
// `replaced`'s place, name and origins, so its output keeps the layer's blob name.
absl::Status ReplaceByConcat(Graph& graph, Node* replaced, std::vector<Value> parts, int64_t axis);

}  // namespace kiln

#endif  // KILN_PASSES_REWRITE_UTIL_H_
