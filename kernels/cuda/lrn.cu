// LRN across channels: one thread per output element, the window summed directly.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_launch.h"

namespace kiln {
namespace cuda {

namespace {

__global__ void LrnAcrossKernel(int64_t n, int64_t c, int64_t inner, int64_t size, float alpha,
                                float beta, float k, const float* __restrict__ x,
                                float* __restrict__ y) {
  const int64_t total = n * c * inner;
  const int64_t half = (size - 1) / 2;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t pos = i % inner;
    const int64_t ch = (i / inner) % c;
    const int64_t b = i / (inner * c);
    float sum = 0.0f;
    const int64_t lo = ch - half < 0 ? 0 : ch - half;
    const int64_t hi = ch + half >= c ? c - 1 : ch + half;
    for (int64_t q = lo; q <= hi; ++q) {
      const float v = x[(b * c + q) * inner + pos];
      sum = fmaf(v, v, sum);
    }
    y[i] = x[i] * powf(k + alpha / static_cast<float>(size) * sum, -beta);
  }
}

}  // namespace

int LaunchLrnAcross(int64_t n, int64_t c, int64_t inner, int64_t local_size, float alpha,
                    float beta, float k, const float* x, float* y, void* stream) {
  const int64_t total = n * c * inner;
  if (total == 0) return 0;
  const int threads = 256;
  const int64_t blocks = (total + threads - 1) / threads;
  LrnAcrossKernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), threads, 0,
                    static_cast<cudaStream_t>(stream)>>>(n, c, inner, local_size, alpha, beta, k, x,
                                                         y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kiln
