// Pooling and PoolingGradient as the primitive library's descriptors.
//
// The op allows a little more than the primitive takes, so the plan reshapes the problem (never
// the data) where that gives the same result: 1-d pooling runs as 2-d pooling under a unit dim,
// and Caffe's pooled-size clip, which Caffe applies to every dim as soon as any dim is padded
// while the primitive applies it per padded dim, is met by pooling a shorter view of x.
#ifndef KILN_KERNELS_DNN_PLANS_POOLING_H_
#define KILN_KERNELS_DNN_PLANS_POOLING_H_

#include <string>

#include "absl/status/statusor.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"
#include "ir/graph.h"
#include "kernels/dnn_plans/tensor.h"

namespace kiln {
namespace dnn_plans {

struct PoolingPlan {
  dnn::PoolingDescriptor pool;
  dnn::TensorDescriptor xd, yd;
  // PoolingGradient only: dx's descriptor, and the part of it the pooling reads (dx_view, dx's
  // strides with xd's dims). When they differ (Caffe's clip), the rows past the view get no
  // gradient: dx is zeroed first and the view's gradient written into it.
  dnn::TensorDescriptor dxd, dx_view;
  std::string note;  // how the problem was reshaped, for plan dumps
};

// The pooling of x to y (Pooling: input 0 to the output; PoolingGradient(x, y, dy) -> dx: input
// 0 to input 1). Unimplemented, with the reason, when the primitive cannot serve the node.
absl::StatusOr<PoolingPlan> PlanPooling(const Node& node, const OperandTypes& types);

}  // namespace dnn_plans
}  // namespace kiln

#endif  // KILN_KERNELS_DNN_PLANS_POOLING_H_
