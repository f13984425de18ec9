// The bias broadcast the graph's InnerProduct starts from: y[m, n] = bias[n].
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_launch.h"

namespace kiln {
namespace cuda {

namespace {

unsigned GridFor(int64_t total, int threads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

__global__ void BroadcastRowsKernel(int64_t m, int64_t n, const float* __restrict__ bias,
                                    float* __restrict__ y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = bias[i % n];
  }
}

}  // namespace

int LaunchBroadcastRows(int64_t m, int64_t n, const float* bias, float* y, void* stream) {
  if (m * n == 0) return 0;
  BroadcastRowsKernel<<<GridFor(m * n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(m, n,
                                                                                          bias, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kiln
