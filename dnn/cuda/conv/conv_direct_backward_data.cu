// Backward data as a direct gather (the DIRECT algorithm's backward-data path): dx[n, c, d, h, w]
// = alpha * the sum over the filters k of c's group and the taps (t, r, s) with
// d + pad - t dil = o stride (and so on for h and w) of dy[n, k, o, p, q] w[k, c, t, r, s],
// + beta dx. Made for strided deconvolutions with few channels (FCN's upsampling layers), where
// the GEMM formulations multiply mostly padding or split into one launch per phase.
//
// Two kernels:
// - By phase (2-d, unit dilation, a few filters per group): every dx pixel with the same
//   (h mod stride_h, w mod stride_w) is reached by the same taps, at dy pixels that move one for
//   one with it. A block takes one phase, 128 of its pixels and 8 channels of one image; the
//   phase's taps of the 8 channels' filters sit in shared memory, so each dy value read is used
//   for 8 products.
// - Any other problem: one thread per dx element, walking only the taps of its phase.
// Both sum in the same order (taps row-major, then k), in f32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "dnn/cuda/conv/conv_element_access.cuh"
#include "dnn/cuda/conv/conv_gemm_launch.h"

namespace kiln {
namespace cuda {

namespace {

using dnn::ConvProblem;

using conv_element::Blend;
using conv_element::Dispatch;
using conv_element::Load;
using conv_element::StoreValue;

int64_t Gcd(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// ------------------------------------------------------------------------------------------------
// By phase.

constexpr int kPhasePixels = 128;     // threads per block, one dx pixel each
constexpr int kPhaseChannels = 8;     // dx channels per thread
constexpr int kPhaseMaxTapsK = 1024;  // taps of a phase x filters of a group held in shared memory

// The problem in 32-bit terms, for the 2-d case (depth 1).
struct PhaseParams {
  int c, cg, kg, groups, h, w, p, q, r, s, pad_h, pad_w, stride_h, stride_w;
  int chunks_per_group;  // ceil(cg / kPhaseChannels)
  bool flip;
  int64_t xs_n, xs_c, xs_h, xs_w, ys_n, ys_k, ys_h, ys_w, ws_k, ws_c, ws_r, ws_s;
  float alpha, beta;
};

// grid: x = pixel tiles of the largest phase, y = phase (a * stride_w + b), z = image x group x
// channel chunk.
template <typename T>
__global__ void __launch_bounds__(kPhasePixels)
    PhaseGatherKernel(const PhaseParams p, const T* dy, const T* w, T* dx) {
  extern __shared__ float taps_smem[];  // [tap of the phase][k][kPhaseChannels]
  const int a = blockIdx.y / p.stride_w, b = blockIdx.y % p.stride_w;
  const int chunk = blockIdx.z % p.chunks_per_group;
  const int ng = blockIdx.z / p.chunks_per_group;
  const int g = ng % p.groups, n = ng / p.groups;
  const int c0 = chunk * kPhaseChannels;  // within the group
  // The phase's taps: r = r0, r0 + stride_h, ... (the one residue that reaches rows h = a mod
  // stride_h), each reading dy row i + (a + pad_h - r) / stride_h for dx row h = a + i stride_h.
  const int r0 = (a + p.pad_h) % p.stride_h, s0 = (b + p.pad_w) % p.stride_w;
  const int taps_h = r0 < p.r ? (p.r - r0 + p.stride_h - 1) / p.stride_h : 0;
  const int taps_w = s0 < p.s ? (p.s - s0 + p.stride_w - 1) / p.stride_w : 0;
  const int taps = taps_h * taps_w;

  // Stage the phase's filter taps for the block's channels, zero past the group's end.
  for (int e = threadIdx.x; e < taps * p.kg * kPhaseChannels; e += kPhasePixels) {
    const int cc = e % kPhaseChannels, k = (e / kPhaseChannels) % p.kg;
    const int tap = e / (kPhaseChannels * p.kg);
    const int r = r0 + (tap / taps_w) * p.stride_h, s = s0 + (tap % taps_w) * p.stride_w;
    const int fr = p.flip ? p.r - 1 - r : r, fs = p.flip ? p.s - 1 - s : s;
    float v = 0.0f;
    if (c0 + cc < p.cg) {
      v = Load(w + (static_cast<int64_t>(g) * p.kg + k) * p.ws_k + (c0 + cc) * p.ws_c +
               fr * p.ws_r + fs * p.ws_s);
    }
    taps_smem[e] = v;
  }
  __syncthreads();

  // This thread's dx pixel (a + i stride_h, b + j stride_w) of the phase.
  const int rows = a < p.h ? (p.h - a + p.stride_h - 1) / p.stride_h : 0;
  const int cols = b < p.w ? (p.w - b + p.stride_w - 1) / p.stride_w : 0;
  const int pixel = blockIdx.x * kPhasePixels + threadIdx.x;
  if (pixel >= rows * cols) return;
  const int i = pixel / cols, j = pixel % cols;
  float acc[kPhaseChannels];
#pragma unroll
  for (int cc = 0; cc < kPhaseChannels; ++cc) acc[cc] = 0.0f;
  const T* dyn = dy + n * p.ys_n + static_cast<int64_t>(g) * p.kg * p.ys_k;
  for (int tr = 0; tr < taps_h; ++tr) {
    const int op = i + (a + p.pad_h - r0 - tr * p.stride_h) / p.stride_h;
    if (op < 0 || op >= p.p) continue;
    for (int ts = 0; ts < taps_w; ++ts) {
      const int oq = j + (b + p.pad_w - s0 - ts * p.stride_w) / p.stride_w;
      if (oq < 0 || oq >= p.q) continue;
      const T* src = dyn + op * p.ys_h + oq * p.ys_w;
      const float4* wt =
          reinterpret_cast<const float4*>(taps_smem + (tr * taps_w + ts) * p.kg * kPhaseChannels);
      for (int k = 0; k < p.kg; ++k) {
        const float v = Load(src + k * p.ys_k);
        const float4 lo = wt[2 * k], hi = wt[2 * k + 1];
        acc[0] = fmaf(v, lo.x, acc[0]);
        acc[1] = fmaf(v, lo.y, acc[1]);
        acc[2] = fmaf(v, lo.z, acc[2]);
        acc[3] = fmaf(v, lo.w, acc[3]);
        acc[4] = fmaf(v, hi.x, acc[4]);
        acc[5] = fmaf(v, hi.y, acc[5]);
        acc[6] = fmaf(v, hi.z, acc[6]);
        acc[7] = fmaf(v, hi.w, acc[7]);
      }
    }
  }
  T* out = dx + n * p.xs_n + (a + i * p.stride_h) * p.xs_h + (b + j * p.stride_w) * p.xs_w +
           (static_cast<int64_t>(g) * p.cg + c0) * p.xs_c;
#pragma unroll
  for (int cc = 0; cc < kPhaseChannels; ++cc) {
    if (c0 + cc < p.cg) Blend(out + cc * p.xs_c, acc[cc], p.alpha, p.beta);
  }
}

// Whether the by-phase kernel takes `p`: 2-d, unit dilation, the phase's taps of a group's
// filters within kPhaseMaxTapsK, sizes and offsets within 32 bits, a grid within CUDA's limits.
bool PhaseGatherServes(const ConvProblem& p) {
  if (p.in[0] != 1 || p.out[0] != 1 || p.filter[0] != 1 || p.pad[0] != 0) return false;
  if (p.dilation[1] != 1 || p.dilation[2] != 1) return false;
  const int64_t taps_h = (p.filter[1] + p.stride[1] - 1) / p.stride[1];
  const int64_t taps_w = (p.filter[2] + p.stride[2] - 1) / p.stride[2];
  if (taps_h * taps_w * p.kg() > kPhaseMaxTapsK) return false;
  const int64_t limit = int64_t{1} << 30;
  for (int64_t v : {p.c, p.k, p.in[1], p.in[2], p.out[1], p.out[2], p.filter[1], p.filter[2],
                    p.pad[1], p.pad[2], p.stride[1], p.stride[2]}) {
    if (v >= limit) return false;
  }
  const int64_t chunks = (p.cg() + kPhaseChannels - 1) / kPhaseChannels;
  const int64_t largest_phase =
      ((p.in[1] + p.stride[1] - 1) / p.stride[1]) * ((p.in[2] + p.stride[2] - 1) / p.stride[2]);
  return p.n * p.groups * chunks <= 65535 && p.stride[1] * p.stride[2] <= 65535 &&
         (largest_phase + kPhasePixels - 1) / kPhasePixels < (int64_t{1} << 31);
}

template <typename T>
int LaunchPhaseGather(const ConvProblem& q, float alpha, float beta, const T* dy, const T* w, T* dx,
                      cudaStream_t stream) {
  PhaseParams p;
  p.c = static_cast<int>(q.c);
  p.cg = static_cast<int>(q.cg());
  p.kg = static_cast<int>(q.kg());
  p.groups = static_cast<int>(q.groups);
  p.h = static_cast<int>(q.in[1]);
  p.w = static_cast<int>(q.in[2]);
  p.p = static_cast<int>(q.out[1]);
  p.q = static_cast<int>(q.out[2]);
  p.r = static_cast<int>(q.filter[1]);
  p.s = static_cast<int>(q.filter[2]);
  p.pad_h = static_cast<int>(q.pad[1]);
  p.pad_w = static_cast<int>(q.pad[2]);
  p.stride_h = static_cast<int>(q.stride[1]);
  p.stride_w = static_cast<int>(q.stride[2]);
  p.chunks_per_group = (p.cg + kPhaseChannels - 1) / kPhaseChannels;
  p.flip = q.mode == dnn::ConvolutionMode::kConvolution;
  p.xs_n = q.x_stride[0];
  p.xs_c = q.x_stride[1];
  p.xs_h = q.x_stride[3];
  p.xs_w = q.x_stride[4];
  p.ys_n = q.y_stride[0];
  p.ys_k = q.y_stride[1];
  p.ys_h = q.y_stride[3];
  p.ys_w = q.y_stride[4];
  p.ws_k = q.w_stride[0];
  p.ws_c = q.w_stride[1];
  p.ws_r = q.w_stride[3];
  p.ws_s = q.w_stride[4];
  p.alpha = alpha;
  p.beta = beta;
  const int taps_h = (p.r + p.stride_h - 1) / p.stride_h;
  const int taps_w = (p.s + p.stride_w - 1) / p.stride_w;
  const size_t smem = sizeof(float) * taps_h * taps_w * p.kg * kPhaseChannels;
  const int64_t largest_phase = static_cast<int64_t>((p.h + p.stride_h - 1) / p.stride_h) *
                                ((p.w + p.stride_w - 1) / p.stride_w);
  const dim3 grid(static_cast<unsigned>((largest_phase + kPhasePixels - 1) / kPhasePixels),
                  static_cast<unsigned>(p.stride_h * p.stride_w),
                  static_cast<unsigned>(q.n * p.groups * p.chunks_per_group));
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(
        PhaseGatherKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return static_cast<int>(e);
  }
  PhaseGatherKernel<T><<<grid, kPhasePixels, smem, stream>>>(p, dy, w, dx);
  return static_cast<int>(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// Any problem: one thread per dx element.

struct TapSteps {
  int64_t step[3];  // stride / gcd(stride, dilation) per spatial dimension
};

// The first tap of one dimension that reaches coordinate x: x + pad - t dil is a multiple of the
// stride. Later ones follow every `step` taps; the phases repeat with that period, so only the
// first `step` taps need testing. Returns `filter` when none does.
__device__ __forceinline__ int64_t FirstTap(int64_t x, int64_t pad, int64_t dil, int64_t stride,
                                            int64_t step, int64_t filter) {
  if (dil == 1) {
    const int64_t t = (x + pad) % stride;  // x + pad >= 0
    return t < filter ? t : filter;
  }
  const int64_t limit = filter < step ? filter : step;
  for (int64_t t = 0; t < limit; ++t) {
    const int64_t z = x + pad - t * dil;
    if (((z % stride) + stride) % stride == 0) return t;
  }
  return filter;
}

template <typename T>
__global__ void ElementGatherKernel(ConvProblem p, TapSteps steps, const T* dy, const T* w,
                                    float alpha, float beta, T* dx, bool channels_fastest) {
  const int64_t cg = p.cg(), kg = p.kg();
  const bool flip = p.mode == dnn::ConvolutionMode::kConvolution;
  const int64_t total = p.n * p.c * p.in[0] * p.in[1] * p.in[2];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // dx's memory order, so that neighbouring threads store neighbouring elements.
    int64_t rest = i, c = 0, xw, xh, xd, n;
    if (channels_fastest) {
      c = rest % p.c;
      rest /= p.c;
    }
    xw = rest % p.in[2];
    rest /= p.in[2];
    xh = rest % p.in[1];
    rest /= p.in[1];
    xd = rest % p.in[0];
    rest /= p.in[0];
    if (!channels_fastest) {
      c = rest % p.c;
      rest /= p.c;
    }
    n = rest;
    const int64_t g = c / cg, cc = c % cg;
    const int64_t t0 =
        FirstTap(xd, p.pad[0], p.dilation[0], p.stride[0], steps.step[0], p.filter[0]);
    const int64_t r0 =
        FirstTap(xh, p.pad[1], p.dilation[1], p.stride[1], steps.step[1], p.filter[1]);
    const int64_t s0 =
        FirstTap(xw, p.pad[2], p.dilation[2], p.stride[2], steps.step[2], p.filter[2]);
    const T* dyn = dy + n * p.y_stride[0] + g * kg * p.y_stride[1];
    const T* wc = w + g * kg * p.w_stride[0] + cc * p.w_stride[1];
    float acc = 0.0f;
    // Along a dimension, z = x + pad - t dil falls as t grows: once below zero it stays there.
    for (int64_t t = t0; t < p.filter[0]; t += steps.step[0]) {
      const int64_t zd = xd + p.pad[0] - t * p.dilation[0];
      if (zd < 0) break;
      const int64_t o = zd / p.stride[0];
      if (o >= p.out[0]) continue;
      const int64_t ft = flip ? p.filter[0] - 1 - t : t;
      for (int64_t r = r0; r < p.filter[1]; r += steps.step[1]) {
        const int64_t zh = xh + p.pad[1] - r * p.dilation[1];
        if (zh < 0) break;
        const int64_t op = zh / p.stride[1];
        if (op >= p.out[1]) continue;
        const int64_t fr = flip ? p.filter[1] - 1 - r : r;
        for (int64_t s = s0; s < p.filter[2]; s += steps.step[2]) {
          const int64_t zw = xw + p.pad[2] - s * p.dilation[2];
          if (zw < 0) break;
          const int64_t oq = zw / p.stride[2];
          if (oq >= p.out[2]) continue;
          const int64_t fs = flip ? p.filter[2] - 1 - s : s;
          const T* src = dyn + o * p.y_stride[2] + op * p.y_stride[3] + oq * p.y_stride[4];
          const T* wt = wc + ft * p.w_stride[2] + fr * p.w_stride[3] + fs * p.w_stride[4];
          for (int64_t k = 0; k < kg; ++k) {
            acc = fmaf(Load(src), Load(wt), acc);
            src += p.y_stride[1];
            wt += p.w_stride[0];
          }
        }
      }
    }
    Blend(dx + n * p.x_stride[0] + c * p.x_stride[1] + xd * p.x_stride[2] + xh * p.x_stride[3] +
              xw * p.x_stride[4],
          acc, alpha, beta);
  }
}

}  // namespace

int LaunchConvDirectBackwardData(const ConvProblem& p, ElementType element, const void* dy,
                                 const void* w, float alpha, float beta, void* dx,
                                 void* stream_ptr) {
  const int64_t total = p.n * p.c * p.in[0] * p.in[1] * p.in[2];
  if (total == 0) return 0;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (PhaseGatherServes(p)) {
    return Dispatch(element, [&](auto zero) {
      using T = decltype(zero);
      return LaunchPhaseGather<T>(p, alpha, beta, static_cast<const T*>(dy),
                                  static_cast<const T*>(w), static_cast<T*>(dx), stream);
    });
  }
  TapSteps steps;
  for (int i = 0; i < 3; ++i) steps.step[i] = p.stride[i] / Gcd(p.stride[i], p.dilation[i]);
  const bool channels_fastest = p.x_stride[1] == 1 && p.c > 1;
  const int64_t blocks = (total + 255) / 256;
  const unsigned grid = static_cast<unsigned>(blocks < 132 * 64 ? blocks : 132 * 64);
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    ElementGatherKernel<T><<<grid, 256, 0, stream>>>(p, steps, static_cast<const T*>(dy),
                                                     static_cast<const T*>(w), alpha, beta,
                                                     static_cast<T*>(dx), channels_fastest);
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace cuda
}  // namespace kiln
