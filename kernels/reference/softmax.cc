// Reference Softmax / log-softmax over one axis and its gradient, through the primitive
// library's oracle (see dnn_oracle.h).
#include "kernels/dnn_plans/softmax.h"

#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/dnn_plans/tensor.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

absl::Status Softmax(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn::SoftmaxDescriptor softmax,
                        dnn_plans::SoftmaxOf(node, a.in_types[0].rank()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor xd, dnn_plans::DescriptorOf(a.in_types[0]));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, dnn_plans::DescriptorOf(a.out_types[0]));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(
      dnn::reference::SoftmaxForward(softmax, 1.0, xd, d.in(0), 0.0, yd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

// SoftmaxGradient(y, dy) -> dx.
absl::Status SoftmaxGradient(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn::SoftmaxDescriptor softmax,
                        dnn_plans::SoftmaxOf(node, a.in_types[0].rank()));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor yd, dnn_plans::DescriptorOf(a.in_types[0]));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dyd, dnn_plans::DescriptorOf(a.in_types[1]));
  KILN_ASSIGN_OR_RETURN(dnn::TensorDescriptor dxd, dnn_plans::DescriptorOf(a.out_types[0]));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(
      dnn::reference::SoftmaxBackward(softmax, 1.0, yd, d.in(0), dyd, d.in(1), 0.0, dxd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceSoftmax(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Softmax", Softmax));
  return RegisterReference(registry, "SoftmaxGradient", SoftmaxGradient);
}

}  // namespace kiln
