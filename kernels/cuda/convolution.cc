// The convolution algorithms: how each direction maps onto the GEMM kernels, cuBLAS and the
// auxiliary kernels, and how much workspace each needs.
#include "kernels/cuda/convolution.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"
#include "kernels/cuda/conv_fft.h"
#include "kernels/cuda/conv_gemm_launch.h"
#include "kernels/cuda/conv_small_channels_launch.h"
#include "kernels/cuda/conv_wgmma_launch.h"
#include "kernels/cuda/conv_winograd_launch.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/dnn/conv_gemm_views.h"

namespace kiln {
namespace dnn {

namespace {

using cuda::ConvGemmLaunch;
using cuda::ElementType;
using cuda::GemmMath;

// The GEMM algorithms stage at most this many bytes of im2col/col2im matrix at a time.
constexpr int64_t kGemmChunkBytes = int64_t{512} << 20;

ElementType ElementOf(DataType t) {
  return t == DataType::kF16 ? ElementType::kF16
                             : (t == DataType::kBF16 ? ElementType::kBF16 : ElementType::kF32);
}
int64_t ElementBytes(DataType t) { return t == DataType::kF32 ? 4 : 2; }
int VectorWidth(DataType t) { return static_cast<int>(16 / ElementBytes(t)); }
GemmMath MathOf(const ConvProblem& p) {
  if (p.dtype != DataType::kF32) return GemmMath::kHalf;
  return p.math == MathMode::kTf32 ? GemmMath::kTf32 : GemmMath::kFfma;
}
bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

absl::Status Launched(int error, const char* what) {
  if (error == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(error))));
}

// An implicit-GEMM launch over `view`, vectorizing each operand when its layout and pointer
// allow.
ConvGemmLaunch GemmLaunch(const ConvProblem& p, const GemmView& view, const void* a, const void* b,
                          void* c, float alpha, float beta) {
  ConvGemmLaunch l;
  l.view = view;
  l.element = ElementOf(p.dtype);
  l.math = MathOf(p);
  l.a = a;
  l.b = b;
  l.c = c;
  l.alpha = alpha;
  l.beta = beta;
  const int width = VectorWidth(p.dtype);
  l.vector_a = InnerVectorizable(view.a, width) && Aligned16(a) ? width : 1;
  l.vector_b = InnerVectorizable(view.b, width) && Aligned16(b) ? width : 1;
  l.a_lanes_along_k = InnerIsContiguous(view.a);
  l.b_lanes_along_k = InnerIsContiguous(view.b);
  return l;
}

// The small-channel kernels' launch (conv_small_channels_launch.h): forward reads x and w into
// y; the filter gradient reads x and dy (y) with `partial` as workspace, and its caller sets dw.
cuda::SmallChannelsLaunch SmallChannelsLaunchOf(const Handle& h, const ConvProblem& p, float alpha,
                                                float beta, const void* x, const void* w, void* y,
                                                float* partial) {
  cuda::SmallChannelsLaunch l;
  l.problem = p;
  l.x = x;
  l.w = w;
  l.y = y;
  l.alpha = alpha;
  l.beta = beta;
  l.multiprocessors = h.multiprocessors();
  l.partial = partial;
  return l;
}

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

// Whether the wgmma kernel takes the forward problem `q` (the layout the kernel sees): tensor-core
// math, one group, 2-d, channel-contiguous x and w with 16-byte multiples for C and every other
// stride, indices within 32 bits, on a device that runs its sm_90a code.
bool WgmmaServes(const ConvProblem& q) {
  if (q.dtype == DataType::kF32 && q.math != MathMode::kTf32) return false;
  if (q.groups != 1 || q.in[0] != 1 || q.filter[0] != 1 || q.out[0] != 1) return false;
  const int64_t width = VectorWidth(q.dtype);
  if (q.x_stride[1] != 1 || q.w_stride[1] != 1 || q.c % width != 0) return false;
  // Each k tile holds 128 bytes of channels at one tap: with fewer channels than half a tile
  // (the 3-channel first layer) most of the tensor-core work would multiply padding, and the
  // mma.sync kernel, whose k slices span taps, is faster.
  const int64_t tile_channels = 128 / ElementBytes(q.dtype);
  if (2 * q.c < tile_channels) return false;
  for (int i : {0, 3, 4}) {
    if (q.x_stride[i] % width != 0 || q.w_stride[i] % width != 0) return false;
  }
  const int64_t limit = int64_t{1} << 30;
  if (q.OutputPixels() >= limit || q.k >= limit || q.c >= limit || q.in[1] >= limit ||
      q.in[2] >= limit || q.pad[1] >= limit || q.pad[2] >= limit) {
    return false;
  }
  return cuda::ConvWgmmaAvailable();
}

// Blocks for about two waves of `multiprocessors` (the pipelined kernel runs two per SM), each
// split keeping at least 8 k slices.
int ForwardSplits(const GemmView& v, int multiprocessors) {
  const int64_t tiles = ((v.m + 127) / 128) * ((v.n + 127) / 128) * v.groups;
  const int64_t k_tiles = (v.k + 31) / 32;
  if (tiles >= 2 * multiprocessors) return 1;
  int64_t splits = (2 * multiprocessors + tiles - 1) / tiles;
  splits = std::min<int64_t>(splits, k_tiles / 8);
  splits = std::min<int64_t>(splits, 65535 / v.groups);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(splits, 16)));
}

PrecompPlan PlanPrecomp(const ConvProblem& p, int multiprocessors) {
  PrecompPlan plan;
  plan.problem = p;
  const int width = VectorWidth(p.dtype);
  const GemmView direct = ForwardGemmView(p, true);
  const bool vectorizable =
      InnerVectorizable(direct.a, width) && InnerVectorizable(direct.b, width);
  plan.copy = !vectorizable && (p.groups == 1 || p.cg() % width == 0);
  size_t bytes = 0;
  if (plan.copy) {
    ConvProblem& q = plan.problem;
    plan.padded_c = p.groups == 1 ? (p.c + width - 1) / width * width : p.c;
    q.c = plan.padded_c;
    const int64_t d = p.in[0], h = p.in[1], w = p.in[2];
    q.x_stride[1] = 1;
    q.x_stride[4] = q.c;
    q.x_stride[3] = w * q.c;
    q.x_stride[2] = h * w * q.c;
    q.x_stride[0] = d * h * w * q.c;
    const int64_t cg = q.cg();
    // A filter that is channels-last with 16-byte strides and no channels to pad (backward
    // data's transposed filter) is used in place.
    bool w_ready = p.w_stride[1] == 1 && q.c == p.c;
    for (int i : {0, 2, 3, 4}) w_ready = w_ready && p.w_stride[i] % width == 0;
    plan.copy_w = !w_ready;
    if (plan.copy_w) {
      q.w_stride[1] = 1;
      q.w_stride[4] = cg;
      q.w_stride[3] = p.filter[2] * cg;
      q.w_stride[2] = p.filter[1] * p.filter[2] * cg;
      q.w_stride[0] = p.FilterTaps() * cg;
      q.filter_format = TensorFormat::kNHWC;
    }
    plan.x_offset = 0;
    bytes = Align256(static_cast<size_t>(p.n * d * h * w * q.c * ElementBytes(p.dtype)));
    plan.w_offset = bytes;
    if (plan.copy_w) {
      bytes += Align256(static_cast<size_t>(p.k * p.FilterTaps() * cg * ElementBytes(p.dtype)));
    }
  }
  const GemmView view = ForwardGemmView(plan.problem, plan.copy || p.XChannelsLast());
  plan.a_table_offset = bytes;
  bytes += Align256(static_cast<size_t>(view.k) * sizeof(IndexInfo));
  plan.b_table_offset = bytes;
  bytes += Align256(static_cast<size_t>(view.k) * sizeof(IndexInfo));
  plan.splits = ForwardSplits(view, multiprocessors);
  plan.partial_offset = bytes;
  int64_t partial = cuda::ConvGemmPartialBytes(view, plan.splits);
  plan.wgmma = WgmmaServes(plan.problem);
  if (plan.wgmma) {
    cuda::ConvWgmmaLaunch l;
    l.problem = plan.problem;
    plan.wgmma_splits = cuda::ConvWgmmaSplits(l, multiprocessors);
    partial = std::max(partial, cuda::ConvWgmmaPartialBytes(l, plan.wgmma_splits));
  }
  bytes += Align256(static_cast<size_t>(partial));
  plan.bytes = bytes;
  return plan;
}

// Backward data at unit stride as a forward convolution: x' = dy, w' = the filter transposed per
// group and flipped, pad' = dilation (filter - 1) - pad, y' = dx.
bool BackwardDataAsForward(const ConvProblem& p, ConvProblem* q) {
  for (int i = 0; i < 3; ++i) {
    if (p.stride[i] != 1 || p.pad[i] > p.dilation[i] * (p.filter[i] - 1)) return false;
  }
  *q = p;
  q->c = p.k;
  q->k = p.c;
  for (int i = 0; i < 3; ++i) {
    q->in[i] = p.out[i];
    q->out[i] = p.in[i];
    q->pad[i] = p.dilation[i] * (p.filter[i] - 1) - p.pad[i];
  }
  for (int i = 0; i < 5; ++i) {
    q->x_stride[i] = p.y_stride[i];
    q->y_stride[i] = p.x_stride[i];
  }
  // w' is packed KRSC with dims (C, K/groups, T, R, S); the flip is baked into it.
  const int64_t kg = p.kg();
  q->w_stride[1] = 1;
  q->w_stride[4] = kg;
  q->w_stride[3] = p.filter[2] * kg;
  q->w_stride[2] = p.filter[1] * p.filter[2] * kg;
  q->w_stride[0] = p.FilterTaps() * kg;
  q->filter_format = TensorFormat::kNHWC;
  q->mode = ConvolutionMode::kCrossCorrelation;
  q->x_span = p.y_span;
  q->y_span = p.x_span;
  q->w_count = p.w_count;
  return true;
}

// Backward filter as a forward convolution over transposed copies: the images are x's channels
// (n' = C), their channels are the batch (c' = N, padded to a 16-byte multiple), the filters are
// dy's channels (k' = K) with dy's pixels as taps (R' x S' = P x Q), and the output pixels are
// the filter taps (P' x Q' = R x S). Tap (p, q) at output (r, s) reads x at p * stride + r *
// dilation - pad, so stride and dilation trade places. x' = x as [C][H][W][N'], w' = dy as
// [K][P][Q][N'] (both in the workspace), y' = dw through its own strides (reversed spatially for
// true convolution). Serves ungrouped 2-d problems.
bool BackwardFilterAsForward(const ConvProblem& p, ConvProblem* q) {
  if (p.groups != 1 || p.in[0] != 1 || p.filter[0] != 1 || p.out[0] != 1) return false;
  const int64_t width = VectorWidth(p.dtype);
  const int64_t batch = (p.n + width - 1) / width * width;
  *q = p;
  q->n = p.c;
  q->c = batch;
  q->k = p.k;
  q->in[1] = p.in[1];
  q->in[2] = p.in[2];
  q->out[1] = p.filter[1];
  q->out[2] = p.filter[2];
  q->filter[1] = p.out[1];
  q->filter[2] = p.out[2];
  for (int i = 1; i < 3; ++i) {
    q->stride[i] = p.dilation[i];
    q->dilation[i] = p.stride[i];
  }
  const int64_t h = p.in[1], w = p.in[2], oh = p.out[1], ow = p.out[2];
  const int64_t x_strides[5] = {h * w * batch, 1, 0, w * batch, batch};
  const int64_t w_strides[5] = {oh * ow * batch, 1, 0, ow * batch, batch};
  for (int i = 0; i < 5; ++i) {
    q->x_stride[i] = x_strides[i];
    q->w_stride[i] = w_strides[i];
  }
  q->filter_format = TensorFormat::kNHWC;
  q->mode = ConvolutionMode::kCrossCorrelation;
  const bool flip = p.mode == ConvolutionMode::kConvolution;
  q->y_stride[0] = p.w_stride[1];
  q->y_stride[1] = p.w_stride[0];
  q->y_stride[2] = 0;
  q->y_stride[3] = flip ? -p.w_stride[3] : p.w_stride[3];
  q->y_stride[4] = flip ? -p.w_stride[4] : p.w_stride[4];
  q->x_span = p.c * h * w * batch;
  q->w_count = p.k * oh * ow * batch;
  q->y_span = p.w_count;
  return true;
}

// Backward filter of an ungrouped, unpadded, unit-stride 1x1 problem whose x and dy hold each
// (image, channel)'s pixels as one contiguous run (NCHW) as a forward convolution straight on x
// and dy, no copies: the images are x's channels (n' = C, one output pixel each), the channels
// are the pixels (c' = H W, contiguous), and the batch is a column of taps (R' = N, stepping by
// the image strides). False when the layout does not allow it or the pixel run is not a 16-byte
// multiple.
bool BackwardFilter1x1AsForward(const ConvProblem& p, ConvProblem* q) {
  if (p.groups != 1 || p.in[0] != 1 || p.FilterTaps() != 1) return false;
  for (int i = 1; i < 3; ++i) {
    if (p.stride[i] != 1 || p.pad[i] != 0) return false;
  }
  const int64_t hw = p.in[1] * p.in[2], width = VectorWidth(p.dtype);
  auto contiguous_pixels = [&](const int64_t* strides) {
    return strides[4] == 1 && (p.in[1] == 1 || strides[3] == p.in[2]) && hw % width == 0 &&
           strides[0] % width == 0 && strides[1] % width == 0;
  };
  if (!contiguous_pixels(p.x_stride) || !contiguous_pixels(p.y_stride)) return false;
  *q = p;
  q->n = p.c;
  q->c = hw;
  q->k = p.k;
  const int64_t in[3] = {1, p.n, 1}, one[3] = {1, 1, 1}, zero[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    q->in[i] = in[i];
    q->filter[i] = in[i];
    q->out[i] = one[i];
    q->stride[i] = one[i];
    q->dilation[i] = one[i];
    q->pad[i] = zero[i];
  }
  const int64_t xs[5] = {p.x_stride[1], 1, 0, p.x_stride[0], 0};
  const int64_t ws[5] = {p.y_stride[1], 1, 0, p.y_stride[0], 0};
  const int64_t ys[5] = {p.w_stride[1], p.w_stride[0], 0, 0, 0};
  for (int i = 0; i < 5; ++i) {
    q->x_stride[i] = xs[i];
    q->w_stride[i] = ws[i];
    q->y_stride[i] = ys[i];
  }
  q->filter_format = TensorFormat::kNHWC;
  q->mode = ConvolutionMode::kCrossCorrelation;
  q->x_span = p.x_span;
  q->w_count = p.y_span;
  q->y_span = p.w_count;
  return true;
}

// Where dw's element (c, k, r = 0, s = 0) of the forward view above lies: reversed taps start at
// the last one.
int64_t BackwardFilterOutputOrigin(const ConvProblem& p) {
  if (p.mode != ConvolutionMode::kConvolution) return 0;
  return (p.filter[1] - 1) * p.w_stride[3] + (p.filter[2] - 1) * p.w_stride[4];
}

// The transposed copies' bytes: x' then dy'.
size_t BackwardFilterCopyBytes(const ConvProblem& q) {
  return Align256(static_cast<size_t>(q.x_span * ElementBytes(q.dtype))) +
         Align256(static_cast<size_t>(q.w_count * ElementBytes(q.dtype)));
}

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
};
struct SubPixelPlan {
  std::vector<SubPixelPhase> phases;
  int64_t padded_k = 0;
  size_t precomp_offset = 0, bytes = 0;  // the dy copy is at 0, then the filters
};

bool PlanSubPixel(const ConvProblem& p, int multiprocessors, SubPixelPlan* plan) {
  if (p.groups != 1 || p.in[0] != 1 || p.filter[0] != 1 || p.out[0] != 1) return false;
  if (p.mode != ConvolutionMode::kCrossCorrelation) return false;
  if (p.stride[1] == 1 && p.stride[2] == 1) return false;
  for (int i = 1; i < 3; ++i) {
    if (p.dilation[i] != 1 || p.stride[i] > p.filter[i]) return false;
  }
  const int64_t width = VectorWidth(p.dtype), e = ElementBytes(p.dtype);
  plan->padded_k = (p.k + width - 1) / width * width;
  const int64_t kp = plan->padded_k;
  size_t bytes = Align256(static_cast<size_t>(p.n * p.out[1] * p.out[2] * kp * e));
  size_t precomp = 0;
  plan->phases.clear();
  for (int64_t ph = 0; ph < p.stride[1] && ph < p.in[1]; ++ph) {
    for (int64_t pw = 0; pw < p.stride[2] && pw < p.in[2]; ++pw) {
      SubPixelPhase phase;
      const int64_t sh = p.stride[1], sw = p.stride[2];
      phase.r0 = (ph + p.pad[1]) % sh;
      phase.s0 = (pw + p.pad[2]) % sw;
      const int64_t taps_h = (p.filter[1] - phase.r0 + sh - 1) / sh;
      const int64_t taps_w = (p.filter[2] - phase.s0 + sw - 1) / sw;
      // Output row i (row i sh + ph of dx) meets dy row i + off_h - t at tap t.
      const int64_t off_h = (ph + p.pad[1] - phase.r0) / sh;
      const int64_t off_w = (pw + p.pad[2] - phase.s0) / sw;
      ConvProblem& q = phase.q;
      q = p;
      q.n = p.n;
      q.c = kp;
      q.k = p.c;
      q.in[1] = p.out[1];
      q.in[2] = p.out[2];
      q.out[1] = (p.in[1] - ph + sh - 1) / sh;
      q.out[2] = (p.in[2] - pw + sw - 1) / sw;
      q.filter[1] = taps_h;
      q.filter[2] = taps_w;
      q.pad[1] = taps_h - 1 - off_h;
      q.pad[2] = taps_w - 1 - off_w;
      for (int i = 0; i < 3; ++i) {
        q.stride[i] = 1;
        q.dilation[i] = 1;
      }
      const int64_t xs[5] = {p.out[1] * p.out[2] * kp, 1, 0, p.out[2] * kp, kp};
      const int64_t ws[5] = {taps_h * taps_w * kp, 1, 0, taps_w * kp, kp};
      const int64_t ys[5] = {p.x_stride[0], p.x_stride[1], 0, sh * p.x_stride[3],
                             sw * p.x_stride[4]};
      for (int i = 0; i < 5; ++i) {
        q.x_stride[i] = xs[i];
        q.w_stride[i] = ws[i];
        q.y_stride[i] = ys[i];
      }
      q.filter_format = TensorFormat::kNHWC;
      q.x_span = p.n * p.out[1] * p.out[2] * kp;
      q.w_count = p.c * taps_h * taps_w * kp;
      q.y_span = p.x_span;
      phase.y_offset = ph * p.x_stride[3] + pw * p.x_stride[4];
      phase.filter_offset = bytes;
      bytes += Align256(static_cast<size_t>(q.w_count * e));
      precomp = std::max(precomp, PlanPrecomp(q, multiprocessors).bytes);
      plan->phases.push_back(phase);
    }
  }
  plan->precomp_offset = bytes;
  plan->bytes = bytes + precomp;
  return true;
}

size_t BackwardDataFilterBytes(const ConvProblem& p) {
  return Align256(static_cast<size_t>(p.w_count * ElementBytes(p.dtype)));
}

// Rows of a chunk so that `row_bytes` x rows stays within kGemmChunkBytes (and cuBLAS's int).
int64_t ChunkRows(int64_t total, int64_t row_bytes, int64_t row_elems) {
  int64_t rows = std::max<int64_t>(1, kGemmChunkBytes / std::max<int64_t>(1, row_bytes));
  rows = std::min<int64_t>(rows, (int64_t{1} << 31) / std::max<int64_t>(1, row_elems) - 1);
  return std::max<int64_t>(1, std::min(rows, total));
}

// Forward GEMM: rows of output pixels per chunk.
struct GemmPlan {
  int64_t chunk = 0;  // rows (forward), images (backward data) or pixels (backward filter)
  size_t bytes = 0;
};

GemmPlan PlanGemm(ConvDirection direction, const ConvProblem& p) {
  const int64_t e = ElementBytes(p.dtype), g = p.groups;
  const int64_t ctaps = p.cg() * p.FilterTaps();
  GemmPlan plan;
  switch (direction) {
    case ConvDirection::kForward: {
      plan.chunk = ChunkRows(p.OutputPixels(), g * (ctaps * e + p.kg() * 4), ctaps);
      plan.bytes = Align256(g * p.kg() * ctaps * e) + Align256(g * plan.chunk * ctaps * e) +
                   Align256(g * plan.chunk * p.kg() * 4);
      break;
    }
    case ConvDirection::kBackwardData: {
      const int64_t opq = p.out[0] * p.out[1] * p.out[2];
      plan.chunk = std::max<int64_t>(
          1, ChunkRows(p.OutputPixels(), g * (p.kg() * e + ctaps * 4), ctaps) / opq);
      plan.chunk = std::min(plan.chunk, p.n);
      const int64_t rows = plan.chunk * opq;
      plan.bytes = Align256(g * ctaps * p.kg() * e) + Align256(g * rows * p.kg() * e) +
                   Align256(g * rows * ctaps * 4);
      break;
    }
    case ConvDirection::kBackwardFilter: {
      plan.chunk = ChunkRows(p.OutputPixels(), g * (p.kg() + ctaps) * e, p.kg() + ctaps);
      plan.bytes = Align256(g * p.kg() * plan.chunk * e) + Align256(g * ctaps * plan.chunk * e) +
                   Align256(g * p.kg() * ctaps * 4);
      break;
    }
  }
  return plan;
}

// Split-K factor for backward filter: enough blocks for two waves, at least 8 k slices each.
int SplitsFor(const Handle& handle, const GemmView& v) {
  const int64_t tiles = ((v.m + 127) / 128) * ((v.n + 127) / 128) * v.groups;
  const int64_t k_tiles = (v.k + 31) / 32;
  int64_t splits = (2 * handle.multiprocessors() + tiles - 1) / tiles;
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, k_tiles / 8));
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, 65535 / v.groups));
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(splits, 64)));
}

bool Is1x1Packed(const ConvProblem& p, bool* nhwc) {
  if (p.FilterTaps() != 1 || p.groups != 1) return false;
  for (int i = 0; i < 3; ++i)
    if (p.stride[i] != 1 || p.pad[i] != 0) return false;
  const int64_t hw = p.in[0] * p.in[1] * p.in[2];
  const bool x_nchw = p.x_stride[1] == hw && p.x_stride[0] == p.c * hw && p.x_stride[4] == 1 &&
                      p.x_stride[3] == p.in[2];
  const bool y_nchw = p.y_stride[1] == hw && p.y_stride[0] == p.k * hw && p.y_stride[4] == 1 &&
                      p.y_stride[3] == p.in[2];
  const bool x_nhwc = p.x_stride[1] == 1 && p.x_stride[4] == p.c &&
                      p.x_stride[3] == p.in[2] * p.c && p.x_stride[0] == hw * p.c;
  const bool y_nhwc = p.y_stride[1] == 1 && p.y_stride[4] == p.k &&
                      p.y_stride[3] == p.in[2] * p.k && p.y_stride[0] == hw * p.k;
  // The filter is packed KCRS or KRSC; with 1x1 taps both are K x C row-major.
  if (x_nchw && y_nchw) {
    *nhwc = false;
    return true;
  }
  if (x_nhwc && y_nhwc) {
    *nhwc = true;
    return true;
  }
  return false;
}

cudaDataType_t CublasType(DataType t) {
  return t == DataType::kF16 ? CUDA_R_16F : (t == DataType::kBF16 ? CUDA_R_16BF : CUDA_R_32F);
}
cublasComputeType_t CublasCompute(const ConvProblem& p) {
  return p.dtype == DataType::kF32 && p.math == MathMode::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                : CUBLAS_COMPUTE_32F;
}

absl::Status CublasOk(cublasStatus_t s, absl::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: ", cublasGetStatusString(s)));
}

// D[g][r][c] = sum_k lhs[g][r][k] rhs[g][c][k] (+ D when accumulate), f32 D.
absl::Status BatchedGemm(Handle& h, const ConvProblem& p, int64_t rows, int64_t cols, int64_t k,
                         const void* lhs, const void* rhs, float* d, bool accumulate) {
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  return CublasOk(
      cublasGemmStridedBatchedEx(
          static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(cols),
          static_cast<int>(rows), static_cast<int>(k), &one, rhs, CublasType(p.dtype),
          static_cast<int>(k), cols * k, lhs, CublasType(p.dtype), static_cast<int>(k), rows * k,
          &beta, d, CUDA_R_32F, static_cast<int>(cols), rows * cols, static_cast<int>(p.groups),
          CublasCompute(p), CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

// A packed 1x1 problem's forward (out = x W^T per pixel, backward = false) or backward data
// (out = dy W, backward = true) on cuBLAS. W is K x C row-major, i.e. C x K column-major.
absl::Status Pixelwise1x1(Handle& h, const ConvProblem& p, bool backward, float alpha, float beta,
                          const void* in, const void* w, void* out) {
  bool nhwc = false;
  Is1x1Packed(p, &nhwc);
  const cudaDataType_t t = CublasType(p.dtype);
  auto cublas = static_cast<cublasHandle_t>(h.cublas());
  const int64_t hw = p.in[0] * p.in[1] * p.in[2];
  const int64_t cin = backward ? p.k : p.c, cout = backward ? p.c : p.k;
  const char* what = backward ? "1x1 backward data" : "1x1 forward";
  if (nhwc) {
    // out^T (Cout x NHW, column-major) = W or W^T (Cout x Cin) in^T (Cin x NHW).
    return CublasOk(
        cublasGemmEx(cublas, backward ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N,
                     static_cast<int>(cout), static_cast<int>(p.n * hw), static_cast<int>(cin),
                     &alpha, w, t, static_cast<int>(p.c), in, t, static_cast<int>(cin), &beta, out,
                     t, static_cast<int>(cout), CublasCompute(p), CUBLAS_GEMM_DEFAULT),
        absl::StrCat("cublasGemmEx (", what, ", NHWC)"));
  }
  // Per image: out[n] (HW x Cout, column-major) = in[n] (HW x Cin) W^T or W (Cin x Cout).
  return CublasOk(
      cublasGemmStridedBatchedEx(
          cublas, CUBLAS_OP_N, backward ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(hw),
          static_cast<int>(cout), static_cast<int>(cin), &alpha, in, t, static_cast<int>(hw),
          cin * hw, w, t, static_cast<int>(p.c), 0, &beta, out, t, static_cast<int>(hw), cout * hw,
          static_cast<int>(p.n), CublasCompute(p), CUBLAS_GEMM_DEFAULT),
      absl::StrCat("cublasGemmStridedBatchedEx (", what, ", NCHW)"));
}

// Backward filter of a packed NHWC 1x1 problem on cuBLAS: one product over all pixels.
absl::Status BackwardFilter1x1(Handle& h, const ConvProblem& p, float alpha, float beta,
                               const void* x, const void* dy, void* dw) {
  const cudaDataType_t t = CublasType(p.dtype);
  const int64_t pixels = p.n * p.in[0] * p.in[1] * p.in[2];
  // dw^T (C x K, column-major) = x^T (C x NHW) dy (NHW x K).
  return CublasOk(
      cublasGemmEx(static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_N, CUBLAS_OP_T,
                   static_cast<int>(p.c), static_cast<int>(p.k), static_cast<int>(pixels), &alpha,
                   x, t, static_cast<int>(p.c), dy, t, static_cast<int>(p.k), &beta, dw, t,
                   static_cast<int>(p.c), CublasCompute(p), CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx (1x1 NHWC backward filter)");
}

absl::Status ForwardPrecomp(Handle& h, const ConvProblem& p, float alpha, float beta, const void* x,
                            const void* w, void* y, char* ws) {
  const PrecompPlan plan = PlanPrecomp(p, h.multiprocessors());
  const ElementType e = ElementOf(p.dtype);
  const void* xk = x;
  const void* wk = w;
  if (plan.copy) {
    const int64_t xdims[5] = {p.n, p.c, p.in[0], p.in[1], p.in[2]};
    KILN_RETURN_IF_ERROR(Launched(cuda::LaunchToChannelsLast(e, xdims, p.x_stride, x, plan.padded_c,
                                                             ws + plan.x_offset, h.stream()),
                                  "channels-last copy of x"));
    xk = ws + plan.x_offset;
    if (plan.copy_w) {
      const int64_t wdims[5] = {p.k, p.cg(), p.filter[0], p.filter[1], p.filter[2]};
      KILN_RETURN_IF_ERROR(
          Launched(cuda::LaunchToChannelsLast(e, wdims, p.w_stride, w, plan.problem.cg(),
                                              ws + plan.w_offset, h.stream()),
                   "channels-last copy of w"));
      wk = ws + plan.w_offset;
    }
  }
  if (plan.wgmma && Aligned16(xk) && Aligned16(wk)) {
    cuda::ConvWgmmaLaunch l;
    l.problem = plan.problem;
    l.x = xk;
    l.w = wk;
    l.y = y;
    l.alpha = alpha;
    l.beta = beta;
    l.splits = plan.wgmma_splits;
    l.partial = reinterpret_cast<float*>(ws + plan.partial_offset);
    return Launched(cuda::LaunchConvWgmma(l, h.stream()), "implicit precomp GEMM (wgmma)");
  }
  const GemmView view = ForwardGemmView(plan.problem, plan.copy || p.XChannelsLast());
  auto* a_table = reinterpret_cast<IndexInfo*>(ws + plan.a_table_offset);
  auto* b_table = reinterpret_cast<IndexInfo*>(ws + plan.b_table_offset);
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchDecodeTable(view.a.inner, view.k, a_table, h.stream()), "k table"));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchDecodeTable(view.b.inner, view.k, b_table, h.stream()), "k table"));
  ConvGemmLaunch l = GemmLaunch(plan.problem, view, xk, wk, y, alpha, beta);
  l.a_table = a_table;
  l.b_table = b_table;
  l.splits = plan.splits;
  l.partial = reinterpret_cast<float*>(ws + plan.partial_offset);
  return Launched(cuda::LaunchConvGemm(l, h.stream()), "implicit precomp GEMM");
}

absl::Status BackwardDataSubPixel(Handle& h, const ConvProblem& p, float alpha, float beta,
                                  const void* dy, const void* w, void* dx, char* ws) {
  SubPixelPlan plan;
  PlanSubPixel(p, h.multiprocessors(), &plan);
  const ElementType e = ElementOf(p.dtype);
  const int64_t ydims[5] = {p.n, p.k, 1, p.out[1], p.out[2]};
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchToChannelsLast(e, ydims, p.y_stride, dy, plan.padded_k, ws, h.stream()),
               "channels-last copy of dy"));
  char* out = static_cast<char*>(dx);
  for (const SubPixelPhase& phase : plan.phases) {
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchSubPixelFilter(p, e, w, phase.r0, phase.s0, phase.q.filter[1],
                                            phase.q.filter[2], plan.padded_k,
                                            ws + phase.filter_offset, h.stream()),
                 "sub-pixel filter"));
    KILN_RETURN_IF_ERROR(ForwardPrecomp(h, phase.q, alpha, beta, ws, ws + phase.filter_offset,
                                        out + phase.y_offset * ElementBytes(p.dtype),
                                        ws + plan.precomp_offset));
  }
  return absl::OkStatus();
}

// Writes the filter of backward data's forward view (BackwardDataAsForward) at ws: w transposed
// per group and, for cross-correlation, reversed.
absl::Status WriteBackwardDataFilter(Handle& h, const ConvProblem& p, const void* w, char* ws) {
  return Launched(
      cuda::LaunchBackwardDataFilter(p, ElementOf(p.dtype), w,
                                     p.mode == ConvolutionMode::kCrossCorrelation, ws, h.stream()),
      "backward-data filter");
}

absl::Status BackwardDataPrecomp(Handle& h, const ConvProblem& p, float alpha, float beta,
                                 const void* dy, const void* w, void* dx, char* ws) {
  ConvProblem q;
  if (!BackwardDataAsForward(p, &q)) return BackwardDataSubPixel(h, p, alpha, beta, dy, w, dx, ws);
  KILN_RETURN_IF_ERROR(WriteBackwardDataFilter(h, p, w, ws));
  return ForwardPrecomp(h, q, alpha, beta, dy, ws, dx, ws + BackwardDataFilterBytes(p));
}

absl::Status BackwardFilterPrecomp(Handle& h, const ConvProblem& p, float alpha, float beta,
                                   const void* x, const void* dy, void* dw, char* ws) {
  ConvProblem q;
  if (BackwardFilter1x1AsForward(p, &q)) return ForwardPrecomp(h, q, alpha, beta, x, dy, dw, ws);
  BackwardFilterAsForward(p, &q);
  const ElementType e = ElementOf(p.dtype);
  char* xt = ws;
  char* dyt = ws + Align256(static_cast<size_t>(q.x_span * ElementBytes(p.dtype)));
  // x (N, C, 1, H, W) read as (C, N, 1, H, W): channels-last with the batch innermost.
  const int64_t xdims[5] = {p.c, p.n, 1, p.in[1], p.in[2]};
  const int64_t xstrides[5] = {p.x_stride[1], p.x_stride[0], 0, p.x_stride[3], p.x_stride[4]};
  KILN_RETURN_IF_ERROR(Launched(
      cuda::LaunchToChannelsLast(e, xdims, xstrides, x, q.c, xt, h.stream()), "transpose of x"));
  const int64_t ydims[5] = {p.k, p.n, 1, p.out[1], p.out[2]};
  const int64_t ystrides[5] = {p.y_stride[1], p.y_stride[0], 0, p.y_stride[3], p.y_stride[4]};
  KILN_RETURN_IF_ERROR(Launched(
      cuda::LaunchToChannelsLast(e, ydims, ystrides, dy, q.c, dyt, h.stream()), "transpose of dy"));
  char* out = static_cast<char*>(dw) + BackwardFilterOutputOrigin(p) * ElementBytes(p.dtype);
  return ForwardPrecomp(h, q, alpha, beta, xt, dyt, out, ws + BackwardFilterCopyBytes(q));
}

// Transform points of Winograd F(2x2, RxR): (R + 1)^2.
int64_t WinogradPoints(const ConvProblem& p) { return (p.filter[1] + 1) * (p.filter[1] + 1); }

// Winograd F(2x2, 3x3) and F(2x2, 5x5) serve f32 square 3x3 or 5x5, unit-stride, unit-dilation,
// ungrouped 2-d problems whose transformed planes index in 32 bits.
bool WinogradServes(const ConvProblem& p) {
  if (p.dtype != DataType::kF32 || p.groups != 1) return false;
  if (p.in[0] != 1 || p.filter[0] != 1 || p.out[0] != 1) return false;
  if ((p.filter[1] != 3 && p.filter[1] != 5) || p.filter[2] != p.filter[1]) return false;
  for (int i = 1; i < 3; ++i) {
    if (p.stride[i] != 1 || p.dilation[i] != 1) return false;
  }
  const int64_t tiles = p.n * ((p.out[1] + 1) / 2) * ((p.out[2] + 1) / 2);
  // Chunking pads the tiles by fewer than 16 x 256; backward filter keeps up to 16 partial sums.
  const int64_t limit = int64_t{1} << 31, padded = tiles + 16 * 256;
  return p.c * padded < limit && p.k * padded < limit && 16 * p.k * p.c < limit;
}

// How many chunks backward filter cuts the tiles into: enough batched products (one per point and
// chunk) for about
// two blocks per SM (counting one 128 x 128 output tile a block), each chunk at least 256 tiles.
// Forward and backward data take the tiles whole.
int64_t WinogradChunks(ConvDirection direction, const ConvProblem& p, int multiprocessors) {
  if (direction != ConvDirection::kBackwardFilter) return 1;
  const int64_t tiles = p.n * ((p.out[1] + 1) / 2) * ((p.out[2] + 1) / 2);
  const int64_t blocks = WinogradPoints(p) * ((p.c + 127) / 128) * ((p.k + 127) / 128);
  int64_t chunks = (2 * multiprocessors + blocks - 1) / blocks;
  chunks = std::min<int64_t>(chunks, std::max<int64_t>(1, tiles / 256));
  return std::max<int64_t>(1, std::min<int64_t>(chunks, 16));
}

// Tiles per chunk.
int64_t WinogradChunkTiles(const ConvProblem& p, int64_t chunks) {
  const int64_t tiles = p.n * ((p.out[1] + 1) / 2) * ((p.out[2] + 1) / 2);
  return (tiles + chunks - 1) / chunks;
}

// The transformed input V (points x chunks x C x chunk tiles), filter U (points x chunks x K x C;
// chunks partial sums in backward filter) and products M / dy transform G (points x chunks x K x
// chunk).
size_t WinogradBytes(const ConvProblem& p, int64_t chunks) {
  const int64_t padded = chunks * WinogradChunkTiles(p, chunks);
  const int64_t points = WinogradPoints(p);
  return Align256(static_cast<size_t>(points * p.c * padded * 4)) +
         Align256(static_cast<size_t>(points * chunks * p.k * p.c * 4)) +
         Align256(static_cast<size_t>(points * p.k * padded * 4));
}

// TF32 products only for F(2x2, 3x3): F(2x2, 5x5)'s transforms reach 5 and 1/24, and TF32's
// 10-bit rounding of the transformed operands then loses too much over long reductions (backward
// filter over 140-wide images: errors of 3 %), so its products stay FFMA in every math mode.
cublasComputeType_t WinogradCompute(const ConvProblem& p) {
  return p.filter[1] == 3 ? CublasCompute(p) : CUBLAS_COMPUTE_32F;
}

absl::Status ForwardWinograd(Handle& h, const ConvProblem& p, float alpha, float beta,
                             const void* x, const void* w, void* y, char* ws) {
  const int tiles_h = static_cast<int>((p.out[1] + 1) / 2);
  const int tiles_w = static_cast<int>((p.out[2] + 1) / 2);
  const int64_t tiles = p.n * tiles_h * tiles_w;
  float* v = reinterpret_cast<float*>(ws);
  const int64_t points = WinogradPoints(p);
  float* u = reinterpret_cast<float*>(ws + Align256(static_cast<size_t>(points * p.c * tiles * 4)));
  float* m = reinterpret_cast<float*>(reinterpret_cast<char*>(u) +
                                      Align256(static_cast<size_t>(points * p.k * p.c * 4)));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchWinogradInput(p, static_cast<const float*>(x), tiles_h, tiles_w,
                                         static_cast<int>(tiles), v, h.stream()),
               "Winograd input transform"));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchWinogradFilter(p, static_cast<const float*>(w),
                                          p.mode == ConvolutionMode::kConvolution, u, h.stream()),
               "Winograd filter transform"));
  // Per transform point xi: M[xi] (tiles x K, column-major) = V[xi] (tiles x C) U[xi] (C x K).
  const float one = 1.0f, zero = 0.0f;
  KILN_RETURN_IF_ERROR(
      CublasOk(cublasGemmStridedBatchedEx(
                   static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_N, CUBLAS_OP_N,
                   static_cast<int>(tiles), static_cast<int>(p.k), static_cast<int>(p.c), &one, v,
                   CUDA_R_32F, static_cast<int>(tiles), p.c * tiles, u, CUDA_R_32F,
                   static_cast<int>(p.c), p.k * p.c, &zero, m, CUDA_R_32F, static_cast<int>(tiles),
                   p.k * tiles, static_cast<int>(points), WinogradCompute(p), CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (Winograd)"));
  return Launched(cuda::LaunchWinogradOutput(p, m, tiles_h, tiles_w, alpha, beta,
                                             static_cast<float*>(y), h.stream()),
                  "Winograd output transform");
}

absl::Status BackwardDataWinograd(Handle& h, const ConvProblem& p, float alpha, float beta,
                                  const void* dy, const void* w, void* dx, char* ws) {
  ConvProblem q;
  BackwardDataAsForward(p, &q);
  KILN_RETURN_IF_ERROR(WriteBackwardDataFilter(h, p, w, ws));
  return ForwardWinograd(h, q, alpha, beta, dy, ws, dx, ws + BackwardDataFilterBytes(p));
}

// Backward filter: V from x as in forward, G from dy, dU[xi] = G[xi] V[xi]^T over the tiles,
// dw = G^T dU G. The workspace holds V, dU (where forward keeps U) and G (where forward keeps M):
// the same three sizes.
absl::Status BackwardFilterWinograd(Handle& h, const ConvProblem& p, float alpha, float beta,
                                    const void* x, const void* dy, void* dw, char* ws) {
  const int tiles_h = static_cast<int>((p.out[1] + 1) / 2);
  const int tiles_w = static_cast<int>((p.out[2] + 1) / 2);
  const int64_t chunks = WinogradChunks(ConvDirection::kBackwardFilter, p, h.multiprocessors());
  const int64_t chunk = WinogradChunkTiles(p, chunks);
  const int64_t points = WinogradPoints(p);
  float* v = reinterpret_cast<float*>(ws);
  float* du = reinterpret_cast<float*>(
      ws + Align256(static_cast<size_t>(points * p.c * chunks * chunk * 4)));
  float* g = reinterpret_cast<float*>(
      reinterpret_cast<char*>(du) + Align256(static_cast<size_t>(points * chunks * p.k * p.c * 4)));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchWinogradInput(p, static_cast<const float*>(x), tiles_h, tiles_w,
                                         static_cast<int>(chunk), v, h.stream()),
               "Winograd input transform"));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchWinogradGradient(p, static_cast<const float*>(dy), tiles_h, tiles_w,
                                            static_cast<int>(chunk), g, h.stream()),
               "Winograd gradient transform"));
  // Per (xi, chunk s), batch xi chunks + s: dU[xi][s] (C x K, column-major) = V[xi][s]^T (C x
  // chunk) G[xi][s] (chunk x K).
  const float one = 1.0f, zero = 0.0f;
  KILN_RETURN_IF_ERROR(CublasOk(
      cublasGemmStridedBatchedEx(
          static_cast<cublasHandle_t>(h.cublas()), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(p.c),
          static_cast<int>(p.k), static_cast<int>(chunk), &one, v, CUDA_R_32F,
          static_cast<int>(chunk), p.c * chunk, g, CUDA_R_32F, static_cast<int>(chunk), p.k * chunk,
          &zero, du, CUDA_R_32F, static_cast<int>(p.c), p.k * p.c,
          static_cast<int>(points * chunks), WinogradCompute(p), CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx (Winograd backward filter)"));
  return Launched(cuda::LaunchWinogradFilterGradient(p, du, static_cast<int>(chunks),
                                                     p.mode == ConvolutionMode::kConvolution, alpha,
                                                     beta, static_cast<float*>(dw), h.stream()),
                  "Winograd filter-gradient transform");
}

absl::Status ForwardGemm(Handle& h, const ConvProblem& p, float alpha, float beta, const void* x,
                         const void* w, void* y, char* ws) {
  const GemmPlan plan = PlanGemm(ConvDirection::kForward, p);
  const GemmView v = ForwardGemmView(p, false);
  const ElementType e = ElementOf(p.dtype);
  const int64_t eb = ElementBytes(p.dtype), g = p.groups;
  char* w_mat = ws;
  char* a_mat = w_mat + Align256(g * v.n * v.k * eb);
  float* d = reinterpret_cast<float*>(a_mat + Align256(g * plan.chunk * v.k * eb));
  KILN_RETURN_IF_ERROR(Launched(
      cuda::LaunchMaterialize(v.b, e, w, g, true, 0, v.n, 0, v.k, w_mat, h.stream()), "filter"));
  for (int64_t m0 = 0; m0 < v.m; m0 += plan.chunk) {
    const int64_t rows = std::min(plan.chunk, v.m - m0);
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchMaterialize(v.a, e, x, g, true, m0, rows, 0, v.k, a_mat, h.stream()),
                 "im2col"));
    KILN_RETURN_IF_ERROR(BatchedGemm(h, p, rows, v.n, v.k, a_mat, w_mat, d, false));
    KILN_RETURN_IF_ERROR(Launched(
        cuda::LaunchScatter(v.c, e, d, g, m0, rows, v.n, alpha, beta, y, h.stream()), "scatter"));
  }
  return absl::OkStatus();
}

absl::Status BackwardDataGemm(Handle& h, const ConvProblem& p, float alpha, float beta,
                              const void* dy, const void* w, void* dx, char* ws) {
  const GemmPlan plan = PlanGemm(ConvDirection::kBackwardData, p);
  const GemmView fwd = ForwardGemmView(p, false);          // b: [k][c, taps]
  const GemmView filt = BackwardFilterGemmView(p, false);  // a: [k][output pixel]
  const ElementType e = ElementOf(p.dtype);
  const int64_t eb = ElementBytes(p.dtype), g = p.groups, kg = p.kg();
  const int64_t ctaps = fwd.k, opq = p.out[0] * p.out[1] * p.out[2];
  char* w_mat = ws;
  char* dy_mat = w_mat + Align256(g * ctaps * kg * eb);
  float* col = reinterpret_cast<float*>(dy_mat + Align256(g * plan.chunk * opq * kg * eb));
  KILN_RETURN_IF_ERROR(
      Launched(cuda::LaunchMaterialize(fwd.b, e, w, g, false, 0, ctaps, 0, kg, w_mat, h.stream()),
               "filter"));
  for (int64_t n0 = 0; n0 < p.n; n0 += plan.chunk) {
    const int64_t images = std::min(plan.chunk, p.n - n0), rows = images * opq;
    KILN_RETURN_IF_ERROR(Launched(
        cuda::LaunchMaterialize(filt.a, e, dy, g, false, n0 * opq, rows, 0, kg, dy_mat, h.stream()),
        "dy matrix"));
    KILN_RETURN_IF_ERROR(BatchedGemm(h, p, rows, ctaps, kg, dy_mat, w_mat, col, false));
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchCol2Im(p, col, n0, images, e, alpha, beta, dx, h.stream()), "col2im"));
  }
  return absl::OkStatus();
}

absl::Status BackwardFilterGemm(Handle& h, const ConvProblem& p, float alpha, float beta,
                                const void* x, const void* dy, void* dw, char* ws) {
  const GemmPlan plan = PlanGemm(ConvDirection::kBackwardFilter, p);
  const GemmView v = BackwardFilterGemmView(p, false);
  const ElementType e = ElementOf(p.dtype);
  const int64_t eb = ElementBytes(p.dtype), g = p.groups;
  char* a_mat = ws;
  char* b_mat = a_mat + Align256(g * v.m * plan.chunk * eb);
  float* d = reinterpret_cast<float*>(b_mat + Align256(g * v.n * plan.chunk * eb));
  for (int64_t k0 = 0; k0 < v.k; k0 += plan.chunk) {
    const int64_t cols = std::min(plan.chunk, v.k - k0);
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchMaterialize(v.a, e, dy, g, true, 0, v.m, k0, cols, a_mat, h.stream()),
                 "dy matrix"));
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchMaterialize(v.b, e, x, g, true, 0, v.n, k0, cols, b_mat, h.stream()),
                 "im2col"));
    KILN_RETURN_IF_ERROR(BatchedGemm(h, p, v.m, v.n, cols, a_mat, b_mat, d, k0 > 0));
  }
  return Launched(cuda::LaunchScatter(v.c, e, d, g, 0, v.m, v.n, alpha, beta, dw, h.stream()),
                  "scatter");
}

}  // namespace

absl::string_view ConvAlgoName(ConvAlgo algo) {
  switch (algo) {
    case ConvAlgo::kImplicitGemm:
      return "implicit_gemm";
    case ConvAlgo::kImplicitPrecompGemm:
      return "implicit_precomp_gemm";
    case ConvAlgo::kImplicitGemmSplitK:
      return "implicit_gemm_split_k";
    case ConvAlgo::kGemm:
      return "gemm";
    case ConvAlgo::kDirect:
      return "direct";
    case ConvAlgo::kGemm1x1:
      return "gemm_1x1";
    case ConvAlgo::kWinogradNonfused:
      return "winograd_nonfused";
    case ConvAlgo::kFft:
      return "fft";
  }
  return "unknown";
}

absl::StatusOr<ConvAlgo> ParseConvAlgo(absl::string_view name) {
  for (ConvAlgo a : kAllConvAlgos)
    if (ConvAlgoName(a) == name) return a;
  return absl::InvalidArgumentError(absl::StrCat("unknown convolution algorithm '", name, "'"));
}

absl::string_view ConvDirectionName(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::kForward:
      return "fwd";
    case ConvDirection::kBackwardData:
      return "bwd_data";
    case ConvDirection::kBackwardFilter:
      return "bwd_filter";
  }
  return "unknown";
}

absl::Status CheckConvAlgoSupported(ConvDirection direction, const ConvProblem& p, ConvAlgo algo) {
  auto no = [&](absl::string_view why) {
    return absl::UnimplementedError(absl::StrCat("convolution ", ConvDirectionName(direction),
                                                 ": algorithm ", ConvAlgoName(algo), " ", why));
  };
  const bool fwd = direction == ConvDirection::kForward;
  switch (algo) {
    case ConvAlgo::kImplicitGemm:
    case ConvAlgo::kGemm:
      return absl::OkStatus();
    case ConvAlgo::kImplicitPrecompGemm: {
      if (fwd) return absl::OkStatus();
      // A grouped backward filter runs group by group (see RunConvolution).
      if (direction == ConvDirection::kBackwardFilter && p.groups > 1) {
        return CheckConvAlgoSupported(direction, OneGroupOf(p), algo);
      }
      ConvProblem q;
      SubPixelPlan sub_pixel;
      if (direction == ConvDirection::kBackwardData &&
          (BackwardDataAsForward(p, &q) || PlanSubPixel(p, 1, &sub_pixel))) {
        return absl::OkStatus();
      }
      if (direction == ConvDirection::kBackwardFilter && BackwardFilterAsForward(p, &q)) {
        return absl::OkStatus();
      }
      return no(
          "serves forward, backward data with unit strides and pad <= dilation x (filter - 1) "
          "or ungrouped 2-d cross-correlation with unit dilation and stride <= filter, and "
          "ungrouped 2-d backward filter");
    }
    case ConvAlgo::kDirect:
      return fwd ? absl::OkStatus() : no("is forward-only");
    case ConvAlgo::kImplicitGemmSplitK:
      return direction == ConvDirection::kBackwardFilter ? absl::OkStatus()
                                                         : no("is backward-filter-only");
    case ConvAlgo::kWinogradNonfused: {
      const char* why = "serves f32 3x3 or 5x5 unit-stride, unit-dilation, ungrouped 2-d problems";
      ConvProblem q = p;
      if (direction == ConvDirection::kBackwardData && !BackwardDataAsForward(p, &q)) {
        return no(why);
      }
      return WinogradServes(q) ? absl::OkStatus() : no(why);
    }
    case ConvAlgo::kFft: {
      const absl::Status fft = FftSupport(direction, p);
      return fft.ok() ? fft : no(fft.message());
    }
    case ConvAlgo::kGemm1x1: {
      bool nhwc;
      if (!Is1x1Packed(p, &nhwc)) {
        return no(
            "needs a 1x1, stride-1, unpadded, ungrouped convolution of packed NCHW or NHWC "
            "tensors");
      }
      if (p.n * p.in[0] * p.in[1] * p.in[2] >= (int64_t{1} << 31)) {
        return no("needs fewer than 2^31 pixels");
      }
      if (direction == ConvDirection::kBackwardFilter && !nhwc) {
        return no("serves backward filter in NHWC only");
      }
      return absl::OkStatus();
    }
  }
  return no("is unknown");
}

absl::StatusOr<size_t> GetConvolutionWorkspaceSize(const Handle& handle, ConvDirection direction,
                                                   const ConvProblem& p, ConvAlgo algo) {
  KILN_RETURN_IF_ERROR(CheckConvAlgoSupported(direction, p, algo));
  switch (algo) {
    case ConvAlgo::kImplicitPrecompGemm: {
      if (direction == ConvDirection::kForward) {
        return PlanPrecomp(p, handle.multiprocessors()).bytes;
      }
      ConvProblem q;
      if (direction == ConvDirection::kBackwardFilter && p.groups > 1) {
        return GetConvolutionWorkspaceSize(handle, direction, OneGroupOf(p), algo);
      }
      if (direction == ConvDirection::kBackwardFilter) {
        if (BackwardFilter1x1AsForward(p, &q))
          return PlanPrecomp(q, handle.multiprocessors()).bytes;
        BackwardFilterAsForward(p, &q);
        return BackwardFilterCopyBytes(q) + PlanPrecomp(q, handle.multiprocessors()).bytes;
      }
      if (!BackwardDataAsForward(p, &q)) {
        SubPixelPlan plan;
        PlanSubPixel(p, handle.multiprocessors(), &plan);
        return plan.bytes;
      }
      return BackwardDataFilterBytes(p) + PlanPrecomp(q, handle.multiprocessors()).bytes;
    }
    case ConvAlgo::kGemm:
      return PlanGemm(direction, p).bytes;
    case ConvAlgo::kWinogradNonfused: {
      if (direction != ConvDirection::kBackwardData) {
        return WinogradBytes(p, WinogradChunks(direction, p, handle.multiprocessors()));
      }
      ConvProblem q;
      BackwardDataAsForward(p, &q);
      return BackwardDataFilterBytes(p) + WinogradBytes(q, 1);
    }
    case ConvAlgo::kFft:
      return FftWorkspaceBytes(handle, direction, p);
    case ConvAlgo::kImplicitGemmSplitK: {
      if (cuda::SmallChannelsServes(p)) {
        return static_cast<size_t>(
            cuda::SmallChannelsFilterGradientBytes(p, handle.multiprocessors()));
      }
      const GemmView v = BackwardFilterGemmView(p, false);
      return static_cast<size_t>(cuda::ConvGemmPartialBytes(v, SplitsFor(handle, v)));
    }
    default:
      return size_t{0};
  }
}

absl::Status RunConvolution(Handle& handle, ConvDirection direction, const ConvProblem& p,
                            ConvAlgo algo, float alpha, float beta, void* x, void* w, void* y,
                            void* workspace, size_t workspace_bytes) {
  const std::string where =
      absl::StrCat("convolution ", ConvDirectionName(direction), " (", ConvAlgoName(algo), ")");
  KILN_RETURN_IF_ERROR(CheckConvAlgoSupported(direction, p, algo));
  if (x == nullptr || w == nullptr || y == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": a tensor pointer is null"));
  }
  KILN_ASSIGN_OR_RETURN(const size_t needed,
                        GetConvolutionWorkspaceSize(handle, direction, p, algo));
  if (workspace_bytes < needed || (needed > 0 && workspace == nullptr)) {
    return absl::ResourceExhaustedError(absl::StrCat(where, " needs ", needed,
                                                     " bytes of workspace, given ",
                                                     workspace == nullptr ? 0 : workspace_bytes));
  }
  char* ws = static_cast<char*>(workspace);
  if (algo == ConvAlgo::kFft) {
    return Annotate(RunFft(handle, direction, p, alpha, beta, x, w, y, ws), where);
  }
  absl::Status status;
  switch (direction) {
    case ConvDirection::kForward:
      switch (algo) {
        case ConvAlgo::kImplicitGemm: {
          // A first layer's few input channels: the kernel made for them, no workspace.
          if (cuda::SmallChannelsServes(p)) {
            status = Launched(cuda::LaunchSmallChannelsForward(
                                  SmallChannelsLaunchOf(handle, p, alpha, beta, x, w, y, nullptr),
                                  handle.stream()),
                              "small-channel implicit GEMM");
            break;
          }
          // Channels-last x and w that the Hopper kernel can read as they are: no workspace
          // needed, so it serves this algorithm too (without split-K).
          if (WgmmaServes(p) && Aligned16(x) && Aligned16(w)) {
            cuda::ConvWgmmaLaunch l;
            l.problem = p;
            l.x = x;
            l.w = w;
            l.y = y;
            l.alpha = alpha;
            l.beta = beta;
            status = Launched(cuda::LaunchConvWgmma(l, handle.stream()), "implicit GEMM (wgmma)");
            break;
          }
          const GemmView v = ForwardGemmView(p, p.XChannelsLast());
          status = Launched(
              cuda::LaunchConvGemm(GemmLaunch(p, v, x, w, y, alpha, beta), handle.stream()),
              "implicit GEMM");
          break;
        }
        case ConvAlgo::kImplicitPrecompGemm:
          status = ForwardPrecomp(handle, p, alpha, beta, x, w, y, ws);
          break;
        case ConvAlgo::kGemm:
          status = ForwardGemm(handle, p, alpha, beta, x, w, y, ws);
          break;
        case ConvAlgo::kDirect:
          status = Launched(
              cuda::LaunchConvDirect(p, ElementOf(p.dtype), x, w, alpha, beta, y, handle.stream()),
              "direct convolution");
          break;
        case ConvAlgo::kGemm1x1:
          status = Pixelwise1x1(handle, p, /*backward=*/false, alpha, beta, x, w, y);
          break;
        case ConvAlgo::kWinogradNonfused:
          status = ForwardWinograd(handle, p, alpha, beta, x, w, y, ws);
          break;
        default:
          break;
      }
      break;
    case ConvDirection::kBackwardData:
      if (algo == ConvAlgo::kGemm1x1) {
        status = Pixelwise1x1(handle, p, /*backward=*/true, alpha, beta, y, w, x);
      } else if (algo == ConvAlgo::kWinogradNonfused) {
        status = BackwardDataWinograd(handle, p, alpha, beta, y, w, x, ws);
      } else if (algo == ConvAlgo::kImplicitPrecompGemm) {
        status = BackwardDataPrecomp(handle, p, alpha, beta, y, w, x, ws);
      } else if (algo == ConvAlgo::kImplicitGemm) {
        const GemmView v = BackwardDataGemmView(p, p.YChannelsLast());
        status =
            Launched(cuda::LaunchConvGemm(GemmLaunch(p, v, y, w, x, alpha, beta), handle.stream()),
                     "implicit GEMM");
      } else {
        status = BackwardDataGemm(handle, p, alpha, beta, y, w, x, ws);
      }
      break;
    case ConvDirection::kBackwardFilter:
      if (algo == ConvAlgo::kGemm) {
        status = BackwardFilterGemm(handle, p, alpha, beta, x, y, w, ws);
      } else if (algo == ConvAlgo::kGemm1x1) {
        status = BackwardFilter1x1(handle, p, alpha, beta, x, y, w);
      } else if (algo == ConvAlgo::kWinogradNonfused) {
        status = BackwardFilterWinograd(handle, p, alpha, beta, x, y, w, ws);
      } else if (algo == ConvAlgo::kImplicitPrecompGemm && p.groups > 1) {
        // Each group is an ungrouped backward filter on slices of x, dy and dw (the groups'
        // filters are disjoint), one after another on the stream, sharing the workspace.
        const ConvProblem q = OneGroupOf(p);
        const int64_t bytes = ElementBytes(p.dtype);
        for (int64_t g = 0; g < p.groups && status.ok(); ++g) {
          const GroupOffsets o = GroupOffsetsOf(p, g);
          status = BackwardFilterPrecomp(
              handle, q, alpha, beta, static_cast<char*>(x) + o.x * bytes,
              static_cast<char*>(y) + o.y * bytes, static_cast<char*>(w) + o.w * bytes, ws);
        }
      } else if (algo == ConvAlgo::kImplicitPrecompGemm) {
        status = BackwardFilterPrecomp(handle, p, alpha, beta, x, y, w, ws);
      } else if (algo == ConvAlgo::kImplicitGemmSplitK && cuda::SmallChannelsServes(p)) {
        cuda::SmallChannelsLaunch l = SmallChannelsLaunchOf(handle, p, alpha, beta, x, nullptr, y,
                                                            reinterpret_cast<float*>(ws));
        l.dw = w;
        status = Launched(cuda::LaunchSmallChannelsFilterGradient(l, handle.stream()),
                          "small-channel filter gradient");
      } else {
        const GemmView v = BackwardFilterGemmView(p, p.XChannelsLast());
        ConvGemmLaunch l = GemmLaunch(p, v, y, x, w, alpha, beta);
        if (algo == ConvAlgo::kImplicitGemmSplitK) {
          l.splits = SplitsFor(handle, BackwardFilterGemmView(p, false));
          l.partial = reinterpret_cast<float*>(ws);
        }
        status = Launched(cuda::LaunchConvGemm(l, handle.stream()), "implicit GEMM");
      }
      break;
  }
  return Annotate(status, where);
}

absl::Status ConvolutionForward(Handle& handle, float alpha, const TensorDescriptor& x_desc,
                                const void* x, const FilterDescriptor& w_desc, const void* w,
                                const ConvolutionDescriptor& conv, ConvAlgo algo, void* workspace,
                                size_t workspace_bytes, float beta, const TensorDescriptor& y_desc,
                                void* y) {
  KILN_ASSIGN_OR_RETURN(const ConvProblem p,
                        MakeConvProblem(x_desc, w_desc, conv, y_desc, "ConvolutionForward"));
  return RunConvolution(handle, ConvDirection::kForward, p, algo, alpha, beta, const_cast<void*>(x),
                        const_cast<void*>(w), y, workspace, workspace_bytes);
}

absl::Status ConvolutionBackwardData(Handle& handle, float alpha, const FilterDescriptor& w_desc,
                                     const void* w, const TensorDescriptor& dy_desc, const void* dy,
                                     const ConvolutionDescriptor& conv, ConvAlgo algo,
                                     void* workspace, size_t workspace_bytes, float beta,
                                     const TensorDescriptor& dx_desc, void* dx) {
  KILN_ASSIGN_OR_RETURN(const ConvProblem p,
                        MakeConvProblem(dx_desc, w_desc, conv, dy_desc, "ConvolutionBackwardData"));
  return RunConvolution(handle, ConvDirection::kBackwardData, p, algo, alpha, beta, dx,
                        const_cast<void*>(w), const_cast<void*>(dy), workspace, workspace_bytes);
}

absl::Status ConvolutionBackwardFilter(Handle& handle, float alpha, const TensorDescriptor& x_desc,
                                       const void* x, const TensorDescriptor& dy_desc,
                                       const void* dy, const ConvolutionDescriptor& conv,
                                       ConvAlgo algo, void* workspace, size_t workspace_bytes,
                                       float beta, const FilterDescriptor& dw_desc, void* dw) {
  KILN_ASSIGN_OR_RETURN(const ConvProblem p, MakeConvProblem(x_desc, dw_desc, conv, dy_desc,
                                                             "ConvolutionBackwardFilter"));
  return RunConvolution(handle, ConvDirection::kBackwardFilter, p, algo, alpha, beta,
                        const_cast<void*>(x), dw, const_cast<void*>(dy), workspace,
                        workspace_bytes);
}

absl::Status ConvolutionBackwardBias(Handle& handle, float alpha, const TensorDescriptor& dy_desc,
                                     const void* dy, float beta, const TensorDescriptor& db_desc,
                                     void* db) {
  KILN_RETURN_IF_ERROR(CheckBiasDescriptor(db_desc, dy_desc, "ConvolutionBackwardBias"));
  if (dy == nullptr || db == nullptr) {
    return absl::InvalidArgumentError("ConvolutionBackwardBias: a tensor pointer is null");
  }
  // A problem whose output is dy: a 1x1 convolution of dy's shape with itself.
  ConvProblem p;
  p.dtype = dy_desc.dtype;
  p.n = dy_desc.dims[0];
  p.k = p.c = dy_desc.dims[1];
  const int off = 5 - dy_desc.rank();
  p.y_stride[0] = dy_desc.strides[0];
  p.y_stride[1] = dy_desc.strides[1];
  for (int i = 0; i < 3; ++i) {
    const int j = 2 + i - off;
    p.out[i] = j >= 2 ? dy_desc.dims[j] : 1;
    p.y_stride[2 + i] = j >= 2 ? dy_desc.strides[j] : 0;
  }
  // db may be strided along K.
  if (db_desc.strides[1] != 1) {
    return absl::UnimplementedError("ConvolutionBackwardBias: db must have unit channel stride");
  }
  return Launched(cuda::LaunchBiasGrad(p, ElementOf(p.dtype), dy, alpha, beta, db, handle.stream()),
                  "bias gradient");
}

}  // namespace dnn
}  // namespace kiln
