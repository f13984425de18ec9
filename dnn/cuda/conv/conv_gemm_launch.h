// Plain C++ entry points of the convolution GEMM kernels (conv_gemm.cu, conv_aux.cu), callable
// from g++-compiled code. Each returns the cudaError_t of its launches as an int (0 = success),
// read with cudaGetLastError right after each launch.
#ifndef KILN_DNN_CUDA_CONV_CONV_GEMM_LAUNCH_H_
#define KILN_DNN_CUDA_CONV_CONV_GEMM_LAUNCH_H_

#include <cstdint>

#include "dnn/conv_problem.h"
#include "dnn/gemm_view.h"

namespace kiln {
namespace cuda {

// The multiply the GEMM kernel uses: FP32 FFMA, TF32 mma.sync, f16/bf16 mma.sync (the element
// type decides which), or FP32 through three TF32 mma.sync products (kTf32x3: each operand split
// into a TF32 head and a TF32 tail, a*b taken as ah*bh + ah*bl + al*bh, which keeps about 21 of
// FP32's 24 bits per product, below the error of the f32 sums; the strict-FP32 kernels use it),
// all accumulating in f32.
enum class GemmMath : int { kFfma, kTf32, kHalf, kTf32x3 };
enum class ElementType : int { kF32, kF16, kBF16 };

struct ConvGemmLaunch {
  dnn::GemmView view;
  ElementType element = ElementType::kF32;
  GemmMath math = GemmMath::kFfma;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  float alpha = 1, beta = 0;
  int vector_a = 1, vector_b = 1;  // elements per load along k: 1, or 16 bytes' worth
  bool a_lanes_along_k = true, b_lanes_along_k = true;
  // Precomputed per-k decodings of view.a.inner / view.b.inner (IMPLICIT_PRECOMP_GEMM), or null
  // to decode on the fly.
  const dnn::IndexInfo* a_table = nullptr;
  const dnn::IndexInfo* b_table = nullptr;
  // Split-K: `splits` blocks share each output tile's reduction and write f32 partial sums to
  // `partial` ([splits][groups][m][n]); a second kernel adds them in a fixed order. 1 = off.
  int splits = 1;
  float* partial = nullptr;
};

// Runs the implicit-GEMM kernel (and the split-K reduction when splits > 1).
int LaunchConvGemm(const ConvGemmLaunch& launch, void* stream);
// The f32 partial-sum workspace `splits` needs, in bytes.
int64_t ConvGemmPartialBytes(const dnn::GemmView& view, int splits);
// table[i] = Decode(map, i) for i < count.
int LaunchDecodeTable(const dnn::IndexMap& map, int64_t count, dnn::IndexInfo* table, void* stream);

// Writes operand elements as a dense row-major matrix out[g][r][c] (r < rows, c < cols) of
// `element` type: with rows_are_outer, element (r, c) is op(outer = row0 + r, inner = col0 + c),
// otherwise op(outer = col0 + c, inner = row0 + r). Padding is written as zero.
int LaunchMaterialize(const dnn::GatherOperand& op, ElementType element, const void* src,
                      int64_t groups, bool rows_are_outer, int64_t row0, int64_t rows, int64_t col0,
                      int64_t cols, void* out, void* stream);
// out[map(row0 + r, c)] = alpha d[g][r][c] + beta out[...] for a dense f32 d[groups][rows][cols].
int LaunchScatter(const dnn::OutputMap& map, ElementType element, const float* d, int64_t groups,
                  int64_t row0, int64_t rows, int64_t cols, float alpha, float beta, void* out,
                  void* stream);
// Backward data's col2im as a gather: dx[n, c, d, h, w] for images n0 <= n < n0 + images is
// alpha * the sum of col[g][(n - n0, o, p, q)][(c, t, r, s)] over the taps that reach it,
// + beta dx. col is f32, dense, (c, t, r, s) ordered.
int LaunchCol2Im(const dnn::ConvProblem& p, const float* col, int64_t n0, int64_t images,
                 ElementType element, float alpha, float beta, void* dx, void* stream);
// w' (C, K/groups, T, R, S), packed KRSC, from the filter w of `p`: transposed per group and, when
// `flip`, reversed spatially (the forward filter that computes backward data at stride 1).
int LaunchBackwardDataFilter(const dnn::ConvProblem& p, ElementType element, const void* w,
                             bool flip, void* out, void* stream);
// One phase's filter of sub-pixel backward data (2-d, ungrouped, unit dilation), packed
// (C, taps_h, taps_w, padded_k) with zeros past K: w[k][c][r0 + stride_h (taps_h - 1 - t)]
// [s0 + stride_w (taps_w - 1 - u)] at (c, t, u, k).
int LaunchSubPixelFilter(const dnn::ConvProblem& p, ElementType element, const void* w, int64_t r0,
                         int64_t s0, int64_t taps_h, int64_t taps_w, int64_t padded_k, void* out,
                         void* stream);
// y[n, k, ...] += bias[k] over the output of `p`.
int LaunchAddChannelBias(const dnn::ConvProblem& p, ElementType element, const void* bias, void* y,
                         void* stream);
// What a forward kernel applies to each output before its store (dnn::ConvEpilogue, for the
// kernels' launch interfaces): + bias[k] (f32; null: none), then ReLU with `slope` for negative
// values when `relu`. A 16-bit output is rounded to its type before the bias, as a separate pass
// over the stored output would see it.
struct OutputEpilogue {
  const float* bias = nullptr;
  bool relu = false;
  float slope = 0;
};
// Direct forward convolution, one thread per output element.
int LaunchConvDirect(const dnn::ConvProblem& p, ElementType element, const void* x, const void* w,
                     float alpha, float beta, void* y, void* stream);
// Direct backward data (conv_direct_backward_data.cu), a gather of the taps that reach each dx
// element, by phase where it can: dx = alpha conv_backward_data(dy, w) + beta dx.
int LaunchConvDirectBackwardData(const dnn::ConvProblem& p, ElementType element, const void* dy,
                                 const void* w, float alpha, float beta, void* dx, void* stream);
// db[k] = alpha sum(dy[:, k, ...]) + beta db[k], a fixed-order reduction per channel.
int LaunchBiasGrad(const dnn::ConvProblem& p, ElementType element, const void* dy, float alpha,
                   float beta, void* db, void* stream);
// The strided 1x1 product (GEMM_1X1 with stride > 1): xs = the packed [N][C][O][P][Q] pixels of
// x on the output grid; dx = alpha dxs expanded onto x's grid (zero between) + beta dx.
int LaunchSubsample1x1(const dnn::ConvProblem& p, ElementType element, const void* x, void* xs,
                       void* stream);
int LaunchExpand1x1(const dnn::ConvProblem& p, ElementType element, const void* dxs, float alpha,
                    float beta, void* dx, void* stream);
// out[i] = alpha sum over b of part[b][i] (in order) + beta out[i], i < count; part is f32.
int LaunchSumParts(const float* part, int64_t parts, int64_t count, ElementType element,
                   float alpha, float beta, void* out, void* stream);
// Copies a strided 5-d tensor (N, C, D, H, W) into a packed channels-last one with
// `padded_channels` >= C channels, the extra channels zero.
int LaunchToChannelsLast(ElementType element, const int64_t* dims, const int64_t* strides,
                         const void* src, int64_t padded_channels, void* dst, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_GEMM_LAUNCH_H_
