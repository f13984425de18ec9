// 2-d pooling: one thread per output element.
#include <cuda_runtime.h>

#include <cfloat>

#include "kernels/cuda/cuda_launch.h"

namespace kiln {
namespace cuda {

namespace {

__global__ void Pool2dKernel(Pool2dShape s, const float* __restrict__ x, float* __restrict__ y) {
  const int64_t total = s.planes * s.p * s.q;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = i % s.q;
    const int64_t p = (i / s.q) % s.p;
    const int64_t plane = i / (s.q * s.p);
    const int64_t h0 = p * s.stride_h - s.pad_h, w0 = q * s.stride_w - s.pad_w;
    const int64_t h1 = min(h0 + s.kernel_h, s.h + s.pad_h),
                  w1 = min(w0 + s.kernel_w, s.w + s.pad_w);
    const int64_t padded_count = (h1 - h0) * (w1 - w0);
    const int64_t hs = max(h0, int64_t{0}), ws = max(w0, int64_t{0});
    const int64_t he = min(h1, s.h), we = min(w1, s.w);
    const float* xp = x + plane * s.h * s.w;
    float max_v = -FLT_MAX, sum = 0.0f;
    for (int64_t h = hs; h < he; ++h) {
      for (int64_t w = ws; w < we; ++w) {
        const float v = xp[h * s.w + w];
        max_v = fmaxf(max_v, v);
        sum += v;
      }
    }
    const int64_t count = (he - hs) * (we - ws);
    y[i] = s.mode == 0   ? max_v
           : s.mode == 1 ? sum / static_cast<float>(padded_count)
                         : (count > 0 ? sum / static_cast<float>(count) : 0.0f);
  }
}

}  // namespace

int LaunchPool2d(const Pool2dShape& shape, const float* x, float* y, void* stream) {
  const int64_t total = shape.planes * shape.p * shape.q;
  if (total == 0) return 0;
  const int threads = 256;
  const int64_t blocks = (total + threads - 1) / threads;
  Pool2dKernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), threads, 0,
                 static_cast<cudaStream_t>(stream)>>>(shape, x, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kiln
