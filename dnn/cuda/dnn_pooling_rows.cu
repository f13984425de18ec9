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

#include "dnn/cuda/pooling_rows.h"
#include "dnn/cuda/storage_access.cuh"
#include "dnn/pooling_math.h"

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

// Writes dx = alpha acc + beta dx over `count` consecutive elements of dst from `acc`, which is
// laid out by AccumulatorFor(dst) so that the aligned body moves as float4s (f32).
template <typename T>
__device__ __forceinline__ void StoreRun(const float* acc, int count, float alpha, float beta,
                                         T* dst) {
  int done = 0;
  if constexpr (sizeof(T) == 4) {
    const int misaligned = static_cast<int>(reinterpret_cast<uintptr_t>(dst) & 15) / 4;
    const int head = min(count, (4 - misaligned) % 4);
    const int vectors = (count - head) / 4;
    const float4* from = reinterpret_cast<const float4*>(acc + head);
    float4* to = reinterpret_cast<float4*>(dst + head);
    for (int j = threadIdx.x; j < vectors; j += kThreads) {
      float4 v = from[j];
      v = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
      if (beta != 0.0f) {
        const float4 old = to[j];
        v = make_float4(v.x + beta * old.x, v.y + beta * old.y, v.z + beta * old.z,
                        v.w + beta * old.w);
      }
      to[j] = v;
    }
    if (static_cast<int>(threadIdx.x) < head) {
      const int i = threadIdx.x;
      dst[i] = Blend(alpha, acc[i], beta, [&] { return dst[i]; });
    }
    done = head + vectors * 4;
  }
  for (int i = done + threadIdx.x; i < count; i += kThreads) {
    dst[i] = FromFloat<T>(Blend(alpha, acc[i], beta, [&] { return ToFloat(dst[i]); }));
  }
}

// Where in `region` (RegionFloats) an accumulator for the run at dst starts, so that StoreRun's
// float4s are aligned on both sides.
template <typename T>
__device__ __forceinline__ float* AccumulatorFor(const T* dst, float* region) {
  const int misaligned = static_cast<int>(reinterpret_cast<uintptr_t>(dst) & 15) / sizeof(T);
  // The run reaches 16-byte alignment after (4 - misaligned) % 4 elements; starting the
  // accumulator `misaligned` floats in aligns it there too.
  return region + (sizeof(T) == 4 ? misaligned : 0);
}

// A backward tile owns input rows [ih0, ih1) and evaluates every output covering them. Shared
// memory holds, each a region of RegionFloats: the owned rows' gradient accumulator; the covering
// outputs' dy; and for max also their y and the input rows their windows read. Each output adds
// its gradient share to its window (average) or to its winner (max: the first element of the
// window equal to y, in (h, w) order) in the accumulator, keeping only owned rows.
// The adds are ordered so that no two threads touch one element at once, without atomics and
// the same way on every run: outputs ceil(window / stride) apart have disjoint windows, so
//  - output rows are taken in rows_apart phases separated by block barriers, and in a phase each
//    warp takes whole rows, 32 outputs at a time;
//  - within a warp, lanes whose outputs are cols_apart apart add together, in sub-steps
//    separated by warp barriers. The window search itself runs on all lanes at once.
// kWin, kStride > 0: as for the forward (square, unpadded, every window inside): the window loops
// unroll.
template <typename T, int kWin, int kStride>
__global__ void __launch_bounds__(kThreads, sizeof(T) == 4 ? 7 : 4)
    PoolRowsBackward(const __grid_constant__ RowsGeometry g, const T* __restrict__ x,
                     const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx) {
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
  const bool dx_packed = g.dx[2] == g.w.in && g.dx[3] == 1;  // the owned rows are one run
  T* dx_plane = dx + PlaneOffset(g.dx, n, c);

  // y and dy are read straight from global memory in the phase loop below, where a warp takes
  // a run of consecutive outputs (coalesced): staging them would cost a second pass over shared
  // memory and the instructions to set it up, which this kernel is short of.
  const T* y_plane = y + PlaneOffset(g.y, n, c);
  const T* dy_plane = dy + PlaneOffset(g.dy, n, c);
  float* acc_region = reinterpret_cast<float*>(smem);
  const int64_t acc_floats = RegionFloats(static_cast<int64_t>(g.rows_per_tile) * g.w.in);
  float* x_region = acc_region + acc_floats;
  const float* xs = x_region;
  int r0 = 0, r1 = 0;
  if (out_rows > 0 && max) {
    InputRowsOf(g.h, first_oh, last_oh + 1, &r0, &r1);
    xs = StageRows(x + PlaneOffset(g.x, n, c), g.x[2], g.x[3], g.in_w, r0, r1, x_region);
  }
  for (int i = threadIdx.x; i < acc_floats / 4; i += kThreads) {
    smem[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float* acc = dx_packed ? AccumulatorFor(dx_plane + ih0 * g.w.in, acc_region) : acc_region;
  WaitForStaging();
  __syncthreads();

  const int rows_apart = kWin > 0 ? (kWin + kStride - 1) / kStride : g.rows_apart;
  const int cols_apart = kWin > 0 ? (kWin + kStride - 1) / kStride : g.cols_apart;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int sub_steps = cols_apart < 32 ? cols_apart : 32;
  const int my_step = lane % cols_apart;     // lanes of one step are cols_apart apart
  const int to_owned = (r0 - ih0) * g.w.in;  // staged-row index to accumulator index
  const int row_phases = out_rows < rows_apart ? out_rows : rows_apart;
  for (int ph = 0; ph < row_phases; ++ph) {
    for (int row = ph + warp * rows_apart; row < out_rows; row += rows_apart * (kThreads / 32)) {
      const int oh = first_oh + row;
      for (int ow0 = 0; ow0 < g.w.out; ow0 += 32) {
        const int ow = ow0 + lane;
        const bool active = ow < g.w.out;
        const int in_y = oh * static_cast<int>(g.y[2]) + ow * static_cast<int>(g.y[3]);
        const int in_dy = oh * static_cast<int>(g.dy[2]) + ow * static_cast<int>(g.dy[3]);
        const float grad = active ? ToFloat(dy_plane[in_dy]) : 0.0f;
        int at = -1;  // max: the winner's accumulator index, when owned
        float share = 0.0f;
        int hb = 0, he = 0, hp, wb = 0, we = 0, wp;
        if (active && max) {
          const float best = ToFloat(y_plane[in_y]);
          int win = -1;  // index into the staged rows
          if constexpr (kWin > 0) {
            const int corner = (oh * kStride - r0) * g.w.in + ow * kStride;
#pragma unroll
            for (int e = kWin * kWin - 1; e >= 0; --e) {  // backwards, so the first match stays
              const int i = corner + (e / kWin) * g.w.in + e % kWin;
              if (xs[i] == best) win = i;
            }
          } else {
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
          if (win >= 0 && win + to_owned >= 0 && win + to_owned < owned) at = win + to_owned;
          share = grad;
        } else if (active) {
          dnn::PoolWindow(g.h, oh, &hb, &he, &hp);
          dnn::PoolWindow(g.w, ow, &wb, &we, &wp);
          share = grad / static_cast<float>(g.mode == 1 ? hp * wp : (he - hb) * (we - wb));
          hb = hb > ih0 ? hb : ih0;
          he = he < ih1 ? he : ih1;
        }
        for (int step = 0; step < sub_steps; ++step) {
          if (active && my_step == step) {
            if (max) {
              if (at >= 0) acc[at] += share;
            } else {
              for (int h = hb; h < he; ++h) {
                float* line = acc + (h - ih0) * g.w.in;
                for (int w = wb; w < we; ++w) line[w] += share;
              }
            }
          }
          __syncwarp();
        }
      }
    }
    __syncthreads();
  }

  if (dx_packed) {
    StoreRun(acc, owned, g.alpha, g.beta, dx_plane + ih0 * g.w.in);
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
size_t TileBytes(const PoolingCall& c, bool forward, int64_t rows) {
  const int64_t wh = c.window[1], sh = c.stride[1];
  if (forward) {
    const int64_t input_rows = std::min((rows - 1) * sh + wh, c.in[1]);
    return static_cast<size_t>(RegionFloats(input_rows * c.in[2])) * sizeof(float);
  }
  // Owned input rows are covered by at most (rows + wh - 2) / sh + 1 output rows, whose windows
  // span at most that many rows times the stride, plus the window. The accumulator, then for max
  // those input rows (the kernel's layout).
  const int64_t output_rows = std::min((rows + wh - 2) / sh + 1, c.out[1]);
  const int64_t input_rows = std::min((output_rows - 1) * sh + wh, c.in[1]);
  int64_t floats = RegionFloats(rows * c.in[2]);
  if (c.mode == 0) floats += RegionFloats(input_rows * c.in[2]);
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
                    cudaStream_t s) {
  const T* x = static_cast<const T*>(c.x);
  const T* y = static_cast<const T*>(c.y);
  const T* dy = static_cast<const T*>(c.dy);
  T* dx = static_cast<T*>(c.result);
  auto fixed = [&](int64_t win, int64_t stride) {
    return FixedWindow(c, 1, win, stride) && FixedWindow(c, 2, win, stride);
  };
  if (fixed(3, 2)) {
    PoolRowsBackward<T, 3, 2><<<grid, kThreads, smem, s>>>(g, x, y, dy, dx);
  } else if (fixed(2, 2)) {
    PoolRowsBackward<T, 2, 2><<<grid, kThreads, smem, s>>>(g, x, y, dy, dx);
  } else if (fixed(3, 1)) {
    PoolRowsBackward<T, 3, 1><<<grid, kThreads, smem, s>>>(g, x, y, dy, dx);
  } else {
    PoolRowsBackward<T, 0, 0><<<grid, kThreads, smem, s>>>(g, x, y, dy, dx);
  }
}

template <typename T>
int LaunchTyped(const PoolingCall& c, bool forward, int rows, size_t smem, cudaStream_t s) {
  const RowsGeometry g = GeometryOf(c, rows);
  const int64_t extent = forward ? c.out[1] : c.in[1];
  const dim3 grid(static_cast<unsigned>(c.n * c.c),
                  static_cast<unsigned>((extent + rows - 1) / rows));
  if (forward && c.mode == 0) {
    LaunchForward<T, true>(c, g, grid, smem, s);
  } else if (forward) {
    LaunchForward<T, false>(c, g, grid, smem, s);
  } else {
    LaunchBackward<T>(c, g, grid, smem, s);
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
  int64_t rows = extent;
  while (rows > 1 && TileBytes(c, forward, rows) > kTileBytes) {
    rows = rows * 3 / 4;
  }
  const size_t smem = TileBytes(c, forward, rows);
  if (smem > kTileBytes || (extent + rows - 1) / rows > 65535) return kNo;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int r = static_cast<int>(rows);
  switch (c.type) {
    case Storage::kF16:
      return LaunchTyped<__half>(c, forward, r, smem, s);
    case Storage::kBF16:
      return LaunchTyped<__nv_bfloat16>(c, forward, r, smem, s);
    default:
      return LaunchTyped<float>(c, forward, r, smem, s);
  }
}

}  // namespace cuda
}  // namespace kiln
