#include "dnn/cuda/normalization.h"

#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/primitive_checks.h"

namespace kiln {
namespace dnn {

using internal::LaunchStatus;

namespace {

absl::StatusOr<cuda::LrnCall> LrnCallFor(const LrnDescriptor& lrn, const TensorDescriptor& xd,
                                         float alpha, float beta, const char* where) {
  KILN_RETURN_IF_ERROR(CheckLrn(lrn, xd, where));
  if (xd.rank() > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": x ", xd.ToString(), " has more than 3 spatial dims"));
  }
  cuda::LrnCall c;
  c.across = lrn.mode == LrnMode::kAcrossChannels;
  c.size = lrn.size;
  c.alpha = static_cast<float>(lrn.alpha);
  c.beta = static_cast<float>(lrn.beta);
  c.k = static_cast<float>(lrn.k);
  c.n = xd.dims[0];
  c.c = xd.dims[1];
  c.spatial_rank = xd.rank() - 2;
  for (int i = 2; i < xd.rank(); ++i) c.sp[i - 2 + (5 - xd.rank())] = xd.dims[i];
  c.type = internal::StorageOf(xd.dtype);
  internal::Strides5(xd, c.x_strides);
  c.blend_alpha = alpha;
  c.blend_beta = beta;
  return c;
}

std::vector<bool> BatchNormFeatures(BatchNormMode mode, const TensorDescriptor& xd) {
  std::vector<bool> is_feature(xd.rank(), false);
  for (int i = 1; i < xd.rank(); ++i)
    is_feature[i] = i == 1 || mode == BatchNormMode::kPerActivation;
  return is_feature;
}

// The fused activation a training call asks for, or why it cannot have it (only a ReLU with
// slope 0 is implemented: its backward mask is y > 0).
absl::StatusOr<bool> FusedRelu(const BatchNormTraining& bn, const char* where) {
  if (bn.ops == BatchNormOps::kBatchNorm) return false;
  if (bn.activation.mode != ActivationMode::kRelu || bn.activation.coef != 0) {
    return absl::UnimplementedError(absl::StrCat(where, ": the fused activation ",
                                                 bn.activation.ToString(),
                                                 " is not implemented (only a ReLU with slope 0)"));
  }
  return true;
}

// An operand of the apply pass.
struct ApplyOperand {
  const TensorDescriptor* d;
  const void* data;
};

// y = A (x - mean) + bias (then a ReLU when `relu`), or dx = P dy + Q (x - mean) + R, with the
// dense parameters of a bound reduction; operands {dy, y, x} make dy count only where y > 0.
absl::Status LaunchApply(Handle& handle, const cuda::ReduceCall& r, BatchNormMode mode, float alpha,
                         float beta, const TensorDescriptor& outd, void* out,
                         std::initializer_list<ApplyOperand> operands, bool relu,
                         const char* where) {
  cuda::ElementwiseCall c =
      internal::ElementwiseOver(cuda::ElementwiseOp::kAffine, outd, out, alpha, beta);
  for (const ApplyOperand& o : operands) internal::AddInput(c, internal::OperandOf(*o.d, o.data));
  if (relu) {
    c.then_activation = true;
    c.act.kind = kActRelu;
    c.act.coef = 0.0f;
  }
  // Dense feature index: row-major over the feature dims.
  const std::vector<bool> is_feature = BatchNormFeatures(mode, outd);
  int64_t stride = 1;
  for (int d = outd.rank() - 1; d >= 0; --d) {
    c.feature_strides[d] = is_feature[d] ? stride : 0;
    if (is_feature[d]) stride *= outd.dims[d];
  }
  for (int k = 0; k < 4; ++k) c.params[k] = internal::DenseVector(r, k);
  // The reduction before this pass reads x (and dy) last at its end; starting there hits L2.
  c.from_end = true;
  return LaunchStatus(cuda::LaunchElementwise(c, handle.stream()), where);
}

// Whether two tensors have the same dims, strides and dtype (an output the one-block-per-channel
// kernels write where they read x).
bool SamePlacement(const TensorDescriptor& a, const TensorDescriptor& b) {
  return a.dtype == b.dtype && a.dims == b.dims && a.strides == b.strides;
}

cuda::ReduceCall MomentsCall(BatchNormMode mode, const TensorDescriptor& xd, const void* x,
                             const TensorDescriptor& pd) {
  return internal::ReduceOver(cuda::ReduceOp::kMoments, xd, x, nullptr, nullptr,
                              BatchNormFeatures(mode, xd), pd);
}

}  // namespace

absl::Status LrnForward(Handle& handle, const LrnDescriptor& lrn, float alpha,
                        const TensorDescriptor& xd, const void* x, float beta,
                        const TensorDescriptor& yd, void* y) {
  const char* where = "LrnForward";
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", where));
  KILN_ASSIGN_OR_RETURN(cuda::LrnCall c, LrnCallFor(lrn, xd, alpha, beta, where));
  internal::Strides5(yd, c.y_strides);
  c.x = x;
  c.out = y;
  return LaunchStatus(cuda::LaunchLrnForward(c, handle.stream()), where);
}

absl::Status LrnBackward(Handle& handle, const LrnDescriptor& lrn, float alpha,
                         const TensorDescriptor& yd, const void* y, const TensorDescriptor& dyd,
                         const void* dy, const TensorDescriptor& xd, const void* x, float beta,
                         const TensorDescriptor& dxd, void* dx) {
  const char* where = "LrnBackward";
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dyd, "dy", where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  KILN_ASSIGN_OR_RETURN(cuda::LrnCall c, LrnCallFor(lrn, xd, alpha, beta, where));
  internal::Strides5(dyd, c.dy_strides);
  internal::Strides5(dxd, c.dx_strides);
  c.x = x;
  (void)y;  // recomputed from x, see normalization.h
  c.dy = dy;
  c.out = dx;
  return LaunchStatus(cuda::LaunchLrnBackward(c, handle.stream()), where);
}

size_t BatchNormWorkspaceSize(BatchNormMode mode, const TensorDescriptor& xd) {
  if (xd.rank() < 2) return 0;
  TensorDescriptor pd = xd;  // only the feature strides matter for the size
  // The backward's dy and mask may be laid out unlike x.
  return internal::ReduceWorkspaceBytesForAnyOperands(MomentsCall(mode, xd, nullptr, pd));
}

absl::Status BatchNormForwardTraining(Handle& handle, const BatchNormTraining& bn, float alpha,
                                      float beta, const TensorDescriptor& xd, const void* x,
                                      const TensorDescriptor& yd, void* y,
                                      const TensorDescriptor& pd, const void* scale,
                                      const void* bias, void* running_mean, void* running_var,
                                      void* caffe_scale_factor, void* save_mean, void* save_inv_std,
                                      void* workspace, size_t workspace_bytes) {
  BatchNormRunningStats running;
  running.mean = running_mean;
  running.var = running_var;
  running.caffe_scale_factor = caffe_scale_factor;
  return BatchNormForwardTraining(handle, bn, alpha, beta, xd, x, yd, y, pd, scale, bias, running,
                                  save_mean, save_inv_std, workspace, workspace_bytes);
}

absl::Status BatchNormForwardTraining(Handle& handle, const BatchNormTraining& bn, float alpha,
                                      float beta, const TensorDescriptor& xd, const void* x,
                                      const TensorDescriptor& yd, void* y,
                                      const TensorDescriptor& pd, const void* scale,
                                      const void* bias, const BatchNormRunningStats& running,
                                      void* save_mean, void* save_inv_std, void* workspace,
                                      size_t workspace_bytes) {
  const char* where = "BatchNormForwardTraining";
  KILN_RETURN_IF_ERROR(CheckBatchNorm(bn.mode, xd, yd, pd, bn.epsilon, where));
  KILN_ASSIGN_OR_RETURN(const bool relu, FusedRelu(bn, where));
  if ((running.mean == nullptr) != (running.var == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": give both running statistics or neither"));
  }
  const bool caffe = bn.rule == RunningStatsRule::kCaffeSum;
  if (caffe && running.mean && !running.caffe_scale_factor) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": Caffe's running sums need the scale-factor element"));
  }
  cuda::ReduceCall r = MomentsCall(bn.mode, xd, x, pd);
  KILN_RETURN_IF_ERROR(internal::BindReduceWorkspace(r, workspace, workspace_bytes, where));
  r.scale = static_cast<const float*>(scale);
  r.bias = static_cast<const float*>(bias);
  r.save_mean = static_cast<float*>(save_mean);
  r.save_inv_std = static_cast<float*>(save_inv_std);
  r.running_mean = static_cast<float*>(running.mean);
  r.running_var = static_cast<float*>(running.var);
  r.caffe_factor = static_cast<float*>(running.caffe_scale_factor);
  r.running_mean_in = static_cast<const float*>(running.mean_in);
  r.running_var_in = static_cast<const float*>(running.var_in);
  r.caffe_factor_in = static_cast<const float*>(running.caffe_scale_factor_in);
  r.caffe_rule = caffe;
  r.factor = bn.factor;
  r.epsilon = bn.epsilon;
  if (SamePlacement(xd, yd) && cuda::BatchNormPlanesServe(r)) {
    return LaunchStatus(cuda::LaunchBatchNormPlanes(r, alpha, beta, relu, y, handle.stream()),
                        where);
  }
  KILN_RETURN_IF_ERROR(LaunchStatus(cuda::LaunchReduce(r, handle.stream()), where));
  return LaunchApply(handle, r, bn.mode, alpha, beta, yd, y, {{&xd, x}}, relu, where);
}

absl::Status BatchNormForwardInference(Handle& handle, BatchNormMode mode, float alpha, float beta,
                                       const TensorDescriptor& xd, const void* x,
                                       const TensorDescriptor& yd, void* y,
                                       const TensorDescriptor& pd, const void* scale,
                                       const void* bias, const void* mean, const void* var,
                                       double epsilon, const void* caffe_scale_factor,
                                       void* workspace, size_t workspace_bytes) {
  const char* where = "BatchNormForwardInference";
  KILN_RETURN_IF_ERROR(CheckBatchNorm(mode, xd, yd, pd, epsilon, where));
  cuda::ReduceCall r = MomentsCall(mode, xd, x, pd);
  KILN_RETURN_IF_ERROR(internal::BindReduceWorkspace(r, workspace, workspace_bytes, where));
  KILN_RETURN_IF_ERROR(LaunchStatus(
      cuda::LaunchBatchNormInferenceParams(
          r.features, r.feature_rank, r.feature_dims, r.param_strides,
          static_cast<const float*>(scale), static_cast<const float*>(bias),
          static_cast<const float*>(mean), static_cast<const float*>(var),
          static_cast<const float*>(caffe_scale_factor), epsilon, r.dense, handle.stream()),
      where));
  return LaunchApply(handle, r, mode, alpha, beta, yd, y, {{&xd, x}}, false, where);
}

absl::Status BatchNormBackward(Handle& handle, BatchNormMode mode, float alpha_data,
                               float beta_data, float alpha_param, float beta_param,
                               const TensorDescriptor& xd, const void* x,
                               const TensorDescriptor& dyd, const void* dy,
                               const TensorDescriptor& dxd, void* dx, const TensorDescriptor& pd,
                               const void* scale, void* dscale, void* dbias, double epsilon,
                               const void* saved_mean, const void* saved_inv_std, void* workspace,
                               size_t workspace_bytes) {
  BatchNormTraining bn;
  bn.mode = mode;
  bn.epsilon = epsilon;
  return BatchNormBackward(handle, bn, alpha_data, beta_data, alpha_param, beta_param, xd, x, xd,
                           nullptr, dyd, dy, dxd, dx, pd, scale, dscale, dbias, saved_mean,
                           saved_inv_std, workspace, workspace_bytes);
}

absl::Status BatchNormBackward(Handle& handle, const BatchNormTraining& bn, float alpha_data,
                               float beta_data, float alpha_param, float beta_param,
                               const TensorDescriptor& xd, const void* x,
                               const TensorDescriptor& yd, const void* y,
                               const TensorDescriptor& dyd, const void* dy,
                               const TensorDescriptor& dxd, void* dx, const TensorDescriptor& pd,
                               const void* scale, void* dscale, void* dbias, const void* saved_mean,
                               const void* saved_inv_std, void* workspace, size_t workspace_bytes) {
  const char* where = "BatchNormBackward";
  const BatchNormMode mode = bn.mode;
  const double epsilon = bn.epsilon;
  KILN_RETURN_IF_ERROR(CheckBatchNorm(mode, xd, dyd, pd, epsilon, where));
  KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", dxd, "dx", where));
  KILN_ASSIGN_OR_RETURN(const bool relu, FusedRelu(bn, where));
  if (relu) {
    KILN_RETURN_IF_ERROR(CheckSameShape(xd, "x", yd, "y", where));
    if (y == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the fused activation's backward needs y"));
    }
    if (yd.dtype != xd.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": y ", yd.ToString(), " must have x's dtype"));
    }
  }
  cuda::ReduceCall r =
      internal::ReduceOver(cuda::ReduceOp::kGradientSums, xd, x, &dyd, dy,
                           BatchNormFeatures(mode, xd), pd, relu ? &yd : nullptr, y);
  KILN_RETURN_IF_ERROR(internal::BindReduceWorkspace(r, workspace, workspace_bytes, where));
  if (saved_mean && saved_inv_std) {
    r.mean_in = static_cast<const float*>(saved_mean);
    r.inv_std_in = static_cast<const float*>(saved_inv_std);
  } else {
    // Recompute the statistics into dense vectors 4 and 5 of the same workspace.
    cuda::ReduceCall m = MomentsCall(mode, xd, x, pd);
    KILN_RETURN_IF_ERROR(internal::BindReduceWorkspace(m, workspace, workspace_bytes, where));
    m.dense = nullptr;
    m.epsilon = epsilon;
    m.mean_dense = internal::DenseVector(m, 4);
    m.inv_std_dense = internal::DenseVector(m, 5);
    KILN_RETURN_IF_ERROR(LaunchStatus(cuda::LaunchReduce(m, handle.stream()), where));
    r.mean_in = m.mean_dense;
    r.inv_std_in = m.inv_std_dense;
    r.stats_dense = true;
  }
  r.scale = static_cast<const float*>(scale);
  r.dscale = static_cast<float*>(dscale);
  r.dbias = static_cast<float*>(dbias);
  r.alpha = alpha_param;
  r.beta = beta_param;
  if (SamePlacement(xd, dxd) && cuda::BatchNormPlanesServe(r)) {
    return LaunchStatus(
        cuda::LaunchBatchNormPlanes(r, alpha_data, beta_data, false, dx, handle.stream()), where);
  }
  KILN_RETURN_IF_ERROR(LaunchStatus(cuda::LaunchReduce(r, handle.stream()), where));
  if (relu) {
    return LaunchApply(handle, r, mode, alpha_data, beta_data, dxd, dx,
                       {{&dyd, dy}, {&yd, y}, {&xd, x}}, false, where);
  }
  return LaunchApply(handle, r, mode, alpha_data, beta_data, dxd, dx, {{&dyd, dy}, {&xd, x}}, false,
                     where);
}

}  // namespace dnn
}  // namespace kiln
