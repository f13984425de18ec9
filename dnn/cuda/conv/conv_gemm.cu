// The implicit-GEMM convolution kernel: one template for all three directions (the GemmView
// says how each operand element is gathered), for FP32 FFMA, TF32 mma.sync and f16/bf16
// mma.sync. A block computes a 128 x 128 tile of C with 256 threads over 32-wide k slices. The
// next slice is loaded into registers while the current one is multiplied from shared memory
// (double buffer), and the per-k gather decodings are prepared two slices ahead (triple buffer)
// so that no barrier waits on them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "dnn/cuda/conv/conv_gemm_launch.h"
#include "dnn/cuda/conv/mma_sync.cuh"

namespace kiln {
namespace cuda {

namespace {

using dnn::Decode;
using dnn::GatherOperand;
using dnn::GemmView;
using dnn::IndexInfo;
using dnn::Locate;
using mma::FromFloat;
using mma::LdMatrixX2;
using mma::LdMatrixX4;
using mma::Mma16816;
using mma::ToFloat;

constexpr int kBM = 128, kBN = 128, kBK = 32, kThreads = 256;

__device__ __forceinline__ float RoundTf32(float v) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
  return __uint_as_float(r);
}

// Shared-memory layout per math: mma kernels keep k contiguous ([row][k], padded so fragment
// loads hit 32 different banks); the FFMA kernel keeps rows contiguous ([k][row]) so each
// thread reads 4 rows at once as a float4.
template <typename T, int kMath>
struct Smem {
  static constexpr bool kRowMajorK = kMath != static_cast<int>(GemmMath::kFfma);
  static constexpr int kPadK = sizeof(T) == 4 ? 4 : 8;
  static constexpr int kLd = kRowMajorK ? kBK + kPadK : kBM + 4;  // kBM == kBN
  static constexpr int kTileElems = kRowMajorK ? kBM * kLd : kBK * kLd;
  __device__ static int Index(int row, int k) { return kRowMajorK ? row * kLd + k : k * kLd + row; }
};

struct Params {
  GemmView view;
  const void* a;
  const void* b;
  void* c;
  float alpha, beta;
  bool a_lanes_k, b_lanes_k;
  const IndexInfo* a_table;
  const IndexInfo* b_table;
  int splits;
  float* partial;
  int64_t k_tiles_per_split;
};

// Loads one operand's k slice into registers and stores it to shared memory.
template <typename T, int kMath, int kVec, int kRows>
struct TileLoader {
  static constexpr int kUnits = kRows * kBK / kVec / kThreads;
  using Smem_ = Smem<T, kMath>;
  // Vector loads stage 16-byte words; scalar loads stage elements.
  using Stage = typename std::conditional<(kVec > 1), uint4, T>::type;
  Stage stage[kUnits];

  __device__ __forceinline__ void Unit(int u, bool lanes_k, int* row, int* kk) const {
    if (kVec > 1 || lanes_k) {
      constexpr int kPerRow = kBK / kVec;
      *kk = (u % kPerRow) * kVec;
      *row = u / kPerRow;
    } else {
      *row = u % kRows;
      *kk = u / kRows;
    }
  }

  __device__ __forceinline__ void Load(const GatherOperand& op, const T* base,
                                       const IndexInfo* rows, const bool* row_ok,
                                       const IndexInfo* cols, int64_t k0, int64_t k_total,
                                       bool lanes_k) {
#pragma unroll
    for (int j = 0; j < kUnits; ++j) {
      int row, kk;
      Unit(threadIdx.x + j * kThreads, lanes_k, &row, &kk);
      int64_t offset = 0;
      const bool ok = row_ok[row] && k0 + kk < k_total && Locate(op, rows[row], cols[kk], &offset);
      if constexpr (kVec > 1) {
        stage[j] = ok ? *reinterpret_cast<const uint4*>(base + offset) : make_uint4(0, 0, 0, 0);
      } else {
        stage[j] = ok ? base[offset] : FromFloat<T>(0.0f);
      }
    }
  }

  __device__ __forceinline__ void Store(T* smem, bool lanes_k) const {
#pragma unroll
    for (int j = 0; j < kUnits; ++j) {
      int row, kk;
      Unit(threadIdx.x + j * kThreads, lanes_k, &row, &kk);
      if constexpr (kVec > 1) {
        const T* v = reinterpret_cast<const T*>(&stage[j]);
        if constexpr (Smem_::kRowMajorK) {
          uint4 w = stage[j];
          if constexpr (kMath == static_cast<int>(GemmMath::kTf32)) {
            float* f = reinterpret_cast<float*>(&w);
#pragma unroll
            for (int e = 0; e < 4; ++e) f[e] = RoundTf32(f[e]);
          }
          *reinterpret_cast<uint4*>(smem + Smem_::Index(row, kk)) = w;
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e) smem[Smem_::Index(row, kk + e)] = v[e];
        }
      } else {
        T v = stage[j];
        if constexpr (kMath == static_cast<int>(GemmMath::kTf32)) v = RoundTf32(v);
        smem[Smem_::Index(row, kk)] = v;
      }
    }
  }
};

__device__ __forceinline__ void MmaTf32(float* d, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// x = head + tail, both TF32 values (f32 bits with the low 13 mantissa bits zero): the head is x
// rounded to TF32, the tail the exact remainder rounded to TF32 in turn.
__device__ __forceinline__ void SplitTf32(uint32_t x, uint32_t* head, uint32_t* tail) {
  const float v = __uint_as_float(x);
  const float h = RoundTf32(v);
  *head = __float_as_uint(h);
  *tail = __float_as_uint(RoundTf32(v - h));
}

// The per-thread accumulators and the multiply of one shared-memory k slice.
//   mma: 8 warps as 2 (m) x 4 (n), each a 64 x 32 warp tile of 4 x 4 mma tiles; accumulator
//        [i][j][e] is row 16 i + lane / 4 (+ 8 for e >= 2), column 8 j + 2 (lane % 4) + e % 2.
//   FFMA: 16 x 16 threads, each rows {4 ty + 0..3, 64 + 4 ty + 0..3} and the same for columns.
template <typename T, int kMath>
struct Accumulator {
  using Smem_ = Smem<T, kMath>;
  static constexpr bool kMma = kMath != static_cast<int>(GemmMath::kFfma);
  float acc[64];

  __device__ __forceinline__ void Zero() {
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  }

  __device__ __forceinline__ void Multiply(const T* as, const T* bs) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if constexpr (kMath == static_cast<int>(GemmMath::kTf32x3)) {
      // The same fragments as TF32's, from unrounded f32 tiles, each split into head and tail.
      // The tensor cores truncate as they add, so a long reduction straight into the
      // accumulators drifts by far more than f32 rounding: each output's products over this
      // slice (12 mma) go into a zeroed partial first, added to the accumulator with one FADD.
      // A's fragments for the whole slice are held one row block at a time, B's one column block
      // at a time.
      const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
      const int lrow = lane % 8, lsel = lane / 8;
      const float* af = reinterpret_cast<const float*>(as);
      const float* bf = reinterpret_cast<const float*>(bs);
      // Two k steps of fragments at a time (of the slice's four), into partials held per row
      // block: fewer live registers than a whole slice's fragments.
      constexpr int kSteps = kBK / 8, kHeld = 2;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float part[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) part[j][e] = 0.0f;
#pragma unroll
        for (int s0 = 0; s0 < kSteps; s0 += kHeld) {
          uint32_t a_hi[kHeld][4], a_lo[kHeld][4];
#pragma unroll
          for (int s = 0; s < kHeld; ++s) {
            uint32_t a[4];
            LdMatrixX4(a, af + (wm + 16 * i + lrow + (lsel % 2) * 8) * Smem_::kLd + 8 * (s0 + s) +
                              (lsel / 2) * 4);
#pragma unroll
            for (int e = 0; e < 4; ++e) SplitTf32(a[e], &a_hi[s][e], &a_lo[s][e]);
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int s = 0; s < kHeld; ++s) {
              uint32_t r[2], b_hi[2], b_lo[2];
              LdMatrixX2(r, bf + (wn + 8 * j + lrow) * Smem_::kLd + 8 * (s0 + s) + (lsel % 2) * 4);
              SplitTf32(r[0], &b_hi[0], &b_lo[0]);
              SplitTf32(r[1], &b_hi[1], &b_lo[1]);
              // The small products first, so they are not lost against the large one.
              MmaTf32(part[j], a_lo[s], b_hi);
              MmaTf32(part[j], a_hi[s], b_lo);
              MmaTf32(part[j], a_hi[s], b_hi);
            }
          }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[(i * 4 + j) * 4 + e] += part[j][e];
      }
    } else if constexpr (kMath == static_cast<int>(GemmMath::kTf32)) {
      // ldmatrix on 32-bit data: each 8x8 b16 matrix is 8 rows x 4 floats, which is exactly a
      // quarter of the m16n8k8 TF32 A fragment (or half of B's).
      const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
      const int lrow = lane % 8, lsel = lane / 8;
      const float* af = reinterpret_cast<const float*>(as);
      const float* bf = reinterpret_cast<const float*>(bs);
#pragma unroll
      for (int kk = 0; kk < kBK; kk += 8) {
        uint32_t a[4][4], b[4][2];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          LdMatrixX4(a[i],
                     af + (wm + 16 * i + lrow + (lsel % 2) * 8) * Smem_::kLd + kk + (lsel / 2) * 4);
        }
#pragma unroll
        for (int j = 0; j < 4; j += 2) {
          uint32_t r[4];
          LdMatrixX4(r,
                     bf + (wn + 8 * j + lrow + (lsel / 2) * 8) * Smem_::kLd + kk + (lsel % 2) * 4);
          b[j][0] = r[0];
          b[j][1] = r[1];
          b[j + 1][0] = r[2];
          b[j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) MmaTf32(&acc[(i * 4 + j) * 4], a[i], b[j]);
      }
    } else if constexpr (kMath == static_cast<int>(GemmMath::kHalf)) {
      // ldmatrix.x4 hands each lane its mma fragments straight from the [row][k] tiles: four 8x8
      // matrices per instruction, lanes 8i..8i+7 addressing the rows of matrix i.
      const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
      const int lrow = lane % 8, lsel = lane / 8;
#pragma unroll
      for (int kk = 0; kk < kBK; kk += 16) {
        uint32_t a[4][4], b[4][2];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const T* p =
              as + (wm + 16 * i + lrow + (lsel % 2) * 8) * Smem_::kLd + kk + (lsel / 2) * 8;
          LdMatrixX4(a[i], p);
        }
#pragma unroll
        for (int j = 0; j < 4; j += 2) {
          const T* p = bs + (wn + 8 * j + lrow + (lsel / 2) * 8) * Smem_::kLd + kk + (lsel % 2) * 8;
          uint32_t r[4];
          LdMatrixX4(r, p);
          b[j][0] = r[0];
          b[j][1] = r[1];
          b[j + 1][0] = r[2];
          b[j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) Mma16816<T>(&acc[(i * 4 + j) * 4], a[i], b[j]);
      }
    } else {
      const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
      const float* af = reinterpret_cast<const float*>(as);
      const float* bf = reinterpret_cast<const float*>(bs);
#pragma unroll 4
      for (int kk = 0; kk < kBK; ++kk) {
        float a[8], b[8];
        *reinterpret_cast<float4*>(a) =
            *reinterpret_cast<const float4*>(af + kk * Smem_::kLd + 4 * ty);
        *reinterpret_cast<float4*>(a + 4) =
            *reinterpret_cast<const float4*>(af + kk * Smem_::kLd + 64 + 4 * ty);
        *reinterpret_cast<float4*>(b) =
            *reinterpret_cast<const float4*>(bf + kk * Smem_::kLd + 4 * tx);
        *reinterpret_cast<float4*>(b + 4) =
            *reinterpret_cast<const float4*>(bf + kk * Smem_::kLd + 64 + 4 * tx);
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i * 8 + j] = fmaf(a[i], b[j], acc[i * 8 + j]);
      }
    }
  }

  // Calls f(row, col, value) for every accumulator, rows/cols relative to the block tile.
  template <typename F>
  __device__ __forceinline__ void ForEach(F f) const {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if constexpr (kMma) {
      const int wm = (warp / 4) * 64, wn = (warp % 4) * 32, g = lane / 4, t = lane % 4;
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            f(wm + 16 * i + g + (e >= 2 ? 8 : 0), wn + 8 * j + 2 * t + (e & 1),
              acc[(i * 4 + j) * 4 + e]);
    } else {
      const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
          f((i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4), (j < 4 ? 4 * tx + j : 64 + 4 * tx + j - 4),
            acc[i * 8 + j]);
    }
  }
};

// What a block keeps besides its operand tiles: its place in the grid, the decoded rows of A and
// B, the k decodings of `col_slots` slices (a ring) and where its C rows and columns go.
template <typename T>
struct BlockState {
  IndexInfo* row_a;
  IndexInfo* row_b;
  IndexInfo* col_a;  // [col_slots][kBK]
  IndexInfo* col_b;
  int64_t* out_row;
  int64_t* out_col;
  bool* ok_a;
  bool* ok_b;
  int col_slots;
  int split;
  int64_t m0, n0, group, kt_begin, tiles;
  const T* a_base;
  const T* b_base;

  static constexpr size_t Bytes(int col_slots) {
    return (kBM + kBN + 2 * col_slots * kBK) * sizeof(IndexInfo) + (kBM + kBN) * sizeof(int64_t) +
           (kBM + kBN);
  }

  __device__ BlockState(const Params& p, unsigned char* smem, int slots) : col_slots(slots) {
    row_a = reinterpret_cast<IndexInfo*>(smem);
    row_b = row_a + kBM;
    col_a = row_b + kBN;
    col_b = col_a + col_slots * kBK;
    out_row = reinterpret_cast<int64_t*>(col_b + col_slots * kBK);
    out_col = out_row + kBM;
    ok_a = reinterpret_cast<bool*>(out_col + kBN);
    ok_b = ok_a + kBM;
    const GemmView& v = p.view;
    m0 = static_cast<int64_t>(blockIdx.x) * kBM;
    n0 = static_cast<int64_t>(blockIdx.y) * kBN;
    group = blockIdx.z / p.splits;
    split = blockIdx.z % p.splits;
    a_base = static_cast<const T*>(p.a) + group * v.a.group_stride;
    b_base = static_cast<const T*>(p.b) + group * v.b.group_stride;
    const int64_t k_tiles_total = (v.k + kBK - 1) / kBK;
    kt_begin = split * p.k_tiles_per_split;
    const int64_t kt_end = min(kt_begin + p.k_tiles_per_split, k_tiles_total);
    tiles = kt_end > kt_begin ? kt_end - kt_begin : 0;
  }

  // Rows of A and B, and where each C row/column goes, decoded once per block (no barrier).
  __device__ void DecodeRows(const Params& p) {
    const GemmView& v = p.view;
    for (int i = threadIdx.x; i < kBM; i += kThreads) {
      const int64_t m = m0 + i;
      ok_a[i] = m < v.m;
      row_a[i] = Decode(v.a.outer, ok_a[i] ? m : 0);
      out_row[i] = Decode(v.c.rows, ok_a[i] ? m : 0).offset;
    }
    for (int i = threadIdx.x; i < kBN; i += kThreads) {
      const int64_t n = n0 + i;
      ok_b[i] = n < v.n;
      row_b[i] = Decode(v.b.outer, ok_b[i] ? n : 0);
      out_col[i] = Decode(v.c.cols, ok_b[i] ? n : 0).offset;
    }
  }

  __device__ int Slot(int64_t t) const { return static_cast<int>(t % col_slots) * kBK; }

  // The k decodings of slice t into its ring slot; threads 0..31 do A's, 32..63 B's.
  __device__ void DecodeCols(const Params& p, int64_t t) {
    if (t >= tiles) return;
    const GemmView& v = p.view;
    const int i = threadIdx.x % kBK;
    const int64_t k = min((kt_begin + t) * kBK + i, v.k - 1);
    if (threadIdx.x < kBK) {
      col_a[Slot(t) + i] = p.a_table ? p.a_table[k] : Decode(v.a.inner, k);
    } else if (threadIdx.x < 2 * kBK) {
      col_b[Slot(t) + i] = p.b_table ? p.b_table[k] : Decode(v.b.inner, k);
    }
  }

  // Writes the accumulators: blended into C, or as split-K partial sums.
  template <typename Acc>
  __device__ void Store(const Params& p, const Acc& acc) const {
    const GemmView& v = p.view;
    if (p.splits > 1) {
      float* part = p.partial + ((static_cast<int64_t>(split) * v.groups + group) * v.m) * v.n;
      acc.ForEach([&](int r, int c, float value) {
        if (ok_a[r] && ok_b[c]) part[(m0 + r) * v.n + n0 + c] = value;
      });
      return;
    }
    T* c_base = static_cast<T*>(p.c) + group * v.c.group_stride;
    const float alpha = p.alpha, beta = p.beta;
    acc.ForEach([&](int r, int c, float value) {
      if (!ok_a[r] || !ok_b[c]) return;
      T* dst = c_base + out_row[r] + out_col[c];
      float out = alpha * value;
      if (beta != 0.0f) out += beta * ToFloat(*dst);
      *dst = FromFloat<T>(out);
    });
  }
};

template <typename T, int kMath, int kVecA, int kVecB>
__global__ void __launch_bounds__(kThreads, 1) ConvGemmKernel(const Params p) {
  using Smem_ = Smem<T, kMath>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* as = reinterpret_cast<T*>(smem_raw);
  T* bs = as + 2 * Smem_::kTileElems;
  BlockState<T> b(p, reinterpret_cast<unsigned char*>(bs + 2 * Smem_::kTileElems), 3);
  const GemmView& v = p.view;
  b.DecodeRows(p);
  // Slice t's k decodings are made two slices ahead, so no barrier waits for them.
  b.DecodeCols(p, 0);
  b.DecodeCols(p, 1);
  __syncthreads();

  TileLoader<T, kMath, kVecA, kBM> load_a;
  TileLoader<T, kMath, kVecB, kBN> load_b;
  Accumulator<T, kMath> acc;
  acc.Zero();
  if (b.tiles > 0) {
    const int64_t k0 = b.kt_begin * kBK;
    load_a.Load(v.a, b.a_base, b.row_a, b.ok_a, b.col_a, k0, v.k, p.a_lanes_k);
    load_b.Load(v.b, b.b_base, b.row_b, b.ok_b, b.col_b, k0, v.k, p.b_lanes_k);
    load_a.Store(as, p.a_lanes_k);
    load_b.Store(bs, p.b_lanes_k);
  }
  __syncthreads();
  for (int64_t t = 0; t < b.tiles; ++t) {
    const int cur = t & 1;
    const bool more = t + 1 < b.tiles;
    b.DecodeCols(p, t + 2);
    if (more) {
      const int64_t k0 = (b.kt_begin + t + 1) * kBK;
      const int slot = b.Slot(t + 1);
      load_a.Load(v.a, b.a_base, b.row_a, b.ok_a, b.col_a + slot, k0, v.k, p.a_lanes_k);
      load_b.Load(v.b, b.b_base, b.row_b, b.ok_b, b.col_b + slot, k0, v.k, p.b_lanes_k);
    }
    acc.Multiply(as + cur * Smem_::kTileElems, bs + cur * Smem_::kTileElems);
    if (more) {
      load_a.Store(as + (cur ^ 1) * Smem_::kTileElems, p.a_lanes_k);
      load_b.Store(bs + (cur ^ 1) * Smem_::kTileElems, p.b_lanes_k);
    }
    __syncthreads();
  }
  b.Store(p, acc);
}

// The pipelined variant for tensor-core math when both operands load as 16-byte vectors: the
// copies go global -> shared with cp.async (zero-filled in padding), kStages slices in flight, so
// no registers stage data and two blocks fit on an SM.
// Three stages for 16-bit data; two for f32, whose tiles are twice as large, so that two blocks
// still share an SM.
template <typename T>
__host__ __device__ constexpr int StagesFor() {
  return sizeof(T) == 4 ? 2 : 3;
}

__device__ __forceinline__ void CpAsync16(void* smem, const void* global, bool ok) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(addr), "l"(global),
               "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;"); }
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending));
}

template <typename T, int kMath>
__global__ void __launch_bounds__(kThreads, 2) ConvGemmAsyncKernel(const Params p) {
  using Smem_ = Smem<T, kMath>;
  constexpr int kStages = StagesFor<T>();
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kPerRow = kBK / kVec;
  constexpr int kUnits = kBM * kBK / kVec / kThreads;  // per operand, kBM == kBN
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* as = reinterpret_cast<T*>(smem_raw);
  T* bs = as + kStages * Smem_::kTileElems;
  BlockState<T> b(p, reinterpret_cast<unsigned char*>(bs + kStages * Smem_::kTileElems),
                  kStages + 1);
  const GemmView& v = p.view;
  b.DecodeRows(p);

  // Issues the copies of slice t into stage t % kStages (an empty group when t is past the end,
  // so the group count stays in step).
  auto issue = [&](int64_t t) {
    if (t < b.tiles) {
      const int64_t k0 = (b.kt_begin + t) * kBK;
      const int slot = b.Slot(t);
      T* sa = as + (t % kStages) * Smem_::kTileElems;
      T* sb = bs + (t % kStages) * Smem_::kTileElems;
#pragma unroll
      for (int j = 0; j < kUnits; ++j) {
        const int u = threadIdx.x + j * kThreads;
        const int row = u / kPerRow, kk = (u % kPerRow) * kVec;
        const bool k_ok = k0 + kk < v.k;
        int64_t off = 0;
        bool ok = b.ok_a[row] && k_ok && Locate(v.a, b.row_a[row], b.col_a[slot + kk], &off);
        CpAsync16(sa + Smem_::Index(row, kk), ok ? b.a_base + off : b.a_base, ok);
        off = 0;
        ok = b.ok_b[row] && k_ok && Locate(v.b, b.row_b[row], b.col_b[slot + kk], &off);
        CpAsync16(sb + Smem_::Index(row, kk), ok ? b.b_base + off : b.b_base, ok);
      }
    }
    CpAsyncCommit();
  };

  // The ring holds kStages + 1 slices of k decodings: slice t + kStages is decoded while slice
  // t + kStages - 1's copies are issued, and the slot it reuses was last read two barriers ago.
  for (int t = 0; t < kStages; ++t) b.DecodeCols(p, t);
  __syncthreads();
  for (int t = 0; t < kStages - 1; ++t) issue(t);
  Accumulator<T, kMath> acc;
  acc.Zero();
  for (int64_t t = 0; t < b.tiles; ++t) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // slice t landed for every thread; slice t - 1's stage is free again
    issue(t + kStages - 1);
    b.DecodeCols(p, t + kStages);
    const int stage = static_cast<int>(t % kStages);
    acc.Multiply(as + stage * Smem_::kTileElems, bs + stage * Smem_::kTileElems);
  }
  CpAsyncWait<0>();
  b.Store(p, acc);
}

size_t AsyncSharedBytes(size_t elem) {
  const size_t ld = kBK + (elem == 4 ? 4 : 8);
  const int stages = elem == 4 ? 2 : 3;
  return 2 * stages * kBM * ld * elem + BlockState<float>::Bytes(stages + 1);
}

template <typename T, int kMath>
int LaunchAsync(const Params& p, dim3 grid, cudaStream_t stream) {
  const size_t bytes = AsyncSharedBytes(sizeof(T));
  auto kernel = ConvGemmAsyncKernel<T, kMath>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  kernel<<<grid, kThreads, bytes, stream>>>(p);
  return cudaGetLastError();
}

size_t SharedBytes(size_t elem, bool row_major_k) {
  const size_t ld = row_major_k ? kBK + (elem == 4 ? 4 : 8) : kBM + 4;
  const size_t tile = row_major_k ? kBM * ld : kBK * ld;
  return 4 * tile * elem + BlockState<float>::Bytes(3);
}

template <typename T, int kMath, int kVecA, int kVecB>
int Launch(const Params& p, dim3 grid, cudaStream_t stream) {
  const size_t bytes = SharedBytes(sizeof(T), kMath != static_cast<int>(GemmMath::kFfma));
  auto kernel = ConvGemmKernel<T, kMath, kVecA, kVecB>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  kernel<<<grid, kThreads, bytes, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, int kMath, int kVec>
int LaunchVec(const Params& p, int va, int vb, dim3 grid, cudaStream_t stream) {
  if (va > 1 && vb > 1) {
    // The split-TF32 multiply holds a whole slice's fragments: more registers than the pipelined
    // kernel's two blocks per SM leave, so it stays on the register-staged kernel.
    if constexpr (kMath != static_cast<int>(GemmMath::kFfma) &&
                  kMath != static_cast<int>(GemmMath::kTf32x3)) {
      return LaunchAsync<T, kMath>(p, grid, stream);
    }
    return Launch<T, kMath, kVec, kVec>(p, grid, stream);
  }
  if (va > 1) return Launch<T, kMath, kVec, 1>(p, grid, stream);
  if (vb > 1) return Launch<T, kMath, 1, kVec>(p, grid, stream);
  return Launch<T, kMath, 1, 1>(p, grid, stream);
}

__global__ void SplitKReduceKernel(const float* partial, int splits, GemmView v, void* c,
                                   int element, float alpha, float beta) {
  const int64_t per_group = v.m * v.n;
  const int64_t total = per_group * v.groups;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partial[s * total + i];
    const int64_t g = i / per_group, m = (i % per_group) / v.n, n = i % v.n;
    const int64_t off =
        g * v.c.group_stride + Decode(v.c.rows, m).offset + Decode(v.c.cols, n).offset;
    float out = alpha * sum;
    if (element == static_cast<int>(ElementType::kF32)) {
      float* dst = static_cast<float*>(c) + off;
      if (beta != 0.0f) out += beta * *dst;
      *dst = out;
    } else if (element == static_cast<int>(ElementType::kF16)) {
      __half* dst = static_cast<__half*>(c) + off;
      if (beta != 0.0f) out += beta * __half2float(*dst);
      *dst = __float2half_rn(out);
    } else {
      __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(c) + off;
      if (beta != 0.0f) out += beta * __bfloat162float(*dst);
      *dst = __float2bfloat16_rn(out);
    }
  }
}

__global__ void DecodeTableKernel(dnn::IndexMap map, int64_t count, IndexInfo* table) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    table[i] = Decode(map, i);
}

unsigned GridFor(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 132 * 32 ? (blocks < 1 ? 1 : blocks) : 132 * 32);
}

}  // namespace

int64_t ConvGemmPartialBytes(const GemmView& view, int splits) {
  return splits > 1 ? static_cast<int64_t>(splits) * view.groups * view.m * view.n * 4 : 0;
}

int LaunchConvGemm(const ConvGemmLaunch& l, void* stream_ptr) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const GemmView& v = l.view;
  if (v.m == 0 || v.n == 0 || v.groups == 0) return 0;
  Params p;
  p.view = v;
  p.a = l.a;
  p.b = l.b;
  p.c = l.c;
  p.alpha = l.alpha;
  p.beta = l.beta;
  p.a_lanes_k = l.a_lanes_along_k;
  p.b_lanes_k = l.b_lanes_along_k;
  p.a_table = l.a_table;
  p.b_table = l.b_table;
  p.splits = l.splits < 1 ? 1 : l.splits;
  p.partial = l.partial;
  const int64_t k_tiles = (v.k + kBK - 1) / kBK;
  p.k_tiles_per_split = (k_tiles + p.splits - 1) / p.splits;
  const int64_t m_tiles = (v.m + kBM - 1) / kBM, n_tiles = (v.n + kBN - 1) / kBN;
  if (m_tiles > 0x7fffffff || n_tiles > 65535 || v.groups * p.splits > 65535) {
    return static_cast<int>(cudaErrorInvalidConfiguration);
  }
  dim3 grid(static_cast<unsigned>(m_tiles), static_cast<unsigned>(n_tiles),
            static_cast<unsigned>(v.groups * p.splits));
  int err = 0;
  const int f = static_cast<int>(GemmMath::kFfma), tf = static_cast<int>(GemmMath::kTf32),
            h = static_cast<int>(GemmMath::kHalf), tf3 = static_cast<int>(GemmMath::kTf32x3);
  switch (l.element) {
    case ElementType::kF32:
      if (l.math == GemmMath::kTf32) {
        err = LaunchVec<float, tf, 4>(p, l.vector_a, l.vector_b, grid, stream);
      } else if (l.math == GemmMath::kTf32x3) {
        err = LaunchVec<float, tf3, 4>(p, l.vector_a, l.vector_b, grid, stream);
      } else {
        err = LaunchVec<float, f, 4>(p, l.vector_a, l.vector_b, grid, stream);
      }
      break;
    case ElementType::kF16:
      err = LaunchVec<__half, h, 8>(p, l.vector_a, l.vector_b, grid, stream);
      break;
    case ElementType::kBF16:
      err = LaunchVec<__nv_bfloat16, h, 8>(p, l.vector_a, l.vector_b, grid, stream);
      break;
  }
  if (err != 0 || p.splits == 1) return err;
  SplitKReduceKernel<<<GridFor(v.m * v.n * v.groups), 256, 0, stream>>>(
      l.partial, p.splits, v, l.c, static_cast<int>(l.element), l.alpha, l.beta);
  return cudaGetLastError();
}

int LaunchDecodeTable(const dnn::IndexMap& map, int64_t count, IndexInfo* table, void* stream) {
  if (count == 0) return 0;
  DecodeTableKernel<<<GridFor(count), 256, 0, static_cast<cudaStream_t>(stream)>>>(map, count,
                                                                                   table);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace kiln
