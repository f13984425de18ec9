// The text form of a Graph: one line per node, readable, and parsed back to an equal graph
// (print -> parse -> print gives the same text). Example:
//
//   %0 = Parameter "data" () {dtype="f32", shape=[1,3,8,8]} : f32[1,3,8,8]
//   %1 = Constant "w" () {dtype="f32", shape=[2,3,1,1]} : f32[2,3,1,1] = [0.5,-1,...]
//   %2 = Convolution "conv1" (%0, %1) {group=1, ...} : f32[1,2,8,8]
//   output "conv1" = %2
//
// Values are %<node>[.<output>]; nodes are numbered in topological order. Lines starting with
// '#' are comments.
#ifndef KILN_IR_TEXT_FORMAT_H_
#define KILN_IR_TEXT_FORMAT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ir/graph.h"

namespace kiln {

struct PrintOptions {
  // Constants print their values (needed to parse back). Off: "= <N values elided>".
  bool print_constant_values = true;
  // Constants print "= external": their bytes are kept elsewhere (a saved plan's weights
  // section) and ParseGraph asks `external_constant` for them.
  bool external_constants = false;
};

// The text form of `graph`. A graph with a cycle prints an error line instead of nodes.
std::string PrintGraph(const Graph& graph, const PrintOptions& options = {});

// Parses text written by PrintGraph. InvalidArgument with "line L, column C: ..." on bad text;
// shape rules are checked by the same InferTypes as the builder, and the printed output types
// must equal the inferred ones.
absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(absl::string_view text,
                                                  const OpRegistry* registry);

// The data of a Constant written "= external", by its node name and type.
using ExternalConstantFn =
    std::function<absl::StatusOr<HostTensor>(const std::string& name, const TensorType& type)>;
// ParseGraph for text with external constants (PrintOptions::external_constants).
absl::StatusOr<std::unique_ptr<Graph>> ParseGraph(absl::string_view text,
                                                  const OpRegistry* registry,
                                                  const ExternalConstantFn& external_constant);

}  // namespace kiln

#endif  // KILN_IR_TEXT_FORMAT_H_
