// The strict-f32 small-channel forward convolution: a first layer's 1 to 4 input channels (an RGB
// image) with FFMA products, for the f32 plans that keep the tensor cores off.
//
// The general FFMA implicit GEMM reduces over C * R * S = 147 elements for ResNet's conv1 and
// tiles 128 filters where there are 64, so half its multiplies are padding, and every operand
// element is a gather; the FFT has no such waste but needs a workspace of hundreds of MiB. Here a
// block owns 16 x 16 output pixels of one image and 64 filters: it stages the pixels' input
// window ([c][rows][cols] floats, zero outside the image) and the 64 filters ([tap][filter]) in
// shared memory, and each thread accumulates 8 pixels (one column, 8 rows) x 8 filters in
// registers, reading per tap 8 window values and two float4 of filter values for 64 FMAs.
// A block keeps its filters while it walks several tiles, so the filter is staged once per block.
//
// The filter gradient, dw[f][c, r, s] = sum over pixels of dy[pixel][f] * window[pixel, (c, r, s)],
// reduces over pixels: a block walks its share of the tiles with the same window and dy[pixel][64
// filters] in shared memory, each warp 8 filters x all taps (a lane every 32nd tap), and writes
// f32 partial sums that a second kernel adds in a fixed order (deterministic) into dw.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "dnn/cuda/conv/conv_small_channels_launch.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kTile = 16;     // output pixels per block: kTile x kTile
constexpr int kFilters = 64;  // filters per block (grid.y walks chunks of K)
constexpr int kMaxChannels = 4;
constexpr int kMaxSharedBytes = 200 * 1024;

struct Geometry {
  int n, c, h, w, k, p, q, r, s;
  int pad_h, pad_w, stride_h, stride_w;
  int rows_in, cols_in, cols_ld;  // the window of one tile; cols_ld: its row pitch in floats
  int taps;                       // c * r * s
  int tiles_h, tiles_w, tiles;    // tiles per image row/column, and in all (n images)
  bool flip;                      // true convolution: the filter's taps reversed
  int64_t xs[4], ys[4], ws[4];    // strides of x (n, c, h, w), y (n, k, p, q), w (k, c, r, s)
  float alpha, beta;
  int window_floats;  // c * rows_in * cols_ld, rounded up to a multiple of 4
  OutputEpilogue epilogue;
};

struct Plan {
  bool ok = false;
  Geometry g;
  int shared_bytes = 0;
};

bool Fits32(int64_t v) { return v >= 0 && v < (int64_t{1} << 31); }

Plan MakePlan(const dnn::ConvProblem& p) {
  Plan plan;
  if (p.dtype != DataType::kF32 || p.spatial_rank != 2 || p.groups != 1) return plan;
  if (p.c < 1 || p.c > kMaxChannels || p.k < 1 || p.n < 1) return plan;
  if (p.dilation[1] != 1 || p.dilation[2] != 1) return plan;
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
  g.rows_in = (kTile - 1) * g.stride_h + g.r;
  g.cols_in = (kTile - 1) * g.stride_w + g.s;
  // An odd pitch spreads the rows a thread's 8 pixels read over different banks.
  g.cols_ld = g.cols_in | 1;
  g.taps = g.c * g.r * g.s;
  g.tiles_h = (g.p + kTile - 1) / kTile;
  g.tiles_w = (g.q + kTile - 1) / kTile;
  g.flip = p.mode == dnn::ConvolutionMode::kConvolution;
  // The 2-d strides of the 5-d ones (n, c, d, h, w): the depth dim (index 2) is skipped.
  for (int i = 0; i < 4; ++i) {
    const int d = i < 2 ? i : i + 1;
    g.xs[i] = p.x_stride[d];
    g.ys[i] = p.y_stride[d];
    g.ws[i] = p.w_stride[d];
  }
  const int64_t tiles = p.n * g.tiles_h * g.tiles_w;
  // Rounded up to 4 floats: the filters that follow are read as float4.
  const int64_t window = (int64_t{g.c} * g.rows_in * g.cols_ld + 3) / 4 * 4;
  const int64_t bytes = (window + int64_t{g.taps} * kFilters) * 4;
  if (!Fits32(tiles) || bytes > kMaxSharedBytes || g.p < 1 || g.q < 1) return plan;
  g.tiles = static_cast<int>(tiles);
  g.window_floats = static_cast<int>(window);
  plan.shared_bytes = static_cast<int>(bytes);
  plan.ok = true;
  return plan;
}

// Loads issued per thread before any is stored, so that their latencies overlap: a block's
// tile loads would otherwise wait on one global load at a time.
constexpr int kBatch = 8;

// The tile's input window, window[c][row][col] (row pitch cols_ld), zero outside the image.
__device__ __forceinline__ void LoadWindow(const Geometry& g, const float* xi, int ih0, int iw0,
                                           float* window) {
  const int plane = g.rows_in * g.cols_in, total = g.c * plane;
  for (int first = threadIdx.x; first < total; first += kBatch * kThreads) {
    float v[kBatch];
    int at[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = first + b * kThreads;
      const int c = i / plane, rc = i - c * plane;
      const int row = rc / g.cols_in, cc = rc - row * g.cols_in;
      const int ih = ih0 + row, iw = iw0 + cc;
      const bool in = i < total && ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
      v[b] = in ? xi[c * g.xs[1] + ih * g.xs[2] + iw * g.xs[3]] : 0.0f;
      at[b] = i < total ? (c * g.rows_in + row) * g.cols_ld + cc : -1;
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (at[b] >= 0) window[at[b]] = v[b];
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    SmallChannelsForwardF32Kernel(const __grid_constant__ Geometry g, const float* __restrict__ x,
                                  const float* __restrict__ w, float* __restrict__ y) {
  extern __shared__ float smem[];
  float* window = smem;
  float* filters = smem + g.window_floats;  // [tap][kFilters], tap = (c, r, s)
  const int k0 = blockIdx.y * kFilters;
  // The block's filters, once: thread i reads filter i % 64 (the global reads are strided but
  // few and cached; the shared stores are conflict-free), zero past K; kBatch loads in flight
  // per thread before any store, so that their latencies overlap.
  const int filter_count = g.taps * kFilters;
  for (int first = threadIdx.x; first < filter_count; first += kBatch * kThreads) {
    float v[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = first + b * kThreads;
      v[b] = 0.0f;
      if (i >= filter_count) continue;
      const int f = i % kFilters, tap = i / kFilters;
      const int c = tap / (g.r * g.s), rs = tap - c * g.r * g.s;
      int r = rs / g.s, s = rs - r * g.s;
      if (g.flip) r = g.r - 1 - r, s = g.s - 1 - s;
      if (k0 + f < g.k)
        v[b] = __ldg(w + (k0 + f) * g.ws[0] + c * g.ws[1] + r * g.ws[2] + s * g.ws[3]);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int i = first + b * kThreads;
      if (i < filter_count) filters[i] = v[b];
    }
  }
  // Thread layout: lanes 0-15 and 16-31 take 16 neighbouring output columns (coalesced stores,
  // distinct banks for the window reads), each lane 8 rows and 8 filters.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = lane % 16;
  const int fg = (warp % 4) * 2 + lane / 16;  // filters fg * 8 .. fg * 8 + 7 of the chunk
  const int row0 = (warp / 4) * 8;            // rows row0 .. row0 + 7 of the tile
  const int row_step = g.stride_h * g.cols_ld;
  for (int tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
    const int per_image = g.tiles_h * g.tiles_w;
    const int img = tile / per_image, t = tile - img * per_image;
    const int oh0 = (t / g.tiles_w) * kTile, ow0 = (t % g.tiles_w) * kTile;
    const int ih0 = oh0 * g.stride_h - g.pad_h, iw0 = ow0 * g.stride_w - g.pad_w;
    __syncthreads();  // the previous tile's reads of the window are done
    const float* xi = x + img * g.xs[0];
    LoadWindow(g, xi, ih0, iw0, window);
    __syncthreads();
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    const float* filter_tap = filters + fg * 8;
    for (int c = 0; c < g.c; ++c) {
      for (int r = 0; r < g.r; ++r) {
        const float* a_row =
            window + (c * g.rows_in + row0 * g.stride_h + r) * g.cols_ld + col * g.stride_w;
#pragma unroll 2
        for (int s = 0; s < g.s; ++s) {
          float a[8];
#pragma unroll
          for (int i = 0; i < 8; ++i) a[i] = a_row[i * row_step + s];
          const float4 b0 = *reinterpret_cast<const float4*>(filter_tap);
          const float4 b1 = *reinterpret_cast<const float4*>(filter_tap + 4);
          filter_tap += kFilters;
          const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
          for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
      }
    }
    const int ow = ow0 + col;
    if (ow >= g.q) continue;
    float* yi = y + img * g.ys[0] + ow * g.ys[3];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int f = k0 + fg * 8 + j;
      if (f >= g.k) break;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int oh = oh0 + row0 + i;
        if (oh >= g.p) break;
        float* at = yi + f * g.ys[1] + oh * g.ys[2];
        float v = g.alpha * acc[i][j];
        if (g.beta != 0.0f) v += g.beta * *at;
        if (g.epilogue.bias != nullptr) v += g.epilogue.bias[f];
        if (g.epilogue.relu && v < 0.0f) v *= g.epilogue.slope;
        *at = v;
      }
    }
  }
}

constexpr int kDyPitch = kFilters + 4;  // dy[pixel][filter] rows: 16-byte aligned, spread banks
constexpr int kMaxTapsPerLane = 12;     // taps <= 32 * 12

// The gradient's shared memory: the window, then dy of one tile.
int GradientSharedBytes(const Geometry& g) {
  return (g.window_floats + kTile * kTile * kDyPitch) * 4;
}

// partial[block][f][tap] (f < K of the block's chunk, all taps) of the blocks' shares of tiles.
template <int kTapsPerLane>
__global__ void __launch_bounds__(kThreads)
    FilterGradientF32Kernel(const __grid_constant__ Geometry g, const float* __restrict__ x,
                            const float* __restrict__ dy, float* __restrict__ partial) {
  extern __shared__ float smem[];
  float* window = smem;
  float* dys = smem + g.window_floats;  // [pixel][kDyPitch]
  const int k0 = blockIdx.y * kFilters;
  const int lane = threadIdx.x % 32, fg = threadIdx.x / 32;  // filters fg * 8 .. fg * 8 + 7
  // Each lane's taps t = lane + 32 u, as offsets into the window.
  int offset[kTapsPerLane];
#pragma unroll
  for (int u = 0; u < kTapsPerLane; ++u) {
    const int t = lane + 32 * u;
    const int c = t / (g.r * g.s), rs = t - c * g.r * g.s, r = rs / g.s;
    offset[u] = t < g.taps ? (c * g.rows_in + r) * g.cols_ld + (rs - r * g.s) : 0;
  }
  float acc[kTapsPerLane][8];
#pragma unroll
  for (int u = 0; u < kTapsPerLane; ++u)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[u][j] = 0.0f;
  const int per_image = g.tiles_h * g.tiles_w;
  for (int tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
    const int img = tile / per_image, t = tile - img * per_image;
    const int oh0 = (t / g.tiles_w) * kTile, ow0 = (t % g.tiles_w) * kTile;
    const int ih0 = oh0 * g.stride_h - g.pad_h, iw0 = ow0 * g.stride_w - g.pad_w;
    __syncthreads();  // the previous tile's reads are done
    const float* xi = x + img * g.xs[0];
    LoadWindow(g, xi, ih0, iw0, window);
    // dy of the tile's pixels (zero past the output's edge and past K): consecutive threads read
    // consecutive columns.
    const float* dyi = dy + img * g.ys[0];
    for (int first = threadIdx.x; first < kTile * kTile * kFilters; first += kBatch * kThreads) {
      float v[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int i = first + b * kThreads;
        const int f = i / (kTile * kTile), px = i - f * kTile * kTile;
        const int oh = oh0 + px / kTile, ow = ow0 + px % kTile;
        const bool in = k0 + f < g.k && oh < g.p && ow < g.q;  // i < total: kBatch divides it
        v[b] = in ? dyi[(k0 + f) * g.ys[1] + oh * g.ys[2] + ow * g.ys[3]] : 0.0f;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int i = first + b * kThreads;
        const int f = i / (kTile * kTile), px = i - f * kTile * kTile;
        dys[px * kDyPitch + f] = v[b];
      }
    }
    __syncthreads();
    for (int px = 0; px < kTile * kTile; ++px) {
      const int base = (px / kTile) * g.stride_h * g.cols_ld + (px % kTile) * g.stride_w;
      const float4 d0 = *reinterpret_cast<const float4*>(dys + px * kDyPitch + fg * 8);
      const float4 d1 = *reinterpret_cast<const float4*>(dys + px * kDyPitch + fg * 8 + 4);
      const float d[8] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
#pragma unroll
      for (int u = 0; u < kTapsPerLane; ++u) {
        const float a = window[base + offset[u]];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[u][j] = fmaf(a, d[j], acc[u][j]);
      }
    }
  }
  float* out =
      partial + (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kFilters * g.taps;
#pragma unroll
  for (int u = 0; u < kTapsPerLane; ++u) {
    const int t = lane + 32 * u;
    if (t >= g.taps) break;
#pragma unroll
    for (int j = 0; j < 8; ++j) out[(fg * 8 + j) * g.taps + t] = acc[u][j];
  }
}

// dw[f][c][r][s] = alpha * (the blocks' partial sums, added in block order) + beta * dw; a true
// convolution's taps are reversed.
__global__ void FinishFilterGradientF32Kernel(const __grid_constant__ Geometry g,
                                              const float* __restrict__ partial, int blocks,
                                              float* __restrict__ dw) {
  const int64_t count = int64_t{g.k} * g.taps;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int f = static_cast<int>(i / g.taps), t = static_cast<int>(i - int64_t{f} * g.taps);
    const int chunk = f / kFilters, fc = f - chunk * kFilters;
    const float* p = partial + (static_cast<int64_t>(chunk) * blocks * kFilters + fc) * g.taps + t;
    double sum = 0;
    for (int b = 0; b < blocks; ++b) sum += p[static_cast<int64_t>(b) * kFilters * g.taps];
    const int c = t / (g.r * g.s), rs = t - c * g.r * g.s;
    int r = rs / g.s, s = rs - r * g.s;
    if (g.flip) r = g.r - 1 - r, s = g.s - 1 - s;
    float* at = dw + f * g.ws[0] + c * g.ws[1] + r * g.ws[2] + s * g.ws[3];
    const float v = g.alpha * static_cast<float>(sum);
    *at = g.beta == 0.0f ? v : v + g.beta * *at;
  }
}

// Blocks per filter chunk of the gradient: two per SM in all, at most one per tile.
int GradientBlocks(const Plan& plan, int multiprocessors) {
  const int chunks = (plan.g.k + kFilters - 1) / kFilters;
  return std::max(1, std::min(plan.g.tiles, 2 * multiprocessors / chunks));
}

bool GradientFits(const Plan& plan) {
  return plan.ok && plan.g.taps <= 32 * kMaxTapsPerLane &&
         GradientSharedBytes(plan.g) <= kMaxSharedBytes;
}

template <int kTapsPerLane>
int LaunchGradient(const Plan& plan, const SmallChannelsLaunch& l, int blocks, int chunks,
                   cudaStream_t stream) {
  auto kernel = FilterGradientF32Kernel<kTapsPerLane>;
  const int bytes = GradientSharedBytes(plan.g);
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  kernel<<<dim3(blocks, chunks), kThreads, bytes, stream>>>(
      plan.g, static_cast<const float*>(l.x), static_cast<const float*>(l.y), l.partial);
  return cudaGetLastError();
}

}  // namespace

bool SmallChannelsF32GradientServes(const dnn::ConvProblem& p) { return GradientFits(MakePlan(p)); }

int64_t SmallChannelsF32GradientBytes(const dnn::ConvProblem& p, int multiprocessors) {
  const Plan plan = MakePlan(p);
  if (!GradientFits(plan)) return 0;
  const int64_t chunks = (plan.g.k + kFilters - 1) / kFilters;
  return chunks * GradientBlocks(plan, multiprocessors) * kFilters * plan.g.taps *
         static_cast<int64_t>(sizeof(float));
}

int LaunchSmallChannelsF32Gradient(const SmallChannelsLaunch& l, void* stream) {
  Plan plan = MakePlan(l.problem);
  if (!GradientFits(plan) || l.partial == nullptr) return cudaErrorInvalidValue;
  plan.g.alpha = l.alpha;
  plan.g.beta = l.beta;
  const int chunks = (plan.g.k + kFilters - 1) / kFilters;
  if (chunks > 65535) return cudaErrorInvalidConfiguration;
  const int blocks = GradientBlocks(plan, l.multiprocessors);
  auto s = static_cast<cudaStream_t>(stream);
  const int lanes = (plan.g.taps + 31) / 32;
  int e;
  if (lanes <= 2) {
    e = LaunchGradient<2>(plan, l, blocks, chunks, s);
  } else if (lanes <= 4) {
    e = LaunchGradient<4>(plan, l, blocks, chunks, s);
  } else if (lanes <= 6) {
    e = LaunchGradient<6>(plan, l, blocks, chunks, s);
  } else if (lanes <= 8) {
    e = LaunchGradient<8>(plan, l, blocks, chunks, s);
  } else {
    e = LaunchGradient<kMaxTapsPerLane>(plan, l, blocks, chunks, s);
  }
  if (e != 0) return e;
  const int64_t count = int64_t{plan.g.k} * plan.g.taps;
  const int finish_blocks = static_cast<int>(std::min<int64_t>((count + 255) / 256, 4096));
  FinishFilterGradientF32Kernel<<<finish_blocks, 256, 0, s>>>(plan.g, l.partial, blocks,
                                                              static_cast<float*>(l.dw));
  return cudaGetLastError();
}

bool SmallChannelsF32Serves(const dnn::ConvProblem& p) { return MakePlan(p).ok; }

int LaunchSmallChannelsForwardF32(const SmallChannelsLaunch& l, void* stream) {
  Plan plan = MakePlan(l.problem);
  if (!plan.ok) return cudaErrorInvalidValue;
  plan.g.alpha = l.alpha;
  plan.g.beta = l.beta;
  plan.g.epilogue = l.epilogue;
  cudaError_t e =
      cudaFuncSetAttribute(SmallChannelsForwardF32Kernel,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, plan.shared_bytes);
  if (e != cudaSuccess) return e;
  int per_sm = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, SmallChannelsForwardF32Kernel,
                                                    kThreads, plan.shared_bytes);
  if (e != cudaSuccess) return e;
  const int chunks = (plan.g.k + kFilters - 1) / kFilters;
  // Enough blocks to fill every SM, each walking several tiles so that its filter staging pays
  // off; no more blocks than tiles.
  const int blocks =
      std::max(1, std::min(plan.g.tiles, std::max(1, per_sm) * l.multiprocessors / chunks));
  if (chunks > 65535) return cudaErrorInvalidConfiguration;
  SmallChannelsForwardF32Kernel<<<dim3(blocks, chunks), kThreads, plan.shared_bytes,
                                  static_cast<cudaStream_t>(stream)>>>(
      plan.g, static_cast<const float*>(l.x), static_cast<const float*>(l.w),
      static_cast<float*>(l.y));
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace kiln
