// Softmax and its gradient as the primitive library's descriptor.
#ifndef KILN_KERNELS_DNN_PLANS_SOFTMAX_H_
#define KILN_KERNELS_DNN_PLANS_SOFTMAX_H_

#include "absl/status/statusor.h"
#include "dnn/primitive_descriptors.h"
#include "ir/graph.h"

namespace kiln {
namespace dnn_plans {

// The softmax (or log-softmax) over a Softmax or SoftmaxGradient node's axis, for an input of
// rank `rank`.
absl::StatusOr<dnn::SoftmaxDescriptor> SoftmaxOf(const Node& node, int rank);

}  // namespace dnn_plans
}  // namespace kiln

#endif  // KILN_KERNELS_DNN_PLANS_SOFTMAX_H_
