#include "kernels/dnn_plans/activation.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {
namespace dnn_plans {

absl::StatusOr<dnn::ActivationDescriptor> ActivationOf(const Node& node) {
  const std::string& op =
      node.kind() == OpKind::kActivationGradient ? node.GetString("activation") : node.op();
  if (op == "ReLU") {
    // The forward op multiplies by an f32 slope, as the epilogues that absorb a ReLU (fused
    // Eltwise and Convolution) do, so a double oracle gives their bits too. The gradient keeps
    // the attribute's double (the GPU rounds the descriptor's coefficient to f32 either way).
    const double slope = node.GetFloat("negative_slope");
    return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu,
                                             node.kind() == OpKind::kActivationGradient
                                                 ? slope
                                                 : static_cast<double>(static_cast<float>(slope)));
  }
  if (op == "Sigmoid") return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kSigmoid);
  if (op == "TanH") return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kTanh);
  if (op == "ELU") {
    return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kElu, node.GetFloat("alpha"));
  }
  if (op == "ClippedReLU") {
    return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kClippedRelu,
                                             node.GetFloat("ceiling"));
  }
  if (op == "AbsVal") return dnn::ActivationDescriptor::Create(dnn::ActivationMode::kAbs);
  if (op == "Power") {
    return dnn::ActivationDescriptor::CreatePower(node.GetFloat("power"), node.GetFloat("scale"),
                                                  node.GetFloat("shift"));
  }
  return absl::InvalidArgumentError(absl::StrCat("no activation for op ", op));
}

absl::StatusOr<ActivationPlan> PlanActivation(const Node& node, const OperandTypes& types) {
  ActivationPlan p;
  KILN_ASSIGN_OR_RETURN(p.act, ActivationOf(node));
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(types.in[0]));
  KILN_ASSIGN_OR_RETURN(p.yd, DescriptorOf(types.out[0]));
  return p;
}

absl::StatusOr<PReluPlan> PlanPRelu(const Node& node, const OperandTypes& types) {
  const TensorType& x = types.in[0];
  const TensorType& slope = types.in[1];
  PReluPlan p;
  KILN_ASSIGN_OR_RETURN(p.xd, DescriptorOf(x));
  KILN_ASSIGN_OR_RETURN(p.yd, DescriptorOf(types.out[0]));
  std::vector<int64_t> dims(x.rank(), 1), strides(x.rank(), 1);
  const bool shared = node.GetBool("channel_shared");
  // InferTypes guarantees rank >= 2 and a slope of [C] (or [1] when shared); the check below
  // only keeps a malformed graph from reading past the slope.
  if (x.rank() < 2 || slope.rank() != 1 || slope.dim(0) != (shared ? 1 : x.dim(1))) {
    return absl::InvalidArgumentError(
        absl::StrCat("PReLU: slope ", slope.ToString(), " does not match input ", x.ToString()));
  }
  if (!shared) {
    dims[1] = x.dim(1);
    strides[1] = slope.stride(0);
  }
  KILN_ASSIGN_OR_RETURN(p.slope, dnn::TensorDescriptor::Create(slope.dtype(), dims, strides));
  return p;
}

}  // namespace dnn_plans
}  // namespace kiln
