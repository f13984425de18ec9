// Direct 2-d convolution: one thread per output element, the filter walked in registers.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_launch.h"

namespace kiln {
namespace cuda {

namespace {

__global__ void Conv2dDirectKernel(Conv2dShape s, const float* __restrict__ x,
                                   const float* __restrict__ filter, const float* __restrict__ bias,
                                   float* __restrict__ y) {
  const int64_t total = s.n * s.k * s.p * s.q;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = i % s.q;
    const int64_t p = (i / s.q) % s.p;
    const int64_t k = (i / (s.q * s.p)) % s.k;
    const int64_t n = i / (s.q * s.p * s.k);
    const int64_t cg = s.c / s.group;
    const int64_t grp = k / (s.k / s.group);
    float acc = bias ? bias[k] : 0.0f;
    for (int64_t c = 0; c < cg; ++c) {
      const float* xc = x + (n * s.c + grp * cg + c) * s.h * s.w;
      const float* wc = filter + (k * cg + c) * s.r * s.s;
      for (int64_t r = 0; r < s.r; ++r) {
        const int64_t ih = p * s.stride_h - s.pad_h + r * s.dilation_h;
        if (ih < 0 || ih >= s.h) continue;
        for (int64_t t = 0; t < s.s; ++t) {
          const int64_t iw = q * s.stride_w - s.pad_w + t * s.dilation_w;
          if (iw < 0 || iw >= s.w) continue;
          acc = fmaf(xc[ih * s.w + iw], wc[r * s.s + t], acc);
        }
      }
    }
    y[i] = acc;
  }
}

}  // namespace

int LaunchConv2dDirect(const Conv2dShape& shape, const float* x, const float* filter,
                       const float* bias, float* y, void* stream) {
  const int64_t total = shape.n * shape.k * shape.p * shape.q;
  if (total == 0) return 0;
  const int threads = 256;
  const int64_t blocks = (total + threads - 1) / threads;
  Conv2dDirectKernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), threads, 0,
                       static_cast<cudaStream_t>(stream)>>>(shape, x, filter, bias, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kiln
