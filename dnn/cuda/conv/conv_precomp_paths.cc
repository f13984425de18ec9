// IMPLICIT_PRECOMP_GEMM: forward on the implicit-GEMM kernels with precomputed k tables (the
// mma.sync kernel, or the Hopper wgmma kernel where it serves), optionally over channels-last
// copies and with split-K; backward data and backward filter rewritten as forward convolutions
// (transposed filter, sub-pixel phases, transposed copies of x and dy).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/status_macros.h"
#include "dnn/cuda/conv/conv_gemm_launch.h"
#include "dnn/cuda/conv/conv_paths.h"
#include "dnn/cuda/conv/conv_wgmma_launch.h"
#include "dnn/cuda/primitive_call.h"
#include "dnn/conv_gemm_views.h"

namespace kiln {
namespace dnn {
namespace conv_internal {

namespace {

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

}  // namespace

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

// The transposed copies' bytes: x' then dy'.
size_t BackwardFilterCopyBytes(const ConvProblem& q) {
  return Align256(static_cast<size_t>(q.x_span * ElementBytes(q.dtype))) +
         Align256(static_cast<size_t>(q.w_count * ElementBytes(q.dtype)));
}

bool PlanSubPixel(const ConvProblem& p, int multiprocessors, SubPixelPlan* plan) {
  if (p.groups != 1 || p.in[0] != 1 || p.filter[0] != 1 || p.out[0] != 1) return false;
  if (p.mode != ConvolutionMode::kCrossCorrelation) return false;
  if (p.stride[1] == 1 && p.stride[2] == 1) return false;
  for (int i = 1; i < 3; ++i) {
    if (p.dilation[i] != 1) return false;
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
      if (taps_h <= 0 || taps_w <= 0) {
        // A stride wider than the filter leaves this phase's pixels untouched by every tap.
        phase.empty = true;
        phase.q = p;
        phase.q.out[1] = (p.in[1] - ph + sh - 1) / sh;
        phase.q.out[2] = (p.in[2] - pw + sw - 1) / sw;
        phase.y_offset = ph * p.x_stride[3] + pw * p.x_stride[4];
        plan->phases.push_back(phase);
        continue;
      }
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
  plan->zero_offset = bytes;
  bytes += 256;
  plan->precomp_offset = bytes;
  plan->bytes = bytes + precomp;
  return true;
}

size_t BackwardDataFilterBytes(const ConvProblem& p) {
  return Align256(static_cast<size_t>(p.w_count * ElementBytes(p.dtype)));
}

absl::Status ForwardPrecomp(Handle& h, const ConvProblem& p, float alpha, float beta, const void* x,
                            const void* w, void* y, char* ws, const ConvEpilogue* epilogue,
                            bool* applied) {
  if (applied != nullptr) *applied = false;
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
    if (epilogue != nullptr) {
      l.bias = epilogue->bias;
      l.relu = epilogue->relu;
      l.relu_slope = epilogue->relu_slope;
      if (applied != nullptr) *applied = true;
    }
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

namespace {

// dx's pixels of an empty phase (every `stride`-th row and column from the phase's offset):
// beta times their old value, 0 when beta is 0 (read from a float 0 broadcast over them, so that
// the old values are not read).
absl::Status FillEmptyPhase(Handle& h, const ConvProblem& p, const SubPixelPhase& phase, float beta,
                            char* zero, char* first) {
  const int64_t dims[4] = {p.n, p.c, phase.q.out[1], phase.q.out[2]};
  if (dims[2] <= 0 || dims[3] <= 0) return absl::OkStatus();
  const int64_t strides[4] = {p.x_stride[0], p.x_stride[1], p.stride[1] * p.x_stride[3],
                              p.stride[2] * p.x_stride[4]};
  KILN_ASSIGN_OR_RETURN(TensorDescriptor view,
                        TensorDescriptor::Create(p.dtype, std::vector<int64_t>(dims, dims + 4),
                                                 std::vector<int64_t>(strides, strides + 4)));
  if (cudaMemsetAsync(zero, 0, sizeof(float), static_cast<cudaStream_t>(h.stream())) !=
      cudaSuccess) {
    return Launched(static_cast<int>(cudaGetLastError()), "zero for an empty sub-pixel phase");
  }
  cuda::ElementwiseCall c =
      internal::ElementwiseOver(cuda::ElementwiseOp::kCopy, view, first, 1.0f, beta);
  cuda::Operand zero_operand;  // every stride 0: the one float broadcast
  zero_operand.data = zero;
  zero_operand.type = cuda::Storage::kF32;
  internal::AddInput(c, zero_operand);
  return Launched(cuda::LaunchElementwise(c, h.stream()), "empty sub-pixel phase");
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
    if (phase.empty) {
      KILN_RETURN_IF_ERROR(FillEmptyPhase(h, p, phase, beta, ws + plan.zero_offset,
                                          out + phase.y_offset * ElementBytes(p.dtype)));
      continue;
    }
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

// Where dw's element (c, k, r = 0, s = 0) of the forward view above lies: reversed taps start at
// the last one.
int64_t BackwardFilterOutputOrigin(const ConvProblem& p) {
  if (p.mode != ConvolutionMode::kConvolution) return 0;
  return (p.filter[1] - 1) * p.w_stride[3] + (p.filter[2] - 1) * p.w_stride[4];
}

}  // namespace

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

}  // namespace conv_internal
}  // namespace dnn
}  // namespace kiln
