// Plain C++ declarations of Kiln's CUDA launchers, so that code compiled by g++ can call them.
// Each launcher enqueues on `stream` (a cudaStream_t) and returns the cudaError_t of the launch
// (checked with cudaGetLastError right after it) as an int; 0 means success.
//
// These are the first, straightforward CUDA kernels (one thread per output element); convolution
// lives in the primitive API (convolution.h), and the vectorized memory-bound kernels are the
// subject of the CUDA primitives issue.
#ifndef KILN_KERNELS_CUDA_CUDA_LAUNCH_H_
#define KILN_KERNELS_CUDA_CUDA_LAUNCH_H_

#include <cstdint>

namespace kiln {
namespace cuda {

// 2-d pooling, NCHW f32. mode: 0 max, 1 average including padding (Caffe), 2 excluding.
struct Pool2dShape {
  int64_t planes, h, w, p, q, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  int mode;
};
int LaunchPool2d(const Pool2dShape& shape, const float* x, float* y, void* stream);

// LRN across channels over x viewed as [n, c, inner].
int LaunchLrnAcross(int64_t n, int64_t c, int64_t inner, int64_t local_size, float alpha,
                    float beta, float k, const float* x, float* y, void* stream);

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

// Softmax over the middle dim of [outer, c, inner], max-subtracted; log-softmax when `log`.
int LaunchSoftmax(int64_t outer, int64_t c, int64_t inner, bool log, const float* x, float* y,
                  void* stream);

// y[m, n] = bias[n] for every row (the GEMM then accumulates onto it).
int LaunchBroadcastRows(int64_t m, int64_t n, const float* bias, float* y, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CUDA_LAUNCH_H_
