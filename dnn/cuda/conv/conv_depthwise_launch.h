// Plain C++ entry points of the depthwise convolution kernels (conv_depthwise.cu): all three
// directions of a 2-d convolution with one input and one output channel per group, on
// channels-last (NHWC) x and y, in f32, f16 and bf16 with f32 accumulation.
//
// A depthwise layer (MobileNet's, ShuffleNet's) has no reduction over channels, so no matrix
// product to hand to the tensor cores: it is a stencil whose cost is reading x and writing y.
// These kernels make that traffic as cheap as it gets: each thread takes a vector of 16 bytes of
// adjacent channels (8 f16/bf16, 4 f32), so every load and store is one 16-byte access and a
// warp covers 512 contiguous bytes; the filter taps of its channels stay in registers; forward
// computes a few neighbouring output columns per thread so the input columns they share are
// loaded once. Bias and ReLU are applied before the single store (the convolution epilogue).
#ifndef KILN_DNN_CUDA_CONV_CONV_DEPTHWISE_LAUNCH_H_
#define KILN_DNN_CUDA_CONV_CONV_DEPTHWISE_LAUNCH_H_

#include <cstdint>

#include "dnn/conv_problem.h"
#include "dnn/cuda/conv/conv_gemm_launch.h"

namespace kiln {
namespace cuda {

// True when the kernels serve `p`: 2-d, groups == c == k (one filter per channel), x and y with
// unit channel stride, sizes that fit the kernels' 32-bit pixel counters. The forward kernel
// serves asymmetric padding too; the backward ones, as every backward path, symmetric only.
bool DepthwiseServes(const dnn::ConvProblem& p);

struct DepthwiseLaunch {
  dnn::ConvProblem problem;
  ElementType element = ElementType::kF32;
  const void* x = nullptr;  // forward: read; backward data: dx, written; backward filter: read
  const void* w = nullptr;  // forward and backward data: read; backward filter: dw, written
  const void* y = nullptr;  // forward: written; backward data and filter: dy, read
  float alpha = 1, beta = 0;
  OutputEpilogue epilogue;   // forward only
  int multiprocessors = 1;   // backward filter: sizes the split of the pixel reduction
  float* partial = nullptr;  // backward filter: DepthwiseFilterGradientBytes of workspace
};

// y = act(alpha conv(x, w) + beta y + bias): the epilogue rounds the blend to the element type
// first, as RunConvolutionForwardWithEpilogue promises.
int LaunchDepthwiseForward(const DepthwiseLaunch& l, void* stream);
// dx = alpha conv_backward_data(dy, w) + beta dx (l.x is dx).
int LaunchDepthwiseBackwardData(const DepthwiseLaunch& l, void* stream);
// dw = alpha conv_backward_filter(x, dy) + beta dw (l.w is dw): per-split partial sums in
// l.partial, added in a fixed order by a second kernel (deterministic).
int LaunchDepthwiseBackwardFilter(const DepthwiseLaunch& l, void* stream);
int64_t DepthwiseFilterGradientBytes(const dnn::ConvProblem& p, int multiprocessors);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_DEPTHWISE_LAUNCH_H_
