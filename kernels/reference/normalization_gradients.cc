// Reference backward of batch normalization, BatchNormGradient and AffineBatchNormGradient,
// through the primitive library's oracle (see dnn_oracle.h).
#include <vector>

#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/dnn_plans/batch_norm.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

// BatchNormGradient(x, dy, mean, variance[, scale_factor]) -> dx. Batch statistics: the
// primitive's backward with the identity scale (dscale and dbias unused). Stored statistics are
// constants, so dx = dy / sqrt(var s + eps): the inference transform of dy with a zero mean.
absl::Status BatchNorm(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::BatchNormPlan p, dnn_plans::PlanBatchNorm(node, TypesOf(a)));
  DoubleOperands d(a);
  const std::vector<double> ones(p.features, 1.0), zeros(p.features, 0.0);
  if (p.stored_stats) {
    KILN_RETURN_IF_ERROR(dnn::reference::BatchNormForwardInference(
        p.mode, 1.0, 0.0, p.dyd, d.in(1), p.yd, d.out(0), p.pd, ones.data(), zeros.data(),
        zeros.data(), d.in(3), p.eps, p.has_factor ? d.in(4) : nullptr));
  } else {
    std::vector<double> dscale(p.features), dbias(p.features);
    KILN_RETURN_IF_ERROR(dnn::reference::BatchNormBackward(
        p.mode, 1.0, 0.0, 1.0, 0.0, p.xd, d.in(0), p.dyd, d.in(1), p.yd, d.out(0), p.pd,
        ones.data(), dscale.data(), dbias.data(), p.eps, nullptr, nullptr));
  }
  d.Store(a);
  return absl::OkStatus();
}

// AffineBatchNormGradient(x, dy, scale, saved_mean, saved_inv_std[, y]) -> dx, dscale, dbias,
// with the statistics the forward saved; with "relu", dy counts only where the fused output y is
// positive (the ReLU's backward, as Caffe's reads it).
absl::Status AffineBatchNorm(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::AffineBatchNormPlan p,
                        dnn_plans::PlanAffineBatchNorm(node, TypesOf(a)));
  DoubleOperands d(a);
  const double* y = a.in.size() > 5 ? d.in(5) : nullptr;
  KILN_RETURN_IF_ERROR(dnn::reference::BatchNormBackward(
      p.bn, 1.0, 0.0, 1.0, 0.0, p.xd, d.in(0), p.yd, y, p.dyd, d.in(1), p.dxd, d.out(0), p.pd,
      d.in(2), d.out(1), d.out(2), d.in(3), d.in(4)));
  d.Store(a);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceNormalizationGradients(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "AffineBatchNormGradient", AffineBatchNorm));
  return RegisterReference(registry, "BatchNormGradient", BatchNorm);
}

}  // namespace kiln
