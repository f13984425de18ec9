// Internal to the convolution primitive: the per-algorithm paths that RunConvolution
// (convolution.cc) dispatches to, the workspace each plans, and the small helpers they share.
//   conv_precomp_paths.cc   IMPLICIT_PRECOMP_GEMM (the mma.sync and the Hopper wgmma kernels),
//                           with the rewrites that run backward data and backward filter as
//                           forward convolutions;
//   conv_gemm_paths.cc      GEMM (im2col/col2im and cuBLAS) and GEMM_1X1 (cuBLAS on packed 1x1);
//   conv_winograd_paths.cc  WINOGRAD_NONFUSED (transforms and batched cuBLAS products);
//   conv_paths.cc           the helpers the paths share (launch checks, cuBLAS types).
// Each path takes the problem, alpha and beta, its operands named as in that direction, and the
// workspace its plan sized. The full explanation of each function is at its definition.
#ifndef KILN_DNN_CUDA_CONV_CONV_PATHS_H_
#define KILN_DNN_CUDA_CONV_CONV_PATHS_H_

#include <cublas_v2.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dnn/cuda/conv/conv_gemm_launch.h"
#include "dnn/cuda/conv/convolution.h"
#include "dnn/cuda/dnn_handle.h"
#include "dnn/conv_problem.h"
#include "dnn/gemm_view.h"

namespace kiln {
namespace dnn {
namespace conv_internal {

using cuda::ConvGemmLaunch;
using cuda::ElementType;
using cuda::GemmMath;

// Shared helpers: element types and sizes, alignment, launch and cuBLAS status checks.

inline ElementType ElementOf(DataType t) {
  return t == DataType::kF16 ? ElementType::kF16
                             : (t == DataType::kBF16 ? ElementType::kBF16 : ElementType::kF32);
}
inline int64_t ElementBytes(DataType t) { return t == DataType::kF32 ? 4 : 2; }
inline int VectorWidth(DataType t) { return static_cast<int>(16 / ElementBytes(t)); }
// Strict FP32 runs on the tensor cores as three TF32 products (GemmMath::kTf32x3): its error
// passes the f32 tolerance (per-slice partials, conv_gemm.cu), and on an H100 it is about 10%
// faster than the FFMA kernel on ResNet-18's stride-2 layers (docs/PERF.md).
inline GemmMath MathOf(const ConvProblem& p) {
  if (p.dtype != DataType::kF32) return GemmMath::kHalf;
  return p.math == MathMode::kTf32 ? GemmMath::kTf32 : GemmMath::kTf32x3;
}
inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
inline size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// OK when a launch returned 0; otherwise Internal naming `what` and CUDA's message.
absl::Status Launched(int error, const char* what);

// An implicit-GEMM launch over `view`, vectorizing each operand when its layout and pointer
// allow.
ConvGemmLaunch GemmLaunch(const ConvProblem& p, const GemmView& view, const void* a, const void* b,
                          void* c, float alpha, float beta);

// cuBLAS's data type for `t`, and the compute type for `p`'s math mode.
cudaDataType_t CublasType(DataType t);
cublasComputeType_t CublasCompute(const ConvProblem& p);

// OK on CUBLAS_STATUS_SUCCESS; otherwise Internal naming `what` and cuBLAS's message.
absl::Status CublasOk(cublasStatus_t s, absl::string_view what);

// IMPLICIT_PRECOMP_GEMM (conv_precomp_paths.cc).

// IMPLICIT_PRECOMP_GEMM's workspace: optional channels-last copies of x and w (when the
// original layout cannot be loaded as vectors but the copy can), then the two k tables.
struct PrecompPlan {
  bool copy = false;
  bool copy_w = false;  // false when w is already channels-last as the copy would be
  ConvProblem problem;  // the problem the kernel sees (the copies' layout when copy)
  int64_t padded_c = 0;
  size_t x_offset = 0, w_offset = 0, a_table_offset = 0, b_table_offset = 0, bytes = 0;
  int splits = 1;  // split-K when the output tiles alone would not fill two waves
  size_t partial_offset = 0;
  // The Hopper wgmma kernel serves the problem (when the buffers are 16-byte aligned), with
  // this split-K factor.
  bool wgmma = false;
  int wgmma_splits = 1;
};

// Whether the Hopper wgmma kernel takes the forward problem `q` as the kernel sees it.
bool WgmmaServes(const ConvProblem& q);

// The workspace layout and split-K factors of a forward problem.
PrecompPlan PlanPrecomp(const ConvProblem& p, int multiprocessors);

// Rewrites backward data at unit stride as a forward convolution into `q`; false when the strides
// or padding do not allow it.
bool BackwardDataAsForward(const ConvProblem& p, ConvProblem* q);

// Rewrites backward filter as a forward convolution over transposed copies of x and dy into `q`;
// false unless `p` is ungrouped and 2-d.
bool BackwardFilterAsForward(const ConvProblem& p, ConvProblem* q);

// Rewrites the backward filter of an ungrouped, unpadded, unit-stride 1x1 problem whose pixels
// are contiguous per (image, channel) as a forward convolution straight on x and dy (no copies)
// into `q`; false when the problem or its layout does not allow it.
bool BackwardFilter1x1AsForward(const ConvProblem& p, ConvProblem* q);

// The bytes of BackwardFilterAsForward's transposed copies of x and dy, for its view `q`.
size_t BackwardFilterCopyBytes(const ConvProblem& q);

// Backward data at stride > 1 by sub-pixel decomposition. The outputs whose row is ph mod
// stride_h and column pw mod stride_w (one phase) receive only the taps r = (ph + pad_h) mod
// stride_h + stride_h t (and likewise s), and over those taps, reversed, backward data is a
// unit-stride forward convolution of dy. dy is copied channels-last once for all phases (its K
// channels padded to a 16-byte multiple); each phase has its own filter and writes its outputs
// through dx's strides times the stride. Serves ungrouped 2-d cross-correlations with unit
// dilation whose every phase has a tap (stride <= filter).
struct SubPixelPhase {
  ConvProblem q;  // x' = the dy copy, w' = the phase's filter, y' = dx from y_offset on
  int64_t r0 = 0, s0 = 0;
  int64_t y_offset = 0;  // elements from dx to the phase's first output
  size_t filter_offset = 0;
  // No tap reaches this phase's pixels (a stride wider than the filter: a 1x1 stride-2
  // downsample's odd rows and columns): they are zero (beta times their old value).
  bool empty = false;
};
struct SubPixelPlan {
  std::vector<SubPixelPhase> phases;
  int64_t padded_k = 0;
  size_t precomp_offset = 0, bytes = 0;  // the dy copy is at 0, then the filters
  size_t zero_offset = 0;                // a float 0 that empty phases are filled from
};

// Plans backward data at stride > 1 by sub-pixel phases into `plan`; false when `p` is not served.
bool PlanSubPixel(const ConvProblem& p, int multiprocessors, SubPixelPlan* plan);

// The bytes of backward data's transposed, flipped filter (BackwardDataAsForward's w').
size_t BackwardDataFilterBytes(const ConvProblem& p);

// Writes that filter at `ws` (shared by IMPLICIT_PRECOMP_GEMM and WINOGRAD_NONFUSED).
absl::Status WriteBackwardDataFilter(Handle& h, const ConvProblem& p, const void* w, char* ws);

// With `epilogue` non-null, the wgmma kernel applies it and *applied is set; the other kernels
// leave it (and *applied false).
absl::Status ForwardPrecomp(Handle& h, const ConvProblem& p, float alpha, float beta, const void* x,
                            const void* w, void* y, char* ws,
                            const ConvEpilogue* epilogue = nullptr, bool* applied = nullptr);
absl::Status BackwardDataPrecomp(Handle& h, const ConvProblem& p, float alpha, float beta,
                                 const void* dy, const void* w, void* dx, char* ws);
absl::Status BackwardFilterPrecomp(Handle& h, const ConvProblem& p, float alpha, float beta,
                                   const void* x, const void* dy, void* dw, char* ws);

// GEMM and GEMM_1X1 (conv_gemm_paths.cc).

// Forward GEMM: rows of output pixels per chunk.
struct GemmPlan {
  int64_t chunk = 0;  // rows (forward), images (backward data) or pixels (backward filter)
  size_t bytes = 0;
};

// The chunk and workspace of the GEMM algorithm in `direction`.
GemmPlan PlanGemm(ConvDirection direction, const ConvProblem& p);

// GEMM_1X1 (conv_1x1_paths.cc).

// Whether `p` is a 1x1, stride-1, unpadded, ungrouped problem of packed NCHW or NHWC tensors
// (`nhwc` says which).
bool Is1x1Packed(const ConvProblem& p, bool* nhwc);
// Whether GEMM_1X1 serves `p`: packed 1x1 problems at stride 1 (NCHW or NHWC), and packed NCHW
// ones at any stride (unpadded, ungrouped).
bool Gemm1x1Serves(const ConvProblem& p);
// The workspace of GEMM_1X1 in `direction`: the subsampled x or dx of a strided problem, and the
// NCHW filter gradient's f32 parts.
size_t Gemm1x1WorkspaceBytes(ConvDirection direction, const ConvProblem& p);
// GEMM_1X1: forward (backward = false) or backward data (backward = true), and backward filter.
absl::Status Pixelwise1x1(Handle& h, const ConvProblem& p, bool backward, float alpha, float beta,
                          const void* in, const void* w, void* out, char* ws);
absl::Status BackwardFilter1x1(Handle& h, const ConvProblem& p, float alpha, float beta,
                               const void* x, const void* dy, void* dw, char* ws);

absl::Status ForwardGemm(Handle& h, const ConvProblem& p, float alpha, float beta, const void* x,
                         const void* w, void* y, char* ws);
absl::Status BackwardDataGemm(Handle& h, const ConvProblem& p, float alpha, float beta,
                              const void* dy, const void* w, void* dx, char* ws);
absl::Status BackwardFilterGemm(Handle& h, const ConvProblem& p, float alpha, float beta,
                                const void* x, const void* dy, void* dw, char* ws);

// WINOGRAD_NONFUSED (conv_winograd_paths.cc).

// Whether Winograd F(2x2, 3x3), F(4x4, 3x3) or F(2x2, 5x5) serves `p` (backward data: its
// forward view).
bool WinogradServes(const ConvProblem& p);

// How many chunks `direction` cuts the tiles into (1 outside backward filter).
int64_t WinogradChunks(ConvDirection direction, const ConvProblem& p, int multiprocessors);

// The workspace of `direction` (backward data: kForward on its forward view): transformed input,
// filter and products.
size_t WinogradBytes(ConvDirection direction, const ConvProblem& p, int64_t chunks);

// With `epilogue` non-null the output transform applies it (*applied set true).
absl::Status ForwardWinograd(Handle& h, const ConvProblem& p, float alpha, float beta,
                             const void* x, const void* w, void* y, char* ws,
                             const ConvEpilogue* epilogue = nullptr, bool* applied = nullptr);
absl::Status BackwardDataWinograd(Handle& h, const ConvProblem& p, float alpha, float beta,
                                  const void* dy, const void* w, void* dx, char* ws);
absl::Status BackwardFilterWinograd(Handle& h, const ConvProblem& p, float alpha, float beta,
                                    const void* x, const void* dy, void* dw, char* ws);

}  // namespace conv_internal
}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_PATHS_H_
