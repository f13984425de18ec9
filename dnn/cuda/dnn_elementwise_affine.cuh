// The per-feature affine kernels of the element-wise primitives (BatchNorm's apply, Scale), for
// the layouts batch norm meets most: channels-last (16-bit, f32) and dense channels-first. A part
// of dnn_elementwise.cu, included inside its anonymous namespace after the helpers both use
// (Affine, AffineValue, Load4/Store4, Load8/Store8, Blend); not a header of its own.
#ifndef KILN_DNN_CUDA_DNN_ELEMENTWISE_AFFINE_CUH_
#define KILN_DNN_CUDA_DNN_ELEMENTWISE_AFFINE_CUH_

// Batch norm's apply on a channels-last 16-bit tensor (kAffine over dense [rows][C] operands,
// C % 8 == 0, the feature the innermost index): each thread moves one 16-byte vector of 8
// channels per operand and reads its 8 features' four coefficients as float4 pairs. The general
// vector kernel moves 8 bytes per load and decodes every vector's feature, which left it at about
// a third of HBM bandwidth on ResNet's 56x56x64 batch norms.
template <int kN, typename T>
__global__ void __launch_bounds__(kThreads)
    AffineChannelsLastKernel(const __grid_constant__ ElementwiseCall c, uint32_t vectors,
                             uint32_t channels) {
  const uint32_t vec = blockIdx.x * kThreads + threadIdx.x;
  if (vec >= vectors) return;
  T* out = static_cast<T*>(const_cast<void*>(c.out.data));
  float v[kN][8];
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    Load8(static_cast<const T*>(c.in[i].data) + 8 * static_cast<size_t>(vec), v[i]);
  }
  float old[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (c.beta != 0.0f) Load8(out + 8 * static_cast<size_t>(vec), old);
  const uint32_t f0 = (8 * vec) % channels;
  float q[4][8];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    Load4(c.params[k] + f0, q[k]);
    Load4(c.params[k] + f0 + 4, q[k] + 4);
  }
  float r[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float in[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) in[i] = v[i][e];
    const float value = AffineValue<kN>(c, Affine{q[0][e], q[1][e], q[2][e], q[3][e]}, in);
    r[e] = Blend(c.alpha, value, c.beta, [&] { return old[e]; });
  }
  Store8(out + 8 * static_cast<size_t>(vec), r);
}

// The same on a channels-last f32 tensor (C % 4 == 0; TF32 plans run channels-last): each thread
// moves kPerThread 16-byte vectors of 4 channels per operand and loads every vector's data and
// coefficients (float4 each) before it computes and stores any. The general vector kernel
// loaded a vector's coefficients after the previous vector's store, which it must assume may
// alias them: DenseNet-121's TF32 batch norms ran a third slower than its ReLUs.
template <int kN>
__global__ void __launch_bounds__(kThreads)
    AffineChannelsLastF32Kernel(const __grid_constant__ ElementwiseCall c, uint32_t vectors,
                                FastDiv channel_div, uint32_t channels) {
  float* out = static_cast<float*>(const_cast<void*>(c.out.data));
  float v[kPerThread][kN][4];
  float4 q[kPerThread][4];
  // Batch norm's training apply starts where its reduction ended, on the part still in L2.
  const uint32_t block = c.from_end ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const uint32_t first = block * (kThreads * kPerThread) + threadIdx.x;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t vec = first + j * kThreads;
    if (vec >= vectors) continue;
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      Load4(static_cast<const float*>(c.in[i].data) + 4 * static_cast<size_t>(vec), v[j][i]);
    }
    const uint32_t e0 = 4 * vec;
    const uint32_t f0 = e0 - Div(e0, channel_div) * channels;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // One operand's form never reads the second scale.
      q[j][k] = kN == 1 && k == 1 ? make_float4(0, 0, 0, 0)
                                  : __ldg(reinterpret_cast<const float4*>(c.params[k] + f0));
    }
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t vec = first + j * kThreads;
    if (vec >= vectors) continue;
    float old[4] = {0, 0, 0, 0};
    if (c.beta != 0.0f) Load4(out + 4 * static_cast<size_t>(vec), old);
    const float* a[4] = {&q[j][0].x, &q[j][1].x, &q[j][2].x, &q[j][3].x};
    float r[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float in[kN];
#pragma unroll
      for (int i = 0; i < kN; ++i) in[i] = v[j][i][e];
      const float value = AffineValue<kN>(c, Affine{a[0][e], a[1][e], a[2][e], a[3][e]}, in);
      r[e] = Blend(c.alpha, value, c.beta, [&] { return old[e]; });
    }
    Store4(out + 4 * static_cast<size_t>(vec), r);
  }
}

// Launches AffineChannelsLastKernel (16-bit) or AffineChannelsLastF32Kernel when the call is
// their case; false otherwise.
template <int kN>
bool LaunchAffineChannelsLast(const ElementwiseCall& c, int64_t total, bool dense, cudaStream_t s) {
  const bool f32 = c.out.type == Storage::kF32;
  if (!dense || c.rank != 2 || c.feature_strides[0] != 0 || c.feature_strides[1] != 1 ||
      c.dims[1] % (f32 ? 4 : 8) != 0 || total >= (int64_t{1} << 31)) {
    return false;
  }
  for (int k = 0; k <= kN; ++k) {
    const Operand& o = k < kN ? c.in[k] : c.out;
    if (o.data == nullptr || o.type != c.out.type ||
        reinterpret_cast<uintptr_t>(o.data) % 16 != 0) {
      return false;
    }
  }
  if (c.num_inputs != kN) return false;
  for (int k = 0; k < 4; ++k) {
    if (c.params[k] == nullptr || reinterpret_cast<uintptr_t>(c.params[k]) % 16 != 0) return false;
  }
  const uint32_t channels = static_cast<uint32_t>(c.dims[1]);
  if (f32) {
    const uint32_t vectors = static_cast<uint32_t>(total / 4);
    const unsigned blocks = BlocksFor(vectors, kThreads * kPerThread, int64_t{1} << 31);
    AffineChannelsLastF32Kernel<kN>
        <<<blocks, kThreads, 0, s>>>(c, vectors, MakeFastDiv(channels), channels);
    return true;
  }
  const uint32_t vectors = static_cast<uint32_t>(total / 8);
  const unsigned blocks = (vectors + kThreads - 1) / kThreads;
  if (c.out.type == Storage::kF16) {
    AffineChannelsLastKernel<kN, __half><<<blocks, kThreads, 0, s>>>(c, vectors, channels);
  } else {
    AffineChannelsLastKernel<kN, __nv_bfloat16><<<blocks, kThreads, 0, s>>>(c, vectors, channels);
  }
  return true;
}

// The per-channel affine of a dense channels-first tensor (BatchNorm's apply, Scale: one
// operand, merged dims [outer][C][inner] with inner >= 4): each thread moves kPerThread vectors
// of 4 elements, and finds each vector's channel (or the two channels it straddles) and loads
// their coefficients before any store. The general vector kernel decodes every merged dim per
// vector and reads the coefficients after the previous vector's store, which the compiler must
// assume may alias them: DenseNet-121's 7x7 batch norms ran at a third of ReLU's speed.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    AffinePlanesKernel(const __grid_constant__ ElementwiseCall c, uint32_t total, FastDiv inner_div,
                       uint32_t inner, FastDiv channel_div, uint32_t channels) {
  const T* x = static_cast<const T*>(c.in[0].data);
  T* out = static_cast<T*>(const_cast<void*>(c.out.data));
  const uint32_t vectors = total / 4;
  // The coefficients of channel ch: y = scale (x - shift) + bias.
  auto coefficients = [&](uint32_t ch) {
    return Affine{__ldg(c.params[0] + ch), 0.0f, __ldg(c.params[2] + ch), __ldg(c.params[3] + ch)};
  };
  auto channel_of = [&](uint32_t e, uint32_t* at) {
    const uint32_t plane = Div(e, inner_div);
    *at = e - plane * inner;
    return plane - Div(plane, channel_div) * channels;
  };
  float v[kPerThread][4];
  Affine a[kPerThread][2];
  uint32_t split[kPerThread];  // elements of the vector in its first channel's plane
  // From the end when asked, as in AffineChannelsLastF32Kernel.
  const uint32_t block = c.from_end ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const uint32_t first = block * (kThreads * kPerThread) + threadIdx.x;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t vec = first + j * kThreads;
    split[j] = 4;
    if (vec >= vectors) continue;
    Load4(x + 4 * static_cast<size_t>(vec), v[j]);
    uint32_t at;
    const uint32_t ch = channel_of(4 * vec, &at);
    a[j][0] = coefficients(ch);
    split[j] = inner - at < 4 ? inner - at : 4;
    a[j][1] = split[j] < 4 ? coefficients(ch + 1 == channels ? 0 : ch + 1) : a[j][0];
  }
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    const uint32_t vec = first + j * kThreads;
    if (vec >= vectors) continue;
    float r[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      r[k] = AffineValue<1>(c, k < split[j] ? a[j][0] : a[j][1], &v[j][k]);
    Store4(out + 4 * static_cast<size_t>(vec), r);
  }
  if (blockIdx.x == 0 && threadIdx.x < total % 4) {
    const uint32_t e = 4 * vectors + threadIdx.x;
    uint32_t at;
    const float in = ToFloat(x[e]);
    out[e] = FromFloat<T>(AffineValue<1>(c, coefficients(channel_of(e, &at)), &in));
  }
}

// Launches AffinePlanesKernel when the call is its case; false otherwise.
template <int kN>
bool LaunchAffinePlanes(const ElementwiseCall& c, int64_t total, bool dense, cudaStream_t s) {
  if (kN != 1 || !dense || c.num_inputs != 1 || c.alpha != 1.0f || c.beta != 0.0f ||
      total >= (int64_t{1} << 31) || c.in[0].type != c.out.type) {
    return false;
  }
  int feature = -1;
  for (int d = 0; d < c.rank; ++d) {
    if (c.feature_strides[d] == 0) continue;
    if (c.feature_strides[d] != 1 || feature >= 0) return false;
    feature = d;
  }
  if (feature < 0 || feature == c.rank - 1) return false;
  int64_t inner = 1;
  for (int d = feature + 1; d < c.rank; ++d) inner *= c.dims[d];
  const size_t bytes = c.out.type == Storage::kF32 ? 4 : 2;
  if (inner < 4 || reinterpret_cast<uintptr_t>(c.in[0].data) % (4 * bytes) != 0 ||
      reinterpret_cast<uintptr_t>(c.out.data) % (4 * bytes) != 0) {
    return false;
  }
  for (int k : {0, 2, 3}) {
    if (c.params[k] == nullptr) return false;
  }
  const unsigned blocks = BlocksFor((total + 3) / 4, kThreads * kPerThread, int64_t{1} << 31);
  const uint32_t n = static_cast<uint32_t>(total), in = static_cast<uint32_t>(inner);
  const uint32_t channels = static_cast<uint32_t>(c.dims[feature]);
  const FastDiv inner_div = MakeFastDiv(in), channel_div = MakeFastDiv(channels);
  switch (c.out.type) {
    case Storage::kF16:
      AffinePlanesKernel<__half>
          <<<blocks, kThreads, 0, s>>>(c, n, inner_div, in, channel_div, channels);
      break;
    case Storage::kBF16:
      AffinePlanesKernel<__nv_bfloat16>
          <<<blocks, kThreads, 0, s>>>(c, n, inner_div, in, channel_div, channels);
      break;
    default:
      AffinePlanesKernel<float>
          <<<blocks, kThreads, 0, s>>>(c, n, inner_div, in, channel_div, channels);
  }
  return true;
}

#endif  // KILN_DNN_CUDA_DNN_ELEMENTWISE_AFFINE_CUH_
