// Pooling, 2-d and 3-d, any strides: the general kernels, for what the row kernels
// (dnn_pooling_rows.cu, contiguous rows) and the channels-last kernels
// (dnn_pooling_channels_last.cu) do not take. Forward: one thread per output element, threads
// ordered like the output's memory so stores coalesce. Backward gathers instead of scattering (one
// thread per input element visits the outputs whose windows cover it), so there are no atomics
// and the result is deterministic; max pooling sends the gradient to the first maximum of each
// window in (d, h, w) order, found by comparing with the forward output y.
#include <algorithm>
#include <cfloat>

#include "dnn/cuda/pooling_channels_last.h"
#include "dnn/cuda/pooling_rows.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/storage_access.cuh"
#include "dnn/pooling_math.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;

// The call's geometry in index type I: axes, and strides in (N, C, D, H, W) order.
template <typename I>
struct Geometry {
  dnn::PoolAxisOf<I> axis[3];
  FastDiv stride_div[3];
  I x[5], y[5], dy[5], dx[5];
  int mode;
  float alpha, beta;
};

template <typename I>
Geometry<I> GeometryOf(const PoolingCall& c) {
  Geometry<I> g;
  for (int a = 0; a < 3; ++a) {
    g.axis[a] = {static_cast<I>(c.in[a]), static_cast<I>(c.out[a]), static_cast<I>(c.window[a]),
                 static_cast<I>(c.stride[a]), static_cast<I>(c.pad[a])};
    g.stride_div[a] = MakeFastDiv(static_cast<uint32_t>(c.stride[a]));
  }
  for (int d = 0; d < 5; ++d) {
    g.x[d] = static_cast<I>(c.x_strides[d]);
    g.y[d] = static_cast<I>(c.y_strides[d]);
    g.dy[d] = static_cast<I>(c.dy_strides[d]);
    g.dx[d] = static_cast<I>(c.dx_strides[d]);
  }
  g.mode = c.mode;
  g.alpha = c.alpha;
  g.beta = c.beta;
  return g;
}

template <typename I>
__device__ __forceinline__ I Dot5(const I* strides, const I* idx) {
  return idx[0] * strides[0] + idx[1] * strides[1] + idx[2] * strides[2] + idx[3] * strides[3] +
         idx[4] * strides[4];
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    PoolForwardKernel(const __grid_constant__ Geometry<I> g, const __grid_constant__ Walk walk,
                      I total, const T* __restrict__ x, T* __restrict__ y) {
  const I e = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= total) return;
  I o[5];
  DecodeWalk(walk, e, o);
  I begin[3], end[3], padded[3];
#pragma unroll
  for (int a = 0; a < 3; ++a) dnn::PoolWindow(g.axis[a], o[2 + a], &begin[a], &end[a], &padded[a]);
  const T* plane = x + o[0] * g.x[0] + o[1] * g.x[1];
  float best = -FLT_MAX, sum = 0;
  for (I d = begin[0]; d < end[0]; ++d) {
    for (I h = begin[1]; h < end[1]; ++h) {
      const T* row = plane + d * g.x[2] + h * g.x[3];
      for (I w = begin[2]; w < end[2]; ++w) {
        const float v = ToFloat(row[w * g.x[4]]);
        best = v > best ? v : best;
        sum += v;
      }
    }
  }
  float r = best;
  if (g.mode != 0) {
    const I divisor = g.mode == 1 ? padded[0] * padded[1] * padded[2]
                                  : (end[0] - begin[0]) * (end[1] - begin[1]) * (end[2] - begin[2]);
    r = sum / static_cast<float>(divisor);
  }
  T* out = y + Dot5(g.y, o);
  *out = FromFloat<T>(Blend(g.alpha, r, g.beta, [&] { return ToFloat(*out); }));
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    PoolBackwardKernel(const __grid_constant__ Geometry<I> g, const __grid_constant__ Walk walk,
                       I total, const T* __restrict__ x, const T* __restrict__ y,
                       const T* __restrict__ dy, T* __restrict__ dx) {
  const I e = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= total) return;
  I i[5];
  DecodeWalk(walk, e, i);
  I first[3], last[3];
#pragma unroll
  for (int a = 0; a < 3; ++a) {
    if (sizeof(I) == 4) {  // PoolCoveringOutputs with the divisions by the stride made cheap
      const dnn::PoolAxisOf<I>& ax = g.axis[a];
      const I lo = i[2 + a] + ax.pad - ax.window + 1;
      first[a] =
          lo <= 0 ? 0
                  : static_cast<I>(Div(static_cast<uint32_t>(lo + ax.stride - 1), g.stride_div[a]));
      const I l = static_cast<I>(Div(static_cast<uint32_t>(i[2 + a] + ax.pad), g.stride_div[a]));
      last[a] = l < ax.out - 1 ? l : ax.out - 1;
    } else {
      dnn::PoolCoveringOutputs(g.axis[a], i[2 + a], &first[a], &last[a]);
    }
  }
  const T* xp = x + i[0] * g.x[0] + i[1] * g.x[1];
  const T* yp = y + i[0] * g.y[0] + i[1] * g.y[1];
  const T* dyp = dy + i[0] * g.dy[0] + i[1] * g.dy[1];
  const float self = g.mode == 0 ? ToFloat(xp[i[2] * g.x[2] + i[3] * g.x[3] + i[4] * g.x[4]]) : 0;
  float acc = 0;
  for (I od = first[0]; od <= last[0]; ++od) {
    for (I oh = first[1]; oh <= last[1]; ++oh) {
      for (I ow = first[2]; ow <= last[2]; ++ow) {
        const float grad = ToFloat(dyp[od * g.dy[2] + oh * g.dy[3] + ow * g.dy[4]]);
        if (g.mode != 0) {
          I divisor = 1;
          const I out[3] = {od, oh, ow};
#pragma unroll
          for (int a = 0; a < 3; ++a) {
            I begin, end, padded;
            dnn::PoolWindow(g.axis[a], out[a], &begin, &end, &padded);
            divisor *= g.mode == 1 ? padded : end - begin;
          }
          acc += grad / static_cast<float>(divisor);
          continue;
        }
        const float best = ToFloat(yp[od * g.y[2] + oh * g.y[3] + ow * g.y[4]]);
        if (self != best) continue;
        // Self holds the maximum; it wins unless an earlier element of the window holds it too.
        I begin[3], end[3], padded[3];
        const I out[3] = {od, oh, ow};
#pragma unroll
        for (int a = 0; a < 3; ++a) {
          dnn::PoolWindow(g.axis[a], out[a], &begin[a], &end[a], &padded[a]);
        }
        bool earlier = false;
        for (I d = begin[0]; d <= i[2] && !earlier; ++d) {
          for (I h = begin[1]; h < end[1] && !earlier; ++h) {
            for (I w = begin[2]; w < end[2]; ++w) {
              if (d == i[2] && (h > i[3] || (h == i[3] && w >= i[4]))) break;
              if (ToFloat(xp[d * g.x[2] + h * g.x[3] + w * g.x[4]]) == best) {
                earlier = true;
                break;
              }
            }
          }
        }
        if (!earlier) acc += grad;
      }
    }
  }
  T* out = dx + Dot5(g.dx, i);
  *out = FromFloat<T>(Blend(g.alpha, acc, g.beta, [&] { return ToFloat(*out); }));
}

template <typename T, typename I, bool kForward>
void Launch(const PoolingCall& c, const Walk& walk, int64_t total, cudaStream_t s) {
  const unsigned blocks = BlocksFor(total, kThreads, int64_t{1} << 31);
  const Geometry<I> g = GeometryOf<I>(c);
  if (kForward) {
    PoolForwardKernel<T, I><<<blocks, kThreads, 0, s>>>(
        g, walk, static_cast<I>(total), static_cast<const T*>(c.x), static_cast<T*>(c.result));
  } else {
    PoolBackwardKernel<T, I><<<blocks, kThreads, 0, s>>>(
        g, walk, static_cast<I>(total), static_cast<const T*>(c.x), static_cast<const T*>(c.y),
        static_cast<const T*>(c.dy), static_cast<T*>(c.result));
  }
}

// 32-bit index arithmetic when every offset fits, else 64-bit.
template <typename T, bool kForward>
int LaunchTyped(const PoolingCall& c, const Walk& walk, int64_t total, void* stream) {
  int64_t span = total;
  for (int d = 0; d < 5; ++d) {
    const int64_t extent = d < 2 ? (d == 0 ? c.n : c.c) : std::max(c.in[d - 2], c.out[d - 2]);
    span += (extent - 1) * (c.x_strides[d] + c.y_strides[d] + c.dy_strides[d] + c.dx_strides[d]);
  }
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (span < (int64_t{1} << 31)) {
    Launch<T, int, kForward>(c, walk, total, s);
  } else {
    Launch<T, int64_t, kForward>(c, walk, total, s);
  }
  return LastError();
}

template <bool kForward>
int LaunchPool(const PoolingCall& c, void* stream) {
  const int global = LaunchPoolingGlobalAverage(c, kForward, stream);
  if (global != kPoolingGlobalNotApplicable) return global;
  const int rows = LaunchPoolingRows(c, kForward, stream);
  if (rows != kPoolingRowsNotApplicable) return rows;
  const int last = LaunchPoolingChannelsLast(c, kForward, stream);
  if (last != kPoolingChannelsLastNotApplicable) return last;
  const int64_t* spatial = kForward ? c.out : c.in;
  const int64_t dims[5] = {c.n, c.c, spatial[0], spatial[1], spatial[2]};
  const Walk walk = WalkFor(dims, kForward ? c.y_strides : c.dx_strides);
  const int64_t total = dims[0] * dims[1] * dims[2] * dims[3] * dims[4];
  switch (c.type) {
    case Storage::kF16:
      return LaunchTyped<__half, kForward>(c, walk, total, stream);
    case Storage::kBF16:
      return LaunchTyped<__nv_bfloat16, kForward>(c, walk, total, stream);
    default:
      return LaunchTyped<float, kForward>(c, walk, total, stream);
  }
}

}  // namespace

int LaunchPoolingForward(const PoolingCall& call, void* stream) {
  return LaunchPool<true>(call, stream);
}

int LaunchPoolingBackward(const PoolingCall& call, void* stream) {
  return LaunchPool<false>(call, stream);
}

}  // namespace cuda
}  // namespace kiln
