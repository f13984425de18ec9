#include "kernels/dnn_plans/batch_norm.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {
namespace dnn_plans {

absl::StatusOr<dnn::TensorDescriptor> ParamDescriptor(dnn::BatchNormMode mode,
                                                      const dnn::TensorDescriptor& xd) {
  if (xd.rank() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("BatchNorm: input ", xd.ToString(), " has no channel dim"));
  }
  std::vector<int64_t> dims(xd.rank(), 1);
  dims[1] = xd.dims[1];
  if (mode == dnn::BatchNormMode::kPerActivation) {
    for (int i = 2; i < xd.rank(); ++i) dims[i] = xd.dims[i];
  }
  return dnn::TensorDescriptor::Create(DataType::kF32, dims, RowMajorStrides(dims));
}

absl::StatusOr<BatchNormPlan> PlanBatchNorm(const Node& node, const OperandTypes& types) {
  const bool backward = node.kind() == OpKind::kBatchNormGradient;
  BatchNormPlan p;
  p.mode = node.GetString("mode") == "per_activation" ? dnn::BatchNormMode::kPerActivation
                                                      : dnn::BatchNormMode::kSpatial;
  p.stored_stats = node.GetBool("use_global_stats");
  p.has_factor = types.in.size() > (backward ? 4u : 3u);
  p.eps = node.GetFloat("eps");
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(types.in[0]));
  KILN_ASSIGN_OR_RETURN(p.yd, DescriptorOf(types.out[0]));
  if (backward) {
    KILN_ASSIGN_OR_RETURN(p.dyd, DescriptorOf(types.in[1]));
  }
  KILN_ASSIGN_OR_RETURN(p.pd, ParamDescriptor(p.mode, p.xd));
  p.features = p.pd.ElementCount();
  p.training.mode = p.mode;
  p.training.epsilon = p.eps;
  p.update = !backward && !p.stored_stats && node.GetBool("update_running_stats");
  if (p.update) {
    p.training.rule = dnn::RunningStatsRule::kCaffeSum;
    p.training.factor = node.GetFloat("moving_average_fraction");
  }
  return p;
}

absl::StatusOr<AffineBatchNormPlan> PlanAffineBatchNorm(const Node& node,
                                                        const OperandTypes& types) {
  const bool backward = node.kind() == OpKind::kAffineBatchNormGradient;
  AffineBatchNormPlan p;
  p.bn.mode = dnn::BatchNormMode::kSpatial;
  p.bn.rule = dnn::RunningStatsRule::kCaffeSum;
  if (node.GetBool("relu")) {
    p.bn.ops = dnn::BatchNormOps::kBatchNormActivation;
    KILN_ASSIGN_OR_RETURN(p.bn.activation,
                          dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu, 0.0));
  }
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(types.in[0]));
  KILN_ASSIGN_OR_RETURN(p.pd, ParamDescriptor(p.bn.mode, p.xd));
  if (!backward) {
    // The gradient node has no eps: the saved inverse standard deviation includes the
    // forward's, and the primitive only checks that its default is positive.
    p.bn.epsilon = node.GetFloat("eps");
    p.bn.factor = node.GetFloat("moving_average_fraction");
    p.update = node.GetBool("update_running_stats");
    KILN_ASSIGN_OR_RETURN(p.yd, DescriptorOf(types.out[0]));
    return p;
  }
  KILN_ASSIGN_OR_RETURN(p.dyd, DescriptorOf(types.in[1]));
  KILN_ASSIGN_OR_RETURN(p.dxd, DescriptorOf(types.out[0]));
  p.yd = p.xd;
  if (node.GetBool("relu")) {
    KILN_ASSIGN_OR_RETURN(p.yd, DescriptorOf(types.in[5]));
  }
  return p;
}

}  // namespace dnn_plans
}  // namespace kiln
