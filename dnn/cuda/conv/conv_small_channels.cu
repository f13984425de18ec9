// The small-channel convolution kernels: forward and filter gradient of a 2-d convolution whose
// input has at most 8 channels, on the f16/bf16 mma.sync tensor cores (sm_80 and later).
//
// Both view the convolution as a GEMM whose reduction index runs along one filter row: k =
// (r, s, c) with the channels padded to `cp` (4, or 8 at odd horizontal strides) and the taps of a
// row padded to `sp`, so that a row holds a multiple of 16 reduction elements. A block owns a tile
// of 256 output pixels of one image and stages the input window those pixels read, [rows][cols][cp]
// in shared memory, zero where the window leaves the image. In that window the reduction elements
// (s, c) of one pixel and filter row are contiguous, 16 bytes per pair of taps, so each fragment
// row of the im2col matrix is a plain ldmatrix address: no gather, no padding of each tap to a
// 16-byte run of channels as the general kernels need.
//
// Forward: C[pixel][filter] = sum_k window[pixel, k] * w[filter, k]; the whole filter (or a chunk
// of kNT * 8 filters) stays in shared memory while the block walks its tiles. 8 warps, each 32
// pixels x all the block's filters.
// Filter gradient: dw[filter][k] = sum over pixels of dy[pixel][filter] * window[pixel, k]; the
// reduction runs over pixels, so both operands come through ldmatrix.trans. 8 warps as 2 (filters)
// x 4 (columns); the pixels are split among blocks, each writing f32 partial sums that a second
// kernel adds in a fixed order (deterministic) into the filter's own layout. It also serves wide
// problems (C % 8 == 0, any count): every channel of a window position staged (cp = C, positions
// padded to C + 8 elements so the ldmatrix rows of neighbouring pixels fall in different banks),
// filled by cp.async.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "dnn/cuda/conv/conv_small_channels_launch.h"
#include "dnn/cuda/conv/mma_sync.cuh"

namespace kiln {
namespace cuda {

namespace {

using mma::FromFloat;
using mma::LdMatrixX4;
using mma::LdMatrixX4Trans;
using mma::Mma16816;
using mma::ToFloat;

constexpr int kThreads = 256, kTilePixels = 256;

// The problem as the kernels see it; every count fits 32 bits (checked by Plan), offsets into
// the tensors are 64-bit.
struct Geometry {
  int n, c, h, w, k, p, q, r, s;
  int pad_h, pad_w, stride_h, stride_w;
  int cp;                // channels per tap in the reduction: 4 or 8 (all C when wide)
  int pp;                // elements per window position: cp, or C + 8 when wide (bank spread)
  bool wide;             // the filter gradient of a C % 8 == 0 problem (no forward)
  int row_len;           // reduction elements per filter row: sp * cp, a multiple of 16
  int k_total;           // r * row_len
  int th, tw;            // the pixel tile: th * tw == kTilePixels, tw a power of two
  int tw_shift;          // log2(tw)
  int rows_in, cols_in;  // the input window of a tile
  int tiles_h, tiles_w, tiles;
  bool flip;                    // true convolution: the filter is read reversed
  int64_t xs[4], ys[4], ws[4];  // strides of x (n, c, h, w), y (n, k, p, q), w (k, c, r, s)
};

template <typename T>
__device__ __forceinline__ uint16_t Bits(T v);
template <>
__device__ __forceinline__ uint16_t Bits(__half v) {
  return __half_as_ushort(v);
}
template <>
__device__ __forceinline__ uint16_t Bits(__nv_bfloat16 v) {
  return __bfloat16_as_ushort(v);
}

__device__ __forceinline__ void TileOrigin(const Geometry& g, int tile, int* img, int* oh0,
                                           int* ow0) {
  const int per_image = g.tiles_h * g.tiles_w;
  *img = tile / per_image;
  const int t = tile - *img * per_image;
  const int th_index = t / g.tiles_w;
  *oh0 = th_index * g.th;
  *ow0 = (t - th_index * g.tiles_w) * g.tw;
}

// Packs `count` 16-bit values (a multiple of 2) into 32-bit words.
template <int kWords>
__device__ __forceinline__ void Pack(const uint16_t* v, uint32_t* words) {
#pragma unroll
  for (int i = 0; i < kWords; ++i) words[i] = v[2 * i] | (uint32_t{v[2 * i + 1]} << 16);
}

// The tile's input window, [rows_in][cols_in][cp] of 16-bit values, zero outside the image and
// past the real channels. Each thread loads kBatch positions into registers before storing any,
// so their global latencies overlap instead of adding up.
template <int kBatch>
__device__ void LoadWindow(const Geometry& g, const uint16_t* x, int img, int oh0, int ow0,
                           uint16_t* window) {
  const int count = g.rows_in * g.cols_in;
  const int ih0 = oh0 * g.stride_h - g.pad_h, iw0 = ow0 * g.stride_w - g.pad_w;
  const uint16_t* xi = x + img * g.xs[0];
  for (int first = threadIdx.x; first < count; first += kBatch * kThreads) {
    uint16_t v[kBatch][8];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
#pragma unroll
      for (int c = 0; c < 8; ++c) v[b][c] = 0;
      const int i = first + b * kThreads;
      const int row = i / g.cols_in;
      const int ih = ih0 + row, iw = iw0 + (i - row * g.cols_in);
      if (i < count && ih >= 0 && ih < g.h && iw >= 0 && iw < g.w) {
        const uint16_t* px = xi + ih * g.xs[2] + iw * g.xs[3];
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          if (c < g.c) v[b][c] = px[c * g.xs[1]];
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = first + b * kThreads;
      if (i >= count) break;
      if (g.cp == 4) {
        uint2 packed;
        Pack<2>(v[b], &packed.x);
        *reinterpret_cast<uint2*>(window + i * 4) = packed;
      } else {
        uint4 packed;
        Pack<4>(v[b], &packed.x);
        *reinterpret_cast<uint4*>(window + i * 8) = packed;
      }
    }
  }
}

// 16 bytes from global to shared memory without passing through registers (zero-filled when
// `valid` is false).
__device__ __forceinline__ void CopyAsync16(void* smem, const void* global, bool valid) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(addr), "l"(global),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void WaitAsyncCopies() { asm volatile("cp.async.wait_all;" ::); }

// The window of a wide (C % 8 == 0) problem: positions of pp = C + 8 elements, filled in 16-byte
// vectors of 8 channels (asynchronous copies when x is channels-last and 16-byte aligned).
__device__ void LoadWideWindow(const Geometry& g, const uint16_t* x, int img, int oh0, int ow0,
                               bool vector_x, uint16_t* window) {
  const int vectors = g.c / 8;
  const int count = g.rows_in * g.cols_in * vectors;
  const int ih0 = oh0 * g.stride_h - g.pad_h, iw0 = ow0 * g.stride_w - g.pad_w;
  const uint16_t* xi = x + img * g.xs[0];
  for (int i = threadIdx.x; i < count; i += kThreads) {
    const int position = i / vectors, v = i - position * vectors;
    const int row = position / g.cols_in, col = position - row * g.cols_in;
    const int ih = ih0 + row, iw = iw0 + col;
    const bool inside = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
    uint16_t* to = window + position * g.pp + v * 8;
    const uint16_t* from = xi + ih * g.xs[2] + iw * g.xs[3] + v * 8 * g.xs[1];
    if (vector_x) {
      CopyAsync16(to, inside ? from : x, inside);
      continue;
    }
    uint16_t e[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (inside) {
#pragma unroll
      for (int q = 0; q < 8; ++q) e[q] = from[q * g.xs[1]];
    }
    uint4 packed;
    Pack<4>(e, &packed.x);
    *reinterpret_cast<uint4*>(to) = packed;
  }
}

// Filters k0 .. k0 + filters - 1 as [filter][k] rows of w_ld elements (k = (r, s, c) padded,
// zero in the padding and past K).
//
// Every block stages the whole filter before its first tile, so this is a fixed cost of each
// launch, paid again by every band of a layer computed in bands. Staged one element per step,
// with three divisions by run-time values each, it cost about 0.14 ms per launch of CaffeNet's
// conv1 (96 x 11 x 11 x 3, f16; H100, 2026-11-25: 0.23 ms at batch 32 against 0.49 at 128).
// Each step now fills one 16-byte vector of a filter row (cp = 4: two taps of 4 channels;
// cp = 8: one tap of 8), so the index arithmetic is paid once per 8 elements and the shared
// store is one 16-byte write; kFilterVectors vectors' loads are in flight per thread.
constexpr int kFilterVectors = 4;

__device__ void LoadFilter(const Geometry& g, const uint16_t* __restrict__ w, int k0, int filters,
                           int w_ld, uint16_t* out) {
  const int row_vectors = g.row_len / 8;  // row_len is a multiple of 16
  const int filter_vectors = g.r * row_vectors;
  const int count = filters * filter_vectors;
  const int cp_shift = g.cp == 4 ? 2 : 3;  // the forward's cp is 4 or 8
  for (int first = threadIdx.x; first < count; first += kFilterVectors * kThreads) {
    uint16_t v[kFilterVectors][8];
    int at[kFilterVectors];
#pragma unroll
    for (int b = 0; b < kFilterVectors; ++b) {
      const int i = first + b * kThreads;
#pragma unroll
      for (int e = 0; e < 8; ++e) v[b][e] = 0;
      at[b] = -1;
      if (i >= count) continue;
      const int f = i / filter_vectors;
      const int rem = i - f * filter_vectors;
      const int r = rem / row_vectors;
      const int kk = (rem - r * row_vectors) * 8;  // within the filter row
      at[b] = f * w_ld + r * g.row_len + kk;
      if (k0 + f >= g.k) continue;
      const int rr = g.flip ? g.r - 1 - r : r;
      const uint16_t* wr = w + (k0 + f) * g.ws[0] + rr * g.ws[2];
      const int s0 = kk >> cp_shift;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int s = s0 + (e >> cp_shift), c = e & (g.cp - 1);
        if (s < g.s && c < g.c) {
          const int ss = g.flip ? g.s - 1 - s : s;
          v[b][e] = __ldg(wr + c * g.ws[1] + ss * g.ws[3]);
        }
      }
    }
#pragma unroll
    for (int b = 0; b < kFilterVectors; ++b) {
      if (at[b] < 0) continue;
      uint4 packed;
      Pack<4>(v[b], &packed.x);
      *reinterpret_cast<uint4*>(out + at[b]) = packed;
    }
  }
}

// alpha * v + beta * y at `i` (beta == 0: y is not read), then the epilogue of filter f: rounded
// to T (as the stored convolution would be), + bias, ReLU.
template <typename T>
__device__ __forceinline__ float Blended(const T* y, int64_t i, float v, float alpha, float beta,
                                         const OutputEpilogue& e, int f) {
  float out = alpha * v;
  if (beta != 0.0f) out += beta * ToFloat(y[i]);
  if (e.bias == nullptr && !e.relu) return out;
  out = ToFloat(FromFloat<T>(out));
  if (e.bias != nullptr) out += e.bias[f];
  if (e.relu && out < 0.0f) out *= e.slope;
  return out;
}

template <typename T, int kNT>
__global__ void __launch_bounds__(kThreads, kNT <= 8 ? 2 : 1)
    SmallChannelsForwardKernel(const Geometry g, const T* __restrict__ x, const T* __restrict__ w,
                               T* y, float alpha, float beta, bool vector_out,
                               const OutputEpilogue e) {
  extern __shared__ __align__(16) uint16_t smem[];
  constexpr int kN = kNT * 8;
  const int w_ld = g.k_total + 8;  // an odd number of 16-byte units: conflict-free ldmatrix rows
  uint16_t* filter = smem;
  uint16_t* window = smem + kN * w_ld;
  const int k0 = blockIdx.y * kN;
  LoadFilter(g, reinterpret_cast<const uint16_t*>(w), k0, kN, w_ld, filter);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // This lane's ldmatrix rows: for A, pixel lane % 16 of each of the warp's two m tiles at k half
  // lane / 16, as window offsets; for B, filter lane % 8 (+ 8 for lanes 16..31) at k half
  // (lane / 8) % 2.
  int a_off[2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    const int pixel = warp * 32 + mt * 16 + lane % 16;
    const int ph = pixel >> g.tw_shift, pw = pixel & (g.tw - 1);
    a_off[mt] = (ph * g.stride_h * g.cols_in + pw * g.stride_w) * g.cp + (lane / 16) * 8;
  }
  const int b_off = (lane % 8 + 8 * (lane / 16)) * w_ld + ((lane / 8) % 2) * 8;
  const int window_row = g.cols_in * g.cp;

  for (int tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
    int img, oh0, ow0;
    TileOrigin(g, tile, &img, &oh0, &ow0);
    __syncthreads();  // the previous tile's window reads are done (and the filter is stored)
    LoadWindow<8>(g, reinterpret_cast<const uint16_t*>(x), img, oh0, ow0, window);
    __syncthreads();

    float acc[2][kNT][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int j = 0; j < kNT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.0f;

    for (int r = 0; r < g.r; ++r) {
      const uint16_t* a_row = window + r * window_row;
      const uint16_t* b_row = filter + b_off + r * g.row_len;
      for (int kk = 0; kk < g.row_len; kk += 16) {
        uint32_t a[2][4];
        LdMatrixX4(a[0], a_row + a_off[0] + kk);
        LdMatrixX4(a[1], a_row + a_off[1] + kk);
#pragma unroll
        for (int j = 0; j < kNT; j += 2) {
          uint32_t b[4];
          LdMatrixX4(b, b_row + j * 8 * w_ld + kk);
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            Mma16816<T>(acc[mt][j], a[mt], b);
            Mma16816<T>(acc[mt][j + 1], a[mt], b + 2);
          }
        }
      }
    }

    // Accumulator [mt][j][e]: pixel warp * 32 + mt * 16 + lane / 4 (+ 8 for e >= 2), filter
    // k0 + 8 j + 2 (lane % 4) + e % 2.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int pixel = warp * 32 + mt * 16 + lane / 4 + 8 * half;
        const int ph = pixel >> g.tw_shift, pw = pixel & (g.tw - 1);
        const int oh = oh0 + ph, ow = ow0 + pw;
        if (oh >= g.p || ow >= g.q) continue;
        const int f0 = k0 + 2 * (lane % 4);
        const int64_t base = img * g.ys[0] + oh * g.ys[2] + ow * g.ys[3] + f0 * g.ys[1];
        const int64_t filter_step = 8 * g.ys[1];
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
          const int f = f0 + j * 8;
          const int64_t i = base + j * filter_step;
          const float v0 = acc[mt][j][2 * half], v1 = acc[mt][j][2 * half + 1];
          if (vector_out && f + 1 < g.k) {
            const float o0 = Blended(y, i, v0, alpha, beta, e, f);
            const float o1 = Blended(y, i + 1, v1, alpha, beta, e, f + 1);
            *reinterpret_cast<uint32_t*>(y + i) =
                Bits(FromFloat<T>(o0)) | (uint32_t{Bits(FromFloat<T>(o1))} << 16);
          } else {
            if (f < g.k) y[i] = FromFloat<T>(Blended(y, i, v0, alpha, beta, e, f));
            if (f + 1 < g.k) {
              y[i + g.ys[1]] = FromFloat<T>(Blended(y, i + g.ys[1], v1, alpha, beta, e, f + 1));
            }
          }
        }
      }
    }
  }
}

template <typename T, int kWM, int kWN>
__global__ void __launch_bounds__(kThreads, kWM <= 2 ? 2 : 1)
    WindowFilterGradientKernel(const Geometry g, const T* __restrict__ x, const T* __restrict__ dy,
                               float* partial, int tiles_per_split, bool vector_dy, bool vector_x) {
  extern __shared__ __align__(16) uint16_t smem[];
  constexpr int kM = 2 * kWM * 16;    // filters per block: 2 warps along m
  constexpr int kCols = 4 * kWN * 8;  // reduction columns per block: 4 warps along columns
  constexpr int kDyLd = kM + 8;       // an odd number of 16-byte units
  constexpr int kVectors = kM / 8;    // 16-byte vectors of a dy tile row
  uint16_t* dy_tile = smem;           // [kTilePixels][kDyLd]
  uint16_t* window = smem + kTilePixels * kDyLd;
  const int k0 = blockIdx.y * kM, col0 = blockIdx.z * kCols;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = warp / 4, warp_n = warp % 4;

  // Window offsets of this lane's B column groups: the x4 load at pair j covers groups j and
  // j + 1 (lanes 16..31), each 8 consecutive columns of one filter row. Columns past the problem
  // read the window's start; their sums are never stored.
  int b_col[(kWN + 1) / 2];
#pragma unroll
  for (int jj = 0; jj < (kWN + 1) / 2; ++jj) {
    const int group = 2 * jj + lane / 16 < kWN ? 2 * jj + lane / 16 : kWN - 1;
    const int col = col0 + (warp_n * kWN + group) * 8;
    int off = 0;
    if (col < g.k_total) {
      const int r = col / g.row_len;
      const int rem = col - r * g.row_len, tap = rem / g.cp;
      off = (r * g.cols_in + tap) * g.pp + (rem - tap * g.cp);
    }
    b_col[jj] = off;
  }
  // A (dy transposed) rows: pixel (lane / 16) * 8 + lane % 8 of a 16-pixel step, filters
  // ((lane / 8) % 2) * 8 on from the m tile's first.
  const int a_pixel = (lane / 16) * 8 + lane % 8;
  const int a_filter = warp_m * kWM * 16 + ((lane / 8) % 2) * 8;

  float acc[kWM][kWN][4];
#pragma unroll
  for (int mt = 0; mt < kWM; ++mt)
#pragma unroll
    for (int j = 0; j < kWN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.0f;

  const uint16_t* dyb = reinterpret_cast<const uint16_t*>(dy);
  const int first = blockIdx.x * tiles_per_split;
  const int last = first + tiles_per_split < g.tiles ? first + tiles_per_split : g.tiles;
  for (int tile = first; tile < last; ++tile) {
    int img, oh0, ow0;
    TileOrigin(g, tile, &img, &oh0, &ow0);
    __syncthreads();  // the previous tile's reads are done
    // dy first (asynchronous where it is 16-byte vectors), then the window while it lands.
    for (int i = threadIdx.x; i < kTilePixels * kVectors; i += kThreads) {
      const int pixel = i / kVectors, v = i - (i / kVectors) * kVectors;
      const int ph = pixel >> g.tw_shift, pw = pixel & (g.tw - 1);
      const int oh = oh0 + ph, ow = ow0 + pw, f = k0 + v * 8;
      const bool inside = oh < g.p && ow < g.q;
      const int64_t at = img * g.ys[0] + oh * g.ys[2] + ow * g.ys[3] + f * g.ys[1];
      uint16_t* to = dy_tile + pixel * kDyLd + v * 8;
      if (vector_dy && f + 8 <= g.k) {
        CopyAsync16(to, inside ? dyb + at : dyb, inside);
        continue;
      }
      uint16_t e[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (inside) {
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          if (f + q < g.k) e[q] = dyb[at + q * g.ys[1]];
        }
      }
      uint4 packed;
      Pack<4>(e, &packed.x);
      *reinterpret_cast<uint4*>(to) = packed;
    }
    if (g.wide) {
      LoadWideWindow(g, reinterpret_cast<const uint16_t*>(x), img, oh0, ow0, vector_x, window);
    } else {
      LoadWindow<4>(g, reinterpret_cast<const uint16_t*>(x), img, oh0, ow0, window);
    }
    WaitAsyncCopies();
    __syncthreads();

    for (int step = 0; step < kTilePixels; step += 16) {
      uint32_t a[kWM][4];
#pragma unroll
      for (int mt = 0; mt < kWM; ++mt) {
        LdMatrixX4Trans(a[mt], dy_tile + (step + a_pixel) * kDyLd + a_filter + mt * 16);
      }
      const int pixel = step + lane % 16;
      const int ph = pixel >> g.tw_shift, pw = pixel & (g.tw - 1);
      const uint16_t* b_pixel = window + (ph * g.stride_h * g.cols_in + pw * g.stride_w) * g.pp;
#pragma unroll
      for (int j = 0; j < kWN; j += 2) {
        uint32_t b[4];
        LdMatrixX4Trans(b, b_pixel + b_col[j / 2]);
#pragma unroll
        for (int mt = 0; mt < kWM; ++mt) {
          Mma16816<T>(acc[mt][j], a[mt], b);
          if (j + 1 < kWN) Mma16816<T>(acc[mt][j + 1], a[mt], b + 2);
        }
      }
    }
  }

  // Accumulator [mt][j][e]: filter k0 + warp_m * kWM * 16 + 16 mt + lane / 4 (+ 8 for e >= 2),
  // column col0 + (warp_n * kWN + j) * 8 + 2 (lane % 4) + e % 2.
  float* out = partial + static_cast<int64_t>(blockIdx.x) * g.k * g.k_total;
#pragma unroll
  for (int mt = 0; mt < kWM; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int f = k0 + warp_m * kWM * 16 + mt * 16 + lane / 4 + 8 * half;
      if (f >= g.k) continue;
#pragma unroll
      for (int j = 0; j < kWN; ++j) {
        const int col = col0 + (warp_n * kWN + j) * 8 + 2 * (lane % 4);
        if (col >= g.k_total) continue;
        *reinterpret_cast<float2*>(out + static_cast<int64_t>(f) * g.k_total + col) =
            make_float2(acc[mt][j][2 * half], acc[mt][j][2 * half + 1]);
      }
    }
  }
}

// dw[k, c, r, s] = alpha * (sum of the splits' partial sums, in split order) + beta * dw.
template <typename T>
__global__ void SmallChannelsReduceKernel(const Geometry g, const float* partial, int splits,
                                          float alpha, float beta, T* dw) {
  const int64_t count = int64_t{g.k} * g.c * g.r * g.s;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int s = static_cast<int>(i % g.s);
    const int r = static_cast<int>((i / g.s) % g.r);
    const int c = static_cast<int>((i / (int64_t{g.s} * g.r)) % g.c);
    const int f = static_cast<int>(i / (int64_t{g.s} * g.r * g.c));
    // The window's tap (r, s) of a true convolution is filter element (R-1-r, S-1-s).
    const int wr = g.flip ? g.r - 1 - r : r, ws = g.flip ? g.s - 1 - s : s;
    const int64_t col = static_cast<int64_t>(f) * g.k_total + wr * g.row_len + ws * g.cp + c;
    const int64_t plane = int64_t{g.k} * g.k_total;
    float sum = 0.0f;
    for (int split = 0; split < splits; ++split) sum += partial[split * plane + col];
    const int64_t at = f * g.ws[0] + c * g.ws[1] + r * g.ws[2] + s * g.ws[3];
    float out = alpha * sum;
    if (beta != 0.0f) out += beta * ToFloat(dw[at]);
    dw[at] = FromFloat<T>(out);
  }
}

// The opt-in shared memory per block of the current device (cached per device), or the 48 KiB
// every device has when it cannot be asked.
int MaxSharedBytes() {
  static std::atomic<int> known[64];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) {
    cudaGetLastError();
    return 48 << 10;
  }
  int bytes = known[device].load();
  if (bytes == 0) {
    if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess ||
        bytes <= 0) {
      cudaGetLastError();
      bytes = 48 << 10;
    }
    known[device].store(bytes);
  }
  return bytes;
}

int RoundUp(int v, int m) { return (v + m - 1) / m * m; }

// Everything a launch decides: the geometry, the forward's filters per block (kNT * 8), the
// gradient's warp tile (kWM x kWN) and split of the tiles.
struct Plan {
  Geometry g;
  int forward_nt = 8;
  size_t forward_smem = 0;
  int grad_wm = 2, grad_wn = 8;
  size_t grad_smem = 0;
  int splits = 1, tiles_per_split = 1;
  bool ok = false;
};

// `wide`: the filter gradient's plan for C % 8 == 0 (the window holds every channel of a
// position; no forward plan).
Plan MakePlan(const dnn::ConvProblem& p, int multiprocessors, bool wide = false) {
  Plan plan;
  if (p.dtype != DataType::kF16 && p.dtype != DataType::kBF16) return plan;
  if (p.spatial_rank > 3 || p.groups != 1 || p.in[0] != 1 || p.filter[0] != 1 || p.out[0] != 1 ||
      p.dilation[1] != 1 || p.dilation[2] != 1 || p.c < 1) {
    return plan;
  }
  if (wide ? (p.c % 8 != 0 || p.c > 4096) : p.c > 8) return plan;
  const int64_t limit = int64_t{1} << 30;
  if (p.n >= limit || p.k >= limit || p.in[1] >= limit || p.in[2] >= limit || p.out[1] >= limit ||
      p.out[2] >= limit || p.filter[1] > 64 || p.filter[2] > 64 || p.stride[1] > 64 ||
      p.stride[2] > 64 || p.pad[1] >= limit || p.pad[2] >= limit) {
    return plan;
  }
  Geometry& g = plan.g;
  g.n = static_cast<int>(p.n);
  g.c = static_cast<int>(p.c);
  g.h = static_cast<int>(p.in[1]);
  g.w = static_cast<int>(p.in[2]);
  g.k = static_cast<int>(p.k);
  g.p = static_cast<int>(p.out[1]);
  g.q = static_cast<int>(p.out[2]);
  g.r = static_cast<int>(p.filter[1]);
  g.s = static_cast<int>(p.filter[2]);
  g.pad_h = static_cast<int>(p.pad[1]);
  g.pad_w = static_cast<int>(p.pad[2]);
  g.stride_h = static_cast<int>(p.stride[1]);
  g.stride_w = static_cast<int>(p.stride[2]);
  // Four channels per tap keep a pair of taps in 16 bytes; an ldmatrix row then starts at an even
  // window column, which needs an even horizontal stride. Otherwise a tap is 16 bytes itself.
  g.wide = wide;
  g.cp = wide ? g.c : (p.c <= 4 && g.stride_w % 2 == 0 ? 4 : 8);
  g.pp = wide ? g.c + 8 : g.cp;
  g.row_len = wide ? g.s * g.c : RoundUp(g.s, 16 / g.cp) * g.cp;
  g.k_total = g.r * g.row_len;
  g.flip = p.mode == dnn::ConvolutionMode::kConvolution;
  for (int i = 0; i < 4; ++i) {
    const int d = i < 2 ? i : i + 1;  // n, c, h, w of the 5-d strides (depth skipped)
    g.xs[i] = p.x_stride[d];
    g.ys[i] = p.y_stride[d];
    g.ws[i] = p.w_stride[d];
  }
  // The pixel tile: the fewest padded pixels, then the smallest window.
  int64_t best_pixels = -1, best_window = 0;
  for (int tw : {8, 16, 32, 64}) {
    const int th = kTilePixels / tw;
    const int64_t tiles_h = (g.p + th - 1) / th, tiles_w = (g.q + tw - 1) / tw;
    const int64_t pixels = tiles_h * th * tiles_w * tw;
    const int64_t rows = int64_t{th - 1} * g.stride_h + g.r;
    const int64_t cols = RoundUp((tw - 1) * g.stride_w + g.row_len / g.cp, wide ? 1 : 2);
    const int64_t window = rows * cols;
    if (best_pixels < 0 || pixels < best_pixels ||
        (pixels == best_pixels && window < best_window)) {
      best_pixels = pixels;
      best_window = window;
      g.tw = tw;
      g.tw_shift = tw == 8 ? 3 : (tw == 16 ? 4 : (tw == 32 ? 5 : 6));
      g.th = th;
      g.tiles_h = static_cast<int>(tiles_h);
      g.tiles_w = static_cast<int>(tiles_w);
      g.rows_in = static_cast<int>(rows);
      g.cols_in = static_cast<int>(cols);
    }
  }
  const int64_t tiles = int64_t{g.n} * g.tiles_h * g.tiles_w;
  if (tiles >= limit) return plan;
  g.tiles = static_cast<int>(tiles);
  const size_t window_bytes = static_cast<size_t>(best_window) * g.pp * 2;
  const size_t max_smem = static_cast<size_t>(MaxSharedBytes());

  // Forward: the fewest padded filters among the chunk widths whose filter fits, then the widest.
  int64_t best_filters = -1;
  for (int nt : {16, 12, 8, 4}) {
    if (wide) break;
    const size_t bytes = static_cast<size_t>(nt) * 8 * (g.k_total + 8) * 2 + window_bytes;
    if (bytes > max_smem) continue;
    const int64_t padded = (g.k + nt * 8 - 1) / (nt * 8) * (nt * 8);
    if (best_filters < 0 || padded < best_filters) {
      best_filters = padded;
      plan.forward_nt = nt;
      plan.forward_smem = bytes;
    }
  }
  if (best_filters < 0 && !wide) return plan;

  // Filter gradient: the fewest padded (filters x columns) products, then the larger tiles.
  int64_t best_work = -1;
  for (int wm : {3, 2}) {
    for (int wn : {8, 7, 6}) {
      const int64_t m = (g.k + 32 * wm - 1) / (32 * wm) * (32 * wm);
      const int64_t cols = (g.k_total + 32 * wn - 1) / (32 * wn) * (32 * wn);
      if (best_work < 0 || m * cols < best_work) {
        best_work = m * cols;
        plan.grad_wm = wm;
        plan.grad_wn = wn;
      }
    }
  }
  plan.grad_smem = static_cast<size_t>(kTilePixels) * (32 * plan.grad_wm + 8) * 2 + window_bytes;
  if (plan.grad_smem > max_smem) return plan;
  const int64_t chunks = ((g.k + 32 * plan.grad_wm - 1) / (32 * plan.grad_wm)) *
                         ((g.k_total + 32 * plan.grad_wn - 1) / (32 * plan.grad_wn));
  // About two blocks per multiprocessor, each with at least one tile.
  int64_t splits = std::max<int64_t>(1, (2 * multiprocessors + chunks - 1) / chunks);
  splits = std::min<int64_t>(splits, g.tiles);
  plan.tiles_per_split = static_cast<int>((g.tiles + splits - 1) / splits);
  plan.splits = static_cast<int>((g.tiles + plan.tiles_per_split - 1) / plan.tiles_per_split);
  if (chunks > 65535) return plan;
  plan.ok = true;
  return plan;
}

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename T, int kNT>
int LaunchForward(const Plan& plan, const SmallChannelsLaunch& l, cudaStream_t stream) {
  const Geometry& g = plan.g;
  auto kernel = SmallChannelsForwardKernel<T, kNT>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(plan.forward_smem));
  if (e != cudaSuccess) return e;
  const int chunks = (g.k + kNT * 8 - 1) / (kNT * 8);
  // As many blocks as are resident at once, each walking its share of the tiles: a block more
  // would wait for a slot and then stage the filter again (kNT > 8 fits one block per SM).
  int resident = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, plan.forward_smem);
  if (e != cudaSuccess) return e;
  const int slots = std::max(1, resident) * l.multiprocessors;
  const int blocks = std::max(1, std::min(g.tiles, std::max(1, slots / chunks)));
  const bool vector_out =
      g.ys[1] == 1 && g.ys[0] % 2 == 0 && g.ys[2] % 2 == 0 && g.ys[3] % 2 == 0 && Aligned(l.y, 4);
  kernel<<<dim3(blocks, chunks), kThreads, plan.forward_smem, stream>>>(
      g, static_cast<const T*>(l.x), static_cast<const T*>(l.w), static_cast<T*>(l.y), l.alpha,
      l.beta, vector_out, l.epilogue);
  return cudaGetLastError();
}

template <typename T>
int LaunchForwardTyped(const Plan& plan, const SmallChannelsLaunch& l, cudaStream_t stream) {
  switch (plan.forward_nt) {
    case 4:
      return LaunchForward<T, 4>(plan, l, stream);
    case 8:
      return LaunchForward<T, 8>(plan, l, stream);
    case 12:
      return LaunchForward<T, 12>(plan, l, stream);
    default:
      return LaunchForward<T, 16>(plan, l, stream);
  }
}

template <typename T, int kWM, int kWN>
int LaunchGradient(const Plan& plan, const SmallChannelsLaunch& l, cudaStream_t stream) {
  const Geometry& g = plan.g;
  auto kernel = WindowFilterGradientKernel<T, kWM, kWN>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(plan.grad_smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(plan.splits, (g.k + 32 * kWM - 1) / (32 * kWM),
                  (g.k_total + 32 * kWN - 1) / (32 * kWN));
  const bool vector_dy =
      g.ys[1] == 1 && g.ys[0] % 8 == 0 && g.ys[2] % 8 == 0 && g.ys[3] % 8 == 0 && Aligned(l.y, 16);
  const bool vector_x =
      g.xs[1] == 1 && g.xs[0] % 8 == 0 && g.xs[2] % 8 == 0 && g.xs[3] % 8 == 0 && Aligned(l.x, 16);
  kernel<<<grid, kThreads, plan.grad_smem, stream>>>(g, static_cast<const T*>(l.x),
                                                     static_cast<const T*>(l.y), l.partial,
                                                     plan.tiles_per_split, vector_dy, vector_x);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const int64_t count = int64_t{g.k} * g.c * g.r * g.s;
  const int reduce_blocks = static_cast<int>(std::min<int64_t>((count + 255) / 256, 4096));
  SmallChannelsReduceKernel<T><<<reduce_blocks, 256, 0, stream>>>(
      g, l.partial, plan.splits, l.alpha, l.beta, static_cast<T*>(l.dw));
  return cudaGetLastError();
}

template <typename T, int kWM>
int LaunchGradientWn(const Plan& plan, const SmallChannelsLaunch& l, cudaStream_t stream) {
  switch (plan.grad_wn) {
    case 6:
      return LaunchGradient<T, kWM, 6>(plan, l, stream);
    case 7:
      return LaunchGradient<T, kWM, 7>(plan, l, stream);
    default:
      return LaunchGradient<T, kWM, 8>(plan, l, stream);
  }
}

template <typename T>
int LaunchGradientTyped(const Plan& plan, const SmallChannelsLaunch& l, cudaStream_t stream) {
  return plan.grad_wm == 3 ? LaunchGradientWn<T, 3>(plan, l, stream)
                           : LaunchGradientWn<T, 2>(plan, l, stream);
}

}  // namespace

bool SmallChannelsServes(const dnn::ConvProblem& p) {
  return MakePlan(p, 1).ok || SmallChannelsF32Serves(p);
}

// The filter gradient's plan: the small-channel one, else the wide one.
static Plan GradientPlan(const dnn::ConvProblem& p, int multiprocessors) {
  Plan plan = MakePlan(p, multiprocessors);
  return plan.ok ? plan : MakePlan(p, multiprocessors, /*wide=*/true);
}

bool WindowFilterGradientServes(const dnn::ConvProblem& p) {
  return GradientPlan(p, 1).ok || SmallChannelsF32GradientServes(p);
}

int64_t WindowFilterGradientBytes(const dnn::ConvProblem& p, int multiprocessors) {
  if (p.dtype == DataType::kF32) return SmallChannelsF32GradientBytes(p, multiprocessors);
  const Plan plan = GradientPlan(p, multiprocessors);
  if (!plan.ok) return 0;
  return int64_t{plan.splits} * plan.g.k * plan.g.k_total * static_cast<int64_t>(sizeof(float));
}

int LaunchSmallChannelsForward(const SmallChannelsLaunch& l, void* stream) {
  if (l.problem.dtype == DataType::kF32) return LaunchSmallChannelsForwardF32(l, stream);
  const Plan plan = MakePlan(l.problem, l.multiprocessors);
  if (!plan.ok) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  return l.problem.dtype == DataType::kF16 ? LaunchForwardTyped<__half>(plan, l, s)
                                           : LaunchForwardTyped<__nv_bfloat16>(plan, l, s);
}

int LaunchWindowFilterGradient(const SmallChannelsLaunch& l, void* stream) {
  if (l.problem.dtype == DataType::kF32) return LaunchSmallChannelsF32Gradient(l, stream);
  const Plan plan = GradientPlan(l.problem, l.multiprocessors);
  if (!plan.ok || l.partial == nullptr) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  return l.problem.dtype == DataType::kF16 ? LaunchGradientTyped<__half>(plan, l, s)
                                           : LaunchGradientTyped<__nv_bfloat16>(plan, l, s);
}

}  // namespace cuda
}  // namespace kiln
