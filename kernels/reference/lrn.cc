// Reference LRN (both regions) and LRNGradient through the primitive library's oracle (see
// dnn_oracle.h).
#include "kernels/dnn_plans/lrn.h"

#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

absl::Status Lrn(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::LrnPlan p, dnn_plans::PlanLrn(node, TypesOf(a)));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(dnn::reference::LrnForward(p.lrn, 1.0, p.xd, d.in(0), 0.0, p.yd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

// LRNGradient(x, dy) -> dx. The oracle recomputes y from x; dy stands in for y (same shape).
absl::Status LrnGradient(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::LrnPlan p, dnn_plans::PlanLrn(node, TypesOf(a)));
  DoubleOperands d(a);
  KILN_RETURN_IF_ERROR(dnn::reference::LrnBackward(p.lrn, 1.0, p.yd, d.in(1), p.yd, d.in(1), p.xd,
                                                   d.in(0), 0.0, p.dxd, d.out(0)));
  d.Store(a);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceLrn(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "LRN", Lrn));
  return RegisterReference(registry, "LRNGradient", LrnGradient);
}

}  // namespace kiln
