// Per-feature reductions of channels-last tensors: the features are one contiguous dim and the
// reduction dims collapse to one row stride, so the tensor is a [rows][features] matrix (NHWC
// batch norm, bias and scale gradients). The general feature-major kernel in dnn_reduce.cu
// decodes every element's index and loads one 2-byte element at a time; here a thread owns a
// 16-byte vector of consecutive features and walks down the rows with several vector loads in
// flight, which is what it takes to reach the copy bandwidth. The partial sums have the layout
// of dnn_reduce.cu's, whose finishing kernel completes the op, so results stay deterministic.
#include "dnn/cuda/dnn_reduce_rows.h"
#include "dnn/cuda/reduce_terms.cuh"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;
// Rows each thread loads before it adds: the loads of a group are all in flight together, 128
// bytes a thread (16-byte vectors) for one operand or for two (96 for three: a mask too, where a
// third row would spill), and the kernel stays under 128 registers, so two blocks (16 warps)
// share an SM.
template <bool kTwo, bool kMask>
constexpr int kRowsInFlight = kMask  ? 2
                              : kTwo ? 4
                                     : 8;
// Groups added in f32 before the f32 sums go into the double ones: at most
// kRowsInFlight x kGroupsPerFlush (16 or 32) terms per f32 sum, whose rounding error stays far
// below the tolerance, and one f32-to-f64 conversion per 16 elements instead of one per element.
constexpr int kGroupsPerFlush = 4;

// kVec consecutive elements at p as floats (kVec x sizeof(T) is 16 bytes, or one element).
template <typename T, int kVec>
__device__ __forceinline__ void LoadFeatures(const T* p, float* v) {
  if constexpr (kVec == 1) {
    v[0] = ToFloat(__ldg(p));
  } else {
    LoadVector(p, v);
  }
}

// Block: kThreads = cols x lanes threads; thread (lane, col) owns features
// [(blockIdx.x cols + col) kVec, + kVec) and rows lane, lane + lanes, ... of its split's range.
// kMask: b (dy) is zeroed where the call's mask operand (a fused ReLU's output) is not positive.
template <typename T, int kVec, bool kTwo, bool kMask>
__global__ void __launch_bounds__(kThreads, 2)
    ReduceRowsKernel(const __grid_constant__ ReduceCall c, RowsView v) {
  const int cols = v.cols, lanes = kThreads / cols;
  const int col = threadIdx.x % cols, lane = threadIdx.x / cols;
  const int64_t f0 = (static_cast<int64_t>(blockIdx.x) * cols + col) * kVec;
  const bool active = f0 < c.features;
  const int64_t rows_begin = v.rows * blockIdx.y / c.splits;
  const int64_t rows_end = v.rows * (blockIdx.y + 1) / c.splits;
  const T* a = static_cast<const T*>(c.a.data) + f0;
  const T* b = kTwo ? static_cast<const T*>(c.b.data) + f0 : nullptr;
  const T* m = kMask ? static_cast<const T*>(c.mask.data) + f0 : nullptr;
  double s0[kVec], s1[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) s0[e] = s1[e] = 0;
  int64_t r = rows_begin + lane;
  while (active && r < rows_end) {
    float t0[kVec], t1[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) t0[e] = t1[e] = 0.0f;
    for (int g = 0; g < kGroupsPerFlush && r < rows_end; ++g) {
      constexpr int kRows = kRowsInFlight<kTwo, kMask>;
      float va[kRows][kVec], vb[kRows][kVec];
      float vm[kMask ? kRows : 1][kMask ? kVec : 1];
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        const int64_t row = r + static_cast<int64_t>(k) * lanes;
        if (row < rows_end) {
          LoadFeatures<T, kVec>(a + row * v.a_row_stride, va[k]);
          if (kTwo) LoadFeatures<T, kVec>(b + row * v.b_row_stride, vb[k]);
          if constexpr (kMask) LoadFeatures<T, kVec>(m + row * v.mask_row_stride, vm[k]);
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e) va[k][e] = 0.0f;
          if (kTwo) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) vb[k][e] = 0.0f;
          }
          if constexpr (kMask) {
#pragma unroll
            for (int e = 0; e < kVec; ++e) vm[k][e] = 0.0f;
          }
        }
        if (!kTwo) {
#pragma unroll
          for (int e = 0; e < kVec; ++e) vb[k][e] = 0.0f;
        }
      }
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          const float dy = kMask && !(vm[kMask ? k : 0][kMask ? e : 0] > 0.0f) ? 0.0f : vb[k][e];
          AddTerms<float>(c.op, va[k][e], dy, &t0[e], &t1[e]);
        }
      }
      r += static_cast<int64_t>(kRows) * lanes;
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      s0[e] += t0[e];
      s1[e] += t1[e];
    }
  }
  // The lanes' sums of each feature of the block, added in lane order by one thread each.
  __shared__ double partial[2][kThreads * kVec];  // [lane][feature of the block]
  const int per_block = cols * kVec;              // kThreads at most
  const bool second = HasSecondSum(c.op);
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    partial[0][lane * per_block + col * kVec + e] = s0[e];
    if (second) partial[1][lane * per_block + col * kVec + e] = s1[e];
  }
  __syncthreads();
  double sum0 = 0, sum1 = 0;
  if (threadIdx.x < per_block) {
    for (int l = 0; l < lanes; ++l) {
      sum0 += partial[0][l * per_block + threadIdx.x];
      if (second) sum1 += partial[1][l * per_block + threadIdx.x];
    }
  }
  const int64_t f = static_cast<int64_t>(blockIdx.x) * per_block + threadIdx.x;
  if (threadIdx.x < per_block && f < c.features) {
    double* out = c.partials + (static_cast<int64_t>(blockIdx.y) * c.features + f) * 2;
    out[0] = sum0;
    out[1] = sum1;
  }
}

template <typename T, int kVec>
void LaunchRows(const ReduceCall& c, const RowsView& v, cudaStream_t s) {
  const int64_t per_block = static_cast<int64_t>(v.cols) * kVec;
  const dim3 grid(static_cast<unsigned>((c.features + per_block - 1) / per_block),
                  static_cast<unsigned>(c.splits));
  if (ReadsSecond(c.op) && c.mask.data != nullptr) {
    ReduceRowsKernel<T, kVec, true, true><<<grid, kThreads, 0, s>>>(c, v);
  } else if (ReadsSecond(c.op)) {
    ReduceRowsKernel<T, kVec, true, false><<<grid, kThreads, 0, s>>>(c, v);
  } else {
    ReduceRowsKernel<T, kVec, false, false><<<grid, kThreads, 0, s>>>(c, v);
  }
}

template <typename T>
void LaunchRowsTyped(const ReduceCall& c, RowsView v, bool vectors, cudaStream_t s) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t units = vectors ? c.features / kVec : c.features;
  // Enough threads across a row to cover its vectors (a power of two, at most a warp), the
  // rest of the block down the rows.
  int cols = 1;
  while (cols < 32 && cols < units) cols *= 2;
  v.cols = cols;
  if (vectors) {
    LaunchRows<T, kVec>(c, v, s);
  } else {
    LaunchRows<T, 1>(c, v, s);
  }
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool RowsViewOf(const ReduceCall& c, RowsView* v) {
  if (c.feature_rank != 1 || c.a_feature_strides[0] != 1) return false;
  const bool two = ReadsSecond(c.op);
  const bool masked = two && c.mask.data != nullptr;
  if (two && c.b_feature_strides[0] != 1) return false;
  if (masked && c.mask_feature_strides[0] != 1) return false;
  // The reduction dims must be one walk of a single stride, in every operand.
  int64_t rows = 1, a_stride = c.features, b_stride = c.features, m_stride = c.features;
  auto walks = [&](const int64_t* strides, int d) {
    return strides[d] == strides[d + 1] * c.reduce_dims[d + 1];
  };
  for (int d = c.reduce_rank - 1; d >= 0; --d) {
    if (d == c.reduce_rank - 1) {
      a_stride = c.a_reduce_strides[d];
      b_stride = c.b_reduce_strides[d];
      m_stride = c.mask_reduce_strides[d];
    } else if (!walks(c.a_reduce_strides, d) || (two && !walks(c.b_reduce_strides, d)) ||
               (masked && !walks(c.mask_reduce_strides, d))) {
      return false;
    }
    rows *= c.reduce_dims[d];
  }
  // Rows may not overlap (a stride below the row length would read elements twice).
  if (rows > 1 && (a_stride < c.features || (two && b_stride < c.features) ||
                   (masked && m_stride < c.features))) {
    return false;
  }
  v->rows = rows;
  v->a_row_stride = a_stride;
  v->b_row_stride = two ? b_stride : 0;
  v->mask_row_stride = masked ? m_stride : 0;
  return true;
}

int RowsSplits(int64_t features, int64_t rows) {
  // About 256 blocks in all, two per multiprocessor of an H100 (the grid's x dim covers up to
  // 256 features a block), each with at least 64 rows. More blocks left each thread one group
  // of rows, so a batch-norm's statistics over 200704 rows of 64 channels took 44 us in 4 waves
  // of load-flush-store instead of streaming, and the finishing pass summed 1024 partials.
  const int64_t across = (features + 255) / 256;
  int64_t splits = (256 + across - 1) / across;
  const int64_t most = (rows + 63) / 64;
  if (splits > most) splits = most;
  if (splits > 4096) splits = 4096;
  return static_cast<int>(splits < 1 ? 1 : splits);
}

void LaunchReduceRows(const ReduceCall& c, const RowsView& v, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const bool two = ReadsSecond(c.op);
  const int elem = c.a.type == Storage::kF32 ? 4 : 2;
  const int vec = 16 / elem;
  const bool masked = two && c.mask.data != nullptr;
  const bool vectors = c.features % vec == 0 && v.a_row_stride % vec == 0 && Aligned16(c.a.data) &&
                       (!two || (v.b_row_stride % vec == 0 && Aligned16(c.b.data))) &&
                       (!masked || (v.mask_row_stride % vec == 0 && Aligned16(c.mask.data)));
  switch (c.a.type) {
    case Storage::kF16:
      LaunchRowsTyped<__half>(c, v, vectors, s);
      break;
    case Storage::kBF16:
      LaunchRowsTyped<__nv_bfloat16>(c, v, vectors, s);
      break;
    default:
      LaunchRowsTyped<float>(c, v, vectors, s);
  }
}

}  // namespace cuda
}  // namespace kiln
