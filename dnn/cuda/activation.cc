#include "dnn/cuda/activation.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/primitive_checks.h"

namespace kiln {
namespace dnn {

using cuda::ElementwiseOp;
using internal::ActivationParamsOf;
using internal::AddInput;
using internal::ElementwiseOver;
using internal::LaunchStatus;
using internal::OperandOf;

namespace {

// PReLU's slope must be f32 and broadcast onto x.
absl::Status CheckSlope(const TensorDescriptor& slope_d, const TensorDescriptor& xd,
                        const char* where) {
  KILN_RETURN_IF_ERROR(CheckBroadcastable(slope_d, "slope", xd, "x", where));
  if (slope_d.dtype != DataType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the slope must be f32"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ActivationForward(Handle& handle, const ActivationDescriptor& act, float alpha,
                               const TensorDescriptor& xd, const void* x, float beta,
                               const TensorDescriptor& yd, void* y) {
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", "ActivationForward"));
  cuda::ElementwiseCall c = ElementwiseOver(ElementwiseOp::kActivation, yd, y, alpha, beta);
  AddInput(c, OperandOf(xd, x));
  c.act = ActivationParamsOf(act);
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), "ActivationForward");
}

absl::Status ActivationBackward(Handle& handle, const ActivationDescriptor& act, float alpha,
                                const TensorDescriptor& yd, const void* y,
                                const TensorDescriptor& dyd, const void* dy,
                                const TensorDescriptor& xd, const void* x, float beta,
                                const TensorDescriptor& dxd, void* dx) {
  const char* where = "ActivationBackward";
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  cuda::ElementwiseCall c =
      ElementwiseOver(ElementwiseOp::kActivationGradient, dxd, dx, alpha, beta);
  // Each gradient reads only what its formula uses: y (sigmoid, tanh), x (the rest), or both
  // (ELU), so ReLU's backward moves three tensors, not four.
  const bool uses_y = act.mode == ActivationMode::kSigmoid || act.mode == ActivationMode::kTanh ||
                      act.mode == ActivationMode::kElu;
  const bool uses_x = act.mode != ActivationMode::kSigmoid && act.mode != ActivationMode::kTanh &&
                      act.mode != ActivationMode::kIdentity;
  AddInput(c, OperandOf(yd, uses_y ? y : nullptr));
  AddInput(c, OperandOf(dyd, dy));
  AddInput(c, OperandOf(xd, uses_x ? x : nullptr));
  c.act = ActivationParamsOf(act);
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), where);
}

absl::Status ActivationBackwardOfSum(Handle& handle, const ActivationDescriptor& act, float alpha,
                                     const TensorDescriptor& sd, const void* saved,
                                     const std::vector<TensorDescriptor>& dyds,
                                     const std::vector<const void*>& dys, float beta,
                                     const TensorDescriptor& dxd, void* dx) {
  const char* where = "ActivationBackwardOfSum";
  if (dyds.empty() || dyds.size() != dys.size() ||
      static_cast<int>(dyds.size()) > cuda::kMaxOperands - 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", dys.size(), " dy pointers for ",
                                                   dyds.size(), " descriptors (1 to ",
                                                   cuda::kMaxOperands - 1, ")"));
  }
  KILN_RETURN_IF_ERROR(CheckSameShape(sd, "saved", dxd, "dx", where));
  for (const TensorDescriptor& d : dyds)
    KILN_RETURN_IF_ERROR(CheckSameShape(sd, "saved", d, "dy", where));
  cuda::ElementwiseCall c =
      ElementwiseOver(ElementwiseOp::kActivationGradientOfSum, dxd, dx, alpha, beta);
  AddInput(c, OperandOf(sd, saved));
  for (size_t i = 0; i < dys.size(); ++i) AddInput(c, OperandOf(dyds[i], dys[i]));
  c.act = ActivationParamsOf(act);
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), where);
}

absl::Status PReluForward(Handle& handle, const TensorDescriptor& xd, const void* x,
                          const TensorDescriptor& slope_d, const void* slope, float alpha,
                          float beta, const TensorDescriptor& yd, void* y) {
  const char* where = "PReluForward";
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", where));
  KILN_RETURN_IF_ERROR(CheckSlope(slope_d, xd, where));
  cuda::ElementwiseCall c = ElementwiseOver(ElementwiseOp::kPRelu, yd, y, alpha, beta);
  AddInput(c, OperandOf(xd, x));
  AddInput(c, internal::BroadcastOperandOf(slope_d, slope, xd));
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), where);
}

size_t PReluBackwardWorkspaceSize(const TensorDescriptor& xd, const TensorDescriptor& slope_d) {
  if (slope_d.rank() != xd.rank()) return 0;
  return internal::ReduceWorkspaceBytesForAnyOperands(
      internal::ReduceOver(cuda::ReduceOp::kPReluSlope, xd, nullptr, &xd, nullptr,
                           internal::KeptDims(slope_d, xd), slope_d));
}

absl::Status PReluBackward(Handle& handle, const TensorDescriptor& xd, const void* x,
                           const TensorDescriptor& dyd, const void* dy,
                           const TensorDescriptor& slope_d, const void* slope, float alpha,
                           float beta, const TensorDescriptor& dxd, void* dx, float alpha_param,
                           float beta_param, void* dslope, void* workspace,
                           size_t workspace_bytes) {
  const char* where = "PReluBackward";
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  KILN_RETURN_IF_ERROR(CheckSlope(slope_d, xd, where));
  cuda::ReduceCall r = internal::ReduceOver(cuda::ReduceOp::kPReluSlope, xd, x, &dyd, dy,
                                            internal::KeptDims(slope_d, xd), slope_d);
  KILN_RETURN_IF_ERROR(internal::BindReduceWorkspace(r, workspace, workspace_bytes, where));
  r.alpha = alpha_param;
  r.beta = beta_param;
  r.out0 = static_cast<float*>(dslope);
  r.dense = nullptr;
  // The slope gradient first: dx may alias dy (in-place backward), and it reads dy.
  KILN_RETURN_IF_ERROR(LaunchStatus(cuda::LaunchReduce(r, handle.stream()), where));
  cuda::ElementwiseCall c = ElementwiseOver(ElementwiseOp::kPReluGradient, dxd, dx, alpha, beta);
  AddInput(c, OperandOf(xd, x));
  AddInput(c, OperandOf(dyd, dy));
  AddInput(c, internal::BroadcastOperandOf(slope_d, slope, xd));
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), where);
}

absl::Status DropoutForward(Handle& handle, const DropoutDescriptor& dropout, float alpha,
                            const TensorDescriptor& xd, const void* x, float beta,
                            const TensorDescriptor& yd, void* y, const float* seed_offset) {
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", "Dropout"));
  cuda::ElementwiseCall c = ElementwiseOver(ElementwiseOp::kDropout, yd, y, alpha, beta);
  AddInput(c, OperandOf(xd, x));
  c.seed = dropout.seed;
  c.seed_offset = seed_offset;
  c.ratio = static_cast<float>(dropout.ratio);
  c.coef[0] = static_cast<float>(1.0 / (1.0 - static_cast<double>(c.ratio)));
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), "Dropout");
}

absl::Status DropoutBackward(Handle& handle, const DropoutDescriptor& dropout, float alpha,
                             const TensorDescriptor& dyd, const void* dy, float beta,
                             const TensorDescriptor& dxd, void* dx, const float* seed_offset) {
  return DropoutForward(handle, dropout, alpha, dyd, dy, beta, dxd, dx, seed_offset);
}

}  // namespace dnn
}  // namespace kiln
