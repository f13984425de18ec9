// LRN and LRNGradient as the primitive library's descriptors.
//
// LRN semantics: the op (ops/normalization_ops.cc) and the primitive (dnn/primitive_descriptors.h)
// agree. Across channels y = x (k + alpha/n Σ x^2)^-beta over the n channels centred on c
// (outside ones count as 0). Within channel Caffe pools x^2 with AVE over an n x n window, pad
// (n-1)/2, stride 1; that window never overhangs the padded extent, so its divisor is always n^2,
// and Caffe's power layer adds 1, not k: y = x (1 + alpha/n^2 Σ x^2)^-beta, the sum over the
// zero-padded window, which is the primitive's within-channel formula.
#ifndef KILN_KERNELS_DNN_PLANS_LRN_H_
#define KILN_KERNELS_DNN_PLANS_LRN_H_

#include "absl/status/statusor.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"
#include "ir/graph.h"
#include "kernels/dnn_plans/tensor.h"

namespace kiln {
namespace dnn_plans {

// LRN across channels on [N, C] runs on [N, C, 1], and spatial dims past three are folded into
// one (x, y and dx alike).
struct LrnPlan {
  dnn::LrnDescriptor lrn;
  dnn::TensorDescriptor xd, yd;
  dnn::TensorDescriptor dxd;  // LRNGradient only
};

// LRN of x to y (LRN: input 0 to the output; LRNGradient(x, dy) -> dx: input 0 to dy, input 1,
// of y's shape). Unimplemented, with the reason, when the primitive cannot serve the node.
absl::StatusOr<LrnPlan> PlanLrn(const Node& node, const OperandTypes& types);

}  // namespace dnn_plans
}  // namespace kiln

#endif  // KILN_KERNELS_DNN_PLANS_LRN_H_
