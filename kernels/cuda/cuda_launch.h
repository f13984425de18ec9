// Plain C++ declarations of Kiln's CUDA launchers, so that code compiled by g++ can call them.
// Each launcher enqueues on `stream` (a cudaStream_t) and returns the cudaError_t of the launch
// (checked with cudaGetLastError right after it) as an int; 0 means success.
//
// Only the graph's InnerProduct bias broadcast is left here; the graph's other CUDA kernels run
// on the primitive layer's launchers (convolution.h, primitive_launch.h).
#ifndef KILN_KERNELS_CUDA_CUDA_LAUNCH_H_
#define KILN_KERNELS_CUDA_CUDA_LAUNCH_H_

#include <cstdint>

namespace kiln {
namespace cuda {

// y[m, n] = bias[n] for every row (the GEMM then accumulates onto it).
int LaunchBroadcastRows(int64_t m, int64_t n, const float* bias, float* y, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CUDA_LAUNCH_H_
