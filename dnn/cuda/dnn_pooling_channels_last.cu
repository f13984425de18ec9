// Pooling, 2-d and 3-d, of channels-last tensors (channel stride 1 in every operand). A thread
// owns one chunk (16 bytes of consecutive channels of one position, channels_last.cuh): the
// threads of a warp own consecutive chunks, so each access of a warp is one contiguous run, and
// every window tap is one 16-byte load.
//  - Forward: a thread per output chunk reduces its window's chunks; the common square windows
//    (3x3 and 2x2, any stride and padding) have the window loop unrolled, so a thread's loads
//    are independent and issued together.
//  - Backward, 2-d square windows (3x3 stride 2 or 1, 2x2 stride 2, any padding): by tiles of
//    outputs staged in shared memory (PoolLastBackwardTiled below): each output's window is read
//    once to find its winners, then each input adds the shares of the outputs covering it.
//  - Backward, any other window: a gather, a thread per input chunk visiting the outputs whose
//    windows cover it, in (d, h, w) order.
// Both backward kernels avoid atomics, so the result is the same on every run. Max pooling sends
// an output's gradient to the first element of its window, in (d, h, w) order, that equals y (as
// dnn_pooling.cu does).
#include <algorithm>
#include <cfloat>

#include "dnn/cuda/channels_last.cuh"
#include "dnn/cuda/pooling_channels_last.h"
#include "dnn/cuda/storage_access.cuh"
#include "dnn/pooling_math.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;

struct LastGeometry {
  dnn::PoolAxisOf<int> axis[3];  // D, H, W
  FastDiv stride_div[3];
  Walk positions;  // outputs (forward) or inputs (backward), (N, 1, D, H, W), in memory order
  FastDiv chunks;  // chunks per position
  uint32_t threads;
  int channels;
  int64_t x[5], y[5], dy[5], dx[5];   // (N, C, D, H, W) strides
  bool vec_x, vec_y, vec_dy, vec_dx;  // rows 16-byte aligned (RowsAligned)
  int mode;                           // PoolingCall::mode
  float alpha, beta;
};

__device__ __forceinline__ int64_t At(const int64_t* strides, int d, int h, int w) {
  return d * strides[2] + h * strides[3] + w * strides[4];
}

// The thread's position (idx[2..4]) and chunk; false past the end.
__device__ __forceinline__ bool ThreadChunk(const LastGeometry& g, int* idx, int* chunk) {
  const uint32_t t = blockIdx.x * static_cast<uint32_t>(kThreads) + threadIdx.x;
  if (t >= g.threads) return false;
  PositionAndChunk(g.positions, g.chunks, t, idx, chunk);
  return true;
}

// The divisor of output o's average (mode 1: the window clipped to the padded input; mode 2: to
// the input).
__device__ __forceinline__ int AverageDivisor(const LastGeometry& g, const int* o) {
  int divisor = 1;
#pragma unroll
  for (int a = 0; a < 3; ++a) {
    int begin, end, padded;
    dnn::PoolWindow(g.axis[a], o[a], &begin, &end, &padded);
    divisor *= g.mode == 1 ? padded : end - begin;
  }
  return divisor;
}

// kWin > 0: 2-d with a kWin x kWin window (any stride and padding), unrolled.
template <typename T, int kWin>
__global__ void __launch_bounds__(kThreads)
    PoolLastForward(const __grid_constant__ LastGeometry g, const T* __restrict__ x,
                    T* __restrict__ y) {
  constexpr int kVec = ChunkWidth<T>();
  int o[5], chunk;
  if (!ThreadChunk(g, o, &chunk)) return;
  const int c0 = chunk * kVec;
  const bool max = g.mode == 0;
  const T* plane = x + o[0] * g.x[0];
  int begin[3], end[3], padded[3];
#pragma unroll
  for (int a = 0; a < 3; ++a) dnn::PoolWindow(g.axis[a], o[2 + a], &begin[a], &end[a], &padded[a]);
  float acc[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) acc[k] = max ? -FLT_MAX : 0.0f;
  auto take = [&](int d, int h, int w) {
    float v[kVec];
    LoadChunk(plane + At(g.x, d, h, w), c0, g.channels, g.vec_x, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc[k] = max ? (v[k] > acc[k] ? v[k] : acc[k]) : acc[k] + v[k];
  };
  if constexpr (kWin > 0) {
    const int h0 = o[3] * g.axis[1].stride - g.axis[1].pad;
    const int w0 = o[4] * g.axis[2].stride - g.axis[2].pad;
    auto inside = [&](int e) {
      const int h = h0 + e / kWin, w = w0 + e % kWin;
      return h >= begin[1] && h < end[1] && w >= begin[2] && w < end[2];
    };
    if (WholeChunk<T>(g.vec_x, c0, g.channels)) {
      // Every tap's load issued before the first is used.
      uint4 raw[kWin * kWin];
#pragma unroll
      for (int e = 0; e < kWin * kWin; ++e) {
        raw[e] = LoadRaw(plane + At(g.x, 0, h0 + e / kWin, w0 + e % kWin), c0, inside(e));
      }
#pragma unroll
      for (int e = 0; e < kWin * kWin; ++e) {
        if (!inside(e)) continue;
        float v[kVec];
        Unpack<T>(raw[e], v);
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          acc[k] = max ? (v[k] > acc[k] ? v[k] : acc[k]) : acc[k] + v[k];
        }
      }
    } else {
#pragma unroll
      for (int e = 0; e < kWin * kWin; ++e) {
        if (inside(e)) take(0, h0 + e / kWin, w0 + e % kWin);
      }
    }
  } else {
    for (int d = begin[0]; d < end[0]; ++d) {
      for (int h = begin[1]; h < end[1]; ++h) {
        for (int w = begin[2]; w < end[2]; ++w) take(d, h, w);
      }
    }
  }
  if (!max) {
    const int divisor = g.mode == 1
                            ? padded[0] * padded[1] * padded[2]
                            : (end[0] - begin[0]) * (end[1] - begin[1]) * (end[2] - begin[2]);
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc[k] /= static_cast<float>(divisor);
  }
  StoreChunk(y + o[0] * g.y[0] + At(g.y, o[2], o[3], o[4]), c0, g.channels, g.vec_y, acc, g.alpha,
             g.beta);
}

// The outputs covering input index i along axis a: [*first, *last] (dnn::PoolCoveringOutputs
// with cheap divisions).
__device__ __forceinline__ void Covering(const LastGeometry& g, int a, int i, int* first,
                                         int* last) {
  const dnn::PoolAxisOf<int>& ax = g.axis[a];
  const int lo = i + ax.pad - ax.window + 1;
  *first = lo <= 0 ? 0 : static_cast<int>(Div(lo + ax.stride - 1, g.stride_div[a]));
  const int l = static_cast<int>(Div(i + ax.pad, g.stride_div[a]));
  *last = l < ax.out - 1 ? l : ax.out - 1;
}

// The gather for any window: a thread per input chunk.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    PoolLastBackward(const __grid_constant__ LastGeometry g, const T* __restrict__ x,
                     const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx) {
  constexpr int kVec = ChunkWidth<T>();
  int i[5], chunk;
  if (!ThreadChunk(g, i, &chunk)) return;
  const int c0 = chunk * kVec;
  const bool max = g.mode == 0;
  int first[3], last[3];
#pragma unroll
  for (int a = 0; a < 3; ++a) Covering(g, a, i[2 + a], &first[a], &last[a]);
  const T* xn = x + i[0] * g.x[0];
  const T* yn = y + i[0] * g.y[0];
  const T* dyn = dy + i[0] * g.dy[0];
  // Channels of the chunk that exist: a partial chunk's zero padding must not look like a match.
  const int present = g.channels - c0 < kVec ? g.channels - c0 : kVec;
  const unsigned channel_bits = (1u << present) - 1;
  float self[kVec], acc[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) acc[k] = 0.0f;
  if (max) LoadChunk(xn + At(g.x, i[2], i[3], i[4]), c0, g.channels, g.vec_x, self);
  for (int od = first[0]; od <= last[0]; ++od) {
    for (int oh = first[1]; oh <= last[1]; ++oh) {
      for (int ow = first[2]; ow <= last[2]; ++ow) {
        float grad[kVec];
        LoadChunk(dyn + At(g.dy, od, oh, ow), c0, g.channels, g.vec_dy, grad);
        const int o[3] = {od, oh, ow};
        if (!max) {
          const float divisor = static_cast<float>(AverageDivisor(g, o));
#pragma unroll
          for (int k = 0; k < kVec; ++k) acc[k] += grad[k] / divisor;
          continue;
        }
        float best[kVec];
        LoadChunk(yn + At(g.y, od, oh, ow), c0, g.channels, g.vec_y, best);
        unsigned mask = 0;  // channels where the input holds y
#pragma unroll
        for (int k = 0; k < kVec; ++k) mask |= self[k] == best[k] ? 1u << k : 0u;
        mask &= channel_bits;
        // Clear the channels where an earlier element of o's window holds y too.
        int begin[3], end[3], padded[3];
#pragma unroll
        for (int a = 0; a < 3; ++a)
          dnn::PoolWindow(g.axis[a], o[a], &begin[a], &end[a], &padded[a]);
        bool reached = false;
        for (int d = begin[0]; d < end[0] && !reached && mask; ++d) {
          for (int h = begin[1]; h < end[1] && !reached && mask; ++h) {
            for (int w = begin[2]; w < end[2]; ++w) {
              reached = d == i[2] && h == i[3] && w == i[4];
              if (reached) break;
              float v[kVec];
              LoadChunk(xn + At(g.x, d, h, w), c0, g.channels, g.vec_x, v);
#pragma unroll
              for (int k = 0; k < kVec; ++k) mask &= v[k] == best[k] ? ~(1u << k) : ~0u;
            }
          }
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if (mask >> k & 1u) acc[k] += grad[k];
        }
      }
    }
  }
  StoreChunk(dx + i[0] * g.dx[0] + At(g.dx, i[2], i[3], i[4]), c0, g.channels, g.vec_dx, acc,
             g.alpha, g.beta);
}

// ---- Backward by tiles: 2-d square windows ----
//
// A block takes a tile of outputs (up to kTile a side) plus the kCover - 1 rows and columns of
// outputs before it (whose windows reach into the tile's inputs), and a group of chunks.
//  Phase 1: a thread per (output, chunk) reads dy and, for max, y and the window's x (independent
//  loads, in flight together) and leaves in shared memory the output's gradient share (dy, or
//  dy / divisor for average) and, for max, each channel's winner: the window tap (4 bits a
//  channel) of the first element equal to y.
//  Phase 2: a thread per (input, chunk) of the inputs the tile owns (from its first output's
//  window start to the next tile's; the last tiles take the rest of the input) adds, in (oh, ow)
//  order, the shares of the outputs covering it whose winner it is, and writes dx once.
// Every input is owned by one tile, and its covering outputs are all staged by that tile, so
// there are no atomics and the result is the gather's.

constexpr int kTile = 8;
constexpr int kMaxGroup = 16;
constexpr size_t kTileSmemBudget = 48 * 1024;

struct TileGeometry {
  int tile_h, tile_w;  // outputs per tile
  int tiles_h, tiles_w, groups;
  int ext_h, ext_w;  // staged outputs: the tile and the rows and columns before it
  int group;         // chunks per block
  int items;         // ext_h * ext_w * group
  FastDiv group_div, ext_w_div;
};

template <typename T, int kWin, int kStride>
__global__ void __launch_bounds__(kThreads)
    PoolLastBackwardTiled(const __grid_constant__ LastGeometry g,
                          const __grid_constant__ TileGeometry t, const T* __restrict__ x,
                          const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx) {
  constexpr int kVec = ChunkWidth<T>();
  constexpr int kPlanes = kVec / 4;
  constexpr int kCover = (kWin + kStride - 1) / kStride;  // outputs covering an input, per axis
  extern __shared__ float4 smem[];
  float4* share = smem;  // kPlanes planes of t.items float4s
  uint32_t* winners = reinterpret_cast<uint32_t*>(smem + kPlanes * t.items);
  const int grp = static_cast<int>(blockIdx.x % t.groups);
  const int tile = static_cast<int>(blockIdx.x / t.groups);
  const int th = tile / t.tiles_w, tw = tile - th * t.tiles_w;
  const int n = blockIdx.y;
  const dnn::PoolAxisOf<int>& ah = g.axis[1];
  const dnn::PoolAxisOf<int>& aw = g.axis[2];
  const int oh0 = th * t.tile_h, ow0 = tw * t.tile_w;
  const int base_h = oh0 - (kCover - 1), base_w = ow0 - (kCover - 1);
  const int chunk0 = grp * t.group;
  const int chunks = static_cast<int>(g.chunks.divisor);
  const bool max = g.mode == 0;

  for (int it = threadIdx.x; it < t.items; it += kThreads) {
    const int pos = static_cast<int>(Div(it, t.group_div));
    const int gi = it - pos * t.group;
    const int er = static_cast<int>(Div(pos, t.ext_w_div));
    const int oh = base_h + er, ow = base_w + pos - er * t.ext_w, chunk = chunk0 + gi;
    float grad[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) grad[k] = 0.0f;
    uint32_t win = 0xffffffffu;  // no winner in any channel
    if (oh >= 0 && oh < ah.out && ow >= 0 && ow < aw.out && chunk < chunks) {
      const int c0 = chunk * kVec;
      const T* dyp = dy + n * g.dy[0] + At(g.dy, 0, oh, ow);
      const T* yp = y + n * g.y[0] + At(g.y, 0, oh, ow);
      const T* xn = x + n * g.x[0];
      const int h0 = oh * kStride - ah.pad, w0 = ow * kStride - aw.pad;
      auto inside = [&](int e) {
        const int h = h0 + e / kWin, w = w0 + e % kWin;
        return h >= 0 && h < ah.in && w >= 0 && w < aw.in;
      };
      auto tap = [&](int e) { return xn + At(g.x, 0, h0 + e / kWin, w0 + e % kWin); };
      float best[kVec];
      unsigned found = 0;
      // Tap e's chunk v: the first tap equal to y wins, per channel.
      auto consider = [&](int e, const float* v) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          if (!(found >> k & 1u) && v[k] == best[k]) {
            found |= 1u << k;
            win &= ~(0xfu << (4 * k));
            win |= static_cast<uint32_t>(e) << (4 * k);
          }
        }
      };
      if (max && WholeChunk<T>(g.vec_x && g.vec_y && g.vec_dy, c0, g.channels)) {
        // dy, y and every tap in flight together.
        const uint4 raw_dy = LoadRaw(dyp, c0, true), raw_y = LoadRaw(yp, c0, true);
        uint4 raw[kWin * kWin];
#pragma unroll
        for (int e = 0; e < kWin * kWin; ++e) raw[e] = LoadRaw(tap(e), c0, inside(e));
        Unpack<T>(raw_dy, grad);
        // Taps from last to first, each overwriting the channels where it equals y, so the first
        // such tap is what stays; compared packed, without unpacking.
#pragma unroll
        for (int e = kWin * kWin - 1; e >= 0; --e) {
          if (!inside(e)) continue;
          const uint32_t m = EqualNibbles<T>(raw[e], raw_y);
          win = (win & ~m) | (static_cast<uint32_t>(e) * 0x11111111u & m);
        }
      } else if (max) {
        LoadChunk(dyp, c0, g.channels, g.vec_dy, grad);
        LoadChunk(yp, c0, g.channels, g.vec_y, best);
#pragma unroll
        for (int e = 0; e < kWin * kWin; ++e) {
          if (!inside(e)) continue;
          float v[kVec];
          LoadChunk(tap(e), c0, g.channels, g.vec_x, v);
          consider(e, v);
        }
      } else {
        LoadChunk(dyp, c0, g.channels, g.vec_dy, grad);
        int hb, he, hp, wb, we, wp;
        dnn::PoolWindow(ah, oh, &hb, &he, &hp);
        dnn::PoolWindow(aw, ow, &wb, &we, &wp);
        const float divisor = static_cast<float>(g.mode == 1 ? hp * wp : (he - hb) * (we - wb));
#pragma unroll
        for (int k = 0; k < kVec; ++k) grad[k] /= divisor;
      }
    }
#pragma unroll
    for (int p = 0; p < kPlanes; ++p) {
      share[p * t.items + it] =
          make_float4(grad[4 * p], grad[4 * p + 1], grad[4 * p + 2], grad[4 * p + 3]);
    }
    winners[it] = win;
  }
  __syncthreads();

  const int r0 = oh0 * kStride - ah.pad > 0 ? oh0 * kStride - ah.pad : 0;
  const int r1 = th == t.tiles_h - 1 ? ah.in : min(ah.in, (oh0 + t.tile_h) * kStride - ah.pad);
  const int q0 = ow0 * kStride - aw.pad > 0 ? ow0 * kStride - aw.pad : 0;
  const int q1 = tw == t.tiles_w - 1 ? aw.in : min(aw.in, (ow0 + t.tile_w) * kStride - aw.pad);
  if (r1 <= r0 || q1 <= q0) return;
  const FastDiv width = MakeFastDiv(static_cast<uint32_t>(q1 - q0));
  const int owned = (r1 - r0) * (q1 - q0) * t.group;
  T* dxn = dx + n * g.dx[0];
  for (int it = threadIdx.x; it < owned; it += kThreads) {
    const int pos = static_cast<int>(Div(it, t.group_div));
    const int gi = it - pos * t.group;
    const int chunk = chunk0 + gi;
    if (chunk >= chunks) continue;
    const int row = static_cast<int>(Div(pos, width));
    const int ih = r0 + row, iw = q0 + pos - row * (q1 - q0);
    int fh, lh, fw, lw;
    Covering(g, 1, ih, &fh, &lh);
    Covering(g, 2, iw, &fw, &lw);
    float acc[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc[k] = 0.0f;
#pragma unroll
    for (int a = 0; a < kCover; ++a) {
#pragma unroll
      for (int b = 0; b < kCover; ++b) {
        const int oh = fh + a, ow = fw + b;
        if (oh > lh || ow > lw) continue;
        const int at = ((oh - base_h) * t.ext_w + (ow - base_w)) * t.group + gi;
        float grad[kVec];
#pragma unroll
        for (int p = 0; p < kPlanes; ++p) {
          const float4 v = share[p * t.items + at];
          grad[4 * p] = v.x;
          grad[4 * p + 1] = v.y;
          grad[4 * p + 2] = v.z;
          grad[4 * p + 3] = v.w;
        }
        if (max) {
          const uint32_t tap = static_cast<uint32_t>((ih - (oh * kStride - ah.pad)) * kWin +
                                                     (iw - (ow * kStride - aw.pad)));
          // Bit 4 k set where channel k's winner nibble is `tap` (its xor is then 0).
          const uint32_t z = ~(winners[at] ^ tap * 0x11111111u);
          const uint32_t hits = z & z >> 1 & z >> 2 & z >> 3 & 0x11111111u;
#pragma unroll
          for (int k = 0; k < kVec; ++k) {
            if (hits >> (4 * k) & 1u) acc[k] += grad[k];
          }
        } else {
#pragma unroll
          for (int k = 0; k < kVec; ++k) acc[k] += grad[k];
        }
      }
    }
    StoreChunk(dxn + At(g.dx, 0, ih, iw), chunk * kVec, g.channels, g.vec_dx, acc, g.alpha, g.beta);
  }
}

// Whether the call is 2-d with a kWin x kWin window at stride kStride.
bool Square(const PoolingCall& c, int64_t win, int64_t stride) {
  return c.in[0] == 1 && c.out[0] == 1 && c.window[0] == 1 && c.window[1] == win &&
         c.window[2] == win && c.stride[1] == stride && c.stride[2] == stride;
}

template <typename T>
void LaunchForward(const PoolingCall& c, const LastGeometry& g, unsigned blocks, cudaStream_t s) {
  const T* x = static_cast<const T*>(c.x);
  T* y = static_cast<T*>(c.result);
  if (Square(c, 3, c.stride[1])) {
    PoolLastForward<T, 3><<<blocks, kThreads, 0, s>>>(g, x, y);
  } else if (Square(c, 2, c.stride[1])) {
    PoolLastForward<T, 2><<<blocks, kThreads, 0, s>>>(g, x, y);
  } else {
    PoolLastForward<T, 0><<<blocks, kThreads, 0, s>>>(g, x, y);
  }
}

// Bytes of shared memory per staged (output, chunk) of the tiled backward.
template <typename T>
constexpr size_t TileItemBytes() {
  return ChunkWidth<T>() / 4 * sizeof(float4) + sizeof(uint32_t);
}

// The tiling of a 2-d call whose covering outputs per axis are `cover`; false when the grid
// would not fit.
template <typename T>
bool TileFor(const PoolingCall& c, int64_t chunks, int cover, TileGeometry* t) {
  auto split = [](int64_t out, int* tile, int* tiles) {
    *tiles = static_cast<int>((out + kTile - 1) / kTile);
    *tile = static_cast<int>((out + *tiles - 1) / *tiles);  // balanced: 27 = 7 + 7 + 7 + 6
    *tiles = static_cast<int>((out + *tile - 1) / *tile);
  };
  split(c.out[1], &t->tile_h, &t->tiles_h);
  split(c.out[2], &t->tile_w, &t->tiles_w);
  t->ext_h = t->tile_h + cover - 1;
  t->ext_w = t->tile_w + cover - 1;
  const int64_t per_group =
      static_cast<int64_t>(kTileSmemBudget / (t->ext_h * t->ext_w * TileItemBytes<T>()));
  const int64_t most = std::max<int64_t>(1, std::min<int64_t>(kMaxGroup, per_group));
  t->groups = static_cast<int>((chunks + most - 1) / most);
  t->group = static_cast<int>((chunks + t->groups - 1) / t->groups);
  t->items = t->ext_h * t->ext_w * t->group;
  t->group_div = MakeFastDiv(static_cast<uint32_t>(t->group));
  t->ext_w_div = MakeFastDiv(static_cast<uint32_t>(t->ext_w));
  const int64_t blocks = static_cast<int64_t>(t->tiles_h) * t->tiles_w * t->groups;
  return c.n < 65536 && blocks < (int64_t{1} << 31);
}

template <typename T, int kWin, int kStride>
bool LaunchTiled(const PoolingCall& c, const LastGeometry& g, cudaStream_t s) {
  if (!Square(c, kWin, kStride)) return false;
  TileGeometry t;
  if (!TileFor<T>(c, g.chunks.divisor, (kWin + kStride - 1) / kStride, &t)) return false;
  const dim3 grid(static_cast<unsigned>(t.tiles_h * t.tiles_w * t.groups),
                  static_cast<unsigned>(c.n));
  const size_t smem = static_cast<size_t>(t.items) * TileItemBytes<T>();
  PoolLastBackwardTiled<T, kWin, kStride>
      <<<grid, kThreads, smem, s>>>(g, t, static_cast<const T*>(c.x), static_cast<const T*>(c.y),
                                    static_cast<const T*>(c.dy), static_cast<T*>(c.result));
  return true;
}

template <typename T>
void LaunchBackward(const PoolingCall& c, const LastGeometry& g, unsigned blocks, cudaStream_t s) {
  if (LaunchTiled<T, 3, 2>(c, g, s) || LaunchTiled<T, 2, 2>(c, g, s) ||
      LaunchTiled<T, 3, 1>(c, g, s)) {
    return;
  }
  PoolLastBackward<T>
      <<<blocks, kThreads, 0, s>>>(g, static_cast<const T*>(c.x), static_cast<const T*>(c.y),
                                   static_cast<const T*>(c.dy), static_cast<T*>(c.result));
}

template <typename T>
int LaunchTyped(const PoolingCall& c, bool forward, cudaStream_t s) {
  const int64_t* spatial = forward ? c.out : c.in;
  const int64_t positions = c.n * spatial[0] * spatial[1] * spatial[2];
  const int64_t chunks = ChunksPerRow<T>(c.c);
  const int64_t threads = positions * chunks;
  if (threads >= (int64_t{1} << 31) || c.c >= (int64_t{1} << 30)) {
    return kPoolingChannelsLastNotApplicable;
  }
  LastGeometry g;
  for (int a = 0; a < 3; ++a) {
    g.axis[a] = {static_cast<int>(c.in[a]), static_cast<int>(c.out[a]),
                 static_cast<int>(c.window[a]), static_cast<int>(c.stride[a]),
                 static_cast<int>(c.pad[a])};
    g.stride_div[a] = MakeFastDiv(static_cast<uint32_t>(c.stride[a]));
  }
  const int64_t position_dims[5] = {c.n, 1, spatial[0], spatial[1], spatial[2]};
  g.positions = WalkFor(position_dims, forward ? c.y_strides : c.dx_strides);
  g.chunks = MakeFastDiv(static_cast<uint32_t>(chunks));
  g.threads = static_cast<uint32_t>(threads);
  g.channels = static_cast<int>(c.c);
  for (int d = 0; d < 5; ++d) {
    g.x[d] = c.x_strides[d];
    g.y[d] = c.y_strides[d];
    g.dy[d] = c.dy_strides[d];
    g.dx[d] = c.dx_strides[d];
  }
  const int64_t in_dims[5] = {c.n, c.c, c.in[0], c.in[1], c.in[2]};
  const int64_t out_dims[5] = {c.n, c.c, c.out[0], c.out[1], c.out[2]};
  g.vec_x = RowsAligned<T>(c.x, in_dims, c.x_strides);
  g.vec_y = RowsAligned<T>(forward ? c.result : c.y, out_dims, c.y_strides);
  g.vec_dy = !forward && RowsAligned<T>(c.dy, out_dims, c.dy_strides);
  g.vec_dx = !forward && RowsAligned<T>(c.result, in_dims, c.dx_strides);
  g.mode = c.mode;
  g.alpha = c.alpha;
  g.beta = c.beta;
  const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
  if (forward) {
    LaunchForward<T>(c, g, blocks, s);
  } else {
    LaunchBackward<T>(c, g, blocks, s);
  }
  return LastError();
}

}  // namespace

int LaunchPoolingChannelsLast(const PoolingCall& c, bool forward, void* stream) {
  constexpr int kNo = kPoolingChannelsLastNotApplicable;
  if (c.x_strides[1] != 1 || c.y_strides[1] != 1) return kNo;
  if (!forward && (c.dy_strides[1] != 1 || c.dx_strides[1] != 1)) return kNo;
  // Indices and window bounds in 32 bits.
  for (int a = 0; a < 3; ++a) {
    if (c.in[a] + 2 * c.pad[a] + c.window[a] >= (int64_t{1} << 30) || c.n >= (int64_t{1} << 31)) {
      return kNo;
    }
  }
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
