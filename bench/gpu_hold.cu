#include <cstdint>

#include "bench/gpu_hold.h"

namespace kiln {
namespace bench {

namespace {

__device__ __forceinline__ uint64_t GlobalNanoseconds() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void HoldKernel(uint64_t nanoseconds) {
  const uint64_t end = GlobalNanoseconds() + nanoseconds;
  while (GlobalNanoseconds() < end) __nanosleep(1000);
}

}  // namespace

cudaError_t HoldGpu(cudaStream_t stream, int microseconds) {
  HoldKernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(microseconds) * 1000);
  return cudaGetLastError();
}

}  // namespace bench
}  // namespace kiln
