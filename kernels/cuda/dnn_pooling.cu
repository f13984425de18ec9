// Pooling, 2-d and 3-d, any strides. Forward: one thread per output element, threads ordered
// like the output's memory so stores coalesce. Backward gathers instead of scattering (one
// thread per input element visits the outputs whose windows cover it), so there are no atomics
// and the result is deterministic; max pooling sends the gradient to the first maximum of each
// window in (d, h, w) order, found by comparing with the forward output y.
#include <cfloat>

#include "kernels/cuda/primitive_launch.h"
#include "kernels/cuda/storage_access.cuh"
#include "kernels/dnn/pooling_math.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ dnn::PoolAxis Axis(const PoolingCall& c, int a) {
  dnn::PoolAxis axis;
  axis.in = c.in[a];
  axis.out = c.out[a];
  axis.window = c.window[a];
  axis.stride = c.stride[a];
  axis.pad = c.pad[a];
  return axis;
}

template <typename T, typename Index>
__global__ void __launch_bounds__(kThreads)
    PoolForwardKernel(const __grid_constant__ PoolingCall c, const __grid_constant__ Walk walk,
                      Index total) {
  const Index e = static_cast<Index>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= total) return;
  int64_t o[5];
  DecodeWalk(walk, e, o);
  int64_t begin[3], end[3], padded[3];
#pragma unroll
  for (int a = 0; a < 3; ++a) dnn::PoolWindow(Axis(c, a), o[2 + a], &begin[a], &end[a], &padded[a]);
  const T* x = static_cast<const T*>(c.x) + o[0] * c.x_strides[0] + o[1] * c.x_strides[1];
  float best = -FLT_MAX, sum = 0;
  for (int64_t d = begin[0]; d < end[0]; ++d) {
    for (int64_t h = begin[1]; h < end[1]; ++h) {
      const T* row = x + d * c.x_strides[2] + h * c.x_strides[3];
      for (int64_t w = begin[2]; w < end[2]; ++w) {
        const float v = ToFloat(row[w * c.x_strides[4]]);
        best = v > best ? v : best;
        sum += v;
      }
    }
  }
  float r;
  if (c.mode == 0) {
    r = best;
  } else {
    const int64_t divisor = c.mode == 1 ? padded[0] * padded[1] * padded[2]
                                        : (end[0] - begin[0]) * (end[1] - begin[1]) *
                                              (end[2] - begin[2]);
    r = sum / static_cast<float>(divisor);
  }
  T* y = static_cast<T*>(c.result) + Offset5(c.y_strides, o);
  *y = FromFloat<T>(Blend(c.alpha, r, c.beta, [&] { return ToFloat(*y); }));
}

template <typename T, typename Index>
__global__ void __launch_bounds__(kThreads)
    PoolBackwardKernel(const __grid_constant__ PoolingCall c, const __grid_constant__ Walk walk,
                       Index total) {
  const Index e = static_cast<Index>(blockIdx.x) * kThreads + threadIdx.x;
  if (e >= total) return;
  int64_t i[5];
  DecodeWalk(walk, e, i);
  int64_t first[3], last[3];
#pragma unroll
  for (int a = 0; a < 3; ++a) dnn::PoolCoveringOutputs(Axis(c, a), i[2 + a], &first[a], &last[a]);
  const T* x = static_cast<const T*>(c.x) + i[0] * c.x_strides[0] + i[1] * c.x_strides[1];
  const T* y = static_cast<const T*>(c.y) + i[0] * c.y_strides[0] + i[1] * c.y_strides[1];
  const T* dy = static_cast<const T*>(c.dy) + i[0] * c.dy_strides[0] + i[1] * c.dy_strides[1];
  const float self =
      c.mode == 0 ? ToFloat(x[i[2] * c.x_strides[2] + i[3] * c.x_strides[3] + i[4] * c.x_strides[4]])
                  : 0.0f;
  float acc = 0;
  for (int64_t od = first[0]; od <= last[0]; ++od) {
    for (int64_t oh = first[1]; oh <= last[1]; ++oh) {
      for (int64_t ow = first[2]; ow <= last[2]; ++ow) {
        const int64_t out[3] = {od, oh, ow};
        const float g =
            ToFloat(dy[od * c.dy_strides[2] + oh * c.dy_strides[3] + ow * c.dy_strides[4]]);
        int64_t begin[3], end[3], padded[3];
#pragma unroll
        for (int a = 0; a < 3; ++a) {
          dnn::PoolWindow(Axis(c, a), out[a], &begin[a], &end[a], &padded[a]);
        }
        if (c.mode != 0) {
          const int64_t divisor = c.mode == 1 ? padded[0] * padded[1] * padded[2]
                                              : (end[0] - begin[0]) * (end[1] - begin[1]) *
                                                    (end[2] - begin[2]);
          acc += g / static_cast<float>(divisor);
          continue;
        }
        const float best =
            ToFloat(y[od * c.y_strides[2] + oh * c.y_strides[3] + ow * c.y_strides[4]]);
        if (self != best) continue;
        // Self holds the maximum; it wins unless an earlier element of the window holds it too.
        bool earlier = false;
        for (int64_t d = begin[0]; d <= i[2] && !earlier; ++d) {
          for (int64_t h = begin[1]; h < end[1] && !earlier; ++h) {
            for (int64_t w = begin[2]; w < end[2]; ++w) {
              if (d == i[2] && (h > i[3] || (h == i[3] && w >= i[4]))) break;
              if (ToFloat(x[d * c.x_strides[2] + h * c.x_strides[3] + w * c.x_strides[4]]) ==
                  best) {
                earlier = true;
                break;
              }
            }
          }
        }
        if (!earlier) acc += g;
      }
    }
  }
  T* dx = static_cast<T*>(c.result) + Offset5(c.dx_strides, i);
  *dx = FromFloat<T>(Blend(c.alpha, acc, c.beta, [&] { return ToFloat(*dx); }));
}

template <typename T, bool kForward>
int LaunchTyped(const PoolingCall& c, const Walk& walk, int64_t total, void* stream) {
  const unsigned blocks = BlocksFor(total, kThreads, int64_t{1} << 31);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const bool narrow = total < (int64_t{1} << 31);
  if (kForward) {
    if (narrow) {
      PoolForwardKernel<T, uint32_t><<<blocks, kThreads, 0, s>>>(c, walk, total);
    } else {
      PoolForwardKernel<T, int64_t><<<blocks, kThreads, 0, s>>>(c, walk, total);
    }
  } else if (narrow) {
    PoolBackwardKernel<T, uint32_t><<<blocks, kThreads, 0, s>>>(c, walk, total);
  } else {
    PoolBackwardKernel<T, int64_t><<<blocks, kThreads, 0, s>>>(c, walk, total);
  }
  return LastError();
}

template <bool kForward>
int LaunchPool(const PoolingCall& c, void* stream) {
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
