// The convolution kernels around the implicit GEMM: im2col-style materialization and result
// scatter for the cuBLAS (GEMM) algorithms, backward data's col2im as a deterministic gather,
// the direct forward convolution, the bias gradient, the channels-last copy and the strided 1x1
// product's subsample and expand.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "dnn/cuda/conv/conv_element_access.cuh"
#include "dnn/cuda/conv/conv_gemm_launch.h"

namespace kiln {
namespace cuda {

namespace {

using dnn::ConvProblem;
using dnn::Decode;
using dnn::IndexInfo;

using conv_element::Blend;
using conv_element::Dispatch;
using conv_element::Load;
using conv_element::StoreValue;

unsigned GridFor(int64_t n, int threads = 256) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 132 * 64 ? (blocks < 1 ? 1 : blocks) : 132 * 64);
}

#define KILN_GRID_STRIDE(i, total)                                                           \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (total); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void MaterializeKernel(dnn::GatherOperand op, const T* src, int64_t groups,
                                  bool rows_are_outer, int64_t row0, int64_t rows, int64_t col0,
                                  int64_t cols, T* out) {
  const int64_t per_group = rows * cols;
  KILN_GRID_STRIDE(i, per_group * groups) {
    const int64_t g = i / per_group, r = (i % per_group) / cols, c = i % cols;
    const int64_t outer = rows_are_outer ? row0 + r : col0 + c;
    const int64_t inner = rows_are_outer ? col0 + c : row0 + r;
    int64_t off;
    const bool ok = Locate(op, Decode(op.outer, outer), Decode(op.inner, inner), &off);
    StoreValue(out + i, ok ? Load(src + g * op.group_stride + off) : 0.0f);
  }
}

template <typename T>
__global__ void ScatterKernel(dnn::OutputMap map, const float* d, int64_t groups, int64_t row0,
                              int64_t rows, int64_t cols, float alpha, float beta, T* out) {
  const int64_t per_group = rows * cols;
  KILN_GRID_STRIDE(i, per_group * groups) {
    const int64_t g = i / per_group, r = (i % per_group) / cols, c = i % cols;
    T* dst =
        out + g * map.group_stride + Decode(map.rows, row0 + r).offset + Decode(map.cols, c).offset;
    Blend(dst, d[i], alpha, beta);
  }
}

// dx element (n, c, d, h, w) sums col[g][(n - n0, o, p, q)][(cc, t, r, s)] over taps with
// d + pad - t dil = o stride (and the same for h and w).
template <typename T>
__global__ void Col2ImKernel(ConvProblem p, const float* col, int64_t n0, int64_t images,
                             float alpha, float beta, T* dx) {
  const int64_t cg = p.cg(), taps = p.FilterTaps();
  const int64_t opq = p.out[0] * p.out[1] * p.out[2];
  const int64_t col_cols = cg * taps, col_rows = images * opq;
  const int64_t total = images * p.c * p.in[0] * p.in[1] * p.in[2];
  KILN_GRID_STRIDE(i, total) {
    int64_t rest = i;
    const int64_t w = rest % p.in[2];
    rest /= p.in[2];
    const int64_t h = rest % p.in[1];
    rest /= p.in[1];
    const int64_t d = rest % p.in[0];
    rest /= p.in[0];
    const int64_t c = rest % p.c;
    const int64_t n = rest / p.c;
    const int64_t g = c / cg, cc = c % cg;
    const int64_t coord[3] = {d, h, w};
    float sum = 0.0f;
    for (int64_t t = 0; t < p.filter[0]; ++t) {
      const int64_t zd = coord[0] + p.pad[0] - t * p.dilation[0];
      if (zd < 0 || zd % p.stride[0] != 0 || zd / p.stride[0] >= p.out[0]) continue;
      for (int64_t r = 0; r < p.filter[1]; ++r) {
        const int64_t zh = coord[1] + p.pad[1] - r * p.dilation[1];
        if (zh < 0 || zh % p.stride[1] != 0 || zh / p.stride[1] >= p.out[1]) continue;
        for (int64_t s = 0; s < p.filter[2]; ++s) {
          const int64_t zw = coord[2] + p.pad[2] - s * p.dilation[2];
          if (zw < 0 || zw % p.stride[2] != 0 || zw / p.stride[2] >= p.out[2]) continue;
          const int64_t row = n * opq +
                              ((zd / p.stride[0]) * p.out[1] + zh / p.stride[1]) * p.out[2] +
                              zw / p.stride[2];
          const int64_t column = ((cc * p.filter[0] + t) * p.filter[1] + r) * p.filter[2] + s;
          sum += col[(g * col_rows + row) * col_cols + column];
        }
      }
    }
    T* dst = dx + (n0 + n) * p.x_stride[0] + c * p.x_stride[1] + d * p.x_stride[2] +
             h * p.x_stride[3] + w * p.x_stride[4];
    Blend(dst, sum, alpha, beta);
  }
}

template <typename T>
__global__ void ConvDirectKernel(ConvProblem p, const T* x, const T* w, float alpha, float beta,
                                 T* y) {
  const int64_t cg = p.cg(), kg = p.kg();
  const bool flip = p.mode == dnn::ConvolutionMode::kConvolution;
  const int64_t total = p.n * p.k * p.out[0] * p.out[1] * p.out[2];
  KILN_GRID_STRIDE(i, total) {
    // Consecutive threads take consecutive q, then p, so loads of x and stores of y coalesce in
    // NCHW; in NHWC consecutive k share the input window instead.
    int64_t rest = i;
    const int64_t q = rest % p.out[2];
    rest /= p.out[2];
    const int64_t pp = rest % p.out[1];
    rest /= p.out[1];
    const int64_t o = rest % p.out[0];
    rest /= p.out[0];
    const int64_t k = rest % p.k;
    const int64_t n = rest / p.k;
    const int64_t g = k / kg;
    float acc = 0.0f;
    for (int64_t cc = 0; cc < cg; ++cc) {
      const T* xc = x + n * p.x_stride[0] + (g * cg + cc) * p.x_stride[1];
      const T* wc = w + k * p.w_stride[0] + cc * p.w_stride[1];
      for (int64_t t = 0; t < p.filter[0]; ++t) {
        const int64_t d = o * p.stride[0] - p.pad[0] + t * p.dilation[0];
        if (d < 0 || d >= p.in[0]) continue;
        for (int64_t r = 0; r < p.filter[1]; ++r) {
          const int64_t h = pp * p.stride[1] - p.pad[1] + r * p.dilation[1];
          if (h < 0 || h >= p.in[1]) continue;
          for (int64_t s = 0; s < p.filter[2]; ++s) {
            const int64_t ww = q * p.stride[2] - p.pad[2] + s * p.dilation[2];
            if (ww < 0 || ww >= p.in[2]) continue;
            const int64_t ft = flip ? p.filter[0] - 1 - t : t;
            const int64_t fr = flip ? p.filter[1] - 1 - r : r;
            const int64_t fs = flip ? p.filter[2] - 1 - s : s;
            acc =
                fmaf(Load(xc + d * p.x_stride[2] + h * p.x_stride[3] + ww * p.x_stride[4]),
                     Load(wc + ft * p.w_stride[2] + fr * p.w_stride[3] + fs * p.w_stride[4]), acc);
          }
        }
      }
    }
    Blend(y + n * p.y_stride[0] + k * p.y_stride[1] + o * p.y_stride[2] + pp * p.y_stride[3] +
              q * p.y_stride[4],
          acc, alpha, beta);
  }
}

// One block per output channel; each thread sums a fixed strided subset, then a fixed tree.
template <typename T>
__global__ void BiasGradKernel(ConvProblem p, const T* dy, float alpha, float beta, T* db) {
  const int64_t k = blockIdx.x;
  const int64_t spatial = p.out[0] * p.out[1] * p.out[2];
  const int64_t total = p.n * spatial;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    const int64_t n = i / spatial, s = i % spatial;
    const int64_t q = s % p.out[2], pp = (s / p.out[2]) % p.out[1], o = s / (p.out[2] * p.out[1]);
    sum += Load(dy + n * p.y_stride[0] + k * p.y_stride[1] + o * p.y_stride[2] +
                pp * p.y_stride[3] + q * p.y_stride[4]);
  }
  __shared__ float partial[256];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int width = 128; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) Blend(db + k, partial[0], alpha, beta);
}

struct Dims5 {
  int64_t d[5], s[5];
};

template <typename T>
__global__ void ToChannelsLastKernel(Dims5 in, const T* src, int64_t padded_c, T* dst) {
  const int64_t total = in.d[0] * in.d[2] * in.d[3] * in.d[4] * padded_c;
  KILN_GRID_STRIDE(i, total) {
    int64_t rest = i;
    const int64_t c = rest % padded_c;
    rest /= padded_c;
    const int64_t w = rest % in.d[4];
    rest /= in.d[4];
    const int64_t h = rest % in.d[3];
    rest /= in.d[3];
    const int64_t d = rest % in.d[2];
    const int64_t n = rest / in.d[2];
    float v = 0.0f;
    if (c < in.d[1])
      v = Load(src + n * in.s[0] + c * in.s[1] + d * in.s[2] + h * in.s[3] + w * in.s[4]);
    StoreValue(dst + i, v);
  }
}

// The same copy when the spatial dims are packed (one run of `spatial` elements per (n, c)): a
// tiled transpose of each n's [c][spatial] into [spatial][padded_c], 32 x 32 elements per block
// through shared memory, so both the reads (along spatial) and the writes (along c) are
// coalesced. Block (32, 8); grid (spatial tiles, padded-channel tiles, n).
template <typename T>
__global__ void ToChannelsLastTiledKernel(const T* src, int64_t n_stride, int64_t c_stride,
                                          int64_t channels, int64_t spatial, int64_t padded_c,
                                          T* dst) {
  __shared__ float tile[32][33];  // +1 column: the transposed reads hit 32 different banks
  const int64_t s0 = static_cast<int64_t>(blockIdx.x) * 32,
                c0 = static_cast<int64_t>(blockIdx.y) * 32;
  const int64_t n = blockIdx.z;
  const T* in = src + n * n_stride;
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int64_t c = c0 + i, sp = s0 + threadIdx.x;
    tile[i][threadIdx.x] = c < channels && sp < spatial ? Load(in + c * c_stride + sp) : 0.0f;
  }
  __syncthreads();
  T* out = dst + n * spatial * padded_c;
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int64_t sp = s0 + i, c = c0 + threadIdx.x;
    if (sp < spatial && c < padded_c) StoreValue(out + sp * padded_c + c, tile[threadIdx.x][i]);
  }
}

// The same copy when another dim `a` (0, 2, 3 or 4) is the contiguous one in the source (x read
// as (C, N, H, W) for the filter gradient, whose source channels are the batch): a tiled
// transpose between dim a and the channel dim, 32 x 32 elements per block through shared memory,
// so the reads run along a and the writes along the channels. The three other dims are walked by
// blockIdx.x (`outer` holds their extents and source/destination strides, innermost first).
// Block (32, 8); grid (the other dims' index, a tiles, padded-channel tiles).
struct TransposeDims {
  int64_t extent[3], src_stride[3], dst_stride[3];
  int64_t a_extent, a_dst_stride;  // dim a: source stride 1
  int64_t channels, c_src_stride, padded_c;
};

template <typename T>
__global__ void ToChannelsLastTransposeKernel(TransposeDims t, const T* src, T* dst) {
  __shared__ float tile[32][33];
  int64_t rest = blockIdx.x, src_base = 0, dst_base = 0;
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const int64_t index = rest % t.extent[i];
    rest /= t.extent[i];
    src_base += index * t.src_stride[i];
    dst_base += index * t.dst_stride[i];
  }
  const int64_t a0 = static_cast<int64_t>(blockIdx.y) * 32,
                c0 = static_cast<int64_t>(blockIdx.z) * 32;
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int64_t c = c0 + i, av = a0 + threadIdx.x;
    tile[i][threadIdx.x] =
        c < t.channels && av < t.a_extent ? Load(src + src_base + c * t.c_src_stride + av) : 0.0f;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int64_t av = a0 + i, c = c0 + threadIdx.x;
    if (av < t.a_extent && c < t.padded_c) {
      StoreValue(dst + dst_base + av * t.a_dst_stride + c, tile[threadIdx.x][i]);
    }
  }
}

// One phase's filter for sub-pixel backward data (2-d, ungrouped): out[c][t][u][kk] (packed,
// kk < padded_k, zero past K) = w[kk][c][r0 + stride_h (taps_h - 1 - t)][s0 + stride_w (taps_w -
// 1 - u)]: the taps that reach output rows of one residue mod the stride, reversed.
template <typename T>
__global__ void SubPixelFilterKernel(ConvProblem p, const T* w, int64_t r0, int64_t s0,
                                     int64_t taps_h, int64_t taps_w, int64_t padded_k, T* out) {
  const int64_t total = p.c * taps_h * taps_w * padded_k;
  KILN_GRID_STRIDE(i, total) {
    int64_t rest = i;
    const int64_t kk = rest % padded_k;
    rest /= padded_k;
    const int64_t u = rest % taps_w;
    rest /= taps_w;
    const int64_t t = rest % taps_h;
    const int64_t c = rest / taps_h;
    const int64_t r = r0 + p.stride[1] * (taps_h - 1 - t), s = s0 + p.stride[2] * (taps_w - 1 - u);
    const float v = kk < p.k ? Load(w + kk * p.w_stride[0] + c * p.w_stride[1] + r * p.w_stride[3] +
                                    s * p.w_stride[4])
                             : 0.0f;
    StoreValue(out + i, v);
  }
}

// w' (C, K/groups, T, R, S) packed KRSC from w (K, C/groups, T, R, S): the filter of the forward
// convolution that computes backward data when all strides are 1. w' is w transposed per group
// and, unless `flip` is false, reversed in every spatial dimension.
template <typename T, typename Index>
__global__ void BackwardDataFilterKernel(ConvProblem p, const T* w, bool flip, T* out) {
  // Index: int where the filter has fewer than 2^31 elements, so the decoding divides in 32 bits.
  const Index kg = static_cast<Index>(p.kg()), cg = static_cast<Index>(p.cg());
  const Index taps_t = static_cast<Index>(p.filter[0]), taps_r = static_cast<Index>(p.filter[1]),
              taps_s = static_cast<Index>(p.filter[2]);
  const int64_t total = p.c * p.FilterTaps() * p.kg();
  KILN_GRID_STRIDE(i, total) {
    Index rest = static_cast<Index>(i);
    const Index kk = rest % kg;
    rest /= kg;
    const Index s = rest % taps_s;
    rest /= taps_s;
    const Index r = rest % taps_r;
    rest /= taps_r;
    const Index t = rest % taps_t;
    const Index c = rest / taps_t;
    const Index g = c / cg;
    const int64_t ft = flip ? taps_t - 1 - t : t;
    const int64_t fr = flip ? taps_r - 1 - r : r;
    const int64_t fs = flip ? taps_s - 1 - s : s;
    out[i] = w[(g * kg + kk) * p.w_stride[0] + (c % cg) * p.w_stride[1] + ft * p.w_stride[2] +
               fr * p.w_stride[3] + fs * p.w_stride[4]];
  }
}

template <typename T>
__global__ void AddChannelBiasKernel(ConvProblem p, const T* bias, T* y) {
  const int64_t spatial = p.out[0] * p.out[1] * p.out[2];
  KILN_GRID_STRIDE(i, p.n * p.k * spatial) {
    const int64_t s = i % spatial, k = (i / spatial) % p.k, n = i / (spatial * p.k);
    const int64_t q = s % p.out[2], pp = (s / p.out[2]) % p.out[1], o = s / (p.out[2] * p.out[1]);
    T* dst = y + n * p.y_stride[0] + k * p.y_stride[1] + o * p.y_stride[2] + pp * p.y_stride[3] +
             q * p.y_stride[4];
    StoreValue(dst, Load(dst) + Load(bias + k));
  }
}

// xs[n][c][o][p][q] (packed) = x[n][c][o sd][p sh][q sw]: the pixels a 1x1 convolution of
// stride (sd, sh, sw) reads, so that it can run as a stride-1 product.
template <typename T>
__global__ void Subsample1x1Kernel(ConvProblem p, const T* x, T* xs) {
  const int64_t spatial = p.out[0] * p.out[1] * p.out[2];
  KILN_GRID_STRIDE(i, p.n * p.c * spatial) {
    const int64_t s = i % spatial, c = (i / spatial) % p.c, n = i / (spatial * p.c);
    const int64_t q = s % p.out[2], pp = (s / p.out[2]) % p.out[1], o = s / (p.out[2] * p.out[1]);
    xs[i] = x[n * p.x_stride[0] + c * p.x_stride[1] + o * p.stride[0] * p.x_stride[2] +
              pp * p.stride[1] * p.x_stride[3] + q * p.stride[2] * p.x_stride[4]];
  }
}

// Every element of dx: alpha dxs[n][c][d / sd][h / sh][w / sw] where (d, h, w) is on the output
// grid, alpha 0 elsewhere, + beta dx.
template <typename T>
__global__ void Expand1x1Kernel(ConvProblem p, const T* dxs, float alpha, float beta, T* dx) {
  const int64_t spatial = p.in[0] * p.in[1] * p.in[2];
  KILN_GRID_STRIDE(i, p.n * p.c * spatial) {
    const int64_t s = i % spatial, nc = i / spatial;
    const int64_t w = s % p.in[2], h = (s / p.in[2]) % p.in[1], d = s / (p.in[2] * p.in[1]);
    float v = 0.0f;
    if (d % p.stride[0] == 0 && h % p.stride[1] == 0 && w % p.stride[2] == 0) {
      const int64_t od = d / p.stride[0], oh = h / p.stride[1], ow = w / p.stride[2];
      if (od < p.out[0] && oh < p.out[1] && ow < p.out[2]) {
        v = Load(dxs + ((nc * p.out[0] + od) * p.out[1] + oh) * p.out[2] + ow);
      }
    }
    const int64_t c = nc % p.c, n = nc / p.c;
    Blend(dx + n * p.x_stride[0] + c * p.x_stride[1] + d * p.x_stride[2] + h * p.x_stride[3] +
              w * p.x_stride[4],
          v, alpha, beta);
  }
}

// out[i] = alpha (part[0][i] + part[1][i] + ...) + beta out[i], the parts added in order.
template <typename T>
__global__ void SumPartsKernel(const float* part, int64_t parts, int64_t count, float alpha,
                               float beta, T* out) {
  KILN_GRID_STRIDE(i, count) {
    float sum = 0.0f;
    for (int64_t b = 0; b < parts; ++b) sum += part[b * count + i];
    Blend(out + i, sum, alpha, beta);
  }
}

}  // namespace

int LaunchSubsample1x1(const ConvProblem& p, ElementType element, const void* x, void* xs,
                       void* stream) {
  const int64_t total = p.n * p.c * p.out[0] * p.out[1] * p.out[2];
  if (total == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    Subsample1x1Kernel<T><<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<const T*>(x), static_cast<T*>(xs));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchExpand1x1(const ConvProblem& p, ElementType element, const void* dxs, float alpha,
                    float beta, void* dx, void* stream) {
  const int64_t total = p.n * p.c * p.in[0] * p.in[1] * p.in[2];
  if (total == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    Expand1x1Kernel<T><<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<const T*>(dxs), alpha, beta, static_cast<T*>(dx));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchSumParts(const float* part, int64_t parts, int64_t count, ElementType element,
                   float alpha, float beta, void* out, void* stream) {
  if (count == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    SumPartsKernel<T><<<GridFor(count), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        part, parts, count, alpha, beta, static_cast<T*>(out));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchAddChannelBias(const ConvProblem& p, ElementType element, const void* bias, void* y,
                         void* stream) {
  const int64_t total = p.n * p.k * p.out[0] * p.out[1] * p.out[2];
  if (total == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    AddChannelBiasKernel<T><<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<const T*>(bias), static_cast<T*>(y));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchBackwardDataFilter(const ConvProblem& p, ElementType element, const void* w, bool flip,
                             void* out, void* stream) {
  const int64_t total = p.c * p.FilterTaps() * p.kg();
  if (total == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    if (total < (int64_t{1} << 31)) {
      BackwardDataFilterKernel<T, int>
          <<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
              p, static_cast<const T*>(w), flip, static_cast<T*>(out));
    } else {
      BackwardDataFilterKernel<T, int64_t>
          <<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
              p, static_cast<const T*>(w), flip, static_cast<T*>(out));
    }
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchMaterialize(const dnn::GatherOperand& op, ElementType element, const void* src,
                      int64_t groups, bool rows_are_outer, int64_t row0, int64_t rows, int64_t col0,
                      int64_t cols, void* out, void* stream) {
  const int64_t total = groups * rows * cols;
  if (total == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    MaterializeKernel<T><<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        op, static_cast<const T*>(src), groups, rows_are_outer, row0, rows, col0, cols,
        static_cast<T*>(out));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchScatter(const dnn::OutputMap& map, ElementType element, const float* d, int64_t groups,
                  int64_t row0, int64_t rows, int64_t cols, float alpha, float beta, void* out,
                  void* stream) {
  const int64_t total = groups * rows * cols;
  if (total == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    ScatterKernel<T><<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        map, d, groups, row0, rows, cols, alpha, beta, static_cast<T*>(out));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchCol2Im(const ConvProblem& p, const float* col, int64_t n0, int64_t images,
                 ElementType element, float alpha, float beta, void* dx, void* stream) {
  const int64_t total = images * p.c * p.in[0] * p.in[1] * p.in[2];
  if (total == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    Col2ImKernel<T><<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        p, col, n0, images, alpha, beta, static_cast<T*>(dx));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchConvDirect(const ConvProblem& p, ElementType element, const void* x, const void* w,
                     float alpha, float beta, void* y, void* stream) {
  const int64_t total = p.n * p.k * p.out[0] * p.out[1] * p.out[2];
  if (total == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    ConvDirectKernel<T><<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<const T*>(x), static_cast<const T*>(w), alpha, beta, static_cast<T*>(y));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchBiasGrad(const ConvProblem& p, ElementType element, const void* dy, float alpha,
                   float beta, void* db, void* stream) {
  if (p.k == 0) return 0;
  if (p.k > 0x7fffffff) return static_cast<int>(cudaErrorInvalidConfiguration);
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    BiasGradKernel<T><<<static_cast<unsigned>(p.k), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<const T*>(dy), alpha, beta, static_cast<T*>(db));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchSubPixelFilter(const ConvProblem& p, ElementType element, const void* w, int64_t r0,
                         int64_t s0, int64_t taps_h, int64_t taps_w, int64_t padded_k, void* out,
                         void* stream) {
  const int64_t total = p.c * taps_h * taps_w * padded_k;
  if (total == 0) return 0;
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    SubPixelFilterKernel<T><<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<const T*>(w), r0, s0, taps_h, taps_w, padded_k, static_cast<T*>(out));
    return static_cast<int>(cudaGetLastError());
  });
}

int LaunchToChannelsLast(ElementType element, const int64_t* dims, const int64_t* strides,
                         const void* src, int64_t padded_channels, void* dst, void* stream) {
  Dims5 in;
  for (int i = 0; i < 5; ++i) {
    in.d[i] = dims[i];
    in.s[i] = strides[i];
  }
  const int64_t total = dims[0] * dims[2] * dims[3] * dims[4] * padded_channels;
  if (total == 0) return 0;
  const int64_t spatial = dims[2] * dims[3] * dims[4];
  const bool packed_spatial =
      strides[4] == 1 && strides[3] == dims[4] && strides[2] == dims[3] * dims[4];
  if (packed_spatial && dims[0] <= 65535 && (padded_channels + 31) / 32 <= 65535 &&
      (spatial + 31) / 32 <= 0x7fffffff) {
    const dim3 grid(static_cast<unsigned>((spatial + 31) / 32),
                    static_cast<unsigned>((padded_channels + 31) / 32),
                    static_cast<unsigned>(dims[0]));
    return Dispatch(element, [&](auto zero) {
      using T = decltype(zero);
      ToChannelsLastTiledKernel<T><<<grid, dim3(32, 8), 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const T*>(src), strides[0], strides[1], dims[1], spatial, padded_channels,
          static_cast<T*>(dst));
      return static_cast<int>(cudaGetLastError());
    });
  }
  // Another dim contiguous in the source (and not the channels): the tiled transpose.
  int a = -1;
  for (int dim : {4, 3, 2, 0}) {
    if (strides[dim] == 1 && dims[dim] > 1 && a < 0) a = dim;
  }
  const int64_t others = dims[0] * dims[2] * dims[3] * dims[4] / (a < 0 ? 1 : dims[a]);
  if (a >= 0 && strides[1] != 1 && others <= 0x7fffffff && (dims[a] + 31) / 32 <= 65535 &&
      (padded_channels + 31) / 32 <= 65535) {
    // The packed output's strides for (n, d, h, w); its channel stride is 1.
    const int64_t out_stride[5] = {dims[2] * dims[3] * dims[4] * padded_channels, 1,
                                   dims[3] * dims[4] * padded_channels, dims[4] * padded_channels,
                                   padded_channels};
    TransposeDims t;
    int slot = 0;
    for (int dim : {4, 3, 2, 0}) {
      if (dim == a) continue;
      t.extent[slot] = dims[dim];
      t.src_stride[slot] = strides[dim];
      t.dst_stride[slot] = out_stride[dim];
      ++slot;
    }
    t.a_extent = dims[a];
    t.a_dst_stride = out_stride[a];
    t.channels = dims[1];
    t.c_src_stride = strides[1];
    t.padded_c = padded_channels;
    const dim3 grid(static_cast<unsigned>(others), static_cast<unsigned>((dims[a] + 31) / 32),
                    static_cast<unsigned>((padded_channels + 31) / 32));
    return Dispatch(element, [&](auto zero) {
      using T = decltype(zero);
      ToChannelsLastTransposeKernel<T><<<grid, dim3(32, 8), 0, static_cast<cudaStream_t>(stream)>>>(
          t, static_cast<const T*>(src), static_cast<T*>(dst));
      return static_cast<int>(cudaGetLastError());
    });
  }
  return Dispatch(element, [&](auto zero) {
    using T = decltype(zero);
    ToChannelsLastKernel<T><<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
        in, static_cast<const T*>(src), padded_channels, static_cast<T*>(dst));
    return static_cast<int>(cudaGetLastError());
  });
}

}  // namespace cuda
}  // namespace kiln
