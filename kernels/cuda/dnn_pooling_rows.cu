// 2-d pooling over row tiles of one (n, c) plane, for inputs whose rows are contiguous (NCHW and
// its sub-regions). A block copies the input rows its tile needs into shared memory with
// coalesced loads, each element once, and works from there: the general kernels
// (dnn_pooling.cu) read every input window straight from global memory, which makes them bound by
// load instructions rather than by bytes.
//  - Forward: a tile is a run of output rows; their windows' input rows are staged.
//  - Backward: a tile is a run of input rows it owns. The block stages the input rows and the dy
//    rows of every output covering them, finds each output's winner (max: the first element of
//    the window equal to y, in (h, w) order) or its scaled gradient (average), then each owned
//    input element gathers from the outputs covering it. Outputs on a tile's border are
//    evaluated by both tiles, identically, so there are no atomics and the result is the same on
//    every run.
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/pooling_rows.h"
#include "kernels/cuda/storage_access.cuh"
#include "kernels/dnn/pooling_math.h"

namespace kiln {
namespace cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kLoadsInFlight = 4;
constexpr size_t kTileBytes = 32 * 1024;  // leaves room for 6-7 blocks per SM

struct RowsGeometry {
  dnn::PoolAxisOf<int> h, w;
  FastDiv channels, in_w, out_w, stride_h, stride_w;
  int rows_per_tile;  // output rows (forward) or owned input rows (backward)
  int mode;
  bool x_rows_packed;  // x's rows are back to back, so staged rows are one contiguous run
  int64_t x[4], y[4], dy[4], dx[4];  // strides of N, C, H, W
  float alpha, beta;
};

RowsGeometry GeometryOf(const PoolingCall& c, int rows_per_tile) {
  RowsGeometry g;
  g.h = {static_cast<int>(c.in[1]), static_cast<int>(c.out[1]), static_cast<int>(c.window[1]),
         static_cast<int>(c.stride[1]), static_cast<int>(c.pad[1])};
  g.w = {static_cast<int>(c.in[2]), static_cast<int>(c.out[2]), static_cast<int>(c.window[2]),
         static_cast<int>(c.stride[2]), static_cast<int>(c.pad[2])};
  g.channels = MakeFastDiv(static_cast<uint32_t>(c.c));
  g.in_w = MakeFastDiv(static_cast<uint32_t>(c.in[2]));
  g.out_w = MakeFastDiv(static_cast<uint32_t>(c.out[2]));
  g.stride_h = MakeFastDiv(static_cast<uint32_t>(c.stride[1]));
  g.stride_w = MakeFastDiv(static_cast<uint32_t>(c.stride[2]));
  g.rows_per_tile = rows_per_tile;
  g.mode = c.mode;
  g.x_rows_packed = c.x_strides[3] == c.in[2];
  const int dims[4] = {0, 1, 3, 4};  // skip D
  for (int k = 0; k < 4; ++k) {
    g.x[k] = c.x_strides[dims[k]];
    g.y[k] = c.y_strides[dims[k]];
    g.dy[k] = c.dy_strides[dims[k]];
    g.dx[k] = c.dx_strides[dims[k]];
  }
  g.alpha = c.alpha;
  g.beta = c.beta;
  return g;
}

// The input rows [*r0, *r1) that the windows of output rows [oh0, oh1) touch.
__device__ __forceinline__ void InputRowsOf(const dnn::PoolAxisOf<int>& h, int oh0, int oh1,
                                            int* r0, int* r1) {
  const int lo = oh0 * h.stride - h.pad;
  const int hi = (oh1 - 1) * h.stride - h.pad + h.window;
  *r0 = lo > 0 ? lo : 0;
  *r1 = hi < h.in ? hi : h.in;
}

// Copies input rows [r0, r1) of a plane (rows contiguous, `row_stride` apart) into `tile`,
// in_w floats per row.
template <typename T>
__device__ __forceinline__ void StageRows(const RowsGeometry& g, const T* plane, int64_t row_stride,
                                          int r0, int r1, float* tile) {
  const int count = (r1 - r0) * g.w.in;
  for (int base = threadIdx.x; base < count; base += kThreads * kLoadsInFlight) {
    float v[kLoadsInFlight];
#pragma unroll
    for (int k = 0; k < kLoadsInFlight; ++k) {
      const int i = base + k * kThreads;
      if (i < count) {
        if (g.x_rows_packed) {
          v[k] = ToFloat(plane[r0 * row_stride + i]);
        } else {
          const int row = static_cast<int>(Div(static_cast<uint32_t>(i), g.in_w));
          v[k] = ToFloat(plane[(r0 + row) * row_stride + (i - row * g.w.in)]);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kLoadsInFlight; ++k) {
      const int i = base + k * kThreads;
      if (i < count) tile[i] = v[k];
    }
  }
}

__device__ __forceinline__ void PlaneOf(const RowsGeometry& g, int* n, int* c) {
  const uint32_t p = blockIdx.x;
  *n = static_cast<int>(Div(p, g.channels));
  *c = static_cast<int>(p - static_cast<uint32_t>(*n) * g.channels.divisor);
}

__device__ __forceinline__ int64_t PlaneOffset(const int64_t* strides, int n, int c) {
  return n * strides[0] + c * strides[1];
}

// kWin, kStride > 0: a square window and stride known at compile time, no padding, and every
// window inside the input, so the window loop unrolls with no clipping (the common 3x3/2 and
// 2x2/2 poolings; the generic loop costs about three times the instructions, and this kernel is
// bound by instructions once its loads are coalesced).
template <typename T, bool kMax, int kWin, int kStride>
__global__ void __launch_bounds__(kThreads)
    PoolRowsForward(const __grid_constant__ RowsGeometry g, const T* __restrict__ x,
                    T* __restrict__ y) {
  extern __shared__ float tile[];
  int n, c;
  PlaneOf(g, &n, &c);
  const int oh0 = blockIdx.y * g.rows_per_tile;
  const int oh1 = oh0 + g.rows_per_tile < g.h.out ? oh0 + g.rows_per_tile : g.h.out;
  int r0, r1;
  InputRowsOf(g.h, oh0, oh1, &r0, &r1);
  StageRows(g, x + PlaneOffset(g.x, n, c), g.x[2], r0, r1, tile);
  __syncthreads();
  T* out_plane = y + PlaneOffset(g.y, n, c);
  const int outputs = (oh1 - oh0) * g.w.out;
  for (int o = threadIdx.x; o < outputs; o += kThreads) {
    const int row = static_cast<int>(Div(static_cast<uint32_t>(o), g.out_w));
    const int ow = o - row * g.w.out, oh = oh0 + row;
    float r = kMax ? -FLT_MAX : 0.0f;
    if constexpr (kWin > 0) {
      const float* corner = tile + (oh * kStride - r0) * g.w.in + ow * kStride;
#pragma unroll
      for (int h = 0; h < kWin; ++h) {
#pragma unroll
        for (int w = 0; w < kWin; ++w) {
          const float v = corner[h * g.w.in + w];
          r = kMax ? (v > r ? v : r) : r + v;
        }
      }
      if (!kMax) r /= static_cast<float>(kWin * kWin);
    } else {
      int hb, he, hp, wb, we, wp;
      dnn::PoolWindow(g.h, oh, &hb, &he, &hp);
      dnn::PoolWindow(g.w, ow, &wb, &we, &wp);
      for (int h = hb; h < he; ++h) {
        const float* line = tile + (h - r0) * g.w.in;
        for (int w = wb; w < we; ++w) r = kMax ? (line[w] > r ? line[w] : r) : r + line[w];
      }
      if (!kMax) r /= static_cast<float>(g.mode == 1 ? hp * wp : (he - hb) * (we - wb));
    }
    T* dst = out_plane + oh * g.y[2] + ow * g.y[3];
    *dst = FromFloat<T>(Blend(g.alpha, r, g.beta, [&] { return ToFloat(*dst); }));
  }
}

// The outputs covering input i along one axis, packed as first | last << 16 (dnn::
// PoolCoveringOutputs with cheap divisions; the launcher keeps output extents below 2^15).
__device__ __forceinline__ uint32_t CoveringRange(const dnn::PoolAxisOf<int>& a,
                                                  const FastDiv& stride, int i) {
  const int lo = i + a.pad - a.window + 1;
  const int first = lo <= 0 ? 0 : static_cast<int>(Div(lo + a.stride - 1, stride));
  int last = static_cast<int>(Div(i + a.pad, stride));
  last = last < a.out - 1 ? last : a.out - 1;
  return static_cast<uint32_t>(first) | static_cast<uint32_t>(last) << 16;
}

// Shared memory of a backward tile: the staged input rows (max only); per covering output its
// gradient share (dy, or dy / divisor) and, for max, the plane index of its winner; and the
// covering-output ranges of every input column and owned row.
// kWin, kStride > 0: as for the forward (square, unpadded, every window inside): the window scan
// and the covering ranges unroll with compile-time divisions.
template <typename T, int kWin, int kStride>
__global__ void __launch_bounds__(kThreads)
    PoolRowsBackward(const __grid_constant__ RowsGeometry g, int max_input_rows,
                     int max_output_rows, const T* __restrict__ x, const T* __restrict__ y,
                     const T* __restrict__ dy, T* __restrict__ dx) {
  extern __shared__ float smem[];
  int n, c;
  PlaneOf(g, &n, &c);
  const int ih0 = blockIdx.y * g.rows_per_tile;
  const int ih1 = ih0 + g.rows_per_tile < g.h.in ? ih0 + g.rows_per_tile : g.h.in;
  const int first_oh = static_cast<int>(CoveringRange(g.h, g.stride_h, ih0) & 0xffffu);
  const int last_oh = static_cast<int>(CoveringRange(g.h, g.stride_h, ih1 - 1) >> 16);
  const int out_rows = last_oh >= first_oh ? last_oh - first_oh + 1 : 0;
  float* xs = smem;
  float* share = smem + (g.mode == 0 ? max_input_rows * g.w.in : 0);
  int* winner = reinterpret_cast<int*>(share + max_output_rows * g.w.out);
  uint32_t* col_range = reinterpret_cast<uint32_t*>(winner + max_output_rows * g.w.out);
  uint32_t* row_range = col_range + g.w.in;
  for (int iw = threadIdx.x; iw < g.w.in; iw += kThreads) {
    col_range[iw] = CoveringRange(g.w, g.stride_w, iw);
  }
  for (int r = threadIdx.x; r < ih1 - ih0; r += kThreads) {
    row_range[r] = CoveringRange(g.h, g.stride_h, ih0 + r);
  }
  int r0 = 0, r1 = 0;
  if (out_rows > 0 && g.mode == 0) {
    InputRowsOf(g.h, first_oh, last_oh + 1, &r0, &r1);
    StageRows(g, x + PlaneOffset(g.x, n, c), g.x[2], r0, r1, xs);
  }
  __syncthreads();
  const T* dy_plane = dy + PlaneOffset(g.dy, n, c);
  const T* y_plane = y + PlaneOffset(g.y, n, c);
  const int outputs = out_rows * g.w.out;
  for (int o = threadIdx.x; o < outputs; o += kThreads) {
    const int row = static_cast<int>(Div(static_cast<uint32_t>(o), g.out_w));
    const int ow = o - row * g.w.out, oh = first_oh + row;
    const float grad = ToFloat(dy_plane[oh * g.dy[2] + ow * g.dy[3]]);
    int hb, he, hp, wb, we, wp;
    dnn::PoolWindow(g.h, oh, &hb, &he, &hp);
    dnn::PoolWindow(g.w, ow, &wb, &we, &wp);
    if (g.mode != 0) {
      share[o] = grad / static_cast<float>(g.mode == 1 ? hp * wp : (he - hb) * (we - wb));
      continue;
    }
    const float best = ToFloat(y_plane[oh * g.y[2] + ow * g.y[3]]);
    int win = -1;
    if constexpr (kWin > 0) {
      const float* corner = xs + (hb - r0) * g.w.in + wb;
#pragma unroll
      for (int k = kWin * kWin - 1; k >= 0; --k) {  // backwards, so the first match stays
        if (corner[(k / kWin) * g.w.in + k % kWin] == best) {
          win = (hb + k / kWin) * g.w.in + wb + k % kWin;
        }
      }
    }
    for (int h = hb; h < he && win < 0 && kWin == 0; ++h) {
      const float* line = xs + (h - r0) * g.w.in;
      for (int w = wb; w < we; ++w) {
        if (line[w] == best) {
          win = h * g.w.in + w;
          break;
        }
      }
    }
    share[o] = grad;
    winner[o] = win;
  }
  __syncthreads();
  T* dx_plane = dx + PlaneOffset(g.dx, n, c);
  const int inputs = (ih1 - ih0) * g.w.in;
  for (int i = threadIdx.x; i < inputs; i += kThreads) {
    const int row = static_cast<int>(Div(static_cast<uint32_t>(i), g.in_w));
    const int iw = i - row * g.w.in, ih = ih0 + row;
    const int self = ih * g.w.in + iw;
    float acc = 0;
    if constexpr (kWin > 0) {
      // At most ceil(kWin / kStride) covering outputs per axis.
      constexpr int kCover = (kWin + kStride - 1) / kStride;
      const int fh = ih < kWin ? 0 : (ih - kWin) / kStride + 1;
      const int fw = iw < kWin ? 0 : (iw - kWin) / kStride + 1;
      const int lh = min(ih / kStride, g.h.out - 1), lw = min(iw / kStride, g.w.out - 1);
#pragma unroll
      for (int a = 0; a < kCover; ++a) {
        const int base = (fh + a - first_oh) * g.w.out;
#pragma unroll
        for (int b = 0; b < kCover; ++b) {
          if (fh + a <= lh && fw + b <= lw && (g.mode != 0 || winner[base + fw + b] == self)) {
            acc += share[base + fw + b];
          }
        }
      }
    } else {
      const uint32_t rows = row_range[row], cols = col_range[iw];
      const int fw = static_cast<int>(cols & 0xffffu), lw = static_cast<int>(cols >> 16);
      for (int oh = static_cast<int>(rows & 0xffffu); oh <= static_cast<int>(rows >> 16); ++oh) {
        const int base = (oh - first_oh) * g.w.out;
        for (int ow = fw; ow <= lw; ++ow) {
          if (g.mode != 0 || winner[base + ow] == self) acc += share[base + ow];
        }
      }
    }
    T* dst = dx_plane + ih * g.dx[2] + iw * g.dx[3];
    *dst = FromFloat<T>(Blend(g.alpha, acc, g.beta, [&] { return ToFloat(*dst); }));
  }
}

bool FitsInt(int64_t v) { return v >= 0 && v < (int64_t{1} << 31); }

// Shared bytes of a tile of `rows` (output rows forward, owned input rows backward).
size_t TileBytes(const PoolingCall& c, bool forward, int64_t rows, int64_t* input_rows,
                 int64_t* output_rows) {
  const int64_t wh = c.window[1], sh = c.stride[1];
  if (forward) {
    *output_rows = rows;
    *input_rows = std::min((rows - 1) * sh + wh, c.in[1]);
    return static_cast<size_t>(*input_rows * c.in[2]) * sizeof(float);
  }
  // Owned input rows are covered by at most (rows + wh - 1) / sh + 1 output rows, whose windows
  // span at most that many rows times the stride, plus the window.
  *output_rows = std::min((rows + wh - 2) / sh + 1, c.out[1]);
  *input_rows = std::min((*output_rows - 1) * sh + wh, c.in[1]);
  const int64_t staged = c.mode == 0 ? *input_rows * c.in[2] : 0;
  return static_cast<size_t>(staged + *output_rows * c.out[2] * 2 + c.in[2] + rows) * sizeof(float);
}

// Whether every window of axis a (1 = H, 2 = W) is `win` wide at stride `stride`, unpadded and
// inside the input.
bool FixedWindow(const PoolingCall& c, int a, int64_t win, int64_t stride) {
  return c.window[a] == win && c.stride[a] == stride && c.pad[a] == 0 &&
         (c.out[a] - 1) * stride + win <= c.in[a];
}

template <typename T, bool kMax>
void LaunchForward(const PoolingCall& c, const RowsGeometry& g, dim3 grid, size_t smem,
                   cudaStream_t s) {
  const T* x = static_cast<const T*>(c.x);
  T* y = static_cast<T*>(c.result);
  auto fixed = [&](int64_t win, int64_t stride) {
    return FixedWindow(c, 1, win, stride) && FixedWindow(c, 2, win, stride);
  };
  if (fixed(3, 2)) {
    PoolRowsForward<T, kMax, 3, 2><<<grid, kThreads, smem, s>>>(g, x, y);
  } else if (fixed(2, 2)) {
    PoolRowsForward<T, kMax, 2, 2><<<grid, kThreads, smem, s>>>(g, x, y);
  } else if (fixed(3, 1)) {
    PoolRowsForward<T, kMax, 3, 1><<<grid, kThreads, smem, s>>>(g, x, y);
  } else {
    PoolRowsForward<T, kMax, 0, 0><<<grid, kThreads, smem, s>>>(g, x, y);
  }
}

template <typename T>
void LaunchBackward(const PoolingCall& c, const RowsGeometry& g, dim3 grid, size_t smem,
                    int input_rows, int output_rows, cudaStream_t s) {
  const T* x = static_cast<const T*>(c.x);
  const T* y = static_cast<const T*>(c.y);
  const T* dy = static_cast<const T*>(c.dy);
  T* dx = static_cast<T*>(c.result);
  auto fixed = [&](int64_t win, int64_t stride) {
    return FixedWindow(c, 1, win, stride) && FixedWindow(c, 2, win, stride);
  };
  if (fixed(3, 2)) {
    PoolRowsBackward<T, 3, 2>
        <<<grid, kThreads, smem, s>>>(g, input_rows, output_rows, x, y, dy, dx);
  } else if (fixed(2, 2)) {
    PoolRowsBackward<T, 2, 2>
        <<<grid, kThreads, smem, s>>>(g, input_rows, output_rows, x, y, dy, dx);
  } else if (fixed(3, 1)) {
    PoolRowsBackward<T, 3, 1>
        <<<grid, kThreads, smem, s>>>(g, input_rows, output_rows, x, y, dy, dx);
  } else {
    PoolRowsBackward<T, 0, 0>
        <<<grid, kThreads, smem, s>>>(g, input_rows, output_rows, x, y, dy, dx);
  }
}

template <typename T>
int LaunchTyped(const PoolingCall& c, bool forward, int rows, int64_t input_rows,
                int64_t output_rows, size_t smem, cudaStream_t s) {
  const RowsGeometry g = GeometryOf(c, rows);
  const int64_t extent = forward ? c.out[1] : c.in[1];
  const dim3 grid(static_cast<unsigned>(c.n * c.c),
                  static_cast<unsigned>((extent + rows - 1) / rows));
  if (forward && c.mode == 0) {
    LaunchForward<T, true>(c, g, grid, smem, s);
  } else if (forward) {
    LaunchForward<T, false>(c, g, grid, smem, s);
  } else {
    LaunchBackward<T>(c, g, grid, smem, static_cast<int>(input_rows), static_cast<int>(output_rows),
                      s);
  }
  return LastError();
}

}  // namespace

int LaunchPoolingRows(const PoolingCall& c, bool forward, void* stream) {
  // 2-d only, x's rows contiguous, and every in-plane offset and the grid within 32 bits.
  constexpr int kNo = kPoolingRowsNotApplicable;
  if (c.in[0] != 1 || c.out[0] != 1 || c.window[0] != 1 || c.x_strides[4] != 1) return kNo;
  if (c.n * c.c >= (int64_t{1} << 31) || c.out[1] >= (1 << 15) || c.out[2] >= (1 << 15)) return kNo;
  const int64_t* strides[4] = {c.x_strides, c.y_strides, c.dy_strides, c.dx_strides};
  for (const int64_t* st : strides) {
    const int64_t span =
        (std::max(c.in[1], c.out[1]) - 1) * st[3] + (std::max(c.in[2], c.out[2]) - 1) * st[4];
    if (!FitsInt(st[3]) || !FitsInt(st[4]) || !FitsInt(span)) return kNo;
  }
  // The most rows whose tile fits the budget (at least one, or this path does not apply).
  const int64_t extent = forward ? c.out[1] : c.in[1];
  int64_t rows = extent, input_rows = 0, output_rows = 0;
  while (rows > 1 && TileBytes(c, forward, rows, &input_rows, &output_rows) > kTileBytes) {
    rows = rows * 3 / 4;
  }
  const size_t smem = TileBytes(c, forward, rows, &input_rows, &output_rows);
  if (smem > kTileBytes || (extent + rows - 1) / rows > 65535) return kNo;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int r = static_cast<int>(rows);
  switch (c.type) {
    case Storage::kF16:
      return LaunchTyped<__half>(c, forward, r, input_rows, output_rows, smem, s);
    case Storage::kBF16:
      return LaunchTyped<__nv_bfloat16>(c, forward, r, input_rows, output_rows, smem, s);
    default:
      return LaunchTyped<float>(c, forward, r, input_rows, output_rows, smem, s);
  }
}

}  // namespace cuda
}  // namespace kiln
