// Plain C++ entry points of the small-channel convolution kernels (conv_small_channels.cu): the
// forward and filter gradient of a network's first layer, whose input has 1 to 8 channels (an
// RGB image), on the f16/bf16 tensor cores.
//
// The general implicit-GEMM kernels reduce over 16-byte runs of channels at one filter tap, so a
// 3-channel input pads every tap to 8 channels and spends most of its multiplies on zeros and
// most of its loads on gathers. These kernels instead stage each block's input window in shared
// memory once, with the channels padded to 4 (or 8), and walk the reduction along a filter row,
// where consecutive taps of one output pixel are consecutive in that window: every 16-byte
// fragment row is then a plain ldmatrix address, and the whole filter stays in shared memory.
#ifndef KILN_DNN_CUDA_CONV_CONV_SMALL_CHANNELS_LAUNCH_H_
#define KILN_DNN_CUDA_CONV_CONV_SMALL_CHANNELS_LAUNCH_H_

#include <cstdint>

#include "dnn/cuda/conv/conv_gemm_launch.h"
#include "dnn/conv_problem.h"

namespace kiln {
namespace cuda {

struct SmallChannelsLaunch {
  dnn::ConvProblem problem;
  const void* x = nullptr;  // input image (read)
  const void* w = nullptr;  // forward: the filter (read); filter gradient: unused
  void* y = nullptr;        // forward: the output (written); filter gradient: dy (read)
  void* dw = nullptr;       // filter gradient: the output (written)
  float alpha = 1, beta = 0;
  int multiprocessors = 1;
  float* partial = nullptr;  // filter gradient: WindowFilterGradientBytes of workspace
  OutputEpilogue epilogue;   // forward: bias and ReLU before the store (none by default)
};

// True when the kernels serve `p` forward: f16 or bf16 (both directions), 2-d, one group, unit
// dilation, 1 to 8 input channels, and a filter that fits in shared memory; or the f32 forward
// below.
bool SmallChannelsServes(const dnn::ConvProblem& p);
// True when the windowed filter gradient serves `p`: the small-channel problems above (f32 ones
// through SmallChannelsF32GradientServes), and
// (the same kernel with every channel of a window position staged) f16/bf16 2-d ungrouped
// unit-dilation problems with a multiple of 8 channels whose window fits in shared memory.
bool WindowFilterGradientServes(const dnn::ConvProblem& p);
// The f32 partial-sum workspace of the filter gradient, in bytes.
int64_t WindowFilterGradientBytes(const dnn::ConvProblem& p, int multiprocessors);
// f32 (1 to 4 channels, FFMA products; conv_small_channels_f32.cu) or f16/bf16.
int LaunchSmallChannelsForward(const SmallChannelsLaunch& l, void* stream);
// The f32 forward alone: f32, 2-d, one group, unit dilation, 1 to 4 input channels, a window and
// 64 filters' taps that fit in 200 KiB of shared memory.
bool SmallChannelsF32Serves(const dnn::ConvProblem& p);
int LaunchSmallChannelsForwardF32(const SmallChannelsLaunch& l, void* stream);
// The f32 filter gradient (FFMA): the problems above with at most 384 taps (C x R x S) whose
// window and one tile of dy fit in shared memory; its partial-sum workspace in bytes; the launch
// (reads x and dy = l.y, writes l.dw, l.partial of that size).
bool SmallChannelsF32GradientServes(const dnn::ConvProblem& p);
int64_t SmallChannelsF32GradientBytes(const dnn::ConvProblem& p, int multiprocessors);
int LaunchSmallChannelsF32Gradient(const SmallChannelsLaunch& l, void* stream);
int LaunchWindowFilterGradient(const SmallChannelsLaunch& l, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_SMALL_CHANNELS_LAUNCH_H_
