// Reverse-mode differentiation of a graph: the backward nodes of every op between the losses
// and the values that need gradients, added to the same graph, so forward and backward are one
// graph that the compiler schedules and plans as a whole (the memory planner then keeps alive
// exactly the forward values some backward node reads).
#ifndef KILN_TRAINING_BACKWARD_H_
#define KILN_TRAINING_BACKWARD_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/graph.h"

namespace kiln {

// One term of the objective: weight * value (a scalar loss), Caffe's loss_weight on a top.
struct LossTerm {
  Value value;
  double weight = 1.0;
};

struct BackwardOptions {
  // Per node name, whether each input may receive a gradient (Caffe's propagate_down); inputs
  // of nodes not listed may.
  std::map<std::string, std::vector<bool>> propagate_down;
};

// Adds to `graph` the nodes computing d(Σ weight · loss)/d(v) for each v in `wrt`, and returns
// them in `wrt`'s order; a null Value (node == nullptr) where no loss depends on v. Gradients
// reaching a value along several paths are summed by one Eltwise node. Errors name the node
// whose gradient could not be built.
absl::StatusOr<std::vector<Value>> BuildBackward(Graph& graph, const std::vector<LossTerm>& losses,
                                                 const std::vector<Value>& wrt,
                                                 const BackwardOptions& options = {});

}  // namespace kiln

#endif  // KILN_TRAINING_BACKWARD_H_
