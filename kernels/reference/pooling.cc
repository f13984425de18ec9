// Reference Pooling through the primitive library's oracle (see dnn_oracle.h). Caffe's output
// rounding, its pooled-size clip and its average divisor (the window clipped to the padded input)
// are all in the plan's descriptors (kernels/dnn_plans/pooling.h), as on the GPU.
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

}  // namespace

absl::Status RegisterReferencePooling(KernelRegistry& registry) {
  return RegisterReference(registry, "Pooling", Pooling, "direct");
}

}  // namespace kiln
