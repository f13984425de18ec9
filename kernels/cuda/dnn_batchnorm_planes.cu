// Training batch norm over NCHW channels small enough for one block each (ResNet's 28x28, 14x14
// and 7x7 layers): the block sums its channel, finishes it (FinishFeature: statistics, running
// updates, coefficients) and applies it, in one launch. The two-stage path launches three kernels
// over thousands of short blocks for these sizes and ran at a quarter of copy bandwidth; here the
// second read of the channel comes from L2, which the first read just filled.
#include "kernels/cuda/primitive_launch.h"
#include "kernels/cuda/reduce_finish.cuh"
#include "kernels/cuda/reduce_terms.cuh"
#include "kernels/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

// Threads per block: 512, or 1024 for channels past kWidePlane elements, where a block's loads
// in flight, not the block count, bound the speed (one block per SM streams a whole channel).
constexpr int kNarrowThreads = 512, kWideThreads = 1024;
constexpr int64_t kWidePlane = 16384;
// Largest channel (N x H x W elements) a block takes: past it, too few blocks stream too much
// each, and the two-stage path is faster (ResNet-18 at batch 64: the 28x28 layers' 50176 are
// in, the 56x56 layers' 200704 out).
constexpr int64_t kMaxPlaneElements = 65536;
constexpr int kInFlight = 8;

// Where one channel's elements lie: `rows` runs of `inner` contiguous elements, `row_stride`
// apart, from the channel's start.
struct Plane {
  uint32_t rows, inner, count;
  int64_t row_stride;
};

__device__ __forceinline__ Plane PlaneOf(const ReduceCall& c) {
  const int last = c.reduce_rank - 1;
  Plane p;
  p.inner = static_cast<uint32_t>(c.reduce_dims[last]);
  p.rows = last > 0 ? static_cast<uint32_t>(c.reduce_dims[0]) : 1;
  p.row_stride = last > 0 ? c.a_reduce_strides[0] : 0;
  p.count = p.rows * p.inner;
  return p;
}

__device__ __forceinline__ int64_t OffsetOf(const Plane& p, uint32_t i) {
  const uint32_t row = i / p.inner;
  return row * p.row_stride + (i - row * p.inner);
}

// The block's two sums in double, in a fixed order (deterministic), to every thread.
template <int kThreads>
__device__ void BlockSums(double* s0, double* s1) {
  __shared__ double partial[2][kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    *s0 += __shfl_xor_sync(0xffffffffu, *s0, o);
    *s1 += __shfl_xor_sync(0xffffffffu, *s1, o);
  }
  if (threadIdx.x % 32 == 0) {
    partial[0][threadIdx.x / 32] = *s0;
    partial[1][threadIdx.x / 32] = *s1;
  }
  __syncthreads();
  double t0 = 0, t1 = 0;
  for (int w = 0; w < kThreads / 32; ++w) t0 += partial[0][w], t1 += partial[1][w];
  *s0 = t0;
  *s1 = t1;
}

// kMask: the backward through a fused ReLU (dy counts where the forward's output is positive).
template <int kThreads, bool kBackward, bool kMask>
__global__ void __launch_bounds__(kThreads)
    BatchNormPlaneKernel(const __grid_constant__ ReduceCall c, float alpha, float beta, float* out,
                         bool relu) {
  const int64_t f = blockIdx.x;
  const Plane p = PlaneOf(c);
  const int64_t base = f * c.a_feature_strides[0];
  const float* x = static_cast<const float*>(c.a.data) + base;
  const float* dy = kBackward ? static_cast<const float*>(c.b.data) + base : nullptr;
  const float* y = kMask ? static_cast<const float*>(c.mask.data) + base : nullptr;
  out += base;
  double s0 = 0, s1 = 0;
  for (uint32_t i0 = threadIdx.x; i0 < p.count; i0 += kInFlight * kThreads) {
    float a[kInFlight], b[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const uint32_t i = i0 + k * kThreads;
      a[k] = b[k] = 0.0f;
      if (i < p.count) {
        const int64_t o = OffsetOf(p, i);
        a[k] = x[o];
        if constexpr (kBackward) b[k] = kMask && !(y[o] > 0.0f) ? 0.0f : dy[o];
      }
    }
    float t0 = 0, t1 = 0;
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) AddTerms<float>(c.op, a[k], b[k], &t0, &t1);
    s0 += t0;
    s1 += t1;
  }
  BlockSums<kThreads>(&s0, &s1);
  if (threadIdx.x == 0) FinishFeature(c, f, s0, s1);
  __syncthreads();  // thread 0's coefficients are in global memory, visible to the block now
  const int64_t F = c.features;
  const float scale = c.dense[f], scale_last = c.dense[F + f], bias = c.dense[2 * F + f],
              shift = c.dense[3 * F + f];
  // The second pass, kInFlight elements per thread loaded before any is written (the loads
  // cannot move past the stores on their own: out may alias x or dy), from the channel's end:
  // what the first pass read last is likeliest still in L2 when the blocks' channels together
  // outgrow it (the 28x28 backward through a ReLU reads 77 MB at batch 64).
  constexpr uint32_t kChunk = kInFlight * kThreads;
  for (uint32_t chunk = (p.count + kChunk - 1) / kChunk; chunk-- > 0;) {
    const uint32_t i0 = chunk * kChunk + threadIdx.x;
    float a[kInFlight], g[kInFlight];
    int64_t o[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      const uint32_t i = i0 + k * kThreads;
      o[k] = i < p.count ? OffsetOf(p, i) : -1;
      a[k] = g[k] = 0.0f;
      if (o[k] >= 0) {
        a[k] = x[o[k]];
        if constexpr (kBackward) g[k] = kMask && !(y[o[k]] > 0.0f) ? 0.0f : dy[o[k]];
      }
    }
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) {
      if (o[k] < 0) continue;
      float v;
      if constexpr (kBackward) {
        v = scale * g[k] + scale_last * (a[k] - shift) + bias;
      } else {
        v = scale * (a[k] - shift) + bias;
        if (relu) v = v > 0.0f ? v : 0.0f;
      }
      float* dst = out + o[k];
      *dst = Blend(alpha, v, beta, [&] { return *dst; });
    }
  }
}

template <int kThreads>
void Launch(const ReduceCall& c, float alpha, float beta, bool relu, float* out, unsigned blocks,
            cudaStream_t s) {
  if (c.op == ReduceOp::kMoments) {
    BatchNormPlaneKernel<kThreads, false, false>
        <<<blocks, kThreads, 0, s>>>(c, alpha, beta, out, relu);
  } else if (c.mask.data != nullptr) {
    BatchNormPlaneKernel<kThreads, true, true>
        <<<blocks, kThreads, 0, s>>>(c, alpha, beta, out, false);
  } else {
    BatchNormPlaneKernel<kThreads, true, false>
        <<<blocks, kThreads, 0, s>>>(c, alpha, beta, out, false);
  }
}

}  // namespace

bool BatchNormPlanesServe(const ReduceCall& c) {
  if (c.op != ReduceOp::kMoments && c.op != ReduceOp::kGradientSums) return false;
  if (c.feature_rank != 1 || c.reduce_rank < 1 || c.reduce_rank > 2) return false;
  if (c.reduce_count > kMaxPlaneElements || c.dense == nullptr) return false;
  const int last = c.reduce_rank - 1;
  if (c.a.type != Storage::kF32 || c.a_reduce_strides[last] != 1) return false;
  if (c.op == ReduceOp::kGradientSums) {
    // dy (and the mask) laid out as x.
    if (c.b.type != Storage::kF32 || c.b_feature_strides[0] != c.a_feature_strides[0]) return false;
    for (int d = 0; d < c.reduce_rank; ++d) {
      if (c.b_reduce_strides[d] != c.a_reduce_strides[d]) return false;
    }
    if (c.mask.data != nullptr) {
      if (c.mask.type != Storage::kF32 || c.mask_feature_strides[0] != c.a_feature_strides[0]) {
        return false;
      }
      for (int d = 0; d < c.reduce_rank; ++d) {
        if (c.mask_reduce_strides[d] != c.a_reduce_strides[d]) return false;
      }
    }
  }
  return true;
}

int LaunchBatchNormPlanes(const ReduceCall& c, float alpha, float beta, bool relu, void* out,
                          void* stream) {
  if (!BatchNormPlanesServe(c)) return static_cast<int>(cudaErrorInvalidValue);
  const unsigned blocks = static_cast<unsigned>(c.features);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  float* o = static_cast<float*>(out);
  if (c.reduce_count > kWidePlane) {
    Launch<kWideThreads>(c, alpha, beta, relu, o, blocks, s);
  } else {
    Launch<kNarrowThreads>(c, alpha, beta, relu, o, blocks, s);
  }
  return LastError();
}

}  // namespace cuda
}  // namespace kiln
