// Softmax (accurate and log) forward and backward over rows of any strides, and
// SoftmaxWithLoss. Rows of one dim up to 2048 long get a block each with the row in registers.
// Other rows whose elements are contiguous (instance softmax, channels-last channel
// softmax, a classifier's [N, classes]) get a block each, the row cached in shared memory; rows
// strided across memory (NCHW channel softmax) get a thread each, so a warp reads 32 neighbouring
// rows' elements at once. The loss is summed by one block in a fixed order (deterministic).
#include <cfloat>

#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/storage_access.cuh"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kCachedRow = 4096;  // elements a block keeps in shared memory

__device__ __forceinline__ void DecodeOuter(const SoftmaxCall& c, int64_t row, int64_t* base) {
  base[0] = base[1] = base[2] = 0;
  for (int d = c.outer_rank - 1; d >= 0; --d) {
    // What remains of the row is the outermost index: no (64-bit, slow) division for it.
    const int64_t idx = d == 0 ? row : row % c.outer_dims[d];
    if (d > 0) row /= c.outer_dims[d];
    for (int k = 0; k < 3; ++k) base[k] += idx * c.outer_strides[k][d];
  }
}

__device__ __forceinline__ int64_t RowOffset(const SoftmaxCall& c, int k, int64_t e) {
  if (c.row_rank == 1) return e * c.row_strides[k][0];
  int64_t offset = 0;
  for (int d = c.row_rank - 1; d >= 0; --d) {
    offset += (e % c.row_dims[d]) * c.row_strides[k][d];
    e /= c.row_dims[d];
  }
  return offset;
}

// One barrier per reduction: the caller must not reuse `scratch` until a later barrier has
// passed (every thread reads it right after this one), hence a scratch per reduction of a row,
// and for one-reduction rows a pair alternating between rows.
template <bool kMax>
__device__ __forceinline__ float BlockReduce(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_down_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) r = kMax ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}

// Merges (max, sum of exp(v - max)) pairs across the block; returns the block's maximum and
// sets *sum to the block's sum relative to it. Maxima and sums are reduced separately, each
// thread's and each warp's sum rescaled by one exponential, so the chain of dependent steps
// holds no exponential (a merge of pairs needs two per step). One barrier: the caller must not
// reuse `pairs` until a later barrier has passed.
__device__ __forceinline__ float BlockReduceMaxSum(float mx, float* sum, float2* pairs) {
  float top = mx;
  for (int o = 16; o > 0; o >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
  float s = *sum * __expf(mx - top);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) pairs[threadIdx.x / 32] = make_float2(top, s);
  __syncthreads();
  float2 warp[kThreads / 32];
  float block_top = -FLT_MAX;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) {
    warp[w] = pairs[w];
    block_top = fmaxf(block_top, warp[w].x);
  }
  float total = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += warp[w].y * __expf(warp[w].x - block_top);
  *sum = total;
  return block_top;
}

template <typename T>
__device__ __forceinline__ void StoreBlended(const SoftmaxCall& c, int64_t offset, float v) {
  T* out = static_cast<T*>(c.out) + offset;
  *out = FromFloat<T>(Blend(c.alpha, v, c.beta, [&] { return ToFloat(*out); }));
}

// Forward (kBackward false): out = softmax(x). Backward: x is y; out = dx.
template <typename T, bool kBackward>
__global__ void __launch_bounds__(kThreads)
    SoftmaxRowKernel(const __grid_constant__ SoftmaxCall c) {
  __shared__ float cache[kCachedRow];
  __shared__ float scratch[2][kThreads / 32];  // the row ends with a barrier: no alternation
  const bool cached = c.row_length <= kCachedRow;
  const T* x = static_cast<const T*>(c.x);
  const T* dy = static_cast<const T*>(c.dy);
  for (int64_t row = blockIdx.x; row < c.rows; row += gridDim.x) {
    int64_t base[3];
    DecodeOuter(c, row, base);
    auto load = [&](int64_t e) {
      return cached ? cache[e] : ToFloat(x[base[0] + RowOffset(c, 0, e)]);
    };
    float a = kBackward ? 0.0f : -FLT_MAX;
    for (int64_t e = threadIdx.x; e < c.row_length; e += kThreads) {
      const float v = ToFloat(x[base[0] + RowOffset(c, 0, e)]);
      if (cached) cache[e] = v;
      if (kBackward) {
        const float g = ToFloat(dy[base[1] + RowOffset(c, 1, e)]);
        a += c.log ? g : g * v;
      } else {
        a = fmaxf(a, v);
      }
    }
    if (kBackward) {
      const float dot = BlockReduce<false>(a, scratch[0]);
      for (int64_t e = threadIdx.x; e < c.row_length; e += kThreads) {
        const float yv = load(e), g = ToFloat(dy[base[1] + RowOffset(c, 1, e)]);
        StoreBlended<T>(c, base[2] + RowOffset(c, 2, e),
                        c.log ? g - __expf(yv) * dot : yv * (g - dot));
      }
    } else {
      const float mx = BlockReduce<true>(a, scratch[0]);
      float s = 0;
      for (int64_t e = threadIdx.x; e < c.row_length; e += kThreads) s += __expf(load(e) - mx);
      const float sum = BlockReduce<false>(s, scratch[1]);
      const float log_sum = __logf(sum), inv = 1.0f / sum;
      for (int64_t e = threadIdx.x; e < c.row_length; e += kThreads) {
        const float v = load(e) - mx;
        StoreBlended<T>(c, base[2] + RowOffset(c, 2, e), c.log ? v - log_sum : __expf(v) * inv);
      }
    }
    __syncthreads();  // the cache is reused by the next row
  }
}

constexpr int kMaxRegisterSlots = 8;  // elements per thread of a row held in registers

// Rows of one dim, at most kThreads * kRegisterSlots long: a block per row loads the whole row
// into registers with every load in flight at once, so a row costs one memory latency plus one
// block reduction (the latency, not bandwidth, is what bounds small softmaxes like 128 x 1000).
// The launcher picks the fewest slots that hold the row: each slot's loads and exponentials are
// serial work for a thread, needed or not.
template <typename T, bool kBackward, int kRegisterSlots>
__global__ void __launch_bounds__(kThreads)
    SoftmaxRegisterRowKernel(const __grid_constant__ SoftmaxCall c) {
  // One reduction (one barrier) per row, so consecutive rows alternate scratches.
  __shared__ float scratch[2][kThreads / 32];  // backward
  __shared__ float2 pairs[2][kThreads / 32];   // forward
  const int length = static_cast<int>(c.row_length);
  int parity = 0;
  const int64_t sx = c.row_strides[0][0], sdy = c.row_strides[1][0], so = c.row_strides[2][0];
  for (int64_t row = blockIdx.x; row < c.rows; row += gridDim.x) {
    int64_t base[3];
    DecodeOuter(c, row, base);
    const T* x = static_cast<const T*>(c.x) + base[0];
    const T* dy = static_cast<const T*>(c.dy) + base[1];
    float v[kRegisterSlots], g[kRegisterSlots];
#pragma unroll
    for (int k = 0; k < kRegisterSlots; ++k) {
      const int e = threadIdx.x + k * kThreads;
      v[k] = e < length ? ToFloat(x[e * sx]) : (kBackward ? 0.0f : -FLT_MAX);
      if (kBackward) g[k] = e < length ? ToFloat(dy[e * sdy]) : 0.0f;
    }
    float out[kRegisterSlots];
    if (kBackward) {
      float a = 0;
#pragma unroll
      for (int k = 0; k < kRegisterSlots; ++k) a += c.log ? g[k] : g[k] * v[k];
      const float dot = BlockReduce<false>(a, scratch[parity]);
#pragma unroll
      for (int k = 0; k < kRegisterSlots; ++k) {
        out[k] = c.log ? g[k] - __expf(v[k]) * dot : v[k] * (g[k] - dot);
      }
    } else {
      // The row's maximum and sum of exponentials in one reduction of (max, sum) pairs.
      float mx = -FLT_MAX;
#pragma unroll
      for (int k = 0; k < kRegisterSlots; ++k) mx = fmaxf(mx, v[k]);
      float sum = 0;
#pragma unroll
      for (int k = 0; k < kRegisterSlots; ++k) {
        const int e = threadIdx.x + k * kThreads;
        out[k] = __expf(v[k] - mx);
        sum += e < length ? out[k] : 0.0f;
      }
      const float row_max = BlockReduceMaxSum(mx, &sum, pairs[parity]);
      const float log_sum = __logf(sum), scale = __expf(mx - row_max) / sum;
#pragma unroll
      for (int k = 0; k < kRegisterSlots; ++k) {
        out[k] = c.log ? v[k] - row_max - log_sum : out[k] * scale;
      }
    }
    parity ^= 1;
#pragma unroll
    for (int k = 0; k < kRegisterSlots; ++k) {
      const int e = threadIdx.x + k * kThreads;
      if (e < length) StoreBlended<T>(c, base[2] + e * so, out[k]);
    }
  }
}

template <typename T, bool kBackward>
__global__ void __launch_bounds__(kThreads)
    SoftmaxThreadKernel(const __grid_constant__ SoftmaxCall c) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (row >= c.rows) return;
  int64_t base[3];
  DecodeOuter(c, row, base);
  const T* x = static_cast<const T*>(c.x);
  const T* dy = static_cast<const T*>(c.dy);
  if (kBackward) {
    float dot = 0;
    for (int64_t e = 0; e < c.row_length; ++e) {
      const float g = ToFloat(dy[base[1] + RowOffset(c, 1, e)]);
      dot += c.log ? g : g * ToFloat(x[base[0] + RowOffset(c, 0, e)]);
    }
    for (int64_t e = 0; e < c.row_length; ++e) {
      const float yv = ToFloat(x[base[0] + RowOffset(c, 0, e)]);
      const float g = ToFloat(dy[base[1] + RowOffset(c, 1, e)]);
      StoreBlended<T>(c, base[2] + RowOffset(c, 2, e),
                      c.log ? g - __expf(yv) * dot : yv * (g - dot));
    }
    return;
  }
  // Online maximum and sum in one pass, then the writes.
  float mx = -FLT_MAX, sum = 0;
  for (int64_t e = 0; e < c.row_length; ++e) {
    const float v = ToFloat(x[base[0] + RowOffset(c, 0, e)]);
    if (v > mx) {
      sum = sum * __expf(mx - v) + 1.0f;
      mx = v;
    } else {
      sum += __expf(v - mx);
    }
  }
  const float log_sum = __logf(sum), inv = 1.0f / sum;
  for (int64_t e = 0; e < c.row_length; ++e) {
    const float v = ToFloat(x[base[0] + RowOffset(c, 0, e)]) - mx;
    StoreBlended<T>(c, base[2] + RowOffset(c, 2, e), c.log ? v - log_sum : __expf(v) * inv);
  }
}

template <typename T, bool kBackward>
int LaunchTyped(const SoftmaxCall& c, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // A thread per row when rows are many and a row's elements are not contiguous.
  int64_t row_min_stride = INT64_MAX;
  for (int d = 0; d < c.row_rank; ++d) {
    if (c.row_dims[d] > 1 && c.row_strides[0][d] < row_min_stride) {
      row_min_stride = c.row_strides[0][d];
    }
  }
  const bool per_thread = row_min_stride > 1 && c.rows >= 4096;
  if (per_thread) {
    SoftmaxThreadKernel<T, kBackward><<<BlocksFor(c.rows, kThreads), kThreads, 0, s>>>(c);
  } else if (c.row_rank == 1 && c.row_length <= kThreads * kMaxRegisterSlots) {
    const unsigned blocks = BlocksFor(c.rows, 1, 65535);
    if (c.row_length <= kThreads * 2) {
      SoftmaxRegisterRowKernel<T, kBackward, 2><<<blocks, kThreads, 0, s>>>(c);
    } else if (c.row_length <= kThreads * 4) {
      SoftmaxRegisterRowKernel<T, kBackward, 4><<<blocks, kThreads, 0, s>>>(c);
    } else {
      SoftmaxRegisterRowKernel<T, kBackward, kMaxRegisterSlots><<<blocks, kThreads, 0, s>>>(c);
    }
  } else {
    SoftmaxRowKernel<T, kBackward><<<BlocksFor(c.rows, 1, 65535), kThreads, 0, s>>>(c);
  }
  return LastError();
}

template <bool kBackward>
int LaunchSoftmax(const SoftmaxCall& c, void* stream) {
  switch (c.type) {
    case Storage::kF16:
      return LaunchTyped<__half, kBackward>(c, stream);
    case Storage::kBF16:
      return LaunchTyped<__nv_bfloat16, kBackward>(c, stream);
    default:
      return LaunchTyped<float, kBackward>(c, stream);
  }
}

// Position p's offsets in the label tensor and in a class-indexed tensor (class 0).
__device__ __forceinline__ void DecodePosition(const SoftmaxLossCall& c, int64_t p,
                                               const int64_t* strides, int64_t* label_offset,
                                               int64_t* offset) {
  *label_offset = 0;
  *offset = 0;
  for (int d = c.rank - 1; d >= 0; --d) {
    const int64_t idx = p % c.pos_dims[d];
    p /= c.pos_dims[d];
    *label_offset += idx * c.label_strides[d];
    *offset += idx * strides[d];
  }
}

// The class at a position: >= 0, -1 when ignored, -2 when invalid.
__device__ __forceinline__ int64_t ClassAt(const SoftmaxLossCall& c, int64_t label_offset) {
  const float v = LoadAny(c.labels, c.label_type, label_offset);
  const int64_t label = static_cast<int64_t>(v);
  if (c.has_ignore && label == c.ignore_label) return -1;
  if (!(v >= 0.0f) || label >= c.classes) return -2;
  return label;
}

__device__ float Normalizer(const SoftmaxLossCall& c, double valid) {
  double n = 1;
  switch (c.normalization) {  // dnn::LossNormalization's values
    case 0:                   // full
      n = static_cast<double>(c.positions);
      break;
    case 1:  // valid
      n = valid;
      break;
    case 2:  // batch size
      n = 1;
      for (int d = 0; d < c.axis; ++d) n *= static_cast<double>(c.pos_dims[d]);
      break;
    default:  // none
      n = 1;
  }
  return static_cast<float>(n > 1 ? n : 1);
}

// One block: per-thread partial loss and valid count in a fixed order, then a fixed tree.
__global__ void __launch_bounds__(1024)
    SoftmaxLossKernel(const __grid_constant__ SoftmaxLossCall c, bool backward_prepass) {
  __shared__ double loss[1024];
  __shared__ double valid[1024];
  double l = 0, n = 0;
  for (int64_t p = threadIdx.x; p < c.positions; p += 1024) {
    int64_t lo, po;
    DecodePosition(c, p, c.prob_strides, &lo, &po);
    const int64_t label = ClassAt(c, lo);
    if (label == -1) continue;
    if (label == -2) {
      l = NAN;
      continue;
    }
    const float prob = LoadAny(c.prob, c.prob_type, po + label * c.prob_strides[c.axis]);
    l -= log(fmax(static_cast<double>(prob), static_cast<double>(FLT_MIN)));
    n += 1;
  }
  loss[threadIdx.x] = l;
  valid[threadIdx.x] = n;
  __syncthreads();
  for (int half = 512; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      valid[threadIdx.x] += valid[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  const float norm = Normalizer(c, valid[0]);
  if (backward_prepass) {
    *c.scratch = c.loss_weight / norm;
  } else {
    *c.loss = static_cast<float>(loss[0] / norm);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    SoftmaxLossGradientKernel(const __grid_constant__ SoftmaxLossCall c) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (e >= c.positions * c.classes) return;
  const int64_t p = e / c.classes, cls = e % c.classes;
  int64_t lo, po, dxo;
  DecodePosition(c, p, c.prob_strides, &lo, &po);
  DecodePosition(c, p, c.dx_strides, &lo, &dxo);
  const int64_t label = ClassAt(c, lo);
  float g = 0;
  if (label == -2) {
    g = NAN;
  } else if (label >= 0) {
    const float prob = LoadAny(c.prob, c.prob_type, po + cls * c.prob_strides[c.axis]);
    g = *c.scratch * (prob - (cls == label ? 1.0f : 0.0f));
  }
  T* out = static_cast<T*>(c.dx) + dxo + cls * c.dx_strides[c.axis];
  *out = FromFloat<T>(Blend(c.alpha, g, c.beta, [&] { return ToFloat(*out); }));
}

}  // namespace

int LaunchSoftmaxForward(const SoftmaxCall& call, void* stream) {
  return LaunchSoftmax<false>(call, stream);
}

int LaunchSoftmaxBackward(const SoftmaxCall& call, void* stream) {
  return LaunchSoftmax<true>(call, stream);
}

int LaunchSoftmaxLossForward(const SoftmaxLossCall& call, void* stream) {
  SoftmaxLossKernel<<<1, 1024, 0, static_cast<cudaStream_t>(stream)>>>(call, false);
  return LastError();
}

int LaunchSoftmaxLossBackward(const SoftmaxLossCall& call, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  SoftmaxLossKernel<<<1, 1024, 0, s>>>(call, true);
  if (int e = LastError()) return e;
  const unsigned blocks = BlocksFor(call.positions * call.classes, kThreads, int64_t{1} << 31);
  switch (call.prob_type) {
    case Storage::kF16:
      SoftmaxLossGradientKernel<__half><<<blocks, kThreads, 0, s>>>(call);
      break;
    case Storage::kBF16:
      SoftmaxLossGradientKernel<__nv_bfloat16><<<blocks, kThreads, 0, s>>>(call);
      break;
    default:
      SoftmaxLossGradientKernel<float><<<blocks, kThreads, 0, s>>>(call);
  }
  return LastError();
}

}  // namespace cuda
}  // namespace kiln
