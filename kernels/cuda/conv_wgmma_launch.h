// Plain C++ entry point of the Hopper implicit-GEMM convolution (conv_wgmma.cu): a 2-d forward
// convolution of a channels-last x with a KRSC filter on the sm_90a warpgroup tensor-core
// instructions (wgmma), f16/bf16 inputs or f32 inputs in TF32, f32 accumulation.
#ifndef KILN_KERNELS_CUDA_CONV_WGMMA_LAUNCH_H_
#define KILN_KERNELS_CUDA_CONV_WGMMA_LAUNCH_H_

#include <cstdint>

#include "kernels/cuda/conv_gemm_launch.h"

namespace kiln {
namespace cuda {

// Shapes and element strides. The channel stride of x and w is 1; the other strides of x and w
// are multiples of 16 bytes, as are x and w themselves. y is any strided tensor.
struct ConvWgmmaLaunch {
  ElementType element = ElementType::kF16;  // kF32 runs in TF32
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  int64_t n = 0, h = 0, w_in = 0, c = 0;  // x: N, H, W, C (c a multiple of 16 bytes' elements)
  int64_t p = 0, q = 0, k = 0;            // y: P, Q, K
  int64_t r = 0, s = 0;                   // filter taps
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  bool flip = false;         // true convolution: tap (r, s) reads w[R-1-r][S-1-s]
  int64_t x_stride[3] = {};  // n, h, w
  int64_t w_stride[3] = {};  // k, r, s
  int64_t y_stride[4] = {};  // n, k, p, q
  float alpha = 1, beta = 0;
  // Split-K: `splits` blocks share each tile's reduction and write f32 partial sums to
  // `partial`; a second kernel adds them in a fixed order. 1 = off.
  int splits = 1;
  float* partial = nullptr;
};

// True when the current device runs the sm_90a kernels (compute capability 9.0 and the build
// holds their machine code).
bool ConvWgmmaAvailable();
// The split factor that fills the device, given its multiprocessor count.
int ConvWgmmaSplits(const ConvWgmmaLaunch& l, int multiprocessors);
// The f32 workspace `splits` needs, in bytes.
int64_t ConvWgmmaPartialBytes(const ConvWgmmaLaunch& l, int splits);
int LaunchConvWgmma(const ConvWgmmaLaunch& l, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_KERNELS_CUDA_CONV_WGMMA_LAUNCH_H_
