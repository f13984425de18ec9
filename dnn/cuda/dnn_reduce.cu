// Per-feature reductions (batch-norm statistics and gradients, bias and PReLU-slope gradients)
// in two deterministic stages: each block sums its share of one feature (or of 32 features, when
// features are the contiguous dim) in double and writes a partial; one thread per feature then
// adds the partials in a fixed order and finishes the op. No atomics, so results are the same on
// every run.
#include <type_traits>

#include "dnn/cuda/dnn_reduce_rows.h"
#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/reduce_finish.cuh"
#include "dnn/cuda/reduce_terms.cuh"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;

template <typename Index>
__device__ __forceinline__ void Decode(Index i, int rank, const int64_t* dims,
                                       const int64_t* strides_a, const int64_t* strides_b, Index* a,
                                       Index* b) {
  Index oa = 0, ob = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const Index dim = static_cast<Index>(dims[d]);
    const Index idx = i % dim;
    i /= dim;
    oa += idx * static_cast<Index>(strides_a[d]);
    ob += idx * static_cast<Index>(strides_b[d]);
  }
  *a = oa;
  *b = ob;
}

__device__ __forceinline__ double WarpSum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

constexpr int kLoadsInFlight = 8;

// Adds kCount elements' terms in f32 first, then once into the double sums: the f32 error of a
// few terms is far below the tolerance, and it saves most of the f32-to-f64 conversions, which
// on an H100 run at a quarter of the FMA rate and would otherwise bound the kernel. A single
// element (kCount 1: the feature-major kernel, heads and tails) is added in double, exactly.
template <int kCount>
__device__ __forceinline__ void AccumulateGroup(ReduceOp op, const float* a, const float* b,
                                                double* s0, double* s1) {
  using Acc = std::conditional_t<kCount == 1, double, float>;
  Acc t0 = 0, t1 = 0;
#pragma unroll
  for (int k = 0; k < kCount; ++k) AddTerms<Acc>(op, a[k], b[k], &t0, &t1);
  *s0 += t0;
  *s1 += t1;
}

// 16-byte loads in flight per thread and operand on contiguous runs.
constexpr int kVectorsInFlight = 4;

// Zeroes the dy terms b[k] where the fused ReLU's output m[k] is not positive.
template <int kCount>
__device__ __forceinline__ void MaskTerms(float* b, const float* m) {
#pragma unroll
  for (int k = 0; k < kCount; ++k) b[k] = m[k] > 0.0f ? b[k] : 0.0f;
}

// Adds the terms of `len` consecutive elements at a (and b and m, which must have a's alignment
// modulo 16 bytes) with 16-byte loads for the aligned body: a quarter of the load instructions
// and four times the bytes in flight of element loads, which a reduction needs to reach the
// copy bandwidth. kMask: b is masked by m (a fused ReLU's output).
template <typename T, typename Index, bool kTwo, bool kMask>
__device__ __forceinline__ void AccumulateRun(ReduceOp op, const T* a, const T* b, const T* m,
                                              Index len, double* s0, double* s1) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kGroup = kVec * kVectorsInFlight;
  const int misaligned = static_cast<int>(reinterpret_cast<uintptr_t>(a) & 15) / sizeof(T);
  const Index head = min(len, static_cast<Index>((kVec - misaligned) % kVec));
  const Index vectors = (len - head) / kVec;
  const Index done = head + vectors * kVec;
  // The head and the tail (fewer than kVec elements each) take one element per thread.
  const Index t = threadIdx.x;
  const Index single = t < head ? t : done + (t - head);
  if (t < head + (len - done)) {
    const float va = ToFloat(a[single]);
    float vb = kTwo ? ToFloat(b[single]) : 0.0f;
    if (kMask && !(ToFloat(m[single]) > 0.0f)) vb = 0.0f;
    AccumulateGroup<1>(op, &va, &vb, s0, s1);
  }
  const T* body_a = a + head;
  const T* body_b = b + head;
  const T* body_m = m + head;
  for (Index base = t; base < vectors; base += kVectorsInFlight * kThreads) {
    float va[kGroup], vb[kGroup];
    float vm[kMask ? kGroup : 1];
#pragma unroll
    for (int k = 0; k < kVectorsInFlight; ++k) {
      const Index j = base + k * kThreads;
      if (j < vectors) {
        LoadVector(body_a + j * kVec, va + k * kVec);
        if (kTwo) LoadVector(body_b + j * kVec, vb + k * kVec);
        if constexpr (kMask) LoadVector(body_m + j * kVec, vm + k * kVec);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) va[k * kVec + e] = 0.0f;
      }
      if (!kTwo || j >= vectors) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) vb[k * kVec + e] = 0.0f;
      }
    }
    if constexpr (kMask) MaskTerms<kGroup>(vb, vm);
    AccumulateGroup<kGroup>(op, va, vb, s0, s1);
  }
}

// One block per (feature, split), threads along the reduction. The reduction space is seen as
// rows (all reduction dims but the last) times the last dim, the one merged runs end in, which is
// contiguous for packed layouts. A block takes a range of row segments and decodes each
// segment's row once, so the inner loop is a strided stream with eight loads in flight per
// thread. Rows are cut into parts when there are fewer rows than blocks.
// kTwo: the op reads b too (gradient sums, PReLU slope); a template argument so that one-operand
// reductions do not hold registers for b. kMask: b is masked by a third operand (ReduceCall's
// mask, a fused ReLU's output).
template <typename T, typename Index, bool kTwo, bool kMask>
__global__ void __launch_bounds__(kThreads)
    ReduceAlongKernel(const __grid_constant__ ReduceCall c) {
  const Index f = blockIdx.x;
  const int64_t split = blockIdx.y;
  Index fa, fb, fm = 0;
  Decode<Index>(f, c.feature_rank, c.feature_dims, c.a_feature_strides, c.b_feature_strides, &fa,
                &fb);
  if (kMask) {
    Index unused;
    Decode<Index>(f, c.feature_rank, c.feature_dims, c.mask_feature_strides, c.mask_feature_strides,
                  &fm, &unused);
  }
  constexpr bool two = kTwo;
  const int last = c.reduce_rank - 1;
  const Index inner = last >= 0 ? static_cast<Index>(c.reduce_dims[last]) : 1;
  const Index step_a = last >= 0 ? static_cast<Index>(c.a_reduce_strides[last]) : 0;
  const Index step_b = last >= 0 ? static_cast<Index>(c.b_reduce_strides[last]) : 0;
  const Index step_m = last >= 0 && kMask ? static_cast<Index>(c.mask_reduce_strides[last]) : 0;
  const int64_t rows = c.reduce_count / inner;
  const int64_t parts = rows >= c.splits ? 1 : (c.splits + rows - 1) / rows;
  const int64_t segments = rows * parts;
  const int64_t seg_begin = segments * split / c.splits;
  const int64_t seg_end = segments * (split + 1) / c.splits;
  const T* a_data = static_cast<const T*>(c.a.data) + fa;
  const T* b_data = static_cast<const T*>(c.b.data) + fb;
  const T* m_data = kMask ? static_cast<const T*>(c.mask.data) + fm : nullptr;
  double s0 = 0, s1 = 0;
  const bool short_rows = parts == 1 && inner < 4 * kThreads;
  if (short_rows) {
    // Short rows (NCHW planes up to 28x28): row by row, most threads would idle or have one
    // vector in flight each, so the block walks its rows' elements as one flat range.
    const Index first = static_cast<Index>(seg_begin) * inner;
    const Index end = static_cast<Index>(seg_end) * inner;
    const int rank = last > 0 ? last : 0;
    for (Index i = first + threadIdx.x; i < end; i += kLoadsInFlight * kThreads) {
      float a[kLoadsInFlight], b[kLoadsInFlight];
      float m[kMask ? kLoadsInFlight : 1];
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        const Index j = i + k * kThreads;
        const bool in = j < end;
        const Index row = in ? j / inner : 0, col = j - row * inner;
        Index ra = 0, rb = 0, rm = 0, unused;
        if (in) {
          Decode<Index>(row, rank, c.reduce_dims, c.a_reduce_strides, c.b_reduce_strides, &ra, &rb);
          if (kMask) {
            Decode<Index>(row, rank, c.reduce_dims, c.mask_reduce_strides, c.mask_reduce_strides,
                          &rm, &unused);
          }
        }
        a[k] = in ? ToFloat(a_data[ra + col * step_a]) : 0.0f;
        b[k] = in && two ? ToFloat(b_data[rb + col * step_b]) : 0.0f;
        if constexpr (kMask) m[k] = in ? ToFloat(m_data[rm + col * step_m]) : 0.0f;
      }
      if constexpr (kMask) MaskTerms<kLoadsInFlight>(b, m);
      AccumulateGroup<kLoadsInFlight>(c.op, a, b, &s0, &s1);
    }
  }
  for (int64_t seg = seg_begin; !short_rows && seg < seg_end; ++seg) {
    const int64_t row = seg / parts, part = seg % parts;
    const Index lo = static_cast<Index>(inner * part / parts);
    const Index hi = static_cast<Index>(inner * (part + 1) / parts);
    Index ra, rb, rm = 0;
    Decode<Index>(static_cast<Index>(row), last > 0 ? last : 0, c.reduce_dims, c.a_reduce_strides,
                  c.b_reduce_strides, &ra, &rb);
    if (kMask) {
      Index unused;
      Decode<Index>(static_cast<Index>(row), last > 0 ? last : 0, c.reduce_dims,
                    c.mask_reduce_strides, c.mask_reduce_strides, &rm, &unused);
    }
    const T* pa = a_data + ra;
    const T* pb = b_data + rb;
    const T* pm = kMask ? m_data + rm : nullptr;
    const bool aligned_together =
        ((reinterpret_cast<uintptr_t>(pa) ^ reinterpret_cast<uintptr_t>(pb)) & 15) == 0 &&
        (!kMask || ((reinterpret_cast<uintptr_t>(pa) ^ reinterpret_cast<uintptr_t>(pm)) & 15) == 0);
    if (step_a == 1 && (!two || (step_b == 1 && aligned_together)) && (!kMask || step_m == 1)) {
      AccumulateRun<T, Index, kTwo, kMask>(c.op, pa + lo, pb + lo, kMask ? pm + lo : nullptr,
                                           hi - lo, &s0, &s1);
      continue;
    }
    for (Index i = lo + threadIdx.x; i < hi; i += kLoadsInFlight * kThreads) {
      float a[kLoadsInFlight], b[kLoadsInFlight];
      float m[kMask ? kLoadsInFlight : 1];
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        const Index j = i + k * kThreads;
        const bool in = j < hi;
        a[k] = in ? ToFloat(pa[j * step_a]) : 0.0f;
        b[k] = in && two ? ToFloat(pb[j * step_b]) : 0.0f;
        if constexpr (kMask) m[k] = in ? ToFloat(pm[j * step_m]) : 0.0f;
      }
      if constexpr (kMask) MaskTerms<kLoadsInFlight>(b, m);
      AccumulateGroup<kLoadsInFlight>(c.op, a, b, &s0, &s1);
    }
  }
  __shared__ double partial[2][kThreads / 32];
  s0 = WarpSum(s0);
  s1 = WarpSum(s1);
  if (threadIdx.x % 32 == 0) {
    partial[0][threadIdx.x / 32] = s0;
    partial[1][threadIdx.x / 32] = s1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double t0 = 0, t1 = 0;
    for (int w = 0; w < kThreads / 32; ++w) t0 += partial[0][w], t1 += partial[1][w];
    double* out = c.partials + (split * c.features + f) * 2;
    out[0] = t0;
    out[1] = t1;
  }
}

// Blocks of 32 features x 8 reduction lanes, for features that are the contiguous dim.
template <typename Index>
__global__ void __launch_bounds__(kThreads)
    ReduceAcrossKernel(const __grid_constant__ ReduceCall c) {
  const int lane = threadIdx.x % 32, row = threadIdx.x / 32;
  const Index f = static_cast<Index>(blockIdx.x) * 32 + lane;
  const Index split = blockIdx.y;
  const Index count = static_cast<Index>(c.reduce_count);
  const Index chunk = (count + c.splits - 1) / c.splits;
  const Index begin = split * chunk;
  const Index end = begin + chunk < count ? begin + chunk : count;
  const bool two = ReadsSecond(c.op);
  const bool masked = two && c.mask.data != nullptr;
  double s0 = 0, s1 = 0;
  if (f < static_cast<Index>(c.features)) {
    Index fa, fb, fm = 0, unused;
    Decode<Index>(f, c.feature_rank, c.feature_dims, c.a_feature_strides, c.b_feature_strides, &fa,
                  &fb);
    if (masked) {
      Decode<Index>(f, c.feature_rank, c.feature_dims, c.mask_feature_strides,
                    c.mask_feature_strides, &fm, &unused);
    }
    for (Index r = begin + row; r < end; r += kThreads / 32) {
      Index ra, rb;
      Decode<Index>(r, c.reduce_rank, c.reduce_dims, c.a_reduce_strides, c.b_reduce_strides, &ra,
                    &rb);
      const float a = LoadAny(c.a.data, c.a.type, fa + ra);
      float b = two ? LoadAny(c.b.data, c.b.type, fb + rb) : 0.0f;
      if (masked) {
        Index rm, unused;
        Decode<Index>(r, c.reduce_rank, c.reduce_dims, c.mask_reduce_strides, c.mask_reduce_strides,
                      &rm, &unused);
        if (!(LoadAny(c.mask.data, c.mask.type, fm + rm) > 0.0f)) b = 0.0f;
      }
      AccumulateGroup<1>(c.op, &a, &b, &s0, &s1);
    }
  }
  __shared__ double partial[2][kThreads / 32][32];
  partial[0][row][lane] = s0;
  partial[1][row][lane] = s1;
  __syncthreads();
  if (row == 0 && f < static_cast<Index>(c.features)) {
    double t0 = 0, t1 = 0;
    for (int w = 0; w < kThreads / 32; ++w) t0 += partial[0][w][lane], t1 += partial[1][w][lane];
    double* out = c.partials + (static_cast<int64_t>(split) * c.features + f) * 2;
    out[0] = t0;
    out[1] = t1;
  }
}

// A warp per feature: lane l adds splits l, l + 32, ... then the lanes are combined by a fixed
// shuffle tree, so the order (and the result) is the same on every run.
constexpr int kFinishWarps = 4;

__global__ void __launch_bounds__(kFinishWarps * 32)
    FinishKernel(const __grid_constant__ ReduceCall c) {
  const int64_t f = blockIdx.x * static_cast<int64_t>(kFinishWarps) + threadIdx.x / 32;
  if (f >= c.features) return;
  const int lane = threadIdx.x % 32;
  double s0 = 0, s1 = 0;
  for (int s = lane; s < c.splits; s += 32) {
    s0 += c.partials[(s * c.features + f) * 2];
    s1 += c.partials[(s * c.features + f) * 2 + 1];
  }
  for (int o = 16; o > 0; o >>= 1) {
    s0 += __shfl_xor_sync(0xffffffffu, s0, o);
    s1 += __shfl_xor_sync(0xffffffffu, s1, o);
  }
  if (lane != 0) return;
  FinishFeature(c, f, s0, s1);
}

struct InferenceParams {
  int64_t features;
  int rank;
  int64_t dims[kMaxRank], strides[kMaxRank];
  const float *scale, *bias, *mean, *var, *caffe_factor;
  double epsilon;
  float* dense;
};

// y = A (x - s mean) + bias with A = scale / sqrt(s var + eps) (s: Caffe's 1 / factor).
__global__ void InferenceParamsKernel(const __grid_constant__ InferenceParams p) {
  const int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (f >= p.features) return;
  int64_t po = 0, rest = f;
  for (int d = p.rank - 1; d >= 0; --d) {
    po += (rest % p.dims[d]) * p.strides[d];
    rest /= p.dims[d];
  }
  double s = 1;
  if (p.caffe_factor) s = *p.caffe_factor == 0.0f ? 0.0 : 1.0 / *p.caffe_factor;
  p.dense[f] = static_cast<float>(p.scale[po] / sqrt(s * p.var[po] + p.epsilon));
  p.dense[p.features + f] = 0.0f;
  p.dense[2 * p.features + f] = p.bias[po];
  p.dense[3 * p.features + f] = static_cast<float>(s * p.mean[po]);
}

template <typename T, bool kTwo, bool kMask>
void LaunchAlong(const ReduceCall& c, dim3 grid, bool narrow, cudaStream_t s) {
  if (narrow) {
    ReduceAlongKernel<T, uint32_t, kTwo, kMask><<<grid, kThreads, 0, s>>>(c);
  } else {
    ReduceAlongKernel<T, int64_t, kTwo, kMask><<<grid, kThreads, 0, s>>>(c);
  }
}

template <typename T>
void LaunchAlong(const ReduceCall& c, dim3 grid, bool narrow, bool two, bool masked,
                 cudaStream_t s) {
  if (masked) {
    LaunchAlong<T, true, true>(c, grid, narrow, s);
  } else if (two) {
    LaunchAlong<T, true, false>(c, grid, narrow, s);
  } else {
    LaunchAlong<T, false, false>(c, grid, narrow, s);
  }
}

}  // namespace

int ReduceSplits(int64_t features, int64_t reduce_count, bool feature_major) {
  const int64_t blocks = feature_major ? (features + 31) / 32 : features;
  int64_t splits = (2048 + blocks - 1) / blocks;
  const int64_t most = (reduce_count + 1023) / 1024;
  if (splits > most) splits = most;
  if (splits > 4096) splits = 4096;
  return static_cast<int>(splits < 1 ? 1 : splits);
}

int LaunchReduce(const ReduceCall& c, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // The mask is only read with the second operand (kGradientSums), and must share a's storage.
  const bool masked = ReadsSecond(c.op) && c.mask.data != nullptr;
  if (masked && c.mask.type != c.a.type) return static_cast<int>(cudaErrorInvalidValue);
  int64_t span = 0;
  for (int d = 0; d < c.feature_rank; ++d) {
    span += (c.feature_dims[d] - 1) *
            (c.a_feature_strides[d] + c.b_feature_strides[d] + c.mask_feature_strides[d]);
  }
  for (int d = 0; d < c.reduce_rank; ++d) {
    span += (c.reduce_dims[d] - 1) *
            (c.a_reduce_strides[d] + c.b_reduce_strides[d] + c.mask_reduce_strides[d]);
  }
  const bool narrow = c.features * c.reduce_count < (int64_t{1} << 30) && span < (int64_t{1} << 30);
  const dim3 grid(static_cast<unsigned>(c.feature_major ? (c.features + 31) / 32 : c.features),
                  static_cast<unsigned>(c.splits));
  RowsView rows;
  if (c.feature_major && RowsViewOf(c, &rows) && c.splits == RowsSplits(c.features, rows.rows)) {
    LaunchReduceRows(c, rows, stream);
  } else if (c.feature_major) {
    if (narrow) {
      ReduceAcrossKernel<uint32_t><<<grid, kThreads, 0, s>>>(c);
    } else {
      ReduceAcrossKernel<int64_t><<<grid, kThreads, 0, s>>>(c);
    }
  } else {
    const bool two = ReadsSecond(c.op);
    if (two && c.b.type != c.a.type) return static_cast<int>(cudaErrorInvalidValue);
    switch (c.a.type) {
      case Storage::kF16:
        LaunchAlong<__half>(c, grid, narrow, two, masked, s);
        break;
      case Storage::kBF16:
        LaunchAlong<__nv_bfloat16>(c, grid, narrow, two, masked, s);
        break;
      default:
        LaunchAlong<float>(c, grid, narrow, two, masked, s);
    }
  }
  if (int e = LastError()) return e;
  FinishKernel<<<BlocksFor(c.features, kFinishWarps), kFinishWarps * 32, 0, s>>>(c);
  return LastError();
}

int LaunchBatchNormInferenceParams(int64_t features, int feature_rank, const int64_t* feature_dims,
                                   const int64_t* param_strides, const float* scale,
                                   const float* bias, const float* mean, const float* var,
                                   const float* caffe_factor, double epsilon, float* dense,
                                   void* stream) {
  InferenceParams p{};
  p.features = features;
  p.rank = feature_rank;
  for (int d = 0; d < feature_rank; ++d) {
    p.dims[d] = feature_dims[d];
    p.strides[d] = param_strides[d];
  }
  p.scale = scale;
  p.bias = bias;
  p.mean = mean;
  p.var = var;
  p.caffe_factor = caffe_factor;
  p.epsilon = epsilon;
  p.dense = dense;
  InferenceParamsKernel<<<BlocksFor(features, 128), 128, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return LastError();
}

}  // namespace cuda
}  // namespace kiln
