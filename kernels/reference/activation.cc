// Reference element-wise activations and PReLU, and their gradients ActivationGradient and
// PReLUGradient, through the primitive library's oracle (see dnn_oracle.h).
#include "kernels/dnn_plans/activation.h"

#include <vector>

#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/dnn_plans/tensor.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

absl::Status Activation(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::ActivationPlan p, dnn_plans::PlanActivation(node, TypesOf(a)));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(
      dnn::reference::ActivationForward(p.act, 1.0, p.xd, d.in(0), 0.0, p.yd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

absl::Status PRelu(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::PReluPlan p, dnn_plans::PlanPRelu(node, TypesOf(a)));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(
      dnn::reference::PReluForward(p.xd, d.in(0), p.slope, d.in(1), 1.0, 0.0, p.yd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

// The saved tensor stands for x and/or y: the formulas that read one only (ops/gradients/
// pointwise_gradients.cc picks which is saved) get the same value for both. Several dy inputs
// are summed and rounded to f32 first, as the separate Eltwise sum they replace would.
absl::Status ActivationGradient(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn::ActivationDescriptor act, dnn_plans::ActivationOf(node));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor sd, dnn_plans::DescriptorOf(a.in_types[0]));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, dnn_plans::DescriptorOf(a.out_types[0]));
  DoubleOperands d(a);
  std::vector<double> dy(d.in(1), d.in(1) + a.in_types[1].num_elements());
  if (a.in.size() > 2) {
    for (size_t j = 2; j < a.in.size(); ++j) {
      KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, dnn_plans::DescriptorOf(a.in_types[j]));
      KILN_RETURN_IF_ERROR(dnn::reference::AddTensor(1.0, dyd, d.in(j), 1.0, dxd, dy.data()));
    }
    for (double& v : dy) v = static_cast<float>(v);
  }
  KILN_RETURN_IF_ERROR(dnn::reference::ActivationBackward(act, 1.0, sd, d.in(0), dxd, dy.data(), sd,
                                                          d.in(0), 0.0, dxd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

// PReLUGradient(x, slope, dy) -> (dx, dslope).
absl::Status PReluGradient(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::PReluPlan p, dnn_plans::PlanPRelu(node, TypesOf(a)));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, dnn_plans::DescriptorOf(a.in_types[2]));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(dnn::reference::PReluBackward(p.xd, d.in(0), dyd, d.in(2), p.slope, d.in(1),
                                                     1.0, 0.0, p.yd, d.out(0), 1.0, 0.0, d.out(1)));
  d.Store(a);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceActivation(KernelRegistry& registry) {
  for (const char* op : {"ReLU", "Sigmoid", "TanH", "ELU", "ClippedReLU", "Power", "AbsVal"}) {
    KILN_RETURN_IF_ERROR(RegisterReference(registry, op, Activation));
  }
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "PReLU", PRelu));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "ActivationGradient", ActivationGradient));
  return RegisterReference(registry, "PReLUGradient", PReluGradient);
}

}  // namespace kiln
