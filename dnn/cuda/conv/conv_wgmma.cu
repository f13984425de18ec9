// The Hopper implicit-GEMM forward convolution: C[m][k] = sum over (r, s, c) of
// x[pixel m shifted by tap (r, s)][c] * w[k][r][s][c], on wgmma (sm_90a).
//
// A block computes a 128 (output pixels) x kBN (filters) tile with two warpgroups, 64 rows each.
// The reduction runs in k tiles of 128 bytes of channels (64 f16/bf16 or 32 f32) at one filter
// tap. Every thread gathers four 16-byte chunks of the pixel tile and kBN/32 of the filter tile
// per k tile with cp.async (zero-filled where the tap falls into padding or past C), into
// kStages shared-memory buffers laid out in the 128-byte swizzle that the wgmma descriptors
// name, so the loads of tile i + kStages - 2 overlap the products of tile i. The products are
// issued asynchronously and waited for one tile late, which is what keeps the tensor cores busy
// across the barrier.
//
// The kernel body exists only in the sm_90a build of this file (see BUILD); the host refuses
// the path where that code is missing (ConvWgmmaAvailable).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "dnn/cuda/conv/conv_wgmma_launch.h"
#include "dnn/cuda/conv/wgmma.cuh"

namespace kiln {
namespace cuda {

namespace {

constexpr int kBM = 128, kRowBytes = 128, kThreads = 256;

struct Params {
  const char* x;
  const char* w;
  void* y;
  float* partial;
  int h, w_in, c, p, q, k, m, s_taps, r_taps;
  int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  bool flip;
  int64_t xs_n, xs_h, xs_w, ws_k, ws_r, ws_s, ys_n, ys_k, ys_p, ys_q;
  int c_blocks, k_tiles, tiles_per_split, splits;
  bool vector_out;  // y is channels-last with every 4-filter group 4-element aligned
  float alpha, beta;
  // The epilogue before the store: + bias[k] (f32; null: none), then ReLU with `slope`.
  const float* bias;
  bool relu;
  float slope;
};

template <typename T>
__device__ __forceinline__ float LoadAsFloat(const void* base, int64_t i) {
  return static_cast<const float*>(base)[i];
}
template <>
__device__ __forceinline__ float LoadAsFloat<__half>(const void* base, int64_t i) {
  return __half2float(static_cast<const __half*>(base)[i]);
}
template <>
__device__ __forceinline__ float LoadAsFloat<__nv_bfloat16>(const void* base, int64_t i) {
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
}
template <typename T>
__device__ __forceinline__ void StoreFloat(void* base, int64_t i, float v) {
  static_cast<float*>(base)[i] = v;
}
template <>
__device__ __forceinline__ void StoreFloat<__half>(void* base, int64_t i, float v) {
  static_cast<__half*>(base)[i] = __float2half_rn(v);
}
template <>
__device__ __forceinline__ void StoreFloat<__nv_bfloat16>(void* base, int64_t i, float v) {
  static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
}

// v rounded to T's precision (identity for f32).
template <typename T>
__device__ __forceinline__ float RoundTo(float v) {
  T e[1];
  StoreFloat<T>(e, 0, v);
  return LoadAsFloat<T>(e, 0);
}

// The epilogue of filter k's output v: + bias, then ReLU (x < 0: slope x). v is first rounded to
// the output type, as the convolution's own store would, so that the result is bit-equal to the
// convolution followed by a separate bias/ReLU pass (what the unfused graph computes).
template <typename T>
__device__ __forceinline__ float Finish(const Params& p, int k, float v) {
  if (p.bias == nullptr && !p.relu) return v;
  v = RoundTo<T>(v);
  if (p.bias != nullptr) v += p.bias[k];
  if (p.relu && v < 0.0f) v *= p.slope;
  return v;
}

// Writes the epilogue of alpha * v + beta * y at `i` of y, filter k (beta == 0: y is not read).
template <typename T>
__device__ __forceinline__ void Blend(const Params& p, int64_t i, int k, float v) {
  float out = p.alpha * v;
  if (p.beta != 0.0f) out += p.beta * LoadAsFloat<T>(p.y, i);
  StoreFloat<T>(p.y, i, Finish<T>(p, k, out));
}

// Blend of four consecutive elements at `i` (a multiple of 4, y aligned for it), filters k..k+3.
template <typename T>
__device__ __forceinline__ void BlendFour(const Params& p, int64_t i, int k, float4 v) {
  v.x *= p.alpha;
  v.y *= p.alpha;
  v.z *= p.alpha;
  v.w *= p.alpha;
  if constexpr (sizeof(T) == 4) {
    float4* at = reinterpret_cast<float4*>(static_cast<float*>(p.y) + i);
    if (p.beta != 0.0f) {
      const float4 old = *at;
      v.x += p.beta * old.x;
      v.y += p.beta * old.y;
      v.z += p.beta * old.z;
      v.w += p.beta * old.w;
    }
    v = make_float4(Finish<T>(p, k, v.x), Finish<T>(p, k + 1, v.y), Finish<T>(p, k + 2, v.z),
                    Finish<T>(p, k + 3, v.w));
    *at = v;
  } else {
    T* at = static_cast<T*>(p.y) + i;
    if (p.beta != 0.0f) {
      v.x += p.beta * LoadAsFloat<T>(at, 0);
      v.y += p.beta * LoadAsFloat<T>(at, 1);
      v.z += p.beta * LoadAsFloat<T>(at, 2);
      v.w += p.beta * LoadAsFloat<T>(at, 3);
    }
    v = make_float4(Finish<T>(p, k, v.x), Finish<T>(p, k + 1, v.y), Finish<T>(p, k + 2, v.z),
                    Finish<T>(p, k + 3, v.w));
    union {
      T e[4];
      uint2 bits;
    } out;
    StoreFloat<T>(out.e, 0, v.x);
    StoreFloat<T>(out.e, 1, v.y);
    StoreFloat<T>(out.e, 2, v.z);
    StoreFloat<T>(out.e, 3, v.w);
    *reinterpret_cast<uint2*>(at) = out.bits;
  }
}

// y's offset of output pixel m (n, p, q).
__device__ __forceinline__ int64_t OutputRowOffset(const Params& p, int m) {
  const int pq = p.p * p.q;
  const int img = m / pq, rem = m - img * pq;
  const int op = rem / p.q, oq = rem - op * p.q;
  return img * p.ys_n + op * p.ys_p + oq * p.ys_q;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// A 16-byte copy from global to shared memory, or 16 zero bytes when !valid (src is not read).
__device__ __forceinline__ void CopyAsync16(uint32_t dst, uint64_t src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void CopyCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void CopyWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// A K-major operand tile in shared memory: rows of 128 bytes, 16-byte chunks swizzled by the row
// within each 8-row (1024-byte) group. Fields: start address >> 4, leading byte offset (unused
// by this layout; 16), stride byte offset 1024 (next 8-row group), swizzle mode 1 (128 bytes).
__device__ __forceinline__ uint64_t SwizzledTileDescriptor(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// kPending: product groups left running across the barrier (1: tile i - 1's products overlap
// tile i's issue; 0: each tile's products finish before the next barrier, which frees one more
// buffer for loads). kMinBlocks: blocks per SM the registers are capped for.
template <typename T, int kBN, int kStages, int kPending, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) ConvWgmmaKernel(const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kElem = sizeof(T);
  constexpr int kChunkElems = 16 / kElem;           // elements per 16-byte chunk
  constexpr int kTileChannels = kRowBytes / kElem;  // channels per k tile
  constexpr int kStepBytes = 32;                    // one wgmma k step: 16 f16 or 8 tf32
  constexpr int kStageA = kBM * kRowBytes, kStageB = kBN * kRowBytes;
  // Filter rows each thread loads; below 32 rows only the first 8 kBN threads load one each.
  constexpr int kBRows = kBN >= 32 ? kBN / 32 : 1;
  constexpr int kAcc = kBN / 2;  // accumulators per thread (64 x kBN per warpgroup)
  constexpr int kAhead = kStages - 1 - kPending;  // tiles loaded ahead of the one multiplied
  static_assert(kAhead >= 1, "too few stages");

  extern __shared__ char smem_raw[];
  const uint32_t smem_a =
      (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023) & ~1023u;
  const uint32_t smem_b = smem_a + kStages * kStageA;

  const int tid = threadIdx.x, chunk = tid & 7, row0 = tid >> 3;
  const bool loads_b = kBN >= 32 || row0 < kBN;
  // Where this thread's chunk lands in every row it loads: rows row0 + 32 j share row0 & 7.
  const uint32_t chunk_dst = row0 * kRowBytes + ((chunk ^ (row0 & 7)) << 4);
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN, split = blockIdx.z;

  // The four output pixels this thread gathers for: input coordinates at tap (0, 0), and the
  // global address of their chunk there (past the tensor's edge where that tap is padding; such
  // addresses are never read). Rows past the last pixel get an h that no tap brings in range.
  int a_h0[4], a_w0[4];
  uint64_t a_addr[4];
  const int pq = p.p * p.q;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int m = m0 + row0 + 32 * j;
    const int mm = m < p.m ? m : 0;
    const int img = mm / pq, rem = mm - img * pq;
    const int op = rem / p.q, oq = rem - op * p.q;
    const int h0 = op * p.stride_h - p.pad_h;
    a_h0[j] = m < p.m ? h0 : -(1 << 30);
    a_w0[j] = oq * p.stride_w - p.pad_w;
    a_addr[j] = reinterpret_cast<uint64_t>(p.x) +
                (img * p.xs_n + static_cast<int64_t>(h0) * p.xs_h +
                 static_cast<int64_t>(a_w0[j]) * p.xs_w + chunk * kChunkElems) *
                    kElem;
  }
  uint64_t b_addr[kBRows];
  bool b_ok[kBRows];
#pragma unroll
  for (int j = 0; j < kBRows; ++j) {
    const int k = n0 + row0 + 32 * j;
    b_ok[j] = k < p.k && loads_b;
    b_addr[j] = reinterpret_cast<uint64_t>(p.w) +
                (static_cast<int64_t>(b_ok[j] ? k : 0) * p.ws_k + chunk * kChunkElems) * kElem;
  }

  const int tile_begin = split * p.tiles_per_split;
  const int tile_end = min(p.k_tiles, tile_begin + p.tiles_per_split);
  const int tiles = max(0, tile_end - tile_begin);

  // The next tile to load, as (tap row, tap column, channel block), advanced one tile at a time;
  // what depends on the tap alone (byte shifts, which rows are inside the image) is recomputed
  // only when the tap changes.
  int load_cb = tile_begin % p.c_blocks;
  int load_tap = tile_begin / p.c_blocks;
  int load_r = load_tap / p.s_taps, load_s = load_tap - load_r * p.s_taps;
  const int64_t x_step_h = p.dil_h * p.xs_h * kElem, x_step_w = p.dil_w * p.xs_w * kElem;
  const int64_t w_step_r = p.ws_r * kElem, w_step_s = p.ws_s * kElem;
  int64_t x_tap = 0, w_tap = 0;
  bool a_ok[4];
  auto enter_tap = [&]() {
    const int dh = load_r * p.dil_h, dw = load_s * p.dil_w;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      a_ok[j] = static_cast<unsigned>(a_h0[j] + dh) < static_cast<unsigned>(p.h) &&
                static_cast<unsigned>(a_w0[j] + dw) < static_cast<unsigned>(p.w_in);
    }
    x_tap = load_r * x_step_h + load_s * x_step_w;
    const int fr = p.flip ? p.r_taps - 1 - load_r : load_r;
    const int fs = p.flip ? p.s_taps - 1 - load_s : load_s;
    w_tap = fr * w_step_r + fs * w_step_s;
  };
  enter_tap();

  auto load_tile = [&](int stage) {
    const bool c_ok = load_cb * kTileChannels + chunk * kChunkElems < p.c;
    const int64_t x_shift = x_tap + load_cb * kRowBytes;
    const int64_t w_shift = w_tap + load_cb * kRowBytes;
    const uint32_t a_dst = smem_a + stage * kStageA + chunk_dst;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      CopyAsync16(a_dst + j * 32 * kRowBytes, a_addr[j] + x_shift, a_ok[j] && c_ok);
    }
    const uint32_t b_dst = smem_b + stage * kStageB + chunk_dst;
    if (loads_b) {
#pragma unroll
      for (int j = 0; j < kBRows; ++j) {
        CopyAsync16(b_dst + j * 32 * kRowBytes, b_addr[j] + w_shift, b_ok[j] && c_ok);
      }
    }
    if (++load_cb == p.c_blocks) {
      load_cb = 0;
      if (++load_s == p.s_taps) {
        load_s = 0;
        ++load_r;
      }
      enter_tap();
    }
  };

  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    if (i < tiles) load_tile(i);
    CopyCommit();
  }
  const int warpgroup = tid >> 7;
  const uint32_t a_rows = warpgroup * 64 * kRowBytes;
  for (int i = 0; i < tiles; ++i) {
    CopyWait<kAhead - 1>();
    // cp.async wrote through the generic proxy; wgmma reads through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    // Every warpgroup has finished the products of tile i - 1 - kPending (waited for at the end
    // of i - 1), so its buffer, (i + kAhead) % kStages, is free.
    if (i + kAhead < tiles) load_tile((i + kAhead) % kStages);
    CopyCommit();
    const int stage = i % kStages;
    const uint64_t da = SwizzledTileDescriptor(smem_a + stage * kStageA + a_rows);
    const uint64_t db = SwizzledTileDescriptor(smem_b + stage * kStageB);
    WgmmaPin(acc);
    WgmmaFence();
#pragma unroll
    for (int step = 0; step < kRowBytes / kStepBytes; ++step) {
      Wgmma<T, kBN>::Run(acc, da + step * (kStepBytes >> 4), db + step * (kStepBytes >> 4));
    }
    WgmmaCommit();
    WgmmaWait<kPending>();
    WgmmaPin(acc);
  }
  WgmmaWait<0>();
  WgmmaPin(acc);

  // The tile goes out through shared memory (the stages are free once every warpgroup's products
  // are done), so that global stores are coalesced: 4 consecutive filters per thread where y (or
  // the split-K partial sum) is channels-last, else 32 consecutive pixels per warp (NCHW).
  __syncthreads();
  constexpr int kLd = kBN + 8;  // floats per staged row; + 8 keeps half-warps' float2 stores apart
  float* tile = reinterpret_cast<float*>(
      smem_raw + (smem_a - static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw))));
  {
    // Accumulator i of this thread: row warp * 16 + lane / 4 (+ 8 for i % 4 >= 2) of the
    // warpgroup's 64, column 8 (i / 4) + 2 (lane % 4) + i % 2.
    const int lane = tid & 31, warp = (tid >> 5) & 3;
    const int row = warpgroup * 64 + warp * 16 + (lane >> 2);
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int col = 8 * j + 2 * (lane & 3);
      *reinterpret_cast<float2*>(&tile[row * kLd + col]) = make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2*>(&tile[(row + 8) * kLd + col]) =
          make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
  __syncthreads();
  if (p.splits > 1 || p.vector_out) {
    constexpr int kThreadsPerRow = kBN / 4, kRowsPerPass = kThreads / kThreadsPerRow;
    const int c4 = (tid % kThreadsPerRow) * 4, col = n0 + c4;
    for (int r = tid / kThreadsPerRow; r < kBM && m0 + r < p.m; r += kRowsPerPass) {
      const int m = m0 + r;
      const float4 v = *reinterpret_cast<const float4*>(&tile[r * kLd + c4]);
      if (p.splits > 1) {
        float* part = p.partial + (static_cast<int64_t>(split) * p.m + m) * p.k + col;
        if (col + 3 < p.k && (p.k & 3) == 0) {
          *reinterpret_cast<float4*>(part) = v;
        } else {
          const float e[4] = {v.x, v.y, v.z, v.w};
          for (int i = 0; i < 4 && col + i < p.k; ++i) part[i] = e[i];
        }
      } else {
        const int64_t at = OutputRowOffset(p, m) + col;
        if (col + 3 < p.k) {
          BlendFour<T>(p, at, col, v);
        } else {
          const float e[4] = {v.x, v.y, v.z, v.w};
          for (int i = 0; i < 4 && col + i < p.k; ++i) Blend<T>(p, at + i, col + i, e[i]);
        }
      }
    }
  } else {
    const int r = tid % kBM, m = m0 + r;
    if (m < p.m) {
      const int64_t row_off = OutputRowOffset(p, m);
      for (int c = tid / kBM; c < kBN && n0 + c < p.k; c += kThreads / kBM) {
        Blend<T>(p, row_off + static_cast<int64_t>(n0 + c) * p.ys_k, n0 + c, tile[r * kLd + c]);
      }
    }
  }
#else
  __trap();  // never launched: the host checks ConvWgmmaAvailable()
#endif
}

// y[m][k] = alpha * the sum over splits of partial[split][m][k] + beta * y, in split order.
template <typename T>
__global__ void ConvWgmmaReduceKernel(const Params p) {
  const int64_t total = static_cast<int64_t>(p.m) * p.k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < p.splits; ++s) sum += p.partial[s * total + i];
    const int m = static_cast<int>(i / p.k),
              k = static_cast<int>(i - static_cast<int64_t>(m) * p.k);
    Blend<T>(p, OutputRowOffset(p, m) + k * p.ys_k, k, sum);
  }
}

template <int kBN, int kStages>
constexpr int SmemBytes() {
  return kStages * (kBM + kBN) * kRowBytes + 1024;  // + alignment slack
}

template <typename T, int kBN, int kStages, int kPending, int kMinBlocks>
int LaunchTyped(const Params& p, cudaStream_t stream) {
  auto kernel = ConvWgmmaKernel<T, kBN, kStages, kPending, kMinBlocks>;
  constexpr int bytes = SmemBytes<kBN, kStages>();
  static_assert(kMinBlocks * (bytes + 1024) <= 228 * 1024, "blocks do not fit an SM");
  // Per launch, not cached: the limit belongs to the current device's context.
  const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (configured != cudaSuccess) return static_cast<int>(configured);
  const dim3 grid(static_cast<unsigned>((p.m + kBM - 1) / kBM),
                  static_cast<unsigned>((p.k + kBN - 1) / kBN), static_cast<unsigned>(p.splits));
  kernel<<<grid, kThreads, bytes, stream>>>(p);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || p.splits == 1) return static_cast<int>(err);
  const int64_t total = static_cast<int64_t>(p.m) * p.k;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 132 * 16);
  ConvWgmmaReduceKernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p);
  return static_cast<int>(cudaGetLastError());
}

// Whole-wave grids (at most one block per SM) get one block per SM with a deep pipeline; larger
// grids two blocks per SM with three stages, so that one block's barrier waits and epilogue
// overlap the other's products (measured on the H100: docs/PERF.md).
// The filter tile: the narrowest of 8, 16, 64 and 128 that holds K (a few output channels, as in
// backward data into a 3-channel image, would otherwise multiply mostly padding).
int FilterTile(int k) { return k <= 8 ? 8 : (k <= 16 ? 16 : (k <= 64 ? 64 : 128)); }

template <typename T, int kBN>
int LaunchForTile(const Params& p, int multiprocessors, cudaStream_t stream) {
  constexpr int kStageBytes = (kBM + kBN) * kRowBytes;
  // Two blocks per SM: as many stages as fit in half the shared memory, up to 6.
  constexpr int kStagesTwo = 110 * 1024 / kStageBytes < 6 ? 110 * 1024 / kStageBytes : 6;
  constexpr int kStagesOne = kStagesTwo + 2 < 8 ? kStagesTwo + 2 : 8;
  const int64_t blocks =
      static_cast<int64_t>((p.m + kBM - 1) / kBM) * ((p.k + kBN - 1) / kBN) * p.splits;
  if (blocks <= multiprocessors) return LaunchTyped<T, kBN, kStagesOne, 1, 1>(p, stream);
  return LaunchTyped<T, kBN, kStagesTwo, 0, 2>(p, stream);
}

template <typename T>
int LaunchForType(const Params& p, int multiprocessors, cudaStream_t stream) {
  switch (FilterTile(p.k)) {
    case 8:
      return LaunchForTile<T, 8>(p, multiprocessors, stream);
    case 16:
      return LaunchForTile<T, 16>(p, multiprocessors, stream);
    case 64:
      return LaunchForTile<T, 64>(p, multiprocessors, stream);
    default:
      return LaunchForTile<T, 128>(p, multiprocessors, stream);
  }
}

Params MakeParams(const ConvWgmmaLaunch& l) {
  const dnn::ConvProblem& q = l.problem;
  Params p;
  p.x = static_cast<const char*>(l.x);
  p.w = static_cast<const char*>(l.w);
  p.y = l.y;
  p.partial = l.partial;
  p.h = static_cast<int>(q.in[1]);
  p.w_in = static_cast<int>(q.in[2]);
  p.c = static_cast<int>(q.c);
  p.p = static_cast<int>(q.out[1]);
  p.q = static_cast<int>(q.out[2]);
  p.k = static_cast<int>(q.k);
  p.m = static_cast<int>(q.OutputPixels());
  p.r_taps = static_cast<int>(q.filter[1]);
  p.s_taps = static_cast<int>(q.filter[2]);
  p.pad_h = static_cast<int>(q.pad[1]);
  p.pad_w = static_cast<int>(q.pad[2]);
  p.stride_h = static_cast<int>(q.stride[1]);
  p.stride_w = static_cast<int>(q.stride[2]);
  p.dil_h = static_cast<int>(q.dilation[1]);
  p.dil_w = static_cast<int>(q.dilation[2]);
  p.flip = q.mode == dnn::ConvolutionMode::kConvolution;
  p.xs_n = q.x_stride[0];
  p.xs_h = q.x_stride[3];
  p.xs_w = q.x_stride[4];
  p.ws_k = q.w_stride[0];
  p.ws_r = q.w_stride[3];
  p.ws_s = q.w_stride[4];
  p.ys_n = q.y_stride[0];
  p.ys_k = q.y_stride[1];
  p.ys_p = q.y_stride[3];
  p.ys_q = q.y_stride[4];
  const int64_t elem = q.dtype == DataType::kF32 ? 4 : 2;
  const int64_t tile_channels = kRowBytes / elem;
  p.c_blocks = static_cast<int>((q.c + tile_channels - 1) / tile_channels);
  p.k_tiles = static_cast<int>(p.c_blocks * q.filter[1] * q.filter[2]);
  p.splits = std::max(1, l.splits);
  p.tiles_per_split = (p.k_tiles + p.splits - 1) / p.splits;
  p.alpha = l.alpha;
  p.beta = l.beta;
  p.bias = l.bias;
  p.relu = l.relu;
  p.slope = l.relu_slope;
  const uintptr_t y_addr = reinterpret_cast<uintptr_t>(l.y);
  p.vector_out = q.y_stride[1] == 1 && q.y_stride[0] % 4 == 0 && q.y_stride[3] % 4 == 0 &&
                 q.y_stride[4] % 4 == 0 && y_addr % (4 * elem) == 0;
  return p;
}

bool DeviceRunsWgmma(int device) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (major != 9 || minor != 0) return false;
  cudaFuncAttributes attr;
  if (cudaFuncGetAttributes(&attr, ConvWgmmaKernel<__half, 128, 3, 0, 2>) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.binaryVersion == 90;
}

}  // namespace

bool ConvWgmmaAvailable() {
  // Asked on every plan, so answered once per device: 0 unknown, 1 no, 2 yes.
  static std::atomic<int> known[64];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const bool cached = device >= 0 && device < 64;
  if (cached && known[device].load() != 0) return known[device].load() == 2;
  const bool yes = DeviceRunsWgmma(device);
  if (cached) known[device].store(yes ? 2 : 1);
  return yes;
}

int ConvWgmmaSplits(const ConvWgmmaLaunch& l, int multiprocessors) {
  const Params p = MakeParams(l);
  const int bn = FilterTile(p.k);
  const int64_t tiles = static_cast<int64_t>((p.m + kBM - 1) / kBM) * ((p.k + bn - 1) / bn);
  // Estimated time in units of one block's k tile: the waves of blocks times their k tiles, plus
  // the partial sums' round trip (written once, read once, mostly from L2) at about 4 TB/s
  // against one SM's ~3 TFLOP/s.
  const double tile_flops =
      2.0 * kBM * bn * (kRowBytes / (l.problem.dtype == DataType::kF32 ? 4 : 2));
  const double tile_seconds = tile_flops / 3e12;
  double best_time = 0;
  int best = 1;
  for (int s = 1; s <= 64 && s <= p.k_tiles / 4; ++s) {
    const int64_t waves = (tiles * s + multiprocessors - 1) / multiprocessors;
    double t = static_cast<double>(waves) * ((p.k_tiles + s - 1) / s) * tile_seconds;
    if (s > 1) t += 2.0 * s * p.m * static_cast<double>(p.k) * 4 / 4e12;
    if (s == 1 || t < best_time) {
      best_time = t;
      best = s;
    }
  }
  return best;
}

int64_t ConvWgmmaPartialBytes(const ConvWgmmaLaunch& l, int splits) {
  return splits > 1 ? static_cast<int64_t>(splits) * l.problem.OutputPixels() * l.problem.k * 4 : 0;
}

int LaunchConvWgmma(const ConvWgmmaLaunch& l, void* stream_ptr) {
  if (l.problem.OutputPixels() == 0 || l.problem.k == 0) return 0;
  const Params p = MakeParams(l);
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  int device = 0, multiprocessors = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
  }
  if (err != cudaSuccess) return static_cast<int>(err);
  switch (l.problem.dtype) {
    case DataType::kF16:
      return LaunchForType<__half>(p, multiprocessors, stream);
    case DataType::kBF16:
      return LaunchForType<__nv_bfloat16>(p, multiprocessors, stream);
    default:
      return LaunchForType<float>(p, multiprocessors, stream);
  }
}

}  // namespace cuda
}  // namespace kiln
