// Pooling, 2-d and 3-d, of channels-last tensors (channel stride 1 in every operand). A thread
// owns one chunk (16 bytes of consecutive channels of one position, channels_last.cuh): the
// threads of a warp own consecutive chunks, so each access of a warp is one contiguous run, and
// every window tap is one 16-byte load.
//  - Forward: a thread per output chunk reduces its window's chunks.
//  - Backward gathers (no atomics, the same result on every run): a thread per input chunk visits
//    the outputs whose windows cover it, in (d, h, w) order, and adds their gradient shares. Max
//    pooling sends an output's gradient to the first element of its window, in (d, h, w) order,
//    that equals y (as dnn_pooling.cu does): a channel of the input takes it when x == y there
//    and no earlier element of the window equals y, which only the outputs where some channel of
//    the chunk matches need to check.
// The common square windows (3x3 stride 2, 2x2 stride 2, 3x3 stride 1, any padding) have their
// window and covering loops unrolled at compile time, so a thread's loads are independent and
// issued together; the rest take the same code with run-time loops.
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/channels_last.cuh"
#include "kernels/cuda/pooling_channels_last.h"
#include "kernels/cuda/storage_access.cuh"
#include "kernels/dnn/pooling_math.h"

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
#pragma unroll
    for (int e = 0; e < kWin * kWin; ++e) {
      const int h = h0 + e / kWin, w = w0 + e % kWin;
      if (h >= begin[1] && h < end[1] && w >= begin[2] && w < end[2]) take(0, h, w);
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

// kWin, kStride > 0: 2-d with a kWin x kWin window at stride kStride (any padding), unrolled.
template <typename T, int kWin, int kStride>
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

  // Output o's share of the input's gradient, added to acc.
  auto visit = [&](int od, int oh, int ow) {
    float grad[kVec];
    LoadChunk(dyn + At(g.dy, od, oh, ow), c0, g.channels, g.vec_dy, grad);
    if (!max) {
      const int o[3] = {od, oh, ow};
      const float divisor = static_cast<float>(AverageDivisor(g, o));
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc[k] += grad[k] / divisor;
      return;
    }
    float best[kVec];
    LoadChunk(yn + At(g.y, od, oh, ow), c0, g.channels, g.vec_y, best);
    unsigned mask = 0;  // channels where the input holds y
#pragma unroll
    for (int k = 0; k < kVec; ++k) mask |= self[k] == best[k] ? 1u << k : 0u;
    mask &= channel_bits;
    if (mask == 0) return;
    // Clear the channels where an earlier element of o's window holds y too.
    auto earlier = [&](int d, int h, int w) {
      float v[kVec];
      LoadChunk(xn + At(g.x, d, h, w), c0, g.channels, g.vec_x, v);
#pragma unroll
      for (int k = 0; k < kVec; ++k) mask &= v[k] == best[k] ? ~(1u << k) : ~0u;
    };
    if constexpr (kWin > 0) {
      const int h0 = oh * kStride - g.axis[1].pad, w0 = ow * kStride - g.axis[2].pad;
      const int self_tap = (i[3] - h0) * kWin + (i[4] - w0);
#pragma unroll
      for (int e = 0; e < kWin * kWin; ++e) {
        const int h = h0 + e / kWin, w = w0 + e % kWin;
        if (e < self_tap && h >= 0 && h < g.axis[1].in && w >= 0 && w < g.axis[2].in) {
          earlier(0, h, w);
        }
      }
    } else {
      const int o[3] = {od, oh, ow};
      int begin[3], end[3], padded[3];
#pragma unroll
      for (int a = 0; a < 3; ++a) dnn::PoolWindow(g.axis[a], o[a], &begin[a], &end[a], &padded[a]);
      bool reached = false;
      for (int d = begin[0]; d < end[0] && !reached && mask; ++d) {
        for (int h = begin[1]; h < end[1] && !reached && mask; ++h) {
          for (int w = begin[2]; w < end[2]; ++w) {
            reached = d == i[2] && h == i[3] && w == i[4];
            if (reached) break;
            earlier(d, h, w);
          }
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc[k] += mask >> k & 1u ? grad[k] : 0.0f;
  };

  if constexpr (kWin > 0) {
    constexpr int kCover = (kWin + kStride - 1) / kStride;  // outputs covering an input, per axis
#pragma unroll
    for (int a = 0; a < kCover; ++a) {
#pragma unroll
      for (int b = 0; b < kCover; ++b) {
        if (first[1] + a <= last[1] && first[2] + b <= last[2]) {
          visit(0, first[1] + a, first[2] + b);
        }
      }
    }
  } else {
    for (int od = first[0]; od <= last[0]; ++od) {
      for (int oh = first[1]; oh <= last[1]; ++oh) {
        for (int ow = first[2]; ow <= last[2]; ++ow) visit(od, oh, ow);
      }
    }
  }
  StoreChunk(dx + i[0] * g.dx[0] + At(g.dx, i[2], i[3], i[4]), c0, g.channels, g.vec_dx, acc,
             g.alpha, g.beta);
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

template <typename T>
void LaunchBackward(const PoolingCall& c, const LastGeometry& g, unsigned blocks, cudaStream_t s) {
  const T* x = static_cast<const T*>(c.x);
  const T* y = static_cast<const T*>(c.y);
  const T* dy = static_cast<const T*>(c.dy);
  T* dx = static_cast<T*>(c.result);
  if (Square(c, 3, 2)) {
    PoolLastBackward<T, 3, 2><<<blocks, kThreads, 0, s>>>(g, x, y, dy, dx);
  } else if (Square(c, 2, 2)) {
    PoolLastBackward<T, 2, 2><<<blocks, kThreads, 0, s>>>(g, x, y, dy, dx);
  } else if (Square(c, 3, 1)) {
    PoolLastBackward<T, 3, 1><<<blocks, kThreads, 0, s>>>(g, x, y, dy, dx);
  } else {
    PoolLastBackward<T, 0, 0><<<blocks, kThreads, 0, s>>>(g, x, y, dy, dx);
  }
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
