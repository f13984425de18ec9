// Element-wise activations and the bias broadcast used by InnerProduct.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_launch.h"
#include "ops/dropout_mask.h"

namespace kiln {
namespace cuda {

namespace {

unsigned GridFor(int64_t total, int threads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

__global__ void PointwiseKernel(PointwiseParams p, const float* __restrict__ x,
                                float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    float r;
    switch (p.op) {
      case PointwiseOp::kRelu:
        r = fmaxf(v, 0.0f) + p.a * fminf(v, 0.0f);
        break;
      case PointwiseOp::kSigmoid:
        r = 1.0f / (1.0f + expf(-v));
        break;
      case PointwiseOp::kTanh:
        r = tanhf(v);
        break;
      case PointwiseOp::kElu:
        r = v > 0.0f ? v : p.a * expm1f(v);
        break;
      case PointwiseOp::kClippedRelu:
        r = fminf(fmaxf(v, 0.0f), p.a);
        break;
      case PointwiseOp::kAbs:
        r = fabsf(v);
        break;
      case PointwiseOp::kPower:
        r = powf(p.c + p.b * v, p.a);
        break;
      case PointwiseOp::kDropout:
        r = !p.training                                          ? v
            : DropoutKeep(p.seed, static_cast<uint64_t>(i), p.a) ? v / (1.0f - p.a)
                                                                 : 0.0f;
        break;
    }
    y[i] = r;
  }
}

__global__ void BroadcastRowsKernel(int64_t m, int64_t n, const float* __restrict__ bias,
                                    float* __restrict__ y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = bias[i % n];
  }
}

}  // namespace

int LaunchPointwise(const PointwiseParams& params, const float* x, float* y, int64_t n,
                    void* stream) {
  if (n == 0) return 0;
  PointwiseKernel<<<GridFor(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(params, x, y, n);
  return static_cast<int>(cudaGetLastError());
}

int LaunchBroadcastRows(int64_t m, int64_t n, const float* bias, float* y, void* stream) {
  if (m * n == 0) return 0;
  BroadcastRowsKernel<<<GridFor(m * n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(m, n,
                                                                                          bias, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kiln
