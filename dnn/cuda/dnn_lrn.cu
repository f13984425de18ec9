// LRN across channels and within channel. Channels-last tensors (channel stride 1) take the
// kernels of dnn_lrn_channels_last.cu when they apply. Three shapes of kernel here:
//  - chunked (across channels, sizes 3 to 11, channels not the contiguous dim, e.g. NCHW): one
//    thread per (n, position, run of 16 or 32 channels) loads its run plus the window's halo into
//    registers (unrolled at compile time per window size), so loads are independent and many are
//    in flight; the halo re-reads hit L2 because the blocks of one position's runs are adjacent.
//  - sliding (across channels, other sizes or strides): one thread per (n, position) walks the
//    channels with a running sum of squares; backward keeps the last size+1 scales in a
//    shared-memory ring.
//  - windowed (within channel, channels not contiguous): one thread per element sums its window;
//    the neighbours it reads are its neighbours' too, so they come from L1.
// Backward does not read y: it recomputes y_j = x_j scale_j^-beta from x, which costs a power
// per element instead of a whole tensor's read, and is the true gradient even when the forward
// blended into y.
#include "dnn/cuda/lrn_channels_last.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kSlidingThreads = 128;

struct LrnGeometry {
  int64_t dims[5];  // N, C, D, H, W
};

LrnGeometry GeometryOf(const LrnCall& c) { return {{c.n, c.c, c.sp[0], c.sp[1], c.sp[2]}}; }

// Σ x^2 over the window of element `i`, and the window's divisor.
template <typename T>
__device__ __forceinline__ float WindowSumSq(const LrnCall& c, const T* x, const int64_t* i,
                                             float* count) {
  const int64_t half = c.size / 2;
  float sum = 0;
  if (c.across) {
    const int64_t lo = i[1] - half > 0 ? i[1] - half : 0;
    const int64_t hi = i[1] + half < c.c - 1 ? i[1] + half : c.c - 1;
    const int64_t base = i[0] * c.x_strides[0] + i[2] * c.x_strides[2] + i[3] * c.x_strides[3] +
                         i[4] * c.x_strides[4];
    for (int64_t ch = lo; ch <= hi; ++ch) {
      const float v = ToFloat(x[base + ch * c.x_strides[1]]);
      sum += v * v;
    }
    *count = static_cast<float>(c.size);
    return sum;
  }
  // Within channel: a size^k box over the k spatial dims that are not unit (zero padded).
  int64_t lo[3], hi[3];
  float n = 1;
  for (int a = 0; a < 3; ++a) {
    const int64_t extent = c.sp[a];
    const bool used = a >= 3 - c.spatial_rank;
    const int64_t h = used ? half : 0;
    lo[a] = i[2 + a] - h > 0 ? i[2 + a] - h : 0;
    hi[a] = i[2 + a] + h < extent - 1 ? i[2 + a] + h : extent - 1;
    if (used) n *= static_cast<float>(c.size);
  }
  const int64_t base = i[0] * c.x_strides[0] + i[1] * c.x_strides[1];
  for (int64_t d = lo[0]; d <= hi[0]; ++d) {
    for (int64_t h = lo[1]; h <= hi[1]; ++h) {
      for (int64_t w = lo[2]; w <= hi[2]; ++w) {
        const float v =
            ToFloat(x[base + d * c.x_strides[2] + h * c.x_strides[3] + w * c.x_strides[4]]);
        sum += v * v;
      }
    }
  }
  *count = n;
  return sum;
}

template <typename T>
__device__ __forceinline__ float ScaleAt(const LrnCall& c, const T* x, const int64_t* i) {
  float count;
  const float sum = WindowSumSq(c, x, i, &count);
  return (c.across ? c.k : 1.0f) + c.alpha / count * sum;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    LrnWindowedForward(const __grid_constant__ LrnCall c, const __grid_constant__ Walk walk,
                       int64_t total) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (e >= total) return;
  int64_t i[5];
  DecodeWalk<int64_t>(walk, e, i);
  const T* x = static_cast<const T*>(c.x);
  const float v = ToFloat(x[Offset5(c.x_strides, i)]) * powf(ScaleAt(c, x, i), -c.beta);
  T* y = static_cast<T*>(c.out) + Offset5(c.y_strides, i);
  *y = FromFloat<T>(Blend(c.blend_alpha, v, c.blend_beta, [&] { return ToFloat(*y); }));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    LrnWindowedBackward(const __grid_constant__ LrnCall c, const __grid_constant__ Walk walk,
                        int64_t total) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (e >= total) return;
  int64_t i[5];
  DecodeWalk<int64_t>(walk, e, i);
  const T* x = static_cast<const T*>(c.x);
  const T* dy = static_cast<const T*>(c.dy);
  // The windows are symmetric: the elements whose windows hold i are those of i's window.
  const int64_t half = c.size / 2;
  int64_t lo[4], hi[4];  // C, D, H, W ranges
  for (int a = 0; a < 4; ++a) lo[a] = hi[a] = i[1 + a];
  float count = 1;
  if (c.across) {
    lo[0] = i[1] - half > 0 ? i[1] - half : 0;
    hi[0] = i[1] + half < c.c - 1 ? i[1] + half : c.c - 1;
    count = static_cast<float>(c.size);
  } else {
    for (int a = 0; a < 3; ++a) {
      const bool used = a >= 3 - c.spatial_rank;
      if (!used) continue;
      lo[1 + a] = i[2 + a] - half > 0 ? i[2 + a] - half : 0;
      hi[1 + a] = i[2 + a] + half < c.sp[a] - 1 ? i[2 + a] + half : c.sp[a] - 1;
      count *= static_cast<float>(c.size);
    }
  }
  float ratio_sum = 0;
  int64_t t[5] = {i[0], 0, 0, 0, 0};
  for (t[1] = lo[0]; t[1] <= hi[0]; ++t[1]) {
    for (t[2] = lo[1]; t[2] <= hi[1]; ++t[2]) {
      for (t[3] = lo[2]; t[3] <= hi[2]; ++t[3]) {
        for (t[4] = lo[3]; t[4] <= hi[3]; ++t[4]) {
          const float scale = ScaleAt(c, x, t);
          ratio_sum += ToFloat(dy[Offset5(c.dy_strides, t)]) * ToFloat(x[Offset5(c.x_strides, t)]) *
                       __powf(scale, -c.beta) / scale;
        }
      }
    }
  }
  const float xi = ToFloat(x[Offset5(c.x_strides, i)]);
  const float g = ToFloat(dy[Offset5(c.dy_strides, i)]) * powf(ScaleAt(c, x, i), -c.beta) -
                  2.0f * c.alpha * c.beta / count * xi * ratio_sum;
  T* dx = static_cast<T*>(c.out) + Offset5(c.dx_strides, i);
  *dx = FromFloat<T>(Blend(c.blend_alpha, g, c.blend_beta, [&] { return ToFloat(*dx); }));
}

// One thread per (n, d, h, w); positions are numbered with w fastest.
__device__ __forceinline__ bool SlidingPosition(const LrnCall& c, int64_t* i) {
  const int64_t p = blockIdx.x * static_cast<int64_t>(kSlidingThreads) + threadIdx.x;
  if (p >= c.n * c.sp[0] * c.sp[1] * c.sp[2]) return false;
  int64_t rest = p;
  i[4] = rest % c.sp[2];
  rest /= c.sp[2];
  i[3] = rest % c.sp[1];
  rest /= c.sp[1];
  i[2] = rest % c.sp[0];
  i[0] = rest / c.sp[0];
  i[1] = 0;
  return true;
}

__device__ __forceinline__ int64_t SpatialBase(const int64_t* strides, const int64_t* i) {
  return i[0] * strides[0] + i[2] * strides[2] + i[3] * strides[3] + i[4] * strides[4];
}

template <typename T>
__global__ void __launch_bounds__(kSlidingThreads)
    LrnSlidingForward(const __grid_constant__ LrnCall c) {
  int64_t i[5];
  if (!SlidingPosition(c, i)) return;
  const T* __restrict__ x = static_cast<const T*>(c.x) + SpatialBase(c.x_strides, i);
  T* __restrict__ y = static_cast<T*>(c.out) + SpatialBase(c.y_strides, i);
  const int64_t xs = c.x_strides[1], ys = c.y_strides[1];
  const int64_t half = c.size / 2;
  const float a = c.alpha / static_cast<float>(c.size);
  auto sq = [&](int64_t ch) {
    if (ch < 0 || ch >= c.c) return 0.0f;
    const float v = ToFloat(x[ch * xs]);
    return v * v;
  };
  auto emit = [&](int64_t ch, float v, float sum) {
    T* out = y + ch * ys;
    const float r = v * __powf(c.k + a * sum, -c.beta);
    *out = FromFloat<T>(Blend(c.blend_alpha, r, c.blend_beta, [&] { return ToFloat(*out); }));
  };
  float sum = 0;
  for (int64_t ch = 0; ch < half && ch < c.c; ++ch) sum += sq(ch);
  int64_t ch = 0;
  // Four channels per step, their loads issued together (the entering ones come from DRAM; the
  // leaving and current ones were read a few steps ago and come from L1).
  for (; ch + 4 <= c.c; ch += 4) {
    float enter[4], leave[4], cur[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      enter[k] = sq(ch + k + half);
      leave[k] = sq(ch + k - half - 1);
      cur[k] = ToFloat(x[(ch + k) * xs]);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      sum += enter[k] - leave[k];
      emit(ch + k, cur[k], sum);
    }
  }
  for (; ch < c.c; ++ch) {
    sum += sq(ch + half) - sq(ch - half - 1);
    emit(ch, ToFloat(x[ch * xs]), sum);
  }
}

// ring: (size + 1) scales per thread in shared memory, thread-minor so a warp's accesses fall
// in distinct banks.
template <typename T>
__global__ void __launch_bounds__(kSlidingThreads)
    LrnSlidingBackward(const __grid_constant__ LrnCall c) {
  extern __shared__ float ring[];
  int64_t i[5];
  if (!SlidingPosition(c, i)) return;
  const T* __restrict__ x = static_cast<const T*>(c.x) + SpatialBase(c.x_strides, i);
  const T* __restrict__ dy = static_cast<const T*>(c.dy) + SpatialBase(c.dy_strides, i);
  T* __restrict__ dx = static_cast<T*>(c.out) + SpatialBase(c.dx_strides, i);
  const int64_t half = c.size / 2, len = c.size + 1;
  const float a = c.alpha / static_cast<float>(c.size);
  auto slot = [&](int64_t ch) -> float& {
    return ring[(ch % len) * kSlidingThreads + threadIdx.x];
  };
  auto sq = [&](int64_t ch) {
    if (ch < 0 || ch >= c.c) return 0.0f;
    const float v = ToFloat(x[ch * c.x_strides[1]]);
    return v * v;
  };
  auto ratio = [&](int64_t ch) {  // dy y / scale = dy x scale^(-beta-1), scale from the ring
    const float scale = slot(ch);
    return ToFloat(dy[ch * c.dy_strides[1]]) * ToFloat(x[ch * c.x_strides[1]]) *
           __powf(scale, -c.beta) / scale;
  };
  float sum = 0, ratio_sum = 0;
  for (int64_t ch = 0; ch < half && ch < c.c; ++ch) sum += sq(ch);
    // Step j computes scale_j and adds ratio_j, then finishes channel j - half.
#pragma unroll 4
  for (int64_t j = 0; j < c.c + half; ++j) {
    if (j < c.c) {
      sum += sq(j + half) - sq(j - half - 1);
      slot(j) = c.k + a * sum;
      ratio_sum += ratio(j);
    }
    const int64_t ch = j - half;
    if (ch < 0) continue;
    if (ch - half - 1 >= 0) ratio_sum -= ratio(ch - half - 1);
    const float g = ToFloat(dy[ch * c.dy_strides[1]]) * __powf(slot(ch), -c.beta) -
                    2.0f * c.beta * a * ToFloat(x[ch * c.x_strides[1]]) * ratio_sum;
    T* out = dx + ch * c.dx_strides[1];
    *out = FromFloat<T>(Blend(c.blend_alpha, g, c.blend_beta, [&] { return ToFloat(*out); }));
  }
}

// Channels per thread in the chunked kernels. Backward's halo is twice forward's (it needs the
// scales of its window's window), so it takes longer runs to keep the re-reads down.
constexpr int kForwardChunk = 16;
constexpr int kBackwardChunk = 32;

// Where a chunked thread works: its position's offsets in x, the output and dy, and its first
// channel. Blocks are numbered run-fastest so the runs of a group of positions (which share
// halos) are adjacent in the launch and run together.
struct ChunkGeometry {
  FastDiv runs, spatial, w, hw;  // channel runs; D H W; W; H W
  uint32_t positions;
  int64_t x[5], out[5], dy[5];
};

ChunkGeometry ChunkGeometryOf(const LrnCall& c, int chunk, const int64_t* out_strides) {
  ChunkGeometry g;
  g.runs = MakeFastDiv(static_cast<uint32_t>((c.c + chunk - 1) / chunk));
  g.spatial = MakeFastDiv(static_cast<uint32_t>(c.sp[0] * c.sp[1] * c.sp[2]));
  g.w = MakeFastDiv(static_cast<uint32_t>(c.sp[2]));
  g.hw = MakeFastDiv(static_cast<uint32_t>(c.sp[1] * c.sp[2]));
  g.positions = static_cast<uint32_t>(c.n * c.sp[0] * c.sp[1] * c.sp[2]);
  for (int d = 0; d < 5; ++d) {
    g.x[d] = c.x_strides[d];
    g.out[d] = out_strides[d];
    g.dy[d] = c.dy_strides[d];
  }
  return g;
}

// Sets the offsets of (n, channel c0, position) in x, the output and dy; false past the end.
template <int kChunk>
__device__ __forceinline__ bool ChunkOf(const ChunkGeometry& g, int* c0, int64_t* xo, int64_t* oo,
                                        int64_t* dyo) {
  const uint32_t group = Div(blockIdx.x, g.runs);
  const uint32_t run = blockIdx.x - group * g.runs.divisor;
  const uint32_t p = group * kSlidingThreads + threadIdx.x;
  if (p >= g.positions) return false;
  const uint32_t n = Div(p, g.spatial);
  const uint32_t s = p - n * g.spatial.divisor;
  const uint32_t d = Div(s, g.hw);
  const uint32_t hw = s - d * g.hw.divisor;
  const uint32_t h = Div(hw, g.w);
  const uint32_t w = hw - h * g.w.divisor;
  *c0 = static_cast<int>(run) * kChunk;
  const int64_t i[5] = {n, 0, d, h, w};
  *xo = Offset5(g.x, i);
  *oo = Offset5(g.out, i);
  *dyo = Offset5(g.dy, i);
  return true;
}

// Loads channels [first, first + kCount) at `stride`, zero outside [0, channels).
template <int kCount, typename T>
__device__ __forceinline__ void LoadChannels(const T* p, int64_t stride, int first, int channels,
                                             float* v) {
#pragma unroll
  for (int j = 0; j < kCount; ++j) {
    const int ch = first + j;
    v[j] = ch >= 0 && ch < channels ? ToFloat(p[ch * stride]) : 0.0f;
  }
}

template <typename T, int kHalf>
__global__ void __launch_bounds__(kSlidingThreads)
    LrnChunkedForward(const __grid_constant__ LrnCall c, const __grid_constant__ ChunkGeometry g) {
  constexpr int kChunk = kForwardChunk;
  int c0;
  int64_t xo, yo, unused;
  if (!ChunkOf<kChunk>(g, &c0, &xo, &yo, &unused)) return;
  constexpr int kWidth = 2 * kHalf + 1;
  const int channels = static_cast<int>(c.c);
  float xv[kChunk + 2 * kHalf];  // channels c0 - half ...
  LoadChannels<kChunk + 2 * kHalf>(static_cast<const T*>(c.x) + xo, g.x[1], c0 - kHalf, channels,
                                   xv);
  const float a = c.alpha / static_cast<float>(c.size);
  T* y = static_cast<T*>(c.out) + yo;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    const float v = xv[i + kHalf];
    float sum = 0;
#pragma unroll
    for (int t = 0; t < kWidth; ++t) sum += xv[i + t] * xv[i + t];
    const int ch = c0 + i;
    if (ch < channels) {
      T* out = y + ch * g.out[1];
      const float r = v * __powf(c.k + a * sum, -c.beta);
      *out = FromFloat<T>(Blend(c.blend_alpha, r, c.blend_beta, [&] { return ToFloat(*out); }));
    }
  }
}

// dx_i = dy_i s_i^-beta - 2 a beta x_i Σ_{j in window(i)} dy_j x_j s_j^(-beta-1), with
// s_j = k + a Σ_{m in window(j)} x_m^2 and a = alpha / size.
template <typename T, int kHalf>
__global__ void __launch_bounds__(kSlidingThreads)
    LrnChunkedBackward(const __grid_constant__ LrnCall c, const __grid_constant__ ChunkGeometry g) {
  constexpr int kChunk = kBackwardChunk;
  int c0;
  int64_t xo, dxo, dyo;
  if (!ChunkOf<kChunk>(g, &c0, &xo, &dxo, &dyo)) return;
  constexpr int kWidth = 2 * kHalf + 1;
  constexpr int kInner = kChunk + 2 * kHalf;  // channels whose scale and ratio are needed
  const int channels = static_cast<int>(c.c);
  float xv[kInner + 2 * kHalf];  // channels c0 - 2 half ...
  float dyv[kInner];             // channels c0 - half ...
  LoadChannels<kInner + 2 * kHalf>(static_cast<const T*>(c.x) + xo, g.x[1], c0 - 2 * kHalf,
                                   channels, xv);
  LoadChannels<kInner>(static_cast<const T*>(c.dy) + dyo, g.dy[1], c0 - kHalf, channels, dyv);
  const float a = c.alpha / static_cast<float>(c.size);
  float power[kInner], ratio[kInner];
#pragma unroll
  for (int j = 0; j < kInner; ++j) {
    float sum = 0;
#pragma unroll
    for (int t = 0; t < kWidth; ++t) sum += xv[j + t] * xv[j + t];
    const float scale = c.k + a * sum;
    power[j] = __powf(scale, -c.beta);
    ratio[j] = __fdividef(dyv[j] * xv[j + kHalf] * power[j], scale);  // 0 outside the channels
  }
  T* dx = static_cast<T*>(c.out) + dxo;
  const float factor = 2.0f * a * c.beta;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    float ratio_sum = 0;
#pragma unroll
    for (int t = 0; t < kWidth; ++t) ratio_sum += ratio[i + t];
    const int ch = c0 + i;
    if (ch < channels) {
      T* out = dx + ch * g.out[1];
      const float r = dyv[i + kHalf] * power[i + kHalf] - factor * xv[i + 2 * kHalf] * ratio_sum;
      *out = FromFloat<T>(Blend(c.blend_alpha, r, c.blend_beta, [&] { return ToFloat(*out); }));
    }
  }
}

// The chunked kernels for window half-width kHalf; false when it is not one of them.
template <typename T, int kHalf>
bool LaunchChunkedIf(const LrnCall& c, bool forward, cudaStream_t s) {
  if (c.size / 2 != kHalf) return false;
  const ChunkGeometry g = ChunkGeometryOf(c, forward ? kForwardChunk : kBackwardChunk,
                                          forward ? c.y_strides : c.dx_strides);
  const unsigned blocks = static_cast<unsigned>(
      ((g.positions + kSlidingThreads - 1) / kSlidingThreads) * g.runs.divisor);
  if (forward) {
    LrnChunkedForward<T, kHalf><<<blocks, kSlidingThreads, 0, s>>>(c, g);
  } else {
    LrnChunkedBackward<T, kHalf><<<blocks, kSlidingThreads, 0, s>>>(c, g);
  }
  return true;
}

// Chunked when the sizes allow 32-bit position and block numbers.
template <typename T>
bool LaunchChunked(const LrnCall& c, bool forward, cudaStream_t s) {
  const int64_t positions = c.n * c.sp[0] * c.sp[1] * c.sp[2];
  const int64_t chunk = forward ? kForwardChunk : kBackwardChunk;
  const int64_t runs = (c.c + chunk - 1) / chunk;
  const int64_t blocks = (positions + kSlidingThreads - 1) / kSlidingThreads * runs;
  if (positions >= (int64_t{1} << 31) || blocks >= (int64_t{1} << 31) || c.c >= (1 << 30)) {
    return false;
  }
  return LaunchChunkedIf<T, 1>(c, forward, s) || LaunchChunkedIf<T, 2>(c, forward, s) ||
         LaunchChunkedIf<T, 3>(c, forward, s) || LaunchChunkedIf<T, 4>(c, forward, s) ||
         LaunchChunkedIf<T, 5>(c, forward, s);
}

template <typename T>
int LaunchTyped(const LrnCall& c, bool forward, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t positions = c.n * c.sp[0] * c.sp[1] * c.sp[2];
  // Across channels, when the channels-last kernels did not take the call: chunked, else
  // sliding (its ring fits in shared memory for every size the descriptor allows).
  const bool sliding = c.across && c.size + 1 <= 64;
  if (sliding && LaunchChunked<T>(c, forward, s)) return LastError();
  if (sliding) {
    const unsigned blocks = BlocksFor(positions, kSlidingThreads, int64_t{1} << 31);
    if (forward) {
      LrnSlidingForward<T><<<blocks, kSlidingThreads, 0, s>>>(c);
    } else {
      const size_t smem = static_cast<size_t>(c.size + 1) * kSlidingThreads * sizeof(float);
      if (smem > 48 * 1024) {
        cudaFuncSetAttribute(LrnSlidingBackward<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem));
      }
      LrnSlidingBackward<T><<<blocks, kSlidingThreads, smem, s>>>(c);
    }
    return LastError();
  }
  const LrnGeometry g = GeometryOf(c);
  const Walk walk = WalkFor(g.dims, forward ? c.y_strides : c.dx_strides);
  const int64_t total = positions * c.c;
  const unsigned blocks = BlocksFor(total, kThreads, int64_t{1} << 31);
  if (forward) {
    LrnWindowedForward<T><<<blocks, kThreads, 0, s>>>(c, walk, total);
  } else {
    LrnWindowedBackward<T><<<blocks, kThreads, 0, s>>>(c, walk, total);
  }
  return LastError();
}

int LaunchLrn(const LrnCall& c, bool forward, void* stream) {
  const int last = LaunchLrnChannelsLast(c, forward, stream);
  if (last != kLrnChannelsLastNotApplicable) return last;
  switch (c.type) {
    case Storage::kF16:
      return LaunchTyped<__half>(c, forward, stream);
    case Storage::kBF16:
      return LaunchTyped<__nv_bfloat16>(c, forward, stream);
    default:
      return LaunchTyped<float>(c, forward, stream);
  }
}

}  // namespace

int LaunchLrnForward(const LrnCall& call, void* stream) { return LaunchLrn(call, true, stream); }
int LaunchLrnBackward(const LrnCall& call, void* stream) { return LaunchLrn(call, false, stream); }

}  // namespace cuda
}  // namespace kiln
