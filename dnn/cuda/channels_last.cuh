// Device helpers for the channels-last kernels (dnn_lrn_channels_last.cu,
// dnn_pooling_channels_last.cu). When channels are the contiguous dim, a thread owns a "chunk":
// the 16 bytes of consecutive channels (8 of f16/bf16, 4 of f32) of one position, which it moves
// with one 16-byte load or store; the threads of a warp own consecutive chunks, so a warp's
// access is one contiguous run. Positions whose rows are not 16-byte aligned (an odd channel
// count, a misaligned base) and a row's last, partial chunk fall back to element accesses, still
// coalesced across the warp. CUDA only.
#ifndef KILN_DNN_CUDA_CHANNELS_LAST_CUH_
#define KILN_DNN_CUDA_CHANNELS_LAST_CUH_

#include <cstdint>

#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

// Channels per chunk.
template <typename T>
__host__ __device__ constexpr int ChunkWidth() {
  return static_cast<int>(16 / sizeof(T));
}

// The number of chunks of a row of `channels`.
template <typename T>
inline int64_t ChunksPerRow(int64_t channels) {
  return (channels + ChunkWidth<T>() - 1) / ChunkWidth<T>();
}

// Whether every position's row of a tensor at `data` with (N, C, D, H, W) `strides` over `dims`
// starts 16-byte aligned, so whole chunks can move as vectors. Unit dims are never stepped along.
template <typename T>
inline bool RowsAligned(const void* data, const int64_t* dims, const int64_t* strides) {
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) return false;
  for (int d = 0; d < 5; ++d) {
    if (d != 1 && dims[d] > 1 && strides[d] % ChunkWidth<T>() != 0) return false;
  }
  return true;
}

// The two elements of T (2-byte types) in a 32-bit word, the first in the low half.
template <typename T>
__device__ __forceinline__ uint32_t PackPair(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t PackPair<__half>(float lo, float hi) {
  return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(lo))) |
         static_cast<uint32_t>(__half_as_ushort(__float2half_rn(hi))) << 16;
}
template <>
__device__ __forceinline__ uint32_t PackPair<__nv_bfloat16>(float lo, float hi) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16;
}

// A 16-byte vector's words as ChunkWidth<T>() floats.
template <typename T>
__device__ __forceinline__ void Unpack(uint4 raw, float* v) {
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

// ChunkWidth<T>() floats as a 16-byte vector of T.
template <typename T>
__device__ __forceinline__ uint4 Pack(const float* v) {
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(T) == 4) {
      w[k] = __float_as_uint(v[k]);
    } else {
      w[k] = PackPair<T>(v[2 * k], v[2 * k + 1]);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Channels [c0, c0 + ChunkWidth) of the row at `row` (c0 >= 0 a multiple of the width), 0 past
// `channels`. `vec`: the row is 16-byte aligned (RowsAligned). The data is read-only for the
// kernel's life.
template <typename T>
__device__ __forceinline__ void LoadChunk(const T* row, int c0, int channels, bool vec, float* v) {
  constexpr int kVec = ChunkWidth<T>();
  if (vec && c0 + kVec <= channels) {
    Unpack<T>(__ldg(reinterpret_cast<const uint4*>(row + c0)), v);
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) v[k] = c0 + k < channels ? ToFloat(row[c0 + k]) : 0.0f;
}

// Whether the chunk at c0 of a row with alignment flag `vec` moves as one 16-byte vector.
template <typename T>
__device__ __forceinline__ bool WholeChunk(bool vec, int c0, int channels) {
  return vec && c0 + ChunkWidth<T>() <= channels;
}

// The raw 16 bytes of a whole chunk (WholeChunk) when `load`, else zeros: a predicated load with
// no branch, so that a thread's loads of several chunks can all be in flight before the first is
// used (Unpack them after).
template <typename T>
__device__ __forceinline__ uint4 LoadRaw(const T* row, int c0, bool load) {
  return load ? __ldg(reinterpret_cast<const uint4*>(row + c0)) : make_uint4(0, 0, 0, 0);
}

// 0xffff in each 16-bit lane where the two elements of T packed in a and b are equal (IEEE:
// +0 equals -0, NaN equals nothing), as the f32 comparison of the unpacked values says.
template <typename T>
__device__ __forceinline__ uint32_t EqualPair(uint32_t a, uint32_t b);
template <>
__device__ __forceinline__ uint32_t EqualPair<__half>(uint32_t a, uint32_t b) {
  return __heq2_mask(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
}
template <>
__device__ __forceinline__ uint32_t EqualPair<__nv_bfloat16>(uint32_t a, uint32_t b) {
  return __heq2_mask(*reinterpret_cast<const __nv_bfloat162*>(&a),
                     *reinterpret_cast<const __nv_bfloat162*>(&b));
}

// The channels where two whole chunks hold equal values, as a nibble mask: 0xf at bits
// [4 k, 4 k + 4) where channel k's values are equal. Compares 16-bit types two at a time without
// unpacking them.
template <typename T>
__device__ __forceinline__ uint32_t EqualNibbles(uint4 a, uint4 b) {
  const uint32_t wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w};
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (sizeof(T) == 4) {
      m |= __uint_as_float(wa[j]) == __uint_as_float(wb[j]) ? 0xfu << (4 * j) : 0u;
    } else {
      const uint32_t e = EqualPair<T>(wa[j], wb[j]);  // channels 2 j (low lane), 2 j + 1
      m |= ((e & 0xfu) | (e >> 12 & 0xf0u)) << (8 * j);
    }
  }
  return m;
}

// Writes alpha v + beta old over channels [c0, c0 + ChunkWidth) of `row`, those before
// `channels` only; old is read only when beta != 0.
template <typename T>
__device__ __forceinline__ void StoreChunk(T* row, int c0, int channels, bool vec, float* v,
                                           float alpha, float beta) {
  constexpr int kVec = ChunkWidth<T>();
  if (vec && c0 + kVec <= channels) {
    uint4* to = reinterpret_cast<uint4*>(row + c0);
    float old[kVec];
    if (beta != 0.0f) Unpack<T>(*to, old);
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      v[k] = beta != 0.0f ? alpha * v[k] + beta * old[k] : alpha * v[k];
    *to = Pack<T>(v);
    return;
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    if (c0 + k < channels) {
      T* out = row + c0 + k;
      *out = FromFloat<T>(Blend(alpha, v[k], beta, [&] { return ToFloat(*out); }));
    }
  }
}

// The position and chunk of thread `t` when threads are numbered chunk-fastest: idx (N, C, D, H,
// W) with idx[1] = 0 from `positions` (a Walk over the dims with C = 1), *chunk its chunk.
__device__ __forceinline__ void PositionAndChunk(const Walk& positions, const FastDiv& chunks,
                                                 uint32_t t, int* idx, int* chunk) {
  const uint32_t p = Div(t, chunks);
  *chunk = static_cast<int>(t - p * chunks.divisor);
  DecodeWalk<int>(positions, static_cast<int>(p), idx);
}

// The element offset of a position (idx[1] ignored) under (N, C, D, H, W) strides.
__device__ __forceinline__ int64_t PositionOffset(const int64_t* strides, const int* idx) {
  return idx[0] * strides[0] + idx[2] * strides[2] + idx[3] * strides[3] + idx[4] * strides[4];
}

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CHANNELS_LAST_CUH_
