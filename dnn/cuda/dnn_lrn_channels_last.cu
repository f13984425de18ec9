// LRN on channels-last tensors (channel stride 1 in x, the output and dy). A thread owns one
// chunk (16 bytes of consecutive channels of one position, channels_last.cuh) and the threads of
// a warp own consecutive chunks, so every load and store of a warp is one contiguous run, read
// from memory once.
//  - Across channels (window half-width 0 to 5): the window of a chunk's channels reaches `half`
//    channels into the neighbouring chunks (2 half for backward, which needs the scales of its
//    window's window). Those belong to the neighbouring lanes, which hold them already: they come
//    by warp shuffles, and only the first and last lanes of a warp load a neighbour chunk
//    themselves (a hit in L1). Sums of squares, powers and the output are then computed in
//    registers, unrolled per window size.
//  - Within channel: the window is a box of positions around the thread's own; the chunk is
//    loaded at each (16-byte loads, hits in L1/L2 since the neighbours' threads load them too).
//    Backward evaluates the scale of every position of its window (size^(2 k) chunk loads for k
//    spatial dims), which keeps it in one pass without a workspace.
// Backward does not read y (see dnn_lrn.cu).
#include <algorithm>

#include "dnn/cuda/channels_last.cuh"
#include "dnn/cuda/lrn_channels_last.h"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxHalf = 5;  // across-channel windows up to 11 wide

struct LastGeometry {
  Walk positions;  // (N, 1, D, H, W), in the output's memory order
  FastDiv chunks;  // chunks per position
  uint32_t threads;
  int channels;
  int64_t x[5], out[5], dy[5];  // (N, C, D, H, W) strides
  bool vec_x, vec_out, vec_dy;  // rows 16-byte aligned (RowsAligned)
};

// Channels [c0 - kReach, c0 + width + kReach) of the thread's row into w[], 0 outside the
// channels: its own chunk `own` (at c0 = chunk * width) and the ends of its neighbours' chunks,
// taken by shuffle from the lanes that own them (lane +- d owns chunk +- d when that chunk is in
// the row), or loaded by the lanes at the warp's ends. Every lane of the warp must call it.
template <typename T, int kReach>
__device__ __forceinline__ void Widen(const T* row, int chunk, int chunks, int channels, bool vec,
                                      bool valid, const float* own, float* w) {
  constexpr int kVec = ChunkWidth<T>();
  constexpr int kSide = (kReach + kVec - 1) / kVec;  // neighbour chunks each side
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int k = 0; k < kVec; ++k) w[kReach + k] = own[k];
#pragma unroll
  for (int d = 1; d <= kSide; ++d) {
    const bool has_prev = valid && chunk >= d, has_next = valid && chunk + d < chunks;
    float prev[kVec] = {}, next[kVec] = {};
    if (has_prev && lane < d) LoadChunk(row, (chunk - d) * kVec, channels, vec, prev);
    if (has_next && lane + d >= 32) LoadChunk(row, (chunk + d) * kVec, channels, vec, next);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int at_prev = kReach - d * kVec + k;  // w's slot of chunk - d's element k
      if (at_prev >= 0) {
        const float s = __shfl_up_sync(0xffffffffu, own[k], d);
        w[at_prev] = !has_prev ? 0.0f : lane < d ? prev[k] : s;
      }
      const int at_next = kReach + d * kVec + k;
      if (at_next < kVec + 2 * kReach) {
        const float s = __shfl_down_sync(0xffffffffu, own[k], d);
        w[at_next] = !has_next ? 0.0f : lane + d >= 32 ? next[k] : s;
      }
    }
  }
}

// The thread's position and chunk; false past the end (the thread must still take part in the
// warp's shuffles).
__device__ __forceinline__ bool ThreadChunk(const LastGeometry& g, int* idx, int* chunk) {
  const uint32_t t = blockIdx.x * static_cast<uint32_t>(kThreads) + threadIdx.x;
#pragma unroll
  for (int d = 0; d < 5; ++d) idx[d] = 0;
  *chunk = 0;
  if (t >= g.threads) return false;
  PositionAndChunk(g.positions, g.chunks, t, idx, chunk);
  return true;
}

template <typename T, int kHalf>
__global__ void __launch_bounds__(kThreads)
    LrnAcrossLastForward(const __grid_constant__ LrnCall c,
                         const __grid_constant__ LastGeometry g) {
  constexpr int kVec = ChunkWidth<T>();
  constexpr int kWide = kVec + 2 * kHalf;
  int i[5], chunk;
  const bool valid = ThreadChunk(g, i, &chunk);
  const T* x = static_cast<const T*>(c.x) + PositionOffset(g.x, i);
  const int c0 = chunk * kVec;
  float own[kVec] = {};
  if (valid) LoadChunk(x, c0, g.channels, g.vec_x, own);
  float w[kWide];  // channels c0 - half ...
  Widen<T, kHalf>(x, chunk, static_cast<int>(g.chunks.divisor), g.channels, g.vec_x, valid, own, w);
  if (!valid) return;
  float sq[kWide];
#pragma unroll
  for (int j = 0; j < kWide; ++j) sq[j] = w[j] * w[j];
  const float a = c.alpha / static_cast<float>(c.size);
  float r[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    float sum = 0;
#pragma unroll
    for (int t = 0; t <= 2 * kHalf; ++t) sum += sq[k + t];
    r[k] = w[k + kHalf] * __powf(c.k + a * sum, -c.beta);
  }
  StoreChunk(static_cast<T*>(c.out) + PositionOffset(g.out, i), c0, g.channels, g.vec_out, r,
             c.blend_alpha, c.blend_beta);
}

// dx_i = dy_i s_i^-beta - 2 a beta x_i Σ_{j in window(i)} dy_j x_j s_j^(-beta-1), with
// s_j = k + a Σ_{m in window(j)} x_m^2 and a = alpha / size.
template <typename T, int kHalf>
__global__ void __launch_bounds__(kThreads)
    LrnAcrossLastBackward(const __grid_constant__ LrnCall c,
                          const __grid_constant__ LastGeometry g) {
  constexpr int kVec = ChunkWidth<T>();
  constexpr int kInner = kVec + 2 * kHalf;  // channels whose scale and ratio are needed
  int i[5], chunk;
  const bool valid = ThreadChunk(g, i, &chunk);
  const T* x = static_cast<const T*>(c.x) + PositionOffset(g.x, i);
  const T* dy = static_cast<const T*>(c.dy) + PositionOffset(g.dy, i);
  const int c0 = chunk * kVec;
  const int chunks = static_cast<int>(g.chunks.divisor);
  float xo[kVec] = {}, dyo[kVec] = {};
  if (valid && WholeChunk<T>(g.vec_x && g.vec_dy, c0, g.channels)) {
    const uint4 raw_x = LoadRaw(x, c0, true), raw_dy = LoadRaw(dy, c0, true);  // both in flight
    Unpack<T>(raw_x, xo);
    Unpack<T>(raw_dy, dyo);
  } else if (valid) {
    LoadChunk(x, c0, g.channels, g.vec_x, xo);
    LoadChunk(dy, c0, g.channels, g.vec_dy, dyo);
  }
  float xw[kInner + 2 * kHalf];  // channels c0 - 2 half ...
  float dyw[kInner];             // channels c0 - half ...
  Widen<T, 2 * kHalf>(x, chunk, chunks, g.channels, g.vec_x, valid, xo, xw);
  Widen<T, kHalf>(dy, chunk, chunks, g.channels, g.vec_dy, valid, dyo, dyw);
  if (!valid) return;
  const float a = c.alpha / static_cast<float>(c.size);
  float power[kInner], ratio[kInner];
#pragma unroll
  for (int j = 0; j < kInner; ++j) {
    float sum = 0;
#pragma unroll
    for (int t = 0; t <= 2 * kHalf; ++t) sum += xw[j + t] * xw[j + t];
    const float scale = c.k + a * sum;
    power[j] = __powf(scale, -c.beta);
    ratio[j] = __fdividef(dyw[j] * xw[j + kHalf] * power[j], scale);  // 0 outside the channels
  }
  const float factor = 2.0f * a * c.beta;
  float r[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    float ratio_sum = 0;
#pragma unroll
    for (int t = 0; t <= 2 * kHalf; ++t) ratio_sum += ratio[k + t];
    r[k] = dyw[k + kHalf] * power[k + kHalf] - factor * xw[k + 2 * kHalf] * ratio_sum;
  }
  StoreChunk(static_cast<T*>(c.out) + PositionOffset(g.out, i), c0, g.channels, g.vec_out, r,
             c.blend_alpha, c.blend_beta);
}

// Within channel: the box of positions [lo, hi] (D, H, W) around position p, clipped to the
// tensor; only the last spatial_rank dims are windowed.
__device__ __forceinline__ void WithinBox(const LrnCall& c, const int* p, int* lo, int* hi) {
  const int half = static_cast<int>(c.size / 2);
#pragma unroll
  for (int a = 0; a < 3; ++a) {
    const int h = a >= 3 - c.spatial_rank ? half : 0;
    lo[a] = max(p[a] - h, 0);
    hi[a] = min(p[a] + h, static_cast<int>(c.sp[a]) - 1);
  }
}

// Σ x^2 per channel of a chunk over the within-channel window of position p (D, H, W) of batch
// row n.
template <typename T>
__device__ __forceinline__ void WithinSumSq(const LrnCall& c, const LastGeometry& g, int n,
                                            const int* p, int c0, float* sum) {
  constexpr int kVec = ChunkWidth<T>();
  int lo[3], hi[3];
  WithinBox(c, p, lo, hi);
  const T* x = static_cast<const T*>(c.x) + n * g.x[0];
#pragma unroll
  for (int k = 0; k < kVec; ++k) sum[k] = 0;
  for (int d = lo[0]; d <= hi[0]; ++d) {
    for (int h = lo[1]; h <= hi[1]; ++h) {
      for (int w = lo[2]; w <= hi[2]; ++w) {
        float v[kVec];
        LoadChunk(x + d * g.x[2] + h * g.x[3] + w * g.x[4], c0, g.channels, g.vec_x, v);
#pragma unroll
        for (int k = 0; k < kVec; ++k) sum[k] += v[k] * v[k];
      }
    }
  }
}

// The window's divisor: size per windowed dim.
__device__ __forceinline__ float WithinCount(const LrnCall& c) {
  float n = 1;
  for (int a = 0; a < c.spatial_rank; ++a) n *= static_cast<float>(c.size);
  return n;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    LrnWithinLastForward(const __grid_constant__ LrnCall c,
                         const __grid_constant__ LastGeometry g) {
  constexpr int kVec = ChunkWidth<T>();
  int i[5], chunk;
  if (!ThreadChunk(g, i, &chunk)) return;
  const int c0 = chunk * kVec;
  float sum[kVec], v[kVec];
  WithinSumSq<T>(c, g, i[0], i + 2, c0, sum);
  LoadChunk(static_cast<const T*>(c.x) + PositionOffset(g.x, i), c0, g.channels, g.vec_x, v);
  const float a = c.alpha / WithinCount(c);
#pragma unroll
  for (int k = 0; k < kVec; ++k) v[k] *= __powf(1.0f + a * sum[k], -c.beta);
  StoreChunk(static_cast<T*>(c.out) + PositionOffset(g.out, i), c0, g.channels, g.vec_out, v,
             c.blend_alpha, c.blend_beta);
}

// The windows are symmetric: the positions whose windows hold i are those of i's window.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    LrnWithinLastBackward(const __grid_constant__ LrnCall c,
                          const __grid_constant__ LastGeometry g) {
  constexpr int kVec = ChunkWidth<T>();
  int i[5], chunk;
  if (!ThreadChunk(g, i, &chunk)) return;
  const int c0 = chunk * kVec;
  const float a = c.alpha / WithinCount(c);
  int lo[3], hi[3];
  WithinBox(c, i + 2, lo, hi);
  const T* x = static_cast<const T*>(c.x) + i[0] * g.x[0];
  const T* dy = static_cast<const T*>(c.dy) + i[0] * g.dy[0];
  float ratio_sum[kVec] = {}, own_power[kVec] = {};
  for (int d = lo[0]; d <= hi[0]; ++d) {
    for (int h = lo[1]; h <= hi[1]; ++h) {
      for (int w = lo[2]; w <= hi[2]; ++w) {
        const int q[3] = {d, h, w};
        float sum[kVec], xq[kVec], dyq[kVec];
        WithinSumSq<T>(c, g, i[0], q, c0, sum);
        LoadChunk(x + d * g.x[2] + h * g.x[3] + w * g.x[4], c0, g.channels, g.vec_x, xq);
        LoadChunk(dy + d * g.dy[2] + h * g.dy[3] + w * g.dy[4], c0, g.channels, g.vec_dy, dyq);
        const bool self = d == i[2] && h == i[3] && w == i[4];
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          const float scale = 1.0f + a * sum[k];
          const float power = __powf(scale, -c.beta);
          ratio_sum[k] += __fdividef(dyq[k] * xq[k] * power, scale);
          if (self) own_power[k] = power;
        }
      }
    }
  }
  float xi[kVec], dyi[kVec], r[kVec];
  LoadChunk(x + i[2] * g.x[2] + i[3] * g.x[3] + i[4] * g.x[4], c0, g.channels, g.vec_x, xi);
  LoadChunk(dy + i[2] * g.dy[2] + i[3] * g.dy[3] + i[4] * g.dy[4], c0, g.channels, g.vec_dy, dyi);
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    r[k] = dyi[k] * own_power[k] - 2.0f * a * c.beta * xi[k] * ratio_sum[k];
  }
  StoreChunk(static_cast<T*>(c.out) + PositionOffset(g.out, i), c0, g.channels, g.vec_out, r,
             c.blend_alpha, c.blend_beta);
}

template <typename T, int kHalf>
void LaunchAcross(const LrnCall& c, const LastGeometry& g, bool forward, unsigned blocks,
                  cudaStream_t s) {
  if (forward) {
    LrnAcrossLastForward<T, kHalf><<<blocks, kThreads, 0, s>>>(c, g);
  } else {
    LrnAcrossLastBackward<T, kHalf><<<blocks, kThreads, 0, s>>>(c, g);
  }
}

template <typename T>
int LaunchTyped(const LrnCall& c, bool forward, cudaStream_t s) {
  const int64_t dims[5] = {c.n, c.c, c.sp[0], c.sp[1], c.sp[2]};
  const int64_t positions = c.n * c.sp[0] * c.sp[1] * c.sp[2];
  const int64_t chunks = ChunksPerRow<T>(c.c);
  const int64_t threads = positions * chunks;
  if (threads >= (int64_t{1} << 31) || c.c >= (int64_t{1} << 30)) {
    return kLrnChannelsLastNotApplicable;
  }
  const int64_t* out_strides = forward ? c.y_strides : c.dx_strides;
  LastGeometry g;
  const int64_t position_dims[5] = {c.n, 1, c.sp[0], c.sp[1], c.sp[2]};
  g.positions = WalkFor(position_dims, out_strides);
  g.chunks = MakeFastDiv(static_cast<uint32_t>(chunks));
  g.threads = static_cast<uint32_t>(threads);
  g.channels = static_cast<int>(c.c);
  for (int d = 0; d < 5; ++d) {
    g.x[d] = c.x_strides[d];
    g.out[d] = out_strides[d];
    g.dy[d] = c.dy_strides[d];
  }
  g.vec_x = RowsAligned<T>(c.x, dims, c.x_strides);
  g.vec_out = RowsAligned<T>(c.out, dims, out_strides);
  g.vec_dy = !forward && RowsAligned<T>(c.dy, dims, c.dy_strides);
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  if (!c.across) {
    if (forward) {
      LrnWithinLastForward<T><<<blocks, kThreads, 0, s>>>(c, g);
    } else {
      LrnWithinLastBackward<T><<<blocks, kThreads, 0, s>>>(c, g);
    }
    return LastError();
  }
  switch (c.size / 2) {
    case 0:
      LaunchAcross<T, 0>(c, g, forward, blocks, s);
      break;
    case 1:
      LaunchAcross<T, 1>(c, g, forward, blocks, s);
      break;
    case 2:
      LaunchAcross<T, 2>(c, g, forward, blocks, s);
      break;
    case 3:
      LaunchAcross<T, 3>(c, g, forward, blocks, s);
      break;
    case 4:
      LaunchAcross<T, 4>(c, g, forward, blocks, s);
      break;
    default:
      LaunchAcross<T, kMaxHalf>(c, g, forward, blocks, s);
  }
  return LastError();
}

}  // namespace

int LaunchLrnChannelsLast(const LrnCall& c, bool forward, void* stream) {
  constexpr int kNo = kLrnChannelsLastNotApplicable;
  const int64_t* out_strides = forward ? c.y_strides : c.dx_strides;
  if (c.x_strides[1] != 1 || out_strides[1] != 1 || (!forward && c.dy_strides[1] != 1)) return kNo;
  if (c.across && c.size / 2 > kMaxHalf) return kNo;
  // Within channel, every window position's index must fit the 32-bit arithmetic.
  if (std::max({c.n, c.sp[0], c.sp[1], c.sp[2]}) >= (int64_t{1} << 31)) return kNo;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (c.type) {
    case Storage::kF16:
      return LaunchTyped<__half>(c, forward, s);
    case Storage::kBF16:
      return LaunchTyped<__nv_bfloat16>(c, forward, s);
    default:
      return LaunchTyped<float>(c, forward, s);
  }
}

}  // namespace cuda
}  // namespace kiln
