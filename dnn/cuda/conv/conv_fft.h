// The FFT convolution (ConvAlgo::kFft): all three directions of ungrouped 2-d f32 convolutions
// with unit dilation, any stride, padding and layout, as products of spectra. Each direction is a
// unit-stride cross-correlation between planes (conv_fft_launch.h):
//   forward        y  = x (s_h s_w phases as channels) correlated with the sub-filters;
//   backward data  dx = dy fully convolved with the sub-filters, one output channel per (c, phase);
//   backward filter    the sub-filters' gradient = x's phases correlated with dy.
// Per pass of tile-images: the planes go through cuFFT (R2C) into frequency-major spectra, one
// complex GEMM per frequency (cuBLAS, batched) multiplies them with the filter's spectra, and the
// products come back through cuFFT (C2R) to be scattered with alpha / beta. The FFT sizes and tile
// sizes are chosen per problem from a cost model; the work is split into passes so that the
// workspace stays bounded. cuFFT and the f32 GEMM use FFMA (strict FP32); in TF32 math mode the
// GEMM may use TF32 tensor cores. Deterministic: passes accumulate in a fixed order.
#ifndef KILN_DNN_CUDA_CONV_CONV_FFT_H_
#define KILN_DNN_CUDA_CONV_CONV_FFT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "dnn/cuda/conv/convolution.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/conv_problem.h"

namespace kiln {
namespace dnn {

// OK when the FFT algorithm serves `direction` of `p`; otherwise Unimplemented saying why.
absl::Status FftSupport(ConvDirection direction, const ConvProblem& p);

// Workspace bytes: the filter's spectra, one pass's planes and spectra, and cuFFT's work area.
absl::StatusOr<size_t> FftWorkspaceBytes(const Handle& handle, ConvDirection direction,
                                         const ConvProblem& p);

// One direction, operands named as in forward (x, w, y; the output is y, x or w).
absl::Status RunFft(Handle& handle, ConvDirection direction, const ConvProblem& p, float alpha,
                    float beta, void* x, void* w, void* y, void* workspace);

// For tests: the budget of one pass's planes and spectra (1 GiB unless set), and how many passes
// `direction` of `p` takes under it (0 when unsupported).
void SetFftPassBytesForTesting(int64_t bytes);
// The bytes of filter spectra above which forward runs over slices of the output channels (256
// MiB unless set), and how many slices forward of `p` takes (0 when unsupported).
void SetFftFilterSliceBytesForTesting(int64_t bytes);
int64_t FftForwardSlicesForTesting(const ConvProblem& p);
int64_t FftPassesForTesting(ConvDirection direction, const ConvProblem& p);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_FFT_H_
