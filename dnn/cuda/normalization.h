// LRN (across channels, within channel) and batch normalization on the GPU, forward and
// backward, any strides, f32/f16/bf16 data with f32 parameters. Batch-norm statistics are summed
// in double in two deterministic stages (no atomics), so they need a workspace
// (BatchNormWorkspaceSize); running statistics follow cuDNN's exponential rule or Caffe's sums.
#ifndef KILN_DNN_CUDA_NORMALIZATION_H_
#define KILN_DNN_CUDA_NORMALIZATION_H_

#include <cstddef>

#include "absl/status/status.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"

namespace kiln {
namespace dnn {

absl::Status LrnForward(Handle& handle, const LrnDescriptor& lrn, float alpha,
                        const TensorDescriptor& xd, const void* x, float beta,
                        const TensorDescriptor& yd, void* y);
// LRN backward takes y, as cuDNN's does, and checks its shape, but does not read it: y is
// recomputed from x (a power per element is cheaper than reading a tensor), so the gradient is
// LRN's even when the forward blended into y.
absl::Status LrnBackward(Handle& handle, const LrnDescriptor& lrn, float alpha,
                         const TensorDescriptor& yd, const void* y, const TensorDescriptor& dyd,
                         const void* dy, const TensorDescriptor& xd, const void* x, float beta,
                         const TensorDescriptor& dxd, void* dx);

// Workspace bytes any batch-norm call on `xd` in `mode` needs.
size_t BatchNormWorkspaceSize(BatchNormMode mode, const TensorDescriptor& xd);

// A training call's running statistics (f32 in `pd`'s layout; Caffe's scale factor one f32):
// read from the *_in pointers and written to the others. An in pointer left null reads its
// output pointer (cuDNN's update in place); distinct pointers update into new tensors in the
// same pass, so a graph whose running statistics are separate inputs and outputs copies nothing.
struct BatchNormRunningStats {
  const void* mean_in = nullptr;
  const void* var_in = nullptr;
  const void* caffe_scale_factor_in = nullptr;
  void* mean = nullptr;
  void* var = nullptr;
  void* caffe_scale_factor = nullptr;
};

// Training forward: batch statistics, y = alpha (scale x̂ + bias) + beta y, optional
// save_mean / save_inv_std (for backward), optional running statistics (both or neither;
// `caffe_scale_factor` is Caffe's third blob, one f32, needed by RunningStatsRule::kCaffeSum).
// `pd` describes scale, bias, means and variances (f32, dims from CheckBatchNormParam).
absl::Status BatchNormForwardTraining(Handle& handle, const BatchNormTraining& bn, float alpha,
                                      float beta, const TensorDescriptor& xd, const void* x,
                                      const TensorDescriptor& yd, void* y,
                                      const TensorDescriptor& pd, const void* scale,
                                      const void* bias, void* running_mean, void* running_var,
                                      void* caffe_scale_factor, void* save_mean, void* save_inv_std,
                                      void* workspace, size_t workspace_bytes);
// The same with the running statistics read and written apart (BatchNormRunningStats).
absl::Status BatchNormForwardTraining(Handle& handle, const BatchNormTraining& bn, float alpha,
                                      float beta, const TensorDescriptor& xd, const void* x,
                                      const TensorDescriptor& yd, void* y,
                                      const TensorDescriptor& pd, const void* scale,
                                      const void* bias, const BatchNormRunningStats& running,
                                      void* save_mean, void* save_inv_std, void* workspace,
                                      size_t workspace_bytes);
// Inference forward with stored statistics; with `caffe_scale_factor` (device, one f32) the
// statistics are Caffe's sums and are divided by it (0 when it is 0).
absl::Status BatchNormForwardInference(Handle& handle, BatchNormMode mode, float alpha, float beta,
                                       const TensorDescriptor& xd, const void* x,
                                       const TensorDescriptor& yd, void* y,
                                       const TensorDescriptor& pd, const void* scale,
                                       const void* bias, const void* mean, const void* var,
                                       double epsilon, const void* caffe_scale_factor,
                                       void* workspace, size_t workspace_bytes);
// Backward of a training forward `bn` (its mode, epsilon and ops): dx with (alpha_data,
// beta_data), dscale and dbias with (alpha_param, beta_param). Uses saved_mean / saved_inv_std
// when both are given, else recomputes them from x. With BatchNormOps::kBatchNormActivation, y
// (the forward's fused output, x's dims) masks dy inside the gradient sums and the dx pass (a
// ReLU: dy where y > 0), so the activation's backward adds no launch; otherwise y is not read.
absl::Status BatchNormBackward(Handle& handle, const BatchNormTraining& bn, float alpha_data,
                               float beta_data, float alpha_param, float beta_param,
                               const TensorDescriptor& xd, const void* x,
                               const TensorDescriptor& yd, const void* y,
                               const TensorDescriptor& dyd, const void* dy,
                               const TensorDescriptor& dxd, void* dx, const TensorDescriptor& pd,
                               const void* scale, void* dscale, void* dbias, const void* saved_mean,
                               const void* saved_inv_std, void* workspace, size_t workspace_bytes);
// The plain backward (no fused activation), by mode and epsilon.
absl::Status BatchNormBackward(Handle& handle, BatchNormMode mode, float alpha_data,
                               float beta_data, float alpha_param, float beta_param,
                               const TensorDescriptor& xd, const void* x,
                               const TensorDescriptor& dyd, const void* dy,
                               const TensorDescriptor& dxd, void* dx, const TensorDescriptor& pd,
                               const void* scale, void* dscale, void* dbias, double epsilon,
                               const void* saved_mean, const void* saved_inv_std, void* workspace,
                               size_t workspace_bytes);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_NORMALIZATION_H_
