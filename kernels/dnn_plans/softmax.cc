#include "kernels/dnn_plans/softmax.h"

#include "base/status_macros.h"
#include "ops/shape_util.h"

namespace kiln {
namespace dnn_plans {

absl::StatusOr<dnn::SoftmaxDescriptor> SoftmaxOf(const Node& node, int rank) {
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), rank, "axis"));
  return dnn::SoftmaxDescriptor::Axis(
      node.GetBool("log") ? dnn::SoftmaxAlgorithm::kLog : dnn::SoftmaxAlgorithm::kAccurate, axis);
}

}  // namespace dnn_plans
}  // namespace kiln
