// Plain C++ entry point of the Hopper implicit-GEMM convolution (conv_wgmma.cu): a 2-d forward
// convolution of a channels-last x with a KRSC filter on the sm_90a warpgroup tensor-core
// instructions (wgmma), f16/bf16 inputs or f32 inputs in TF32, f32 accumulation.
#ifndef KILN_DNN_CUDA_CONV_CONV_WGMMA_LAUNCH_H_
#define KILN_DNN_CUDA_CONV_CONV_WGMMA_LAUNCH_H_

#include <cstdint>

#include "dnn/conv_problem.h"

namespace kiln {
namespace cuda {

// A 2-d forward problem (depth 1, one group) and its buffers. The channel stride of x and w is 1;
// their other strides are multiples of 16 bytes, as are x and w themselves; y is any strided
// tensor. The element type comes from problem.dtype (f32 runs in TF32).
struct ConvWgmmaLaunch {
  dnn::ConvProblem problem;
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
  float alpha = 1, beta = 0;
  // Split-K: `splits` blocks share each tile's reduction and write f32 partial sums to
  // `partial`; a second kernel adds them in a fixed order. 1 = off.
  int splits = 1;
  float* partial = nullptr;
  // The epilogue, applied to each output before its single store (in the split-K reduction
  // when split): y = act(alpha conv + beta y + bias[k]), act = ReLU with `relu_slope` for
  // negative values when `relu`. bias: f32, one per filter, or null.
  const float* bias = nullptr;
  bool relu = false;
  float relu_slope = 0;
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

#endif  // KILN_DNN_CUDA_CONV_CONV_WGMMA_LAUNCH_H_
