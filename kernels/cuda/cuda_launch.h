// Plain C++ declarations of Kiln's CUDA launchers, so that code compiled by g++ can call them.
// Each launcher enqueues on `stream` (a cudaStream_t) and returns the cudaError_t of the launch
// (checked with cudaGetLastError right after it) as an int; 0 means success.
//
// These are the first, straightforward CUDA kernels (one thread per output element) that the
// graph engine still uses; convolution, pooling, LRN and softmax run on the primitive layer's
// kernels (convolution.h, primitive_launch.h).
#ifndef KILN_KERNELS_CUDA_CUDA_LAUNCH_H_
#define KILN_KERNELS_CUDA_CUDA_LAUNCH_H_

#include <cstdint>

namespace kiln {
namespace cuda {

// Element-wise activations.
enum class PointwiseOp : int { kRelu, kSigmoid, kTanh, kElu, kClippedRelu, kAbs, kPower, kDropout };
struct PointwiseParams {
  PointwiseOp op;
  float a = 0, b = 0, c = 0;  // ReLU slope / ELU alpha / ceiling / power,scale,shift / ratio.
  uint64_t seed = 0;
  bool training = false;
};
int LaunchPointwise(const PointwiseParams& params, const float* x, float* y, int64_t n,
                    void* stream);

// y[m, n] = bias[n] for every row (the GEMM then accumulates onto it).
int LaunchBroadcastRows(int64_t m, int64_t n, const float* bias, float* y, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CUDA_LAUNCH_H_
