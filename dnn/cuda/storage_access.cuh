// Device helpers shared by the primitives' kernels: loading and storing an element of any
// Storage as f32, blending, grid sizing and index decoding. CUDA only.
#ifndef KILN_DNN_CUDA_STORAGE_ACCESS_CUH_
#define KILN_DNN_CUDA_STORAGE_ACCESS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// An element of runtime storage `type` (the branch is uniform across a warp).
__device__ __forceinline__ float LoadAny(const void* p, Storage type, int64_t offset) {
  switch (type) {
    case Storage::kF16:
      return __half2float(static_cast<const __half*>(p)[offset]);
    case Storage::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[offset]);
    default:
      return static_cast<const float*>(p)[offset];
  }
}

// The element of T whose bits are the low 16 bits of `bits` (2-byte types only).
template <typename T>
__device__ __forceinline__ float FromBits16(uint32_t bits);
template <>
__device__ __forceinline__ float FromBits16<__half>(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}
template <>
__device__ __forceinline__ float FromBits16<__nv_bfloat16>(uint32_t bits) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(bits)));
}

// The 16 / sizeof(T) elements at p (16-byte aligned, read-only for the kernel's life) as floats,
// with one 16-byte load. The words are taken apart with shifts rather than by reinterpreting
// the loaded vector, which would put it in local memory.
template <typename T>
__device__ __forceinline__ void LoadVector(const T* p, float* v) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(T) == 4) {
      v[k] = __uint_as_float(words[k]);
    } else {
      v[2 * k] = FromBits16<T>(words[k]);
      v[2 * k + 1] = FromBits16<T>(words[k] >> 16);
    }
  }
}

__device__ __forceinline__ void StoreAny(void* p, Storage type, int64_t offset, float v) {
  switch (type) {
    case Storage::kF16:
      static_cast<__half*>(p)[offset] = __float2half_rn(v);
      break;
    case Storage::kBF16:
      static_cast<__nv_bfloat16*>(p)[offset] = __float2bfloat16_rn(v);
      break;
    default:
      static_cast<float*>(p)[offset] = v;
  }
}

// out = alpha v + beta out; `old` is only evaluated (read) when beta != 0, so NaN poison in an
// output that is fully overwritten does not leak through.
template <class Old>
__device__ __forceinline__ float Blend(float alpha, float v, float beta, Old old) {
  return beta == 0.0f ? alpha * v : alpha * v + beta * old();
}

inline unsigned BlocksFor(int64_t work, int per_block, int64_t cap = 1 << 20) {
  int64_t blocks = (work + per_block - 1) / per_block;
  if (blocks > cap) blocks = cap;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Division by a loop-invariant divisor as a multiply-high and a shift (the round-up method):
// exact for every dividend below 2^31, and several times cheaper than the hardware-less integer
// division the compiler emits. Made on the host, or once per block on the device.
struct FastDiv {
  uint32_t divisor = 1, mul = 1, shift = 0;
};

__host__ __device__ inline FastDiv MakeFastDiv(uint32_t divisor) {
  FastDiv f;
  f.divisor = divisor;
  while ((uint64_t{1} << f.shift) < divisor) ++f.shift;
  f.mul = static_cast<uint32_t>(
      ((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - divisor)) / divisor + 1);
  return f;
}

__device__ __forceinline__ uint32_t Div(uint32_t n, const FastDiv& f) {
  return (__umulhi(n, f.mul) + n) >> f.shift;
}

// The (N, C, D, H, W) dims walked by the threads and the order to decode them in (innermost
// memory dim first, unit dims dropped), so consecutive threads touch consecutive addresses.
struct Walk {
  int64_t dims[5];
  int order[5];
  int rank;        // dims with extent > 1
  FastDiv div[5];  // div[k] divides by dims[order[k]] (32-bit walks)
};

inline Walk WalkFor(const int64_t* dims, const int64_t* strides) {
  Walk w;
  for (int d = 0; d < 5; ++d) {
    w.dims[d] = dims[d];
    w.order[d] = d;
  }
  // Insertion sort by stride, ascending; unit dims last so they cost nothing.
  auto key = [&](int d) { return dims[d] == 1 ? INT64_MAX : strides[d]; };
  for (int i = 1; i < 5; ++i) {
    for (int j = i; j > 0 && key(w.order[j]) < key(w.order[j - 1]); --j) {
      const int t = w.order[j];
      w.order[j] = w.order[j - 1];
      w.order[j - 1] = t;
    }
  }
  w.rank = 0;
  for (int d = 0; d < 5; ++d) w.rank += dims[d] > 1;
  for (int k = 0; k < 5; ++k) {
    const int64_t extent = w.dims[w.order[k]];
    w.div[k] = MakeFastDiv(extent < (int64_t{1} << 31) ? static_cast<uint32_t>(extent) : 1);
  }
  return w;
}

// Sets idx[0..5) (N, C, D, H, W) from the walk position e.
template <typename Index>
__device__ __forceinline__ void DecodeWalk(const Walk& w, Index e, Index* idx) {
#pragma unroll
  for (int k = 0; k < 5; ++k) idx[k] = 0;
  for (int k = 0; k < w.rank; ++k) {
    const int d = w.order[k];
    if (sizeof(Index) == 4) {
      const Index q = static_cast<Index>(Div(static_cast<uint32_t>(e), w.div[k]));
      idx[d] = e - q * static_cast<Index>(w.dims[d]);
      e = q;
    } else {
      const Index dim = static_cast<Index>(w.dims[d]);
      idx[d] = e % dim;
      e /= dim;
    }
  }
}

__device__ __forceinline__ int64_t Offset5(const int64_t* strides, const int64_t* idx) {
  return idx[0] * strides[0] + idx[1] * strides[1] + idx[2] * strides[2] + idx[3] * strides[3] +
         idx[4] * strides[4];
}

inline int LastError() { return static_cast<int>(cudaGetLastError()); }

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_STORAGE_ACCESS_CUH_
