// The element-wise activations and PReLU as the primitive library's descriptors.
#ifndef KILN_KERNELS_DNN_PLANS_ACTIVATION_H_
#define KILN_KERNELS_DNN_PLANS_ACTIVATION_H_

#include "absl/status/statusor.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"
#include "ir/graph.h"
#include "kernels/dnn_plans/tensor.h"

namespace kiln {
namespace dnn_plans {

// The activation of a forward node (ReLU, Sigmoid, TanH, ELU, ClippedReLU, AbsVal, Power), or the
// one an ActivationGradient node differentiates.
absl::StatusOr<dnn::ActivationDescriptor> ActivationOf(const Node& node);

// A forward activation: input 0 to output 0.
struct ActivationPlan {
  dnn::ActivationDescriptor act;
  dnn::TensorDescriptor xd, yd;
};
absl::StatusOr<ActivationPlan> PlanActivation(const Node& node, const OperandTypes& types);

// PReLU(x, slope) -> y, and PReLUGradient(x, slope, dy) -> (dx, dslope), which plans the same x
// and slope (yd is then dx's descriptor).
struct PReluPlan {
  dnn::TensorDescriptor xd, yd;
  // The slope seen with x's rank: (1, C, 1, ...) per channel, all ones when shared; its own
  // stride along C, so a strided slope is read in place.
  dnn::TensorDescriptor slope;
};
absl::StatusOr<PReluPlan> PlanPRelu(const Node& node, const OperandTypes& types);

}  // namespace dnn_plans
}  // namespace kiln

#endif  // KILN_KERNELS_DNN_PLANS_ACTIVATION_H_
