// Reference Pooling and PoolingGradient through the primitive library's oracle (see dnn_oracle.h).
// Caffe's output rounding, its pooled-size clip and its average divisor (the window clipped to the
// padded input) are all in the plan's descriptors (kernels/dnn_plans/pooling.h), as on the GPU.
#include "kernels/dnn_plans/pooling.h"

#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

absl::Status Pooling(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::PoolingPlan p, dnn_plans::PlanPooling(node, TypesOf(a)));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(
      dnn::reference::PoolingForward(p.pool, 1.0, p.xd, d.in(0), 0.0, p.yd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

// PoolingGradient(x, y, dy) -> dx. Max sends dy to the first maximum of the window in (d, h, w)
// order (what the forward pass and Caffe's argmax pick); average spreads it over the window with
// the forward's divisor.
absl::Status PoolingGradient(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::PoolingPlan p, dnn_plans::PlanPooling(node, TypesOf(a)));
  DoubleOperands d(a);
  // dx starts at 0, so the rows past a clipped view keep no gradient.
  KILN_RETURN_IF_ERROR(dnn::reference::PoolingBackward(p.pool, 1.0, p.yd, d.in(1), p.yd, d.in(2),
                                                       p.xd, d.in(0), 0.0, p.dx_view, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferencePooling(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Pooling", Pooling, "direct"));
  return RegisterReference(registry, "PoolingGradient", PoolingGradient, "direct");
}

}  // namespace kiln
