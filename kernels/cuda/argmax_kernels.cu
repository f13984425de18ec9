// ArgMax on the GPU: a row per thread, or per warp when the row is long and its elements are
// adjacent (no axis, or the last axis), so that a warp's loads are one row's consecutive
// elements; with trailing dims (an axis before the last), neighbouring threads take neighbouring
// rows, whose elements sit side by side. top_k passes over the row each take the best entry that
// ranks after the previous pass's pick: no storage beyond registers for any top_k, and the order
// is total (the index breaks ties), so every pass's pick is unique and runs repeat bitwise.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "dnn/cuda/storage_access.cuh"
#include "kernels/cuda/argmax_launch.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;

// True when (va, ia) ranks before (vb, ib): the larger value, NaN above every number, and on
// equal values the higher index (Caffe's std::greater on (value, index) pairs).
__device__ __forceinline__ bool RanksBefore(float va, int64_t ia, float vb, int64_t ib) {
  const bool a_nan = isnan(va), b_nan = isnan(vb);
  if (a_nan != b_nan) return a_nan;
  if (!a_nan && va != vb) return va > vb;
  return ia > ib;
}

// The element offset of row-major index `flat` over dims[begin, end).
__device__ int64_t OffsetOver(const ArgMaxLaunch& p, int64_t flat, int begin, int end) {
  int64_t offset = 0;
  for (int d = end - 1; d >= begin; --d) {
    const int64_t q = flat / p.dims[d];
    offset += (flat - q * p.dims[d]) * p.strides[d];
    flat = q;
  }
  return offset;
}

// Where entry k of row (o, i) goes (ops/argmax_params.h).
__device__ __forceinline__ int64_t OutputOffset(const ArgMaxLaunch& p, int64_t o, int64_t i,
                                                int64_t k, bool value) {
  if (p.has_axis) return (o * p.top_k + k) * p.inner + i;
  if (!p.out_max_val) return o * p.top_k + k;
  return o * 2 * p.top_k + (value ? p.top_k : 0) + k;
}

// G lanes per row (1 or 32, a whole warp, so the shuffles below see full warps).
// `rows_packed`: without an axis, each item's elements are dense (offset o stride0 + j).
template <typename T, int G>
__global__ void ArgMaxKernel(ArgMaxLaunch p, bool rows_packed) {
  const T* x = static_cast<const T*>(p.x);
  const int64_t rows = p.outer * p.inner;
  const int lane = G == 1 ? 0 : static_cast<int>(threadIdx.x % G);
  const int64_t groups = static_cast<int64_t>(gridDim.x) * blockDim.x / G;
  for (int64_t r = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G; r < rows;
       r += groups) {
    const int64_t o = r / p.inner, i = r - o * p.inner;
    // Element j of the row sits at base + j step, unless the row must be decoded per element.
    int64_t base = 0, step = 1;
    bool line = true;
    if (p.has_axis) {
      base = OffsetOver(p, o, 0, p.axis) + OffsetOver(p, i, p.axis + 1, p.rank);
      step = p.strides[p.axis];
    } else {
      base = o * p.strides[0];
      line = rows_packed;
    }
    float prev_v = 0.f;
    int64_t prev_j = -1;
    for (int64_t k = 0; k < p.top_k; ++k) {
      float best_v = 0.f;
      int64_t best_j = -1;
      for (int64_t j = lane; j < p.dim; j += G) {
        const int64_t offset = base + (line ? j * step : OffsetOver(p, j, 1, p.rank));
        const float v = ToFloat(x[offset]);
        if (prev_j >= 0 && !RanksBefore(prev_v, prev_j, v, j)) continue;  // an earlier pick
        if (best_j < 0 || RanksBefore(v, j, best_v, best_j)) {
          best_v = v;
          best_j = j;
        }
      }
      // Butterfly: every lane ends with the group's best (the order is total, so it is unique).
#pragma unroll
      for (int s = G / 2; s > 0; s >>= 1) {
        const float other_v = __shfl_xor_sync(0xffffffffu, best_v, s);
        const long long other_j = __shfl_xor_sync(0xffffffffu, static_cast<long long>(best_j), s);
        if (other_j >= 0 && (best_j < 0 || RanksBefore(other_v, other_j, best_v, best_j))) {
          best_v = other_v;
          best_j = other_j;
        }
      }
      if (lane == 0) {
        const bool values_only = p.has_axis && p.out_max_val;
        p.y[OutputOffset(p, o, i, k, false)] = values_only ? best_v : static_cast<float>(best_j);
        if (!p.has_axis && p.out_max_val) p.y[OutputOffset(p, o, i, k, true)] = best_v;
      }
      prev_v = best_v;
      prev_j = best_j;
    }
  }
}

template <typename T>
int Launch(const ArgMaxLaunch& p, bool rows_packed, cudaStream_t s) {
  const int64_t rows = p.outer * p.inner;
  // A warp per row where a row's elements are adjacent and there are enough to share out.
  const bool warp =
      p.inner == 1 && p.dim >= 64 && (p.has_axis ? p.strides[p.axis] == 1 : rows_packed);
  if (warp) {
    ArgMaxKernel<T, 32><<<BlocksFor(rows * 32, kThreads), kThreads, 0, s>>>(p, rows_packed);
  } else {
    ArgMaxKernel<T, 1><<<BlocksFor(rows, kThreads), kThreads, 0, s>>>(p, rows_packed);
  }
  return LastError();
}

}  // namespace

int LaunchArgMax(const ArgMaxLaunch& p, void* stream) {
  if (p.outer * p.inner == 0 || p.dim == 0) return 0;
  // Without an axis, is each item's block of dims[1:] dense (unit dims' strides aside)?
  bool rows_packed = true;
  int64_t expected = 1;
  for (int d = p.rank - 1; d >= 1; --d) {
    if (p.dims[d] != 1 && p.strides[d] != expected) rows_packed = false;
    expected *= p.dims[d];
  }
  auto s = static_cast<cudaStream_t>(stream);
  switch (p.storage) {
    case Storage::kF16:
      return Launch<__half>(p, rows_packed, s);
    case Storage::kBF16:
      return Launch<__nv_bfloat16>(p, rows_packed, s);
    default:
      return Launch<float>(p, rows_packed, s);
  }
}

}  // namespace cuda
}  // namespace kiln
