// Reference BatchNorm (stored, Caffe-accumulated or batch statistics), AffineBatchNorm and their
// gradients BatchNormGradient and AffineBatchNormGradient through the primitive library's oracle
// (see dnn_oracle.h).
#include "kernels/dnn_plans/batch_norm.h"

#include <algorithm>
#include <vector>

#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/reference/dnn_oracle.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

// The running statistics (inputs 1..3) copied to outputs 1..3, where the training call updates
// them in place; all null when the node does not update them.
struct Running {
  double* mean = nullptr;
  double* var = nullptr;
  double* factor = nullptr;
};

Running RunningOf(bool update, const DenseArgs& a, DoubleOperands& d) {
  Running r;
  if (!update) return r;
  for (int i = 1; i <= 3; ++i) {
    const int64_t n = a.in_types[i].num_elements();
    std::copy(d.in(i), d.in(i) + n, d.out(i));
  }
  r.mean = d.out(1);
  r.var = d.out(2);
  r.factor = d.out(3);
  return r;
}

// Caffe's BatchNorm has no scale or bias: the primitive gets the identity ones.
absl::Status BatchNorm(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::BatchNormPlan p, dnn_plans::PlanBatchNorm(node, TypesOf(a)));
  DoubleOperands d(a);
  const std::vector<double> ones(p.features, 1.0), zeros(p.features, 0.0);
  if (p.stored_stats) {
    KILN_RETURN_IF_ERROR(dnn::reference::BatchNormForwardInference(
        p.mode, 1.0, 0.0, p.xd, d.in(0), p.yd, d.out(0), p.pd, ones.data(), zeros.data(), d.in(1),
        d.in(2), p.eps, p.has_factor ? d.in(3) : nullptr));
  } else {
    const Running r = RunningOf(p.update, a, d);
    KILN_RETURN_IF_ERROR(dnn::reference::BatchNormForwardTraining(
        p.training, 1.0, 0.0, p.xd, d.in(0), p.yd, d.out(0), p.pd, ones.data(), zeros.data(),
        r.mean, r.var, r.factor, nullptr, nullptr));
  }
  d.Store(a);
  return absl::OkStatus();
}

// AffineBatchNorm(x, mean, variance, scale_factor, scale, bias): the batch's statistics, the
// running ones updated as BatchNorm updates them, and the mean and 1 / sqrt(var + eps) saved for
// backward (the last two outputs).
absl::Status AffineBatchNorm(const Node& node, const DenseArgs& a) {
  if (NothingToCompute(a)) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(dnn_plans::AffineBatchNormPlan p,
                        dnn_plans::PlanAffineBatchNorm(node, TypesOf(a)));
  DoubleOperands d(a);
  const Running r = RunningOf(p.update, a, d);
  const int saved = static_cast<int>(a.out.size()) - 2;
  KILN_RETURN_IF_ERROR(dnn::reference::BatchNormForwardTraining(
      p.bn, 1.0, 0.0, p.xd, d.in(0), p.yd, d.out(0), p.pd, d.in(4), d.in(5), r.mean, r.var,
      r.factor, d.out(saved), d.out(saved + 1)));
  d.Store(a);
  return absl::OkStatus();
}

// BatchNormGradient(x, dy, mean, variance[, scale_factor]) -> dx. Batch statistics: the
// primitive's backward with the identity scale (dscale and dbias unused). Stored statistics are
// constants, so dx = dy / sqrt(var s + eps): the inference transform of dy with a zero mean.
absl::Status BatchNormGradient(const Node& node, const DenseArgs& a) {
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
absl::Status AffineBatchNormGradient(const Node& node, const DenseArgs& a) {
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

absl::Status RegisterReferenceBatchNorm(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "AffineBatchNorm", AffineBatchNorm));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "BatchNorm", BatchNorm));
  KILN_RETURN_IF_ERROR(
      RegisterReference(registry, "AffineBatchNormGradient", AffineBatchNormGradient));
  return RegisterReference(registry, "BatchNormGradient", BatchNormGradient);
}

}  // namespace kiln
