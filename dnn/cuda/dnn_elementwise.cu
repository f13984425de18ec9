// The element-wise primitives: one kernel template over (op, operand count, index width).
// Dims that every operand lays out the same way are merged first, so packed tensors become one
// dense run with no index decoding; each thread then keeps 4 elements' loads in flight before
// computing, which is what lets a streaming kernel approach the copy bandwidth.
#include <algorithm>
#include <cstdint>

#include "dnn/cuda/primitive_launch.h"
#include "dnn/cuda/storage_access.cuh"
#include "base/dropout_mask.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;

// One feature's coefficients of the affine op (batch-norm apply and its backward).
struct Affine {
  float scale, scale_last, bias, shift;
};

__device__ __forceinline__ Affine AffineAt(const ElementwiseCall& c, int64_t feature) {
  return {c.params[0][feature], c.params[1][feature], c.params[2][feature], c.params[3][feature]};
}

// The last operand is centred first (x - mean), which keeps f32 accurate when the mean is large
// next to the spread. Three operands: batch norm's backward through a fused ReLU, dy (v0) counts
// where the fused output (v1) is positive.
template <int kN>
__device__ __forceinline__ float ApplyAffine(const Affine& a, const float* v) {
  if (kN == 1) return a.scale * (v[0] - a.shift) + a.bias;
  const float dy = kN == 3 && !(v[1] > 0.0f) ? 0.0f : v[0];
  return a.scale * dy + a.scale_last * (v[kN - 1] - a.shift) + a.bias;
}

// The affine value, then the fused activation when the call has one.
template <int kN>
__device__ __forceinline__ float AffineValue(const ElementwiseCall& c, const Affine& a,
                                             const float* v) {
  const float y = ApplyAffine<kN>(a, v);
  return c.then_activation ? dnn::ActivationValue(c.act, y) : y;
}

template <ElementwiseOp kOp, int kN>
__device__ __forceinline__ float Apply(const ElementwiseCall& c, const float* v, int64_t feature,
                                       int64_t e) {
  switch (kOp) {
    case ElementwiseOp::kCopy:
      return v[0];
    case ElementwiseOp::kActivation:
      return dnn::ActivationValue(c.act, v[0]);
    case ElementwiseOp::kActivationGradient:
      return dnn::ActivationGradient(c.act, v[0], v[1], v[2]);
    case ElementwiseOp::kActivationGradientOfSum: {
      // Added in operand order, as the separate Eltwise sum would.
      float dy = 0;
      for (int i = 1; i < kN; ++i) {
        if (i < c.num_inputs) dy += v[i];
      }
      return dnn::ActivationGradient(c.act, v[0], dy, v[0]);
    }
    case ElementwiseOp::kPRelu:
      return v[0] > 0.0f ? v[0] : v[1] * v[0];
    case ElementwiseOp::kPReluGradient:
      return v[0] > 0.0f ? v[1] : v[2] * v[1];
    case ElementwiseOp::kDropout: {
      const uint64_t seed =
          c.seed + (c.seed_offset != nullptr ? static_cast<uint64_t>(*c.seed_offset) : 0);
      return DropoutKeep(seed, static_cast<uint64_t>(e), c.ratio) ? v[0] * c.coef[0] : 0.0f;
    }
    case ElementwiseOp::kAffine:
      return AffineValue<kN>(c, AffineAt(c, feature), v);
    default:
      break;
  }
  // Eltwise: c.num_inputs operands (for the gradients the last one is dy).
  const int n = c.num_inputs;
  if (kOp == ElementwiseOp::kEltwiseSum || kOp == ElementwiseOp::kEltwiseProd ||
      kOp == ElementwiseOp::kEltwiseMax) {
    float r = kOp == ElementwiseOp::kEltwiseSum    ? 0.0f
              : kOp == ElementwiseOp::kEltwiseProd ? 1.0f
                                                   : v[0];
    for (int i = 0; i < kN; ++i) {
      if (i >= n) continue;
      if (kOp == ElementwiseOp::kEltwiseSum) r += c.coef[i] * v[i];
      if (kOp == ElementwiseOp::kEltwiseProd) r *= v[i];
      if (kOp == ElementwiseOp::kEltwiseMax && v[i] > r) r = v[i];
    }
    return c.then_activation ? dnn::ActivationValue(c.act, r) : r;
  }
  float dy = 0;
  for (int i = 0; i < kN; ++i) {
    if (i == n - 1) dy = v[i];
  }
  if (kOp == ElementwiseOp::kEltwiseProdGradient) {
    float r = dy;
    for (int i = 0; i < kN; ++i) {
      if (i < n - 1 && i != c.which) r *= v[i];
    }
    return r;
  }
  // kEltwiseMaxGradient: the first input holding the maximum gets dy.
  int arg = 0;
  float best = v[0];
  for (int i = 1; i < kN; ++i) {
    if (i < n - 1 && v[i] > best) best = v[i], arg = i;
  }
  return arg == c.which ? dy : 0.0f;
}

// Fast divisors of the merged dims (used by 32-bit index walks).
struct Divisors {
  FastDiv d[kMaxRank];
};

// index = rest % dims[d], rest /= dims[d].
template <typename Index>
__device__ __forceinline__ Index Step(Index* rest, const ElementwiseCall& c, const Divisors& divs,
                                      int d) {
  if (sizeof(Index) == 4) {
    const Index q = static_cast<Index>(Div(static_cast<uint32_t>(*rest), divs.d[d]));
    const Index idx = *rest - q * static_cast<Index>(c.dims[d]);
    *rest = q;
    return idx;
  }
  const Index dim = static_cast<Index>(c.dims[d]);
  const Index idx = *rest % dim;
  *rest /= dim;
  return idx;
}

template <ElementwiseOp kOp, int kN, typename Index>
__global__ void __launch_bounds__(kThreads)
    ElementwiseKernel(const __grid_constant__ ElementwiseCall c,
                      const __grid_constant__ Divisors divs, Index total, bool dense) {
  constexpr bool kUsesFeature = kOp == ElementwiseOp::kAffine;
  const int n = c.num_inputs;
  float v[kPerThread][kN];
  Index out_offset[kPerThread];
  Index feature[kPerThread];
  const Index base = static_cast<Index>(blockIdx.x) * (kThreads * kPerThread) + threadIdx.x;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const Index e = base + j * kThreads;
    feature[j] = 0;
    out_offset[j] = 0;
    if (e >= total) continue;
    Index in_offset[kN];
    if (dense) {
      for (int i = 0; i < kN; ++i) in_offset[i] = e;
      out_offset[j] = e;
      if (kUsesFeature) {
        Index rest = e;
        for (int d = c.rank - 1; d >= 0; --d) {
          feature[j] += Step(&rest, c, divs, d) * static_cast<Index>(c.feature_strides[d]);
        }
      }
    } else {
      for (int i = 0; i < kN; ++i) in_offset[i] = 0;
      Index rest = e;
      for (int d = c.rank - 1; d >= 0; --d) {
        const Index idx = Step(&rest, c, divs, d);
#pragma unroll
        for (int i = 0; i < kN; ++i) in_offset[i] += idx * static_cast<Index>(c.in[i].strides[d]);
        out_offset[j] += idx * static_cast<Index>(c.out.strides[d]);
        if (kUsesFeature) feature[j] += idx * static_cast<Index>(c.feature_strides[d]);
      }
    }
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      // An operand the op does not need (data null) costs no bandwidth.
      v[j][i] = i < n && c.in[i].data != nullptr ? LoadAny(c.in[i].data, c.in[i].type, in_offset[i])
                                                 : 0.0f;
    }
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const Index e = base + j * kThreads;
    if (e >= total) continue;
    const float r = Apply<kOp, kN>(c, v[j], feature[j], e);
    void* out = const_cast<void*>(c.out.data);
    const float value =
        Blend(c.alpha, r, c.beta, [&] { return LoadAny(out, c.out.type, out_offset[j]); });
    StoreAny(out, c.out.type, out_offset[j], value);
  }
}

// Four consecutive elements of storage T as floats, and back; the address is 4-element aligned.
__device__ __forceinline__ void Load4(const float* p, float* v) {
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
template <typename H>  // __half or __nv_bfloat16: 8 bytes
__device__ __forceinline__ void Load4(const H* p, float* v) {
  const uint2 q = *reinterpret_cast<const uint2*>(p);
  const H* h = reinterpret_cast<const H*>(&q);
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = ToFloat(h[k]);
}
__device__ __forceinline__ void Store4(float* p, const float* v) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
template <typename H>
__device__ __forceinline__ void Store4(H* p, const float* v) {
  uint2 q;
  H* h = reinterpret_cast<H*>(&q);
#pragma unroll
  for (int k = 0; k < 4; ++k) h[k] = FromFloat<H>(v[k]);
  *reinterpret_cast<uint2*>(p) = q;
}

// Eight consecutive 16-bit elements as floats, and back, in one 16-byte access (16-byte aligned).
template <typename H>
__device__ __forceinline__ void Load8(const H* p, float* v) {
  const uint4 q = *reinterpret_cast<const uint4*>(p);
  const H* h = reinterpret_cast<const H*>(&q);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] = ToFloat(h[k]);
}
template <typename H>
__device__ __forceinline__ void Store8(H* p, const float* v) {
  uint4 q;
  H* h = reinterpret_cast<H*>(&q);
#pragma unroll
  for (int k = 0; k < 8; ++k) h[k] = FromFloat<H>(v[k]);
  *reinterpret_cast<uint4*>(p) = q;
}

// The feature index of dense element e (merged dims, row-major).
template <ElementwiseOp kOp>
__device__ __forceinline__ uint32_t DenseFeature(const ElementwiseCall& c, const Divisors& divs,
                                                 uint32_t e) {
  if (kOp != ElementwiseOp::kAffine) return 0;
  uint32_t feature = 0;
  for (int d = c.rank - 1; d >= 0; --d) {
    feature += Step(&e, c, divs, d) * static_cast<uint32_t>(c.feature_strides[d]);
  }
  return feature;
}

// Dense operands of one storage T, all 4-element aligned: each thread moves kPerThread runs of
// four elements with 16-byte (f32) or 8-byte (f16, bf16) accesses, all loads issued before any
// math. Four times the bytes per load instruction is what it takes to saturate HBM3e on an H200
// (the scalar kernel tops out near 2.8 TB/s there). Block 0 also does the last total % 4.
template <ElementwiseOp kOp, int kN, typename T>
__global__ void __launch_bounds__(kThreads)
    ElementwiseVectorKernel(const __grid_constant__ ElementwiseCall c,
                            const __grid_constant__ Divisors divs, uint32_t total) {
  const int n = c.num_inputs;
  const uint32_t vectors = total / 4;
  T* out = static_cast<T*>(const_cast<void*>(c.out.data));
  auto finish = [&](uint32_t e, const float* in) {
    return Apply<kOp, kN>(c, in, static_cast<int64_t>(DenseFeature<kOp>(c, divs, e)), e);
  };
  float v[kPerThread][kN][4];
  const uint32_t block = c.from_end ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const uint32_t first = block * (kThreads * kPerThread) + threadIdx.x;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t vec = first + j * kThreads;
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if (vec < vectors && i < n && c.in[i].data != nullptr) {
        Load4(static_cast<const T*>(c.in[i].data) + 4 * vec, v[j][i]);
      } else {
        v[j][i][0] = v[j][i][1] = v[j][i][2] = v[j][i][3] = 0.0f;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t vec = first + j * kThreads;
    if (vec >= vectors) continue;
    float old[4] = {0, 0, 0, 0};
    if (c.beta != 0.0f) Load4(out + 4 * vec, old);
    float r[4];
    // Affine: when the four elements share one feature (the innermost dim does not change the
    // feature and they sit in one run of it, as for all but one vector in 760 of an NCHW
    // 55x55 batch norm), its coefficients are found once rather than four times.
    // Channels-last batch norm is the other common case: the innermost dim is the feature
    // itself (stride 1), so the four elements are four consecutive features, found from one
    // index decoding instead of four.
    bool one_feature = false, consecutive_features = false;
    uint32_t first_feature = 0;
    Affine a{};
    if constexpr (kOp == ElementwiseOp::kAffine) {
      const int inner = c.rank - 1;
      const uint32_t e0 = 4 * vec;
      const uint32_t at = e0 - Div(e0, divs.d[inner]) * static_cast<uint32_t>(c.dims[inner]);
      const bool one_run = at + 3 < c.dims[inner];
      one_feature = c.feature_strides[inner] == 0 && one_run;
      consecutive_features = c.feature_strides[inner] == 1 && one_run;
      if (one_feature || consecutive_features) first_feature = DenseFeature<kOp>(c, divs, e0);
      if (one_feature) a = AffineAt(c, first_feature);
    }
    // Channels-last with the four features 16-byte aligned in the coefficient vectors (C a
    // multiple of 4): one 16-byte load per coefficient instead of four 4-byte loads per element,
    // which otherwise makes the pass bound by load instructions rather than bytes.
    float4 q[4];
    bool packed_coefficients = false;
    if constexpr (kOp == ElementwiseOp::kAffine) {
      if (consecutive_features) {
        packed_coefficients = true;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          packed_coefficients =
              packed_coefficients &&
              (reinterpret_cast<uintptr_t>(c.params[k] + first_feature) & 15) == 0;
        }
        if (packed_coefficients) {
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            q[k] = *reinterpret_cast<const float4*>(c.params[k] + first_feature);
          }
        }
      }
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float in[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i) in[i] = v[j][i][k];
      float value;
      if (packed_coefficients) {
        auto lane = [k](const float4& f) {
          return k == 0 ? f.x : k == 1 ? f.y : k == 2 ? f.z : f.w;
        };
        value = AffineValue<kN>(c, Affine{lane(q[0]), lane(q[1]), lane(q[2]), lane(q[3])}, in);
      } else if (one_feature) {
        value = AffineValue<kN>(c, a, in);
      } else if (consecutive_features) {
        value = AffineValue<kN>(c, AffineAt(c, first_feature + k), in);
      } else {
        value = finish(4 * vec + k, in);
      }
      r[k] = Blend(c.alpha, value, c.beta, [&] { return old[k]; });
    }
    Store4(out + 4 * vec, r);
  }
  if (blockIdx.x == 0 && threadIdx.x < total % 4) {
    const uint32_t e = 4 * vectors + threadIdx.x;
    float in[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      in[i] =
          i < n && c.in[i].data != nullptr ? ToFloat(static_cast<const T*>(c.in[i].data)[e]) : 0.0f;
    }
    out[e] = FromFloat<T>(Blend(c.alpha, finish(e, in), c.beta, [&] { return ToFloat(out[e]); }));
  }
}

#include "dnn/cuda/dnn_elementwise_affine.cuh"

// Vector strides of a call whose operands all run contiguously in the innermost merged dim.
struct VectorWalk {
  uint32_t dims[kMaxRank];
  uint32_t in[3][kMaxRank], out[kMaxRank];  // in units of 4 elements
  FastDiv div[kMaxRank];
};

// Operands that are not dense but whose innermost merged dim is contiguous for all of them and a
// multiple of 4, with every other stride a multiple of 4 (a Concat input written into its slice
// of the output, a Crop of whole rows): moved 4 elements at a time like the dense vector kernel,
// each vector's offsets decoded from its index. Ops whose value needs the element's index or
// feature (dropout, affine) are not this case.
template <ElementwiseOp kOp, int kN, typename T>
__global__ void __launch_bounds__(kThreads)
    StridedVectorKernel(const __grid_constant__ ElementwiseCall c,
                        const __grid_constant__ VectorWalk w, uint32_t vectors) {
  const int n = c.num_inputs;
  T* out = static_cast<T*>(const_cast<void*>(c.out.data));
  float v[kPerThread][kN][4];
  uint32_t out_offset[kPerThread];
  const uint32_t first = blockIdx.x * (kThreads * kPerThread) + threadIdx.x;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t vec = first + j * kThreads;
    out_offset[j] = 0;
    uint32_t in_offset[kN] = {};
    if (vec < vectors) {
      uint32_t rest = vec;
      for (int d = c.rank - 1; d >= 0; --d) {
        const uint32_t q = Div(rest, w.div[d]);
        const uint32_t idx = rest - q * w.dims[d];
        rest = q;
#pragma unroll
        for (int i = 0; i < kN; ++i) in_offset[i] += idx * w.in[i][d];
        out_offset[j] += idx * w.out[d];
      }
    }
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if (vec < vectors && i < n && c.in[i].data != nullptr) {
        Load4(static_cast<const T*>(c.in[i].data) + 4 * static_cast<size_t>(in_offset[i]), v[j][i]);
      } else {
        v[j][i][0] = v[j][i][1] = v[j][i][2] = v[j][i][3] = 0.0f;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (first + j * kThreads >= vectors) continue;
    T* to = out + 4 * static_cast<size_t>(out_offset[j]);
    float old[4] = {0, 0, 0, 0};
    if (c.beta != 0.0f) Load4(to, old);
    float r[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float in[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i) in[i] = v[j][i][k];
      r[k] = Blend(c.alpha, Apply<kOp, kN>(c, in, 0, 0), c.beta, [&] { return old[k]; });
    }
    Store4(to, r);
  }
}

// Launches StridedVectorKernel when the call is its case (see there); false otherwise.
template <ElementwiseOp kOp, int kN>
bool LaunchStridedVector(const ElementwiseCall& c, int64_t total, cudaStream_t s) {
  static_assert(kN <= 3 && kOp != ElementwiseOp::kAffine && kOp != ElementwiseOp::kDropout,
                "the strided vector kernel holds 3 operands and knows no element index");
  if (c.num_inputs > kN || total / 4 >= (int64_t{1} << 31)) {
    return false;
  }
  const int last = c.rank - 1;
  if (c.dims[last] % 4 != 0) return false;
  const size_t bytes = c.out.type == Storage::kF32 ? 4 : 2;
  VectorWalk w;
  for (int k = 0; k <= c.num_inputs; ++k) {
    const Operand& o = k < c.num_inputs ? c.in[k] : c.out;
    if (o.data == nullptr) continue;
    if (o.type != c.out.type || o.strides[last] != 1 ||
        reinterpret_cast<uintptr_t>(o.data) % (4 * bytes) != 0) {
      return false;
    }
    int64_t span = 0;
    for (int d = 0; d < c.rank; ++d) {
      if (d != last && o.strides[d] % 4 != 0) return false;
      span += (c.dims[d] - 1) * o.strides[d];
    }
    if (span / 4 >= (int64_t{1} << 31)) return false;
  }
  for (int d = 0; d < c.rank; ++d) {
    const int64_t dim = d == last ? c.dims[d] / 4 : c.dims[d];
    w.dims[d] = static_cast<uint32_t>(dim);
    w.div[d] = MakeFastDiv(w.dims[d]);
    for (int i = 0; i < 3; ++i) {
      const bool used = i < c.num_inputs && c.in[i].data != nullptr;
      w.in[i][d] = !used ? 0 : d == last ? 1 : static_cast<uint32_t>(c.in[i].strides[d] / 4);
    }
    w.out[d] = d == last ? 1 : static_cast<uint32_t>(c.out.strides[d] / 4);
  }
  const int64_t vectors = total / 4;
  const unsigned blocks = BlocksFor(vectors, kThreads * kPerThread, int64_t{1} << 31);
  const uint32_t nv = static_cast<uint32_t>(vectors);
  switch (c.out.type) {
    case Storage::kF16:
      StridedVectorKernel<kOp, kN, __half><<<blocks, kThreads, 0, s>>>(c, w, nv);
      break;
    case Storage::kBF16:
      StridedVectorKernel<kOp, kN, __nv_bfloat16><<<blocks, kThreads, 0, s>>>(c, w, nv);
      break;
    default:
      StridedVectorKernel<kOp, kN, float><<<blocks, kThreads, 0, s>>>(c, w, nv);
  }
  return true;
}

// Launches the vector kernel when every operand is dense, of one storage and 4-element aligned;
// false otherwise. Called for ops of at most 3 operands (more would not fit the registers).
template <ElementwiseOp kOp, int kN>
bool LaunchVector(const ElementwiseCall& c, const Divisors& divs, int64_t total, bool dense,
                  cudaStream_t s) {
  if (!dense || total >= (int64_t{1} << 31)) return false;
  const size_t bytes = c.out.type == Storage::kF32 ? 4 : 2;
  for (int k = 0; k <= c.num_inputs; ++k) {
    const Operand& o = k < c.num_inputs ? c.in[k] : c.out;
    if (o.data == nullptr) continue;
    if (o.type != c.out.type || reinterpret_cast<uintptr_t>(o.data) % (4 * bytes) != 0) {
      return false;
    }
  }
  const unsigned blocks = BlocksFor((total + 3) / 4, kThreads * kPerThread, int64_t{1} << 31);
  const uint32_t n = static_cast<uint32_t>(total);
  switch (c.out.type) {
    case Storage::kF16:
      ElementwiseVectorKernel<kOp, kN, __half><<<blocks, kThreads, 0, s>>>(c, divs, n);
      break;
    case Storage::kBF16:
      ElementwiseVectorKernel<kOp, kN, __nv_bfloat16><<<blocks, kThreads, 0, s>>>(c, divs, n);
      break;
    default:
      ElementwiseVectorKernel<kOp, kN, float><<<blocks, kThreads, 0, s>>>(c, divs, n);
  }
  return true;
}

// Puts the dims in the output's memory order (largest stride first), the same permutation for
// every operand and for the feature index, so a channels-last tensor is walked contiguously and
// merges like a row-major one (in logical N, C, H, W order its innermost dim is C elements
// apart, and every warp access would scatter). Dropout keeps the logical order: its mask is a
// function of the logical element index.
void OrderDimsByOutputMemory(ElementwiseCall& c) {
  if (c.op == ElementwiseOp::kDropout || c.rank < 2) return;
  int order[kMaxRank];
  for (int d = 0; d < c.rank; ++d) order[d] = d;
  // Unit dims are dropped by MergeDims: they go first, whatever their stride says.
  auto key = [&](int d) { return c.dims[d] == 1 ? INT64_MAX : c.out.strides[d]; };
  std::stable_sort(order, order + c.rank, [&](int a, int b) { return key(a) > key(b); });
  bool identity = true;
  for (int d = 0; d < c.rank; ++d) identity = identity && order[d] == d;
  if (identity) return;
  auto permute = [&](int64_t* v) {
    int64_t copy[kMaxRank];
    for (int d = 0; d < c.rank; ++d) copy[d] = v[d];
    for (int d = 0; d < c.rank; ++d) v[d] = copy[order[d]];
  };
  permute(c.dims);
  for (int k = 0; k < c.num_inputs; ++k) permute(c.in[k].strides);
  permute(c.out.strides);
  permute(c.feature_strides);
}

// Drops unit dims and merges neighbours every operand (and the feature index) lays out as one.
void MergeDims(ElementwiseCall& c) {
  const int operands = c.num_inputs;
  auto strides_of = [&](int k) -> int64_t* {
    if (k < operands) return c.in[k].strides;
    if (k == operands) return c.out.strides;
    return c.feature_strides;
  };
  const int total_operands = operands + 2;
  int rank = 0;
  int64_t dims[kMaxRank];
  int64_t strides[kMaxOperands + 2][kMaxRank];
  for (int d = 0; d < c.rank; ++d) {
    if (c.dims[d] == 1) continue;
    const bool merge = rank > 0 && [&] {
      for (int k = 0; k < total_operands; ++k) {
        if (strides[k][rank - 1] != strides_of(k)[d] * c.dims[d]) return false;
      }
      return true;
    }();
    if (merge) {
      dims[rank - 1] *= c.dims[d];
      for (int k = 0; k < total_operands; ++k) strides[k][rank - 1] = strides_of(k)[d];
    } else {
      dims[rank] = c.dims[d];
      for (int k = 0; k < total_operands; ++k) strides[k][rank] = strides_of(k)[d];
      ++rank;
    }
  }
  if (rank == 0) {
    rank = 1;
    dims[0] = 1;
    for (int k = 0; k < total_operands; ++k) strides[k][0] = 0;
  }
  c.rank = rank;
  for (int d = 0; d < rank; ++d) {
    c.dims[d] = dims[d];
    for (int k = 0; k < total_operands; ++k) strides_of(k)[d] = strides[k][d];
  }
}

template <ElementwiseOp kOp, int kN>
int LaunchFor(const ElementwiseCall& c, void* stream) {
  // Dense: every operand laid out packed row-major over the merged dims, so an element's offset
  // is its index (a broadcast operand, with zero strides, is not).
  int64_t packed[kMaxRank];
  int64_t total = 1;
  for (int d = c.rank - 1; d >= 0; --d) {
    packed[d] = total;
    total *= c.dims[d];
  }
  int64_t largest = 0;
  bool dense = true;
  for (int k = 0; k <= c.num_inputs; ++k) {
    const Operand& o = k < c.num_inputs ? c.in[k] : c.out;
    int64_t span = 0;
    for (int d = 0; d < c.rank; ++d) {
      span += (c.dims[d] - 1) * o.strides[d];
      if (o.data != nullptr && o.strides[d] != packed[d]) dense = false;
    }
    largest = span > largest ? span : largest;
  }
  Divisors divs;
  for (int d = 0; d < c.rank; ++d) {
    divs.d[d] = MakeFastDiv(c.dims[d] < (int64_t{1} << 31) ? static_cast<uint32_t>(c.dims[d]) : 1);
  }
  const unsigned blocks = BlocksFor(total, kThreads * kPerThread, int64_t{1} << 31);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if constexpr (kOp == ElementwiseOp::kAffine && kN <= 3) {
    if (LaunchAffineChannelsLast<kN>(c, total, dense, s)) return LastError();
    if (LaunchAffinePlanes<kN>(c, total, dense, s)) return LastError();
  }
  if constexpr (kN <= 3) {
    if (LaunchVector<kOp, kN>(c, divs, total, dense, s)) return LastError();
    if constexpr (kOp != ElementwiseOp::kAffine && kOp != ElementwiseOp::kDropout) {
      if (!dense && LaunchStridedVector<kOp, kN>(c, total, s)) return LastError();
    }
  }
  if (total < (int64_t{1} << 30) && largest < (int64_t{1} << 30)) {
    ElementwiseKernel<kOp, kN, uint32_t>
        <<<blocks, kThreads, 0, s>>>(c, divs, static_cast<uint32_t>(total), dense);
  } else {
    ElementwiseKernel<kOp, kN, int64_t><<<blocks, kThreads, 0, s>>>(c, divs, total, dense);
  }
  return LastError();
}

// Eltwise ops take up to kMaxOperands operands; the common two- and three-operand calls (a
// residual sum, its gradient sum) are instantiated for their count, which lets them take the
// vectorized dense kernel (it holds kPerThread x 4 values per operand in registers).
template <ElementwiseOp kOp>
int LaunchEltwise(const ElementwiseCall& c, void* stream) {
  switch (c.num_inputs) {
    case 1:
      return LaunchFor<kOp, 1>(c, stream);
    case 2:
      return LaunchFor<kOp, 2>(c, stream);
    case 3:
      return LaunchFor<kOp, 3>(c, stream);
    default:
      return LaunchFor<kOp, kMaxOperands>(c, stream);
  }
}

}  // namespace

int LaunchElementwise(ElementwiseCall call, void* stream) {
  OrderDimsByOutputMemory(call);
  MergeDims(call);
  switch (call.op) {
    case ElementwiseOp::kCopy:
      return LaunchFor<ElementwiseOp::kCopy, 1>(call, stream);
    case ElementwiseOp::kActivation:
      return LaunchFor<ElementwiseOp::kActivation, 1>(call, stream);
    case ElementwiseOp::kActivationGradient:
      return LaunchFor<ElementwiseOp::kActivationGradient, 3>(call, stream);
    case ElementwiseOp::kActivationGradientOfSum:
      return LaunchEltwise<ElementwiseOp::kActivationGradientOfSum>(call, stream);
    case ElementwiseOp::kPRelu:
      return LaunchFor<ElementwiseOp::kPRelu, 2>(call, stream);
    case ElementwiseOp::kPReluGradient:
      return LaunchFor<ElementwiseOp::kPReluGradient, 3>(call, stream);
    case ElementwiseOp::kDropout:
      return LaunchFor<ElementwiseOp::kDropout, 1>(call, stream);
    case ElementwiseOp::kAffine:
      switch (call.num_inputs) {
        case 1:
          return LaunchFor<ElementwiseOp::kAffine, 1>(call, stream);
        case 2:
          return LaunchFor<ElementwiseOp::kAffine, 2>(call, stream);
        default:
          return LaunchFor<ElementwiseOp::kAffine, 3>(call, stream);
      }
    case ElementwiseOp::kEltwiseSum:
      return LaunchEltwise<ElementwiseOp::kEltwiseSum>(call, stream);
    case ElementwiseOp::kEltwiseProd:
      return LaunchEltwise<ElementwiseOp::kEltwiseProd>(call, stream);
    case ElementwiseOp::kEltwiseMax:
      return LaunchEltwise<ElementwiseOp::kEltwiseMax>(call, stream);
    case ElementwiseOp::kEltwiseProdGradient:
      return LaunchEltwise<ElementwiseOp::kEltwiseProdGradient>(call, stream);
    case ElementwiseOp::kEltwiseMaxGradient:
      return LaunchEltwise<ElementwiseOp::kEltwiseMaxGradient>(call, stream);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace cuda
}  // namespace kiln
