// The graph verifier: every structural and type rule of the IR, checked from scratch. The same
// InferTypes functions the builder ran are run again, so shape rules live in one place.
#ifndef KILN_IR_VERIFIER_H_
#define KILN_IR_VERIFIER_H_

#include "absl/status/status.h"
#include "ir/graph.h"

namespace kiln {

// OK, or InvalidArgument naming the first offending node (or output) and the broken rule.
absl::Status VerifyGraph(const Graph& graph);

}  // namespace kiln

#endif  // KILN_IR_VERIFIER_H_
