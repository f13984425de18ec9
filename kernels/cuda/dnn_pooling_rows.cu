// 2-d pooling over row tiles of one (n, c) plane, for inputs whose rows are contiguous (NCHW and
// its sub-regions). A block copies the input rows its tile needs into shared memory with
// coalesced loads, each element once, and works from there: the general kernels
// (dnn_pooling.cu) read every input window straight from global memory, which makes them bound by
// load instructions rather than by bytes.
//  - Forward: a tile is a run of output rows; their windows' input rows are staged.
//  - Backward: a tile is a run of input rows it owns. The block stages dy (and for max y and the
//    input rows) of every output covering them and scatters each output's gradient into a
//    shared accumulator of the owned rows, in phases of outputs whose windows are disjoint.
//    Outputs on a tile's border are evaluated by both tiles, identically, so there are no
//    atomics and the result is the same on every run.
#include <algorithm>
#include <cfloat>
#include <climits>

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
  // ceil(window / stride) per axis: outputs this many rows (columns) apart have disjoint windows.
  int rows_apart, cols_apart;
  int mode;
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
  g.rows_apart = static_cast<int>((c.window[1] + c.stride[1] - 1) / c.stride[1]);
  g.cols_apart = static_cast<int>((c.window[2] + c.stride[2] - 1) / c.stride[2]);
  g.mode = c.mode;
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

// Extra floats per staged region: a region starts up to 3 floats in, so that vector stores into
// it are 16-byte aligned whatever the source's alignment (StageRun).
constexpr int kStageSlack = 4;

// Floats reserved for a region of `count` staged elements: with the slack, rounded to whole
// float4s so the next region starts 16-byte aligned too.
__host__ __device__ constexpr int64_t RegionFloats(int64_t count) {
  return (count + kStageSlack + 3) / 4 * 4;
}

// Starts a copy of 16 bytes from global `src` to shared `dst` (both 16-byte aligned) that
// completes at WaitForStaging: no registers held, and every copy of a block in flight at once.
__device__ __forceinline__ void CopyAsync16(float* dst, const float* src) {
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(src) : "memory");
}

// Waits for this thread's CopyAsync16s; a __syncthreads must follow before other threads read.
__device__ __forceinline__ void WaitForStaging() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// Copies `count` consecutive elements from src into the returned run of `region` (a 16-byte
// aligned block of RegionFloats(count)), with 16-byte transfers for the aligned body: a quarter
// of the instructions of element-wise staging and four times the bytes in flight per transfer.
// The run starts a few floats into the region so that the body's destinations are aligned. f32
// goes straight to shared memory (cp.async, complete after WaitForStaging); narrower types pass
// through registers to be widened to f32.
template <typename T>
__device__ __forceinline__ float* StageRun(const T* src, int count, float* region) {
  constexpr int kVec = 16 / sizeof(T);
  const int misaligned = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15) / sizeof(T);
  const int head = min(count, (kVec - misaligned) % kVec);
  float* run = region + (4 - head % 4) % 4;
  if (static_cast<int>(threadIdx.x) < head) run[threadIdx.x] = ToFloat(src[threadIdx.x]);
  const int vectors = (count - head) / kVec;
  const T* body = src + head;
  float* out = run + head;
  if constexpr (sizeof(T) == 4) {
    for (int j = threadIdx.x; j < vectors; j += kThreads) CopyAsync16(out + j * 4, body + j * 4);
  } else {
    for (int base = threadIdx.x; base < vectors; base += kThreads * kLoadsInFlight) {
      float v[kLoadsInFlight][kVec];
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        const int j = base + k * kThreads;
        if (j < vectors) LoadVector(body + j * kVec, v[k]);
      }
#pragma unroll
      for (int k = 0; k < kLoadsInFlight; ++k) {
        const int j = base + k * kThreads;
        if (j < vectors) {
#pragma unroll
          for (int q = 0; q < kVec; q += 4) {
            *reinterpret_cast<float4*>(out + j * kVec + q) =
                make_float4(v[k][q], v[k][q + 1], v[k][q + 2], v[k][q + 3]);
          }
        }
      }
    }
  }
  const int done = head + vectors * kVec;
  if (static_cast<int>(threadIdx.x) < count - done) {
    run[done + threadIdx.x] = ToFloat(src[done + threadIdx.x]);
  }
  return run;
}

// Rows [r0, r1) of a plane, `width` elements each at (row_stride, col_stride), staged into
// `region` (RegionFloats of their count); returns where they start. Packed rows are one run;
// otherwise element-wise, a row division per element.
template <typename T>
__device__ __forceinline__ float* StageRows(const T* plane, int64_t row_stride, int64_t col_stride,
                                            const FastDiv& width, int r0, int r1, float* region) {
  const int w = static_cast<int>(width.divisor);
  const int count = (r1 - r0) * w;
  if (row_stride == w && col_stride == 1) return StageRun(plane + r0 * row_stride, count, region);
  for (int base = threadIdx.x; base < count; base += kThreads * kLoadsInFlight) {
    float v[kLoadsInFlight];
#pragma unroll
    for (int k = 0; k < kLoadsInFlight; ++k) {
      const int i = base + k * kThreads;
      if (i < count) {
        const int row = static_cast<int>(Div(static_cast<uint32_t>(i), width));
        v[k] = ToFloat(plane[(r0 + row) * row_stride + (i - row * w) * col_stride]);
      }
    }
#pragma unroll
    for (int k = 0; k < kLoadsInFlight; ++k) {
      const int i = base + k * kThreads;
      if (i < count) region[i] = v[k];
    }
  }
  return region;
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
  extern __shared__ float4 smem[];
  int n, c;
  PlaneOf(g, &n, &c);
  const int oh0 = blockIdx.y * g.rows_per_tile;
  const int oh1 = oh0 + g.rows_per_tile < g.h.out ? oh0 + g.rows_per_tile : g.h.out;
  int r0, r1;
  InputRowsOf(g.h, oh0, oh1, &r0, &r1);
  const float* tile = StageRows(x + PlaneOffset(g.x, n, c), g.x[2], g.x[3], g.in_w, r0, r1,
                                reinterpret_cast<float*>(smem));
  WaitForStaging();
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

// A backward tile owns input rows [ih0, ih1) and evaluates every output covering them. Shared
// memory holds, each a region of RegionFloats: the owned rows' gradient accumulator; the covering
// outputs' dy; and for max also their y and the input rows their windows read. Each output adds
// its gradient share to its window (average) or to its winner (max: the first element of the
// window equal to y, in (h, w) order) in the accumulator, keeping only owned rows. Outputs are
// taken in phases: outputs ceil(window / stride) rows and columns apart have disjoint windows,
// so within a phase no two threads touch the same element, and the phases run in a fixed order:
// deterministic, with no atomics and no per-input search of the outputs.
// kWin, kStride > 0: as for the forward (square, unpadded, every window inside): the window loops
// unroll and the phase arithmetic divides by constants.
template <typename T, int kWin, int kStride>
__global__ void __launch_bounds__(kThreads)
    PoolRowsBackward(const __grid_constant__ RowsGeometry g, int max_output_rows,
                     const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ dy,
                     T* __restrict__ dx) {
  extern __shared__ float4 smem[];
  int n, c;
  PlaneOf(g, &n, &c);
  const int ih0 = blockIdx.y * g.rows_per_tile;
  const int ih1 = ih0 + g.rows_per_tile < g.h.in ? ih0 + g.rows_per_tile : g.h.in;
  const int first_oh = static_cast<int>(CoveringRange(g.h, g.stride_h, ih0) & 0xffffu);
  const int last_oh = static_cast<int>(CoveringRange(g.h, g.stride_h, ih1 - 1) >> 16);
  const int out_rows = last_oh >= first_oh ? last_oh - first_oh + 1 : 0;
  const int owned = (ih1 - ih0) * g.w.in;
  const bool max = g.mode == 0;

  float* acc = reinterpret_cast<float*>(smem);
  float* dy_region = acc + RegionFloats(static_cast<int64_t>(g.rows_per_tile) * g.w.in);
  float* y_region = dy_region + RegionFloats(static_cast<int64_t>(max_output_rows) * g.w.out);
  float* x_region = y_region + RegionFloats(static_cast<int64_t>(max_output_rows) * g.w.out);
  const float* grads = dy_region;
  const float* ys = y_region;
  const float* xs = x_region;
  int r0 = 0, r1 = 0;
  if (out_rows > 0) {
    grads = StageRows(dy + PlaneOffset(g.dy, n, c), g.dy[2], g.dy[3], g.out_w, first_oh,
                      last_oh + 1, dy_region);
    if (max) {
      ys = StageRows(y + PlaneOffset(g.y, n, c), g.y[2], g.y[3], g.out_w, first_oh, last_oh + 1,
                     y_region);
      InputRowsOf(g.h, first_oh, last_oh + 1, &r0, &r1);
      xs = StageRows(x + PlaneOffset(g.x, n, c), g.x[2], g.x[3], g.in_w, r0, r1, x_region);
    }
  }
  for (int i = threadIdx.x; i < owned; i += kThreads) acc[i] = 0.0f;
  WaitForStaging();
  __syncthreads();

  // Phases: output rows first_oh + ph + k * rows_apart, columns pw + k * cols_apart.
  const int rows_apart = kWin > 0 ? (kWin + kStride - 1) / kStride : g.rows_apart;
  const int cols_apart = kWin > 0 ? (kWin + kStride - 1) / kStride : g.cols_apart;
  const int row_phases = out_rows < rows_apart ? out_rows : rows_apart;
  const int col_phases = g.w.out < cols_apart ? g.w.out : cols_apart;
  const int to_owned = (r0 - ih0) * g.w.in;  // staged-row index to accumulator index
  for (int ph = 0; ph < row_phases; ++ph) {
    for (int pw = 0; pw < col_phases; ++pw) {
      const int phase_rows = (out_rows - 1 - ph) / rows_apart + 1;
      const int phase_cols = (g.w.out - 1 - pw) / cols_apart + 1;
      for (int k = threadIdx.x; k < phase_rows * phase_cols; k += kThreads) {
        const int pr = k / phase_cols;
        const int oh = first_oh + ph + pr * rows_apart;
        const int ow = pw + (k - pr * phase_cols) * cols_apart;
        const int o = (oh - first_oh) * g.w.out + ow;
        if (max) {
          const float best = ys[o];
          int win = -1;  // index into the staged rows
          if constexpr (kWin > 0) {
            const int corner = (oh * kStride - r0) * g.w.in + ow * kStride;
#pragma unroll
            for (int e = kWin * kWin - 1; e >= 0; --e) {  // backwards, so the first match stays
              const int at = corner + (e / kWin) * g.w.in + e % kWin;
              if (xs[at] == best) win = at;
            }
          } else {
            int hb, he, hp, wb, we, wp;
            dnn::PoolWindow(g.h, oh, &hb, &he, &hp);
            dnn::PoolWindow(g.w, ow, &wb, &we, &wp);
            for (int h = hb; h < he && win < 0; ++h) {
              const float* line = xs + (h - r0) * g.w.in;
              for (int w = wb; w < we; ++w) {
                if (line[w] == best) {
                  win = (h - r0) * g.w.in + w;
                  break;
                }
              }
            }
          }
          // No element equals y (NaN): the gradient goes nowhere, as in the reference.
          const int at = win + to_owned;
          if (win >= 0 && at >= 0 && at < owned) acc[at] += grads[o];
          continue;
        }
        int hb, he, hp, wb, we, wp;
        dnn::PoolWindow(g.h, oh, &hb, &he, &hp);
        dnn::PoolWindow(g.w, ow, &wb, &we, &wp);
        const float share =
            grads[o] / static_cast<float>(g.mode == 1 ? hp * wp : (he - hb) * (we - wb));
        hb = hb > ih0 ? hb : ih0;
        he = he < ih1 ? he : ih1;
        for (int h = hb; h < he; ++h) {
          float* line = acc + (h - ih0) * g.w.in;
          for (int w = wb; w < we; ++w) line[w] += share;
        }
      }
      __syncthreads();
    }
  }

  T* dx_plane = dx + PlaneOffset(g.dx, n, c);
  if (g.dx[2] == g.w.in && g.dx[3] == 1) {  // packed rows: the owned rows are one run
    T* run = dx_plane + ih0 * g.w.in;
    for (int i = threadIdx.x; i < owned; i += kThreads) {
      run[i] = FromFloat<T>(Blend(g.alpha, acc[i], g.beta, [&] { return ToFloat(run[i]); }));
    }
    return;
  }
  for (int i = threadIdx.x; i < owned; i += kThreads) {
    const int row = static_cast<int>(Div(static_cast<uint32_t>(i), g.in_w));
    const int iw = i - row * g.w.in;
    T* dst = dx_plane + (ih0 + row) * g.dx[2] + iw * g.dx[3];
    *dst = FromFloat<T>(Blend(g.alpha, acc[i], g.beta, [&] { return ToFloat(*dst); }));
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
    return static_cast<size_t>(RegionFloats(*input_rows * c.in[2])) * sizeof(float);
  }
  // Owned input rows are covered by at most (rows + wh - 1) / sh + 1 output rows, whose windows
  // span at most that many rows times the stride, plus the window.
  *output_rows = std::min((rows + wh - 2) / sh + 1, c.out[1]);
  *input_rows = std::min((*output_rows - 1) * sh + wh, c.in[1]);
  // The accumulator and dy, then for max y and x (the kernel's layout).
  int64_t floats = RegionFloats(rows * c.in[2]) + RegionFloats(*output_rows * c.out[2]);
  if (c.mode == 0) {
    floats += RegionFloats(*output_rows * c.out[2]) + RegionFloats(*input_rows * c.in[2]);
  }
  return static_cast<size_t>(floats) * sizeof(float);
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
                    int output_rows, cudaStream_t s) {
  const T* x = static_cast<const T*>(c.x);
  const T* y = static_cast<const T*>(c.y);
  const T* dy = static_cast<const T*>(c.dy);
  T* dx = static_cast<T*>(c.result);
  auto fixed = [&](int64_t win, int64_t stride) {
    return FixedWindow(c, 1, win, stride) && FixedWindow(c, 2, win, stride);
  };
  if (fixed(3, 2)) {
    PoolRowsBackward<T, 3, 2><<<grid, kThreads, smem, s>>>(g, output_rows, x, y, dy, dx);
  } else if (fixed(2, 2)) {
    PoolRowsBackward<T, 2, 2><<<grid, kThreads, smem, s>>>(g, output_rows, x, y, dy, dx);
  } else if (fixed(3, 1)) {
    PoolRowsBackward<T, 3, 1><<<grid, kThreads, smem, s>>>(g, output_rows, x, y, dy, dx);
  } else {
    PoolRowsBackward<T, 0, 0><<<grid, kThreads, smem, s>>>(g, output_rows, x, y, dy, dx);
  }
}

template <typename T>
int LaunchTyped(const PoolingCall& c, bool forward, int rows, int64_t output_rows, size_t smem,
                cudaStream_t s) {
  const RowsGeometry g = GeometryOf(c, rows);
  const int64_t extent = forward ? c.out[1] : c.in[1];
  const dim3 grid(static_cast<unsigned>(c.n * c.c),
                  static_cast<unsigned>((extent + rows - 1) / rows));
  if (forward && c.mode == 0) {
    LaunchForward<T, true>(c, g, grid, smem, s);
  } else if (forward) {
    LaunchForward<T, false>(c, g, grid, smem, s);
  } else {
    LaunchBackward<T>(c, g, grid, smem, static_cast<int>(output_rows), s);
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
      return LaunchTyped<__half>(c, forward, r, output_rows, smem, s);
    case Storage::kBF16:
      return LaunchTyped<__nv_bfloat16>(c, forward, r, output_rows, smem, s);
    default:
      return LaunchTyped<float>(c, forward, r, output_rows, smem, s);
  }
}

}  // namespace cuda
}  // namespace kiln
