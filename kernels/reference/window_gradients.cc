// Reference backward of the ops that mix the elements of a window, PoolingGradient and
// LRNGradient, through the primitive library's oracle (see dnn_oracle.h).
#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/dnn_plans/lrn.h"
#include "kernels/dnn_plans/pooling.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

// PoolingGradient(x, y, dy) -> dx. Max sends dy to the first maximum of the window in (d, h, w)
// order (what the forward pass and Caffe's argmax pick); average spreads it over the window with
// the forward's divisor.
absl::Status Pooling(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::PoolingPlan p, dnn_plans::PlanPooling(node, TypesOf(a)));
  DoubleOperands d(a);
  // dx starts at 0, so the rows past a clipped view keep no gradient.
  KILN_RETURN_IF_ERROR(dnn::reference::PoolingBackward(p.pool, 1.0, p.yd, d.in(1), p.yd, d.in(2),
                                                       p.xd, d.in(0), 0.0, p.dx_view, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

// LRNGradient(x, dy) -> dx. The oracle recomputes y from x; dy stands in for y (same shape).
absl::Status Lrn(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::LrnPlan p, dnn_plans::PlanLrn(node, TypesOf(a)));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(dnn::reference::LrnBackward(p.lrn, 1.0, p.yd, d.in(1), p.yd, d.in(1), p.xd,
                                                   d.in(0), 0.0, p.dxd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceWindowGradients(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "PoolingGradient", Pooling, "direct"));
  return RegisterReference(registry, "LRNGradient", Lrn);
}

}  // namespace kiln
