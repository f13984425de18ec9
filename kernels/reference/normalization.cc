// Reference LRN (both regions), BatchNorm (stored, Caffe-accumulated or batch statistics) and
// AffineBatchNorm through the primitive library's oracle (see dnn_oracle.h).
#include <vector>

#include "base/status_macros.h"
#include "dnn/primitive_reference.h"
#include "kernels/dnn_plans/batch_norm.h"
#include "kernels/dnn_plans/lrn.h"
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

}  // namespace

absl::Status RegisterReferenceNormalization(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "LRN", Lrn));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "AffineBatchNorm", AffineBatchNorm));
  return RegisterReference(registry, "BatchNorm", BatchNorm);
}

}  // namespace kiln
