// The finishing step of a per-feature reduction, for one feature whose two sums are known: the
// result (kSum and the like), batch-norm statistics with the running updates and the apply
// pass's dense coefficients, or batch-norm gradient sums into dscale, dbias and the backward's
// coefficients. Shared by the two-stage reduction (dnn_reduce.cu) and the one-block-per-channel
// batch norm (dnn_batchnorm_planes.cu), so both follow the same rules.
#ifndef KILN_DNN_CUDA_REDUCE_FINISH_CUH_
#define KILN_DNN_CUDA_REDUCE_FINISH_CUH_

#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

__device__ __forceinline__ int64_t ParamOffset(const ReduceCall& c, int64_t f) {
  int64_t offset = 0;
  for (int d = c.feature_rank - 1; d >= 0; --d) {
    offset += (f % c.feature_dims[d]) * c.param_strides[d];
    f /= c.feature_dims[d];
  }
  return offset;
}

__device__ __forceinline__ float BlendInto(float alpha, double v, float beta, const float* old) {
  return Blend(alpha, static_cast<float>(v), beta, [&] { return *old; });
}

__device__ inline void FinishFeature(const ReduceCall& c, int64_t f, double s0, double s1) {
  const int64_t po = ParamOffset(c, f);
  const double m = static_cast<double>(c.reduce_count);
  const int64_t F = c.features;
  if (c.op == ReduceOp::kSum || c.op == ReduceOp::kPReluSlope || c.op == ReduceOp::kDot) {
    c.out0[po] = BlendInto(c.alpha, s0, c.beta, c.out0 + po);
    return;
  }
  if (c.op == ReduceOp::kMoments) {
    const double mean = s0 / m;
    double var = s1 / m - mean * mean;
    var = var > 0 ? var : 0;
    const double inv_std = 1.0 / sqrt(var + c.epsilon);
    if (c.save_mean) c.save_mean[po] = static_cast<float>(mean);
    if (c.save_inv_std) c.save_inv_std[po] = static_cast<float>(inv_std);
    if (c.mean_dense) c.mean_dense[f] = static_cast<float>(mean);
    if (c.inv_std_dense) c.inv_std_dense[f] = static_cast<float>(inv_std);
    if (c.running_mean && c.running_var) {
      const double unbiased = m > 1 ? var * m / (m - 1) : var;
      const float* mean_in = c.running_mean_in ? c.running_mean_in : c.running_mean;
      const float* var_in = c.running_var_in ? c.running_var_in : c.running_var;
      if (c.caffe_rule) {
        c.running_mean[po] = static_cast<float>(c.factor * mean_in[po] + mean);
        c.running_var[po] = static_cast<float>(c.factor * var_in[po] + unbiased);
        if (f == 0) {
          const float* factor_in = c.caffe_factor_in ? c.caffe_factor_in : c.caffe_factor;
          *c.caffe_factor = static_cast<float>(c.factor * *factor_in + 1);
        }
      } else {
        c.running_mean[po] = static_cast<float>((1 - c.factor) * mean_in[po] + c.factor * mean);
        c.running_var[po] = static_cast<float>((1 - c.factor) * var_in[po] + c.factor * unbiased);
      }
    }
    if (c.dense) {  // y = scale inv_std (x - mean) + bias
      c.dense[f] = static_cast<float>(c.scale[po] * inv_std);
      c.dense[F + f] = 0.0f;
      c.dense[2 * F + f] = c.bias[po];
      c.dense[3 * F + f] = static_cast<float>(mean);
    }
    return;
  }
  // kGradientSums: s0 = Σ dy, s1 = Σ dy x.
  const int64_t so = c.stats_dense ? f : po;
  const double mean = c.mean_in[so], inv_std = c.inv_std_in[so];
  const double dxhat = inv_std * (s1 - mean * s0);  // Σ dy x̂
  if (c.dscale) c.dscale[po] = BlendInto(c.alpha, dxhat, c.beta, c.dscale + po);
  if (c.dbias) c.dbias[po] = BlendInto(c.alpha, s0, c.beta, c.dbias + po);
  if (c.dense) {  // dx = p dy + q (x - mean) - p Σdy / m
    const double p = c.scale[po] * inv_std;
    c.dense[f] = static_cast<float>(p);
    c.dense[F + f] = static_cast<float>(-p * inv_std * dxhat / m);
    c.dense[2 * F + f] = static_cast<float>(-p * s0 / m);
    c.dense[3 * F + f] = static_cast<float>(mean);
  }
}

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_REDUCE_FINISH_CUH_
