// Depthwise convolution on channels-last tensors (see conv_depthwise_launch.h for why these
// kernels exist). Every thread owns a vector of V adjacent channels (16 bytes where the channel
// count and the pointers allow it), consecutive threads take consecutive vectors, so the warp's
// accesses to one pixel are contiguous. The common shapes (3x3 and 5x5 at stride 1 or 2, unit
// dilation) are compiled with their taps known, which keeps the filter in registers and unrolls
// every loop; anything else runs the same kernels with the shape read at run time.
//
// - Forward: a thread computes kColumns neighbouring output columns of one row, walking the
//   input columns their windows share once (a 3x3 stride-1 pair reads 12 vectors, not 18).
// - Backward data: a thread gathers, for one dx pixel, the dy pixels whose windows hold it
//   (only the taps of the pixel's phase when strided).
// - Backward filter: a block takes a slice of the channels and a split of the N x P x Q pixels
//   for one filter row; its threads sum over pixels in registers, the block adds its threads in a
//   fixed order into its split's partial sums, and a second kernel adds the splits in order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "dnn/cuda/conv/conv_depthwise_launch.h"
#include "dnn/cuda/conv/conv_element_access.cuh"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

using dnn::ConvProblem;

constexpr int kThreads = 256;
constexpr int kColumns = 2;  // forward output columns per thread (fixed shapes)

// The problem in the kernels' terms (depth dropped: these are 2-d problems).
struct Geometry {
  int n, c, h, w, p, q, r, s;
  int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int cv;  // channel vectors: c / V
  int qt;  // forward: tiles of output columns per row
  bool flip;
  int64_t xs_n, xs_h, xs_w, ys_n, ys_h, ys_w, ws_k, ws_r, ws_s;
  float alpha, beta;
  OutputEpilogue epilogue;
};

Geometry GeometryOf(const ConvProblem& p, int vector, int columns, float alpha, float beta) {
  Geometry g;
  g.n = static_cast<int>(p.n);
  g.c = static_cast<int>(p.c);
  g.h = static_cast<int>(p.in[1]);
  g.w = static_cast<int>(p.in[2]);
  g.p = static_cast<int>(p.out[1]);
  g.q = static_cast<int>(p.out[2]);
  g.r = static_cast<int>(p.filter[1]);
  g.s = static_cast<int>(p.filter[2]);
  g.pad_h = static_cast<int>(p.pad[1]);
  g.pad_w = static_cast<int>(p.pad[2]);
  g.stride_h = static_cast<int>(p.stride[1]);
  g.stride_w = static_cast<int>(p.stride[2]);
  g.dil_h = static_cast<int>(p.dilation[1]);
  g.dil_w = static_cast<int>(p.dilation[2]);
  g.cv = g.c / vector;
  g.qt = (g.q + columns - 1) / columns;
  g.flip = p.mode == dnn::ConvolutionMode::kConvolution;
  g.xs_n = p.x_stride[0];
  g.xs_h = p.x_stride[3];
  g.xs_w = p.x_stride[4];
  g.ys_n = p.y_stride[0];
  g.ys_h = p.y_stride[3];
  g.ys_w = p.y_stride[4];
  g.ws_k = p.w_stride[0];
  g.ws_r = p.w_stride[3];
  g.ws_s = p.w_stride[4];
  g.alpha = alpha;
  g.beta = beta;
  return g;
}

// ------------------------------------------------------------------------------------------------
// Vectors of V channels as floats. 16-bit words are taken apart with shifts (reinterpreting the
// loaded vector would put it in local memory).

template <typename T>
__device__ __forceinline__ uint32_t Bits16(float v);
template <>
__device__ __forceinline__ uint32_t Bits16<__half>(float v) {
  return __half_as_ushort(__float2half_rn(v));
}
template <>
__device__ __forceinline__ uint32_t Bits16<__nv_bfloat16>(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

template <typename T, int V>
__device__ __forceinline__ void LoadVec(const T* p, float (&v)[V]) {
  if constexpr (V == 1) {
    v[0] = ToFloat(*p);
  } else if constexpr (std::is_same<T, float>::value) {
    if constexpr (V == 4) {
      const float4 a = *reinterpret_cast<const float4*>(p);
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    } else {
      const float2 a = *reinterpret_cast<const float2*>(p);
      v[0] = a.x, v[1] = a.y;
    }
  } else if constexpr (V == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = FromBits16<T>(words[k]);
      v[2 * k + 1] = FromBits16<T>(words[k] >> 16);
    }
  } else {
    const uint32_t word = *reinterpret_cast<const uint32_t*>(p);
    v[0] = FromBits16<T>(word);
    v[1] = FromBits16<T>(word >> 16);
  }
}

// The raw bits of V elements, loaded in one access and taken apart later (Unpack), so a thread
// can issue all its loads before the first multiply needs one. A pack outside the tensor is
// zero bits (0.0 in every element type), so padding needs no branch around the arithmetic.
template <typename T, int V>
struct RawPack {
  static constexpr int kBytes = static_cast<int>(sizeof(T)) * V;
  using type = typename std::conditional<
      kBytes == 16, uint4,
      typename std::conditional<kBytes == 8, uint2,
                                typename std::conditional<kBytes == 4, uint32_t,
                                                          unsigned short>::type>::type>::type;
};

template <typename T, int V>
__device__ __forceinline__ typename RawPack<T, V>::type LoadRaw(const T* p, bool valid) {
  using Raw = typename RawPack<T, V>::type;
  Raw zero;
  if constexpr (sizeof(Raw) == 16) {
    zero = make_uint4(0, 0, 0, 0);
  } else if constexpr (sizeof(Raw) == 8) {
    zero = make_uint2(0, 0);
  } else {
    zero = 0;
  }
  return valid ? *reinterpret_cast<const Raw*>(p) : zero;
}

template <typename T, int V>
__device__ __forceinline__ void Unpack(const typename RawPack<T, V>::type& raw, float (&v)[V]) {
  if constexpr (std::is_same<T, float>::value) {
    if constexpr (V == 4) {
      v[0] = __uint_as_float(raw.x), v[1] = __uint_as_float(raw.y);
      v[2] = __uint_as_float(raw.z), v[3] = __uint_as_float(raw.w);
    } else if constexpr (V == 2) {
      v[0] = __uint_as_float(raw.x), v[1] = __uint_as_float(raw.y);
    } else {
      v[0] = __uint_as_float(raw);
    }
  } else if constexpr (V == 8) {
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = FromBits16<T>(words[k]);
      v[2 * k + 1] = FromBits16<T>(words[k] >> 16);
    }
  } else if constexpr (V == 2) {
    v[0] = FromBits16<T>(raw);
    v[1] = FromBits16<T>(raw >> 16);
  } else {
    v[0] = FromBits16<T>(raw);
  }
}

template <typename T, int V>
__device__ __forceinline__ void StoreVec(T* p, const float (&v)[V]) {
  if constexpr (V == 1) {
    *p = FromFloat<T>(v[0]);
  } else if constexpr (std::is_same<T, float>::value) {
    if constexpr (V == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
    }
  } else if constexpr (V == 8) {
    uint32_t words[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) words[k] = Bits16<T>(v[2 * k]) | (Bits16<T>(v[2 * k + 1]) << 16);
    *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
  } else {
    *reinterpret_cast<uint32_t*>(p) = Bits16<T>(v[0]) | (Bits16<T>(v[1]) << 16);
  }
}

// The filter tap of channel `ch` that multiplies input offset (r, s) (flipped for a true
// convolution).
template <typename T>
__device__ __forceinline__ float Tap(const Geometry& g, const T* w, int ch, int r, int s) {
  const int fr = g.flip ? g.r - 1 - r : r;
  const int fs = g.flip ? g.s - 1 - s : s;
  return ToFloat(w[ch * g.ws_k + fr * g.ws_r + fs * g.ws_s]);
}

// The R x S taps of channels c0 .. c0 + V - 1, taps[tap][channel] (tap = r S + s, flipped for a
// true convolution). A packed filter (KCRS with one channel per group: each channel's taps
// contiguous) holds them in V x R x S consecutive elements, read as 16-byte vectors where the
// run is aligned; anything else is read tap by tap.
template <typename T, int V, int kTaps>
__device__ __forceinline__ void LoadTaps(const Geometry& g, const T* w, int c0,
                                         float (&taps)[kTaps][V]) {
  constexpr int kElements = V * kTaps;
  constexpr int kPerVector = 16 / sizeof(T);
  const T* run = w + c0 * g.ws_k;
  const bool packed =
      g.ws_s == 1 && g.ws_r == g.s && g.ws_k == kTaps && reinterpret_cast<uintptr_t>(run) % 16 == 0;
  if constexpr (kElements % kPerVector == 0) {
    if (packed) {
      float flat[kElements];
#pragma unroll
      for (int j = 0; j < kElements / kPerVector; ++j) {
        float v[kPerVector];
        LoadVec<T, kPerVector>(run + j * kPerVector, v);
#pragma unroll
        for (int e = 0; e < kPerVector; ++e) flat[j * kPerVector + e] = v[e];
      }
      // Two loops rather than a computed index, so every index is static (registers).
      if (g.flip) {
#pragma unroll
        for (int t = 0; t < kTaps; ++t)
#pragma unroll
          for (int i = 0; i < V; ++i) taps[kTaps - 1 - t][i] = flat[i * kTaps + t];
      } else {
#pragma unroll
        for (int t = 0; t < kTaps; ++t)
#pragma unroll
          for (int i = 0; i < V; ++i) taps[t][i] = flat[i * kTaps + t];
      }
      return;
    }
  }
#pragma unroll
  for (int t = 0; t < kTaps; ++t)
#pragma unroll
    for (int i = 0; i < V; ++i) taps[t][i] = Tap(g, w, c0 + i, t / g.s, t % g.s);
}

// alpha acc + beta old, then the epilogue of channel ch: rounded to T first (as the stored
// convolution would be), + bias, ReLU.
template <typename T>
__device__ __forceinline__ float Finish(const Geometry& g, float acc, float old, int ch) {
  float out = g.alpha * acc;
  if (g.beta != 0.0f) out += g.beta * old;
  const OutputEpilogue& e = g.epilogue;
  if (e.bias == nullptr && !e.relu) return out;
  out = ToFloat(FromFloat<T>(out));
  if (e.bias != nullptr) out += e.bias[ch];
  if (e.relu && out < 0.0f) out *= e.slope;
  return out;
}

// Stores V results of channels c0.. at `at`, blending with what is there when beta != 0.
template <typename T, int V>
__device__ __forceinline__ void FinishAndStore(const Geometry& g, const float (&acc)[V], int c0,
                                               T* at) {
  float old[V] = {};
  if (g.beta != 0.0f) LoadVec<T, V>(at, old);
  float out[V];
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = Finish<T>(g, acc[i], old[i], c0 + i);
  StoreVec<T, V>(at, out);
}

// ------------------------------------------------------------------------------------------------
// Forward. R > 0: an R x S filter at stride STRIDE, unit dilation, kColumns columns per thread;
// R == 0: any shape, one column per thread.

template <typename T, int V, int R, int S, int STRIDE>
__global__ void __launch_bounds__(kThreads, 2)
    DepthwiseForwardKernel(const Geometry g, const T* __restrict__ x, const T* __restrict__ w,
                           T* __restrict__ y) {
  constexpr bool kFixed = R > 0;
  constexpr int kCols = kFixed ? kColumns : 1;
  // Grid (row tiles of qt x cv threads, output rows, images): 32-bit index arithmetic only.
  const int index = blockIdx.x * kThreads + threadIdx.x;
  if (index >= g.qt * g.cv) return;
  const int qt = index / g.cv;
  const int c0 = (index - qt * g.cv) * V;
  const int op = blockIdx.y;
  const int n = blockIdx.z;
  const int q0 = qt * kCols;
  const T* xn = x + n * g.xs_n + c0;
  float acc[kCols][V] = {};
  if constexpr (kFixed) {
    float taps[R * S][V];
    LoadTaps<T, V, R * S>(g, w, c0, taps);
    const int h0 = op * STRIDE - g.pad_h;
    const int w0 = q0 * STRIDE - g.pad_w;
    constexpr int kWindow = (kCols - 1) * STRIDE + S;
    // Every load of the window first (predicated, no branches), then the products: the loads
    // are in flight together rather than one at a time.
    typename RawPack<T, V>::type window[R][kWindow];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int h = h0 + r;
      const bool row_inside = h >= 0 && h < g.h;
#pragma unroll
      for (int j = 0; j < kWindow; ++j) {
        const int col = w0 + j;
        window[r][j] =
            LoadRaw<T, V>(xn + h * g.xs_h + col * g.xs_w, row_inside && col >= 0 && col < g.w);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int j = 0; j < kWindow; ++j) {
        float v[V];
        Unpack<T, V>(window[r][j], v);
#pragma unroll
        for (int t = 0; t < kCols; ++t) {
          const int s = j - t * STRIDE;
          if (s < 0 || s >= S) continue;
#pragma unroll
          for (int i = 0; i < V; ++i) acc[t][i] = fmaf(v[i], taps[r * S + s][i], acc[t][i]);
        }
      }
    }
  } else {
    const int h0 = op * g.stride_h - g.pad_h;
    const int w0 = q0 * g.stride_w - g.pad_w;
    for (int r = 0; r < g.r; ++r) {
      const int h = h0 + r * g.dil_h;
      if (h < 0 || h >= g.h) continue;
      for (int s = 0; s < g.s; ++s) {
        const int col = w0 + s * g.dil_w;
        if (col < 0 || col >= g.w) continue;
        float v[V];
        LoadVec<T, V>(xn + h * g.xs_h + col * g.xs_w, v);
#pragma unroll
        for (int i = 0; i < V; ++i) acc[0][i] = fmaf(v[i], Tap(g, w, c0 + i, r, s), acc[0][i]);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kCols; ++t) {
    const int q = q0 + t;
    if (q >= g.q) break;
    FinishAndStore<T, V>(g, acc[t], c0, y + n * g.ys_n + op * g.ys_h + q * g.ys_w + c0);
  }
}

// ------------------------------------------------------------------------------------------------
// Backward data: dx[n, h, w, c] = sum over the taps (r, s) with h + pad - r dil = p stride and
// w + pad - s dil = q stride inside dy of dy[n, p, q, c] tap(c, r, s).

template <typename T, int V, int R, int S, int STRIDE>
__global__ void __launch_bounds__(kThreads)
    DepthwiseBackwardDataKernel(const Geometry g, const T* __restrict__ dy, const T* __restrict__ w,
                                T* __restrict__ dx) {
  constexpr bool kFixed = R > 0;
  // Grid (row tiles of w x cv threads, dx rows, images).
  const int index = blockIdx.x * kThreads + threadIdx.x;
  if (index >= g.w * g.cv) return;
  const int col = index / g.cv;
  const int c0 = (index - col * g.cv) * V;
  const int h = blockIdx.y;
  const int n = blockIdx.z;
  const int taps_r = kFixed ? R : g.r;
  const int taps_s = kFixed ? S : g.s;
  const int stride_h = kFixed ? STRIDE : g.stride_h;
  const int stride_w = kFixed ? STRIDE : g.stride_w;
  const int dil_h = kFixed ? 1 : g.dil_h;
  const int dil_w = kFixed ? 1 : g.dil_w;
  const T* dyn = dy + n * g.ys_n + c0;
  float acc[V] = {};
  // The compiled shapes keep their taps in registers; the others read them as they go.
  float taps[kFixed ? R * S : 1][V];
  if constexpr (kFixed) LoadTaps<T, V, R * S>(g, w, c0, taps);
  if constexpr (kFixed) {
    // The dy pixels of every tap first (predicated: a tap off this pixel's phase or outside dy
    // loads nothing and counts zero), then the products.
    typename RawPack<T, V>::type reached[R][S];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int ph = h + g.pad_h - r;
      const bool row_reached = ph >= 0 && ph % STRIDE == 0 && ph / STRIDE < g.p;
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int pw = col + g.pad_w - s;
        const bool reached_here = row_reached && pw >= 0 && pw % STRIDE == 0 && pw / STRIDE < g.q;
        reached[r][s] = LoadRaw<T, V>(dyn + (ph / STRIDE) * g.ys_h + (pw / STRIDE) * g.ys_w,
                                      reached_here);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int s = 0; s < S; ++s) {
        float v[V];
        Unpack<T, V>(reached[r][s], v);
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = fmaf(v[i], taps[r * S + s][i], acc[i]);
      }
    }
  } else {
    for (int r = 0; r < taps_r; ++r) {
      const int ph = h + g.pad_h - r * dil_h;
      if (ph < 0 || ph % stride_h != 0) continue;
      const int op = ph / stride_h;
      if (op >= g.p) continue;
      for (int s = 0; s < taps_s; ++s) {
        const int pw = col + g.pad_w - s * dil_w;
        if (pw < 0 || pw % stride_w != 0) continue;
        const int oq = pw / stride_w;
        if (oq >= g.q) continue;
        float v[V];
        LoadVec<T, V>(dyn + op * g.ys_h + oq * g.ys_w, v);
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = fmaf(v[i], Tap(g, w, c0 + i, r, s), acc[i]);
      }
    }
  }
  FinishAndStore<T, V>(g, acc, c0, dx + n * g.xs_n + h * g.xs_h + col * g.xs_w + c0);
}

// ------------------------------------------------------------------------------------------------
// Backward filter. Grid: (channel slices, splits, filter rows (S > 0) or taps (S == 0)). Block:
// (channel vectors of the slice, pixel lanes). partial[split][tap][c] holds each split's sums.

struct FilterSplit {
  int slice_vectors;  // channel vectors per block (x)
  int lanes;          // pixel lanes per block (y)
  int splits;         // blocks along the pixels
  int split_pixels;   // pixels per split
};

template <typename T, int V, int S>
__global__ void __launch_bounds__(kThreads)
    DepthwiseFilterPartialKernel(const Geometry g, const FilterSplit split, const T* __restrict__ x,
                                 const T* __restrict__ dy, float* __restrict__ partial) {
  constexpr bool kFixed = S > 0;
  constexpr int kTaps = kFixed ? S : 1;  // taps of one block: a filter row, or one tap
  __shared__ float sums[kThreads * V];
  const int vec = blockIdx.x * split.slice_vectors + threadIdx.x;
  const bool active = vec < g.cv;
  const int c0 = vec * V;
  const int r = kFixed ? static_cast<int>(blockIdx.z) : static_cast<int>(blockIdx.z) / g.s;
  const int s_first = kFixed ? 0 : static_cast<int>(blockIdx.z) % g.s;
  // Pixel counts fit 32 bits (DepthwiseServes).
  const int pixels = g.n * g.p * g.q;
  const int begin = blockIdx.y * split.split_pixels;
  const int end = begin + split.split_pixels < pixels ? begin + split.split_pixels : pixels;
  const int plane = g.p * g.q;
  float acc[kTaps][V] = {};
  if (active) {
    for (int i = begin + threadIdx.y; i < end; i += split.lanes) {
      const int n = i / plane;
      const int rem = i - n * plane;
      const int op = rem / g.q;
      const int oq = rem - op * g.q;
      const int h = op * g.stride_h - g.pad_h + r * g.dil_h;
      if (h < 0 || h >= g.h) continue;
      // dy and the row's x packs first (predicated), then the products.
      const auto dy_raw = LoadRaw<T, V>(dy + n * g.ys_n + op * g.ys_h + oq * g.ys_w + c0, true);
      const T* row = x + n * g.xs_n + h * g.xs_h + c0;
      typename RawPack<T, V>::type x_raw[kTaps];
#pragma unroll
      for (int t = 0; t < kTaps; ++t) {
        const int col = oq * g.stride_w - g.pad_w + (s_first + t) * g.dil_w;
        x_raw[t] = LoadRaw<T, V>(row + col * g.xs_w, col >= 0 && col < g.w);
      }
      float d[V];
      Unpack<T, V>(dy_raw, d);
#pragma unroll
      for (int t = 0; t < kTaps; ++t) {
        float v[V];
        Unpack<T, V>(x_raw[t], v);
#pragma unroll
        for (int i = 0; i < V; ++i) acc[t][i] = fmaf(v[i], d[i], acc[t][i]);
      }
    }
  }
  const int lane_base = threadIdx.y * split.slice_vectors + threadIdx.x;
  const int flat = lane_base;  // this thread's place in the block
  const int slice_values = split.slice_vectors * V;
  const int taps = g.r * g.s;
#pragma unroll
  for (int t = 0; t < kTaps; ++t) {
#pragma unroll
    for (int i = 0; i < V; ++i) sums[lane_base * V + i] = acc[t][i];
    __syncthreads();
    if (flat < slice_values) {
      // Value `flat` of the slice: vector flat / V, channel element flat % V; lane l's copy sits
      // at (l slice_vectors + flat / V) V + flat % V = l slice_values + flat.
      float total = 0.0f;
      for (int l = 0; l < split.lanes; ++l) total += sums[l * slice_values + flat];
      const int ch = blockIdx.x * slice_values + flat;
      if (ch < g.c) {
        const int tap = r * g.s + s_first + t;
        partial[(static_cast<int64_t>(blockIdx.y) * taps + tap) * g.c + ch] = total;
      }
    }
    __syncthreads();
  }
}

// dw[ch, tap] = alpha sum over splits (in order) + beta dw.
template <typename T>
__global__ void DepthwiseFilterFinishKernel(const Geometry g, int splits,
                                            const float* __restrict__ partial, T* dw) {
  const int taps = g.r * g.s;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (index >= static_cast<int64_t>(taps) * g.c) return;
  const int tap = static_cast<int>(index / g.c);
  const int ch = static_cast<int>(index % g.c);
  float total = 0.0f;
  for (int k = 0; k < splits; ++k)
    total += partial[(static_cast<int64_t>(k) * taps + tap) * g.c + ch];
  const int r = tap / g.s, s = tap % g.s;
  const int fr = g.flip ? g.r - 1 - r : r;
  const int fs = g.flip ? g.s - 1 - s : s;
  conv_element::Blend(dw + ch * g.ws_k + fr * g.ws_r + fs * g.ws_s, total, g.alpha, g.beta);
}

// ------------------------------------------------------------------------------------------------
// Host side: vector width, shape and launch.

int ElementBytesOf(ElementType e) { return e == ElementType::kF32 ? 4 : 2; }

bool Aligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

// The widest of 16 bytes, 2 elements and 1 element that divides the channels, every pixel stride
// of x and y and the pointers' alignment.
int VectorWidth(const ConvProblem& p, ElementType e, const void* a, const void* b) {
  const int bytes = ElementBytesOf(e);
  for (int v : {16 / bytes, 2}) {
    bool ok = p.c % v == 0 && Aligned(a, v * bytes) && Aligned(b, v * bytes);
    for (int i : {0, 3, 4}) ok = ok && p.x_stride[i] % v == 0 && p.y_stride[i] % v == 0;
    if (ok) return v;
  }
  return 1;
}

template <typename T, typename F>
int WithWidth(int v, F f) {
  constexpr int kMax = 16 / sizeof(T);
  if (v == kMax) return f(T{}, std::integral_constant<int, kMax>{});
  if (v == 2) return f(T{}, std::integral_constant<int, 2>{});
  return f(T{}, std::integral_constant<int, 1>{});
}

// Calls f(T{}, integral_constant<int, V>{}) for the element type and width.
template <typename F>
int WithTypeAndWidth(ElementType e, int v, F f) {
  switch (e) {
    case ElementType::kF32:
      return WithWidth<float>(v, f);
    case ElementType::kF16:
      return WithWidth<__half>(v, f);
    case ElementType::kBF16:
      return WithWidth<__nv_bfloat16>(v, f);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

// The compiled shapes: 3x3 or 5x5, equal stride 1 or 2, unit dilation. 0 when none fits.
int FixedTaps(const ConvProblem& p) {
  const bool square = p.filter[1] == p.filter[2] && (p.filter[1] == 3 || p.filter[1] == 5);
  const bool plain = p.dilation[1] == 1 && p.dilation[2] == 1 && p.stride[1] == p.stride[2] &&
                     (p.stride[1] == 1 || p.stride[1] == 2);
  return square && plain ? static_cast<int>(p.filter[1]) : 0;
}

unsigned BlocksFor(int64_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

// Calls f(integral_constant R, S, STRIDE) for the problem's compiled shape, or R = S = 0.
template <typename F>
int WithShape(const ConvProblem& p, F f) {
  using std::integral_constant;
  const int taps = FixedTaps(p);
  const int stride = static_cast<int>(p.stride[1]);
  if (taps == 3 && stride == 1) {
    return f(integral_constant<int, 3>{}, integral_constant<int, 3>{}, integral_constant<int, 1>{});
  }
  if (taps == 3 && stride == 2) {
    return f(integral_constant<int, 3>{}, integral_constant<int, 3>{}, integral_constant<int, 2>{});
  }
  if (taps == 5 && stride == 1) {
    return f(integral_constant<int, 5>{}, integral_constant<int, 5>{}, integral_constant<int, 1>{});
  }
  if (taps == 5 && stride == 2) {
    return f(integral_constant<int, 5>{}, integral_constant<int, 5>{}, integral_constant<int, 2>{});
  }
  return f(integral_constant<int, 0>{}, integral_constant<int, 0>{}, integral_constant<int, 1>{});
}

// How backward filter splits the work; depends on the problem and the GPU only (not on the
// vector width the pointers allow), so the workspace size is known before the buffers are.
FilterSplit PlanFilterSplit(const ConvProblem& p, int multiprocessors, int vector) {
  FilterSplit f;
  const int64_t vectors = (p.c + vector - 1) / vector;
  f.slice_vectors = static_cast<int>(std::min<int64_t>(vectors, 32));
  f.lanes = kThreads / f.slice_vectors;
  const int64_t slices = (vectors + f.slice_vectors - 1) / f.slice_vectors;
  const int64_t rows = FixedTaps(p) > 0 ? p.filter[1] : p.filter[1] * p.filter[2];
  const int64_t pixels = p.n * p.out[1] * p.out[2];
  // About four blocks per multiprocessor, each lane summing at least 16 pixels.
  int64_t splits = (4 * int64_t{multiprocessors} + slices * rows - 1) / (slices * rows);
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, pixels / (int64_t{f.lanes} * 16)));
  splits = std::max<int64_t>(1, std::min<int64_t>(splits, 4096));
  f.split_pixels = static_cast<int>((pixels + splits - 1) / splits);
  f.splits = static_cast<int>((pixels + f.split_pixels - 1) / f.split_pixels);
  if (f.splits < 1) f.splits = 1;
  return f;
}

int WidestVector(const ConvProblem& p) { return p.dtype == DataType::kF32 ? 4 : 8; }

}  // namespace

bool DepthwiseServes(const ConvProblem& p) {
  if (p.in[0] != 1 || p.out[0] != 1 || p.filter[0] != 1 || p.pad[0] != 0) return false;
  if (p.groups != p.c || p.k != p.c || p.c < 1) return false;
  if (p.x_stride[1] != 1 || p.y_stride[1] != 1) return false;
  // The kernels count pixels and channels in 32 bits and take images and rows from the grid's
  // y and z (at most 65535).
  constexpr int64_t kLimit = int64_t{1} << 30;
  return p.n * p.in[1] * p.in[2] < kLimit && p.n * p.out[1] * p.out[2] < kLimit &&
         p.in[2] * p.c < kLimit && p.out[2] * p.c < kLimit && p.k * p.w_stride[0] < kLimit &&
         p.n <= 65535 && p.in[1] <= 65535 && p.out[1] <= 65535;
}

int LaunchDepthwiseForward(const DepthwiseLaunch& l, void* stream) {
  const ConvProblem& p = l.problem;
  const int v = VectorWidth(p, l.element, l.x, l.y);
  const int columns = FixedTaps(p) > 0 ? kColumns : 1;
  Geometry g = GeometryOf(p, v, columns, l.alpha, l.beta);
  g.epilogue = l.epilogue;
  if (int64_t{g.n} * g.p * g.qt * g.cv == 0) return 0;
  const dim3 grid(BlocksFor(int64_t{g.qt} * g.cv), static_cast<unsigned>(g.p),
                  static_cast<unsigned>(g.n));
  return WithTypeAndWidth(l.element, v, [&](auto zero, auto width) {
    using T = decltype(zero);
    constexpr int V = decltype(width)::value;
    return WithShape(p, [&](auto r, auto s, auto stride) {
      DepthwiseForwardKernel<T, V, decltype(r)::value, decltype(s)::value, decltype(stride)::value>
          <<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
              g, static_cast<const T*>(l.x), static_cast<const T*>(l.w),
              static_cast<T*>(const_cast<void*>(l.y)));
      return static_cast<int>(cudaGetLastError());
    });
  });
}

int LaunchDepthwiseBackwardData(const DepthwiseLaunch& l, void* stream) {
  const ConvProblem& p = l.problem;
  const int v = VectorWidth(p, l.element, l.x, l.y);
  const Geometry g = GeometryOf(p, v, 1, l.alpha, l.beta);
  if (int64_t{g.n} * g.h * g.w * g.cv == 0) return 0;
  const dim3 grid(BlocksFor(int64_t{g.w} * g.cv), static_cast<unsigned>(g.h),
                  static_cast<unsigned>(g.n));
  return WithTypeAndWidth(l.element, v, [&](auto zero, auto width) {
    using T = decltype(zero);
    constexpr int V = decltype(width)::value;
    return WithShape(p, [&](auto r, auto s, auto stride) {
      DepthwiseBackwardDataKernel<T, V, decltype(r)::value, decltype(s)::value,
                                  decltype(stride)::value>
          <<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
              g, static_cast<const T*>(l.y), static_cast<const T*>(l.w),
              static_cast<T*>(const_cast<void*>(l.x)));
      return static_cast<int>(cudaGetLastError());
    });
  });
}

int64_t DepthwiseFilterGradientBytes(const ConvProblem& p, int multiprocessors) {
  const FilterSplit f = PlanFilterSplit(p, multiprocessors, WidestVector(p));
  return int64_t{f.splits} * p.filter[1] * p.filter[2] * p.c * 4;
}

int LaunchDepthwiseBackwardFilter(const DepthwiseLaunch& l, void* stream) {
  const ConvProblem& p = l.problem;
  if (l.partial == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  const int v = VectorWidth(p, l.element, l.x, l.y);
  const Geometry g = GeometryOf(p, v, 1, l.alpha, l.beta);
  if (g.c == 0 || g.r * g.s == 0) return 0;
  // The split's pixel ranges come from the widest vector (as the workspace was sized); the block
  // shape from the width these pointers allow.
  FilterSplit split = PlanFilterSplit(p, l.multiprocessors, WidestVector(p));
  const FilterSplit shape = PlanFilterSplit(p, l.multiprocessors, v);
  split.slice_vectors = shape.slice_vectors;
  split.lanes = shape.lanes;
  const int fixed = FixedTaps(p);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>((g.cv + split.slice_vectors - 1) / split.slice_vectors),
                  static_cast<unsigned>(split.splits),
                  static_cast<unsigned>(fixed > 0 ? g.r : g.r * g.s));
  const dim3 block(static_cast<unsigned>(split.slice_vectors), static_cast<unsigned>(split.lanes));
  const int64_t pixels = static_cast<int64_t>(g.n) * g.p * g.q;
  return WithTypeAndWidth(l.element, v, [&](auto zero, auto width) {
    using T = decltype(zero);
    constexpr int V = decltype(width)::value;
    if (pixels > 0) {
      auto launch = [&](auto taps) {
        DepthwiseFilterPartialKernel<T, V, decltype(taps)::value><<<grid, block, 0, s>>>(
            g, split, static_cast<const T*>(l.x), static_cast<const T*>(l.y), l.partial);
      };
      if (fixed == 3) {
        launch(std::integral_constant<int, 3>{});
      } else if (fixed == 5) {
        launch(std::integral_constant<int, 5>{});
      } else {
        launch(std::integral_constant<int, 0>{});
      }
      const cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess) return static_cast<int>(e);
    } else {
      // No pixels: every sum is zero.
      const cudaError_t e = cudaMemsetAsync(
          l.partial, 0, static_cast<size_t>(split.splits) * g.r * g.s * g.c * sizeof(float), s);
      if (e != cudaSuccess) return static_cast<int>(e);
    }
    DepthwiseFilterFinishKernel<T><<<BlocksFor(int64_t{g.r} * g.s * g.c), kThreads, 0, s>>>(
        g, split.splits, l.partial, static_cast<T*>(const_cast<void*>(l.w)));
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace cuda
}  // namespace kiln
