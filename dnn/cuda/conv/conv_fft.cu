// The FFT convolution's data movement (see conv_fft_launch.h for the plane layout): gathering
// tensor tiles and phases into planes, scattering result planes back with alpha/beta, laying the
// filter out as planes, reading the filter gradient off them, and turning spectra between
// cuFFT's plane-major order and the GEMM's frequency-major order. All are memory-bound; plane
// kernels take one block per plane and decode it once, the points in 32-bit arithmetic.
#include <cuda_runtime.h>

#include "dnn/cuda/conv/conv_fft_launch.h"
#include "dnn/host_device.h"

namespace kiln {
namespace cuda {

namespace {

// The direct filter DFT's limits: sub-filter taps, tap rows x spectrum columns, FFT size.
constexpr int kDirectTaps = kFftDirectFilterTaps;
constexpr int kDirectRowSpectra = kFftDirectFilterRowSpectra;
constexpr int kMaxLength = 128;

// Rows a plane kernel's thread handles at once.
constexpr int kRows = 4;

// Grid limit of the one-block-per-plane kernels (the x dimension's).
constexpr int64_t kMaxBlocks = (int64_t{1} << 31) - 1;

unsigned GridFor(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 132 * 64 ? (blocks < 1 ? 1 : blocks) : 132 * 64);
}

// The tensor index plane point `point` of `tile` reads for `phase`, or -1 when it is padding,
// past the window or outside the tensor.
__device__ __forceinline__ int64_t SourceIndex(const FftAxisMap& a, int64_t tile, int64_t point,
                                               int64_t phase) {
  if (point >= a.window) return -1;
  const int64_t i = (tile * a.step + point) * a.phases + phase - a.offset;
  return i >= 0 && i < a.extent ? i : -1;
}

// One block per plane: blockIdx.x the tile-image of the pass, blockIdx.y the plane channel; the
// plane is decoded once, each row once, and a warp writes a row's points.
__global__ void FftGatherKernel(FftPlanesView v, const float* __restrict__ tensor,
                                float* __restrict__ planes) {
  const int lh = v.axis[0].length, lw = v.axis[1].length;
  const int phases = static_cast<int>(v.PhaseCount()),
            phases_w = static_cast<int>(v.axis[1].phases);
  const int tiles_w = static_cast<int>(v.axis[1].tiles);
  // 32-bit decoding (the launcher checks that tile-images fit): 64-bit divisions by every thread
  // of the block had cost more than the plane's copy.
  const int tiles = static_cast<int>(v.TilesPerImage());
  const int image = static_cast<int>(v.first_image) + static_cast<int>(blockIdx.x);
  const int channel = blockIdx.y, tile = tiles == 1 ? 0 : image % tiles;
  const int n = tiles == 1 ? image : image / tiles;
  const int c = phases == 1 ? channel : channel / phases, phase = channel - c * phases;
  float* out = planes + (int64_t{blockIdx.x} * gridDim.y + channel) * lh * lw;
  const float* source = tensor + n * v.n_stride + c * v.c_stride;
  const int tile_h = tiles_w == 1 ? tile : tile / tiles_w, tile_w = tile - tile_h * tiles_w;
  const int phase_h = phases_w == 1 ? phase : phase / phases_w,
            phase_w = phase - phase_h * phases_w;
  // kRows rows at a time, their loads issued before their stores (enough bytes in flight).
  for (int th0 = threadIdx.y; th0 < lh; th0 += kRows * blockDim.y) {
    int64_t rows[kRows];
    KILN_UNROLL
    for (int u = 0; u < kRows; ++u) {
      const int th = th0 + u * blockDim.y;
      rows[u] = th < lh && n < v.n ? SourceIndex(v.axis[0], tile_h, th, phase_h) : -1;
    }
    for (int tw = threadIdx.x; tw < lw; tw += blockDim.x) {
      const int64_t j = SourceIndex(v.axis[1], tile_w, tw, phase_w);
      float values[kRows];
      KILN_UNROLL
      for (int u = 0; u < kRows; ++u) {
        values[u] = rows[u] >= 0 && j >= 0
                        ? source[rows[u] * v.axis[0].stride + j * v.axis[1].stride]
                        : 0.0f;
      }
      KILN_UNROLL
      for (int u = 0; u < kRows; ++u) {
        const int th = th0 + u * blockDim.y;
        if (th < lh) out[th * lw + tw] = values[u];
      }
    }
  }
}

// Where tensor index `i` of an axis lands: its phase, tile and point in the tile. `past` is set
// when the tiles end before it (its value is zero; it is counted to the last tile).
struct Landing {
  int phase, tile, point;
  bool past;
};
__device__ __forceinline__ Landing Land(const FftAxisMap& a, int i) {
  // Uniform branches skip the divisions where there is one phase or one tile.
  const int shifted = i + static_cast<int>(a.offset), phases = static_cast<int>(a.phases);
  const int q = phases == 1 ? shifted : shifted / phases;
  const int t = q - static_cast<int>(a.origin), step = static_cast<int>(a.step);
  Landing l;
  l.phase = shifted - q * phases;
  l.tile = a.tiles == 1 ? 0 : t / step;
  l.point = t - l.tile * step;
  l.past = l.tile >= a.tiles || l.point >= step;
  if (l.tile >= a.tiles) l.tile = static_cast<int>(a.tiles) - 1;
  return l;
}

// One block per tensor plane: blockIdx.x the image (from n_first), blockIdx.y the channel.
__global__ void FftScatterKernel(FftPlanesView v, const float* __restrict__ planes, float alpha,
                                 float beta, int64_t n_first, float* __restrict__ tensor) {
  const int lh = v.axis[0].length, lw = v.axis[1].length;
  const int eh = static_cast<int>(v.axis[0].extent), ew = static_cast<int>(v.axis[1].extent);
  const int phases = static_cast<int>(v.PhaseCount()),
            phases_w = static_cast<int>(v.axis[1].phases);
  const int c = blockIdx.y;
  // 32-bit tile-image numbers (the launcher checks that they fit).
  const int n = static_cast<int>(n_first) + static_cast<int>(blockIdx.x);
  const int tiles_h = static_cast<int>(v.axis[0].tiles),
            tiles_w = static_cast<int>(v.axis[1].tiles);
  const int first_image = static_cast<int>(v.first_image), images = static_cast<int>(v.images);
  float* out_plane = tensor + n * v.n_stride + c * v.c_stride;
  // kRows rows at a time, their loads issued before their stores.
  for (int i0 = threadIdx.y; i0 < eh; i0 += kRows * blockDim.y) {
    Landing at_h[kRows];
    KILN_UNROLL
    for (int u = 0; u < kRows; ++u) at_h[u] = Land(v.axis[0], i0 + u * blockDim.y);
    for (int j = threadIdx.x; j < ew; j += blockDim.x) {
      const Landing at_w = Land(v.axis[1], j);
      float values[kRows];
      bool mine[kRows];
      KILN_UNROLL
      for (int u = 0; u < kRows; ++u) {
        const int image = (n * tiles_h + at_h[u].tile) * tiles_w + at_w.tile - first_image;
        mine[u] = i0 + u * static_cast<int>(blockDim.y) < eh && image >= 0 && image < images;
        values[u] = 0.0f;
        if (mine[u] && !at_h[u].past && !at_w.past) {
          const int channel = c * phases + at_h[u].phase * phases_w + at_w.phase;
          values[u] = planes[(int64_t{image} * gridDim.y * phases + channel) * lh * lw +
                             at_h[u].point * lw + at_w.point];
        }
      }
      KILN_UNROLL
      for (int u = 0; u < kRows; ++u) {
        if (!mine[u]) continue;
        float& out = out_plane[(i0 + u * blockDim.y) * v.axis[0].stride + j * v.axis[1].stride];
        out = beta == 0.0f ? alpha * values[u] : alpha * values[u] + beta * out;
      }
    }
  }
}

// The filter tap that sub-filter point `point` of `phase` holds on axis d, or -1 for none.
__device__ __forceinline__ int64_t FilterTap(const FftFilterView& f, int d, int64_t point,
                                             int64_t phase) {
  if (point >= f.taps[d]) return -1;
  const int64_t sub = f.backward_data ? f.taps[d] - 1 - point : point;
  const int64_t tap = sub * f.phases[d] + phase;
  if (tap >= f.filter[d]) return -1;
  return f.convolution ? f.filter[d] - 1 - tap : tap;
}

// The (k, c) filter and phase behind plane (output, input): forward planes are
// [k][c x phases], backward data's [c x phases][k].
struct FilterPlane {
  const float* w;
  int64_t phase_h, phase_w;
};
__device__ __forceinline__ FilterPlane PlaneOf(const FftFilterView& f, int64_t output,
                                               int64_t input) {
  const int64_t phases = f.phases[0] * f.phases[1];
  const int64_t k = f.backward_data ? input : output;
  const int64_t phased = f.backward_data ? output : input;  // c * phases + phase
  const int64_t c = phased / phases, phase = phased % phases;
  return {f.w + k * f.k_stride + c * f.c_stride, phase / f.phases[1], phase % f.phases[1]};
}

// The weight at sub-filter point (r, q) of a plane, zero where no tap lands.
__device__ __forceinline__ float TapValue(const FftFilterView& f, const FilterPlane& plane,
                                          int64_t r, int64_t q) {
  const int64_t tr = FilterTap(f, 0, r, plane.phase_h);
  const int64_t ts = tr >= 0 ? FilterTap(f, 1, q, plane.phase_w) : -1;
  return ts >= 0 ? plane.w[tr * f.tap_stride[0] + ts * f.tap_stride[1]] : 0.0f;
}

// One block per plane: blockIdx.x the input, blockIdx.y the output.
__global__ void FftFilterKernel(FftFilterView f, float* __restrict__ planes) {
  const int lh = f.length[0], lw = f.length[1];
  const int input = blockIdx.x, output = blockIdx.y;
  const FilterPlane plane = PlaneOf(f, output, input);
  float* out = planes + (int64_t{output} * gridDim.x + input) * lh * lw;
  for (int r = threadIdx.y; r < lh; r += blockDim.y) {
    for (int q = threadIdx.x; q < lw; q += blockDim.x) out[r * lw + q] = TapValue(f, plane, r, q);
  }
}

// The filter's spectra straight from its taps, by a direct 2-d DFT of each sub-filter (cheaper
// than transforming planes that are almost all zero), written frequency-major:
// spectrum[frequency][plane], plane = output * inputs + input. A block takes 32 planes (one per
// lane), stages their taps in shared memory, transforms each tap row along w (rows[r][f2]), then
// each frequency along h from those.
__global__ void FftFilterSpectrumKernel(FftFilterView f, int64_t inputs, int64_t planes,
                                        float2* __restrict__ spectrum) {
  __shared__ float taps[kDirectTaps][32];
  __shared__ float2 rows[kDirectRowSpectra][32];
  __shared__ float2 twiddle_h[kMaxLength], twiddle_w[kMaxLength];
  const int lh = f.length[0], lw = f.length[1], cols = lw / 2 + 1;
  const int th = static_cast<int>(f.taps[0]), tw = static_cast<int>(f.taps[1]);
  const int thread = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y;
  // e^{-2 pi i k / L}, cuFFT's forward sign.
  for (int k = thread; k < lh + lw; k += threads) {
    const int length = k < lh ? lh : lw, at = k < lh ? k : k - lh;
    float sine, cosine;
    sincospif(2.0f * at / length, &sine, &cosine);
    (k < lh ? twiddle_h[at] : twiddle_w[at]) = make_float2(cosine, -sine);
  }
  const int64_t plane = blockIdx.x * int64_t{32} + threadIdx.x;
  {
    const FilterPlane source = PlaneOf(f, plane / inputs, plane % inputs);
    for (int t = threadIdx.y; t < th * tw; t += blockDim.y) {
      taps[t][threadIdx.x] = plane < planes ? TapValue(f, source, t / tw, t % tw) : 0.0f;
    }
  }
  __syncthreads();
  for (int e = threadIdx.y; e < th * cols; e += blockDim.y) {
    const int r = e / cols, f2 = e % cols;
    float re = 0.0f, im = 0.0f;
    int at = 0;  // f2 q mod lw
    for (int q = 0; q < tw; ++q) {
      const float v = taps[r * tw + q][threadIdx.x];
      re += v * twiddle_w[at].x;
      im += v * twiddle_w[at].y;
      at += f2;
      if (at >= lw) at -= lw;
    }
    rows[e][threadIdx.x] = make_float2(re, im);
  }
  __syncthreads();
  if (plane >= planes) return;
  const int frequencies = lh * cols;
  for (int fi = blockIdx.y * blockDim.y + threadIdx.y; fi < frequencies;
       fi += gridDim.y * blockDim.y) {
    const int f1 = fi / cols, f2 = fi % cols;
    float re = 0.0f, im = 0.0f;
    int at = 0;  // f1 r mod lh
    for (int r = 0; r < th; ++r) {
      const float2 a = rows[r * cols + f2][threadIdx.x], t = twiddle_h[at];
      re += a.x * t.x - a.y * t.y;
      im += a.x * t.y + a.y * t.x;
      at += f1;
      if (at >= lh) at -= lh;
    }
    spectrum[fi * planes + plane] = make_float2(re, im);
  }
}

// out[col][row] = in[row][col] for complex rows x cols matrices, through 32 x 32 shared tiles.
__global__ void ComplexTransposeKernel(const float2* __restrict__ in, int64_t rows, int64_t cols,
                                       float2* __restrict__ out) {
  __shared__ float2 tile[32][33];
  const int64_t col_tiles = (cols + 31) / 32, tiles = (rows + 31) / 32 * col_tiles;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row0 = t / col_tiles * 32, col0 = t % col_tiles * 32;
    for (int r = threadIdx.y; r < 32; r += blockDim.y) {
      const int64_t row = row0 + r, col = col0 + threadIdx.x;
      if (row < rows && col < cols) tile[r][threadIdx.x] = in[row * cols + col];
    }
    __syncthreads();
    for (int c = threadIdx.y; c < 32; c += blockDim.y) {
      const int64_t col = col0 + c, row = row0 + threadIdx.x;
      if (row < rows && col < cols) out[col * rows + row] = tile[threadIdx.x][c];
    }
    __syncthreads();
  }
}

__global__ void FftFilterGradientKernel(FftFilterView f, const float* __restrict__ planes,
                                        float alpha, float beta, float* __restrict__ dw) {
  const int lh = f.length[0], lw = f.length[1];
  const int64_t phases = f.phases[0] * f.phases[1];
  const int64_t fr = f.filter[0], fs = f.filter[1];
  const int64_t total = f.k * f.c * fr * fs;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t s = idx % fs;
    int64_t rest = idx / fs;
    const int64_t r = rest % fr;
    rest /= fr;
    const int64_t c = rest % f.c, k = rest / f.c;
    // The gradient of the (reversed, for true convolution) filter's tap, at its phase's point.
    const int64_t er = f.convolution ? fr - 1 - r : r, es = f.convolution ? fs - 1 - s : s;
    const int64_t channel = c * phases + (er % f.phases[0]) * f.phases[1] + es % f.phases[1];
    const float value =
        planes[((k * f.c * phases + channel) * lh + er / f.phases[0]) * lw + es / f.phases[1]];
    float& out = dw[k * f.k_stride + c * f.c_stride + r * f.tap_stride[0] + s * f.tap_stride[1]];
    out = beta == 0.0f ? alpha * value : alpha * value + beta * out;
  }
}

}  // namespace

// Plane kernels: a warp across a row, 8 rows at a time.
const dim3 kPlaneBlock(32, 8);

int LaunchFftGather(const FftPlanesView& v, const float* tensor, float* planes, void* stream) {
  const int64_t channels = v.channels * v.PhaseCount();
  if (v.images == 0 || channels == 0) return 0;
  if (v.first_image + v.images > kMaxBlocks || channels > 65535) {
    return static_cast<int>(cudaErrorInvalidConfiguration);
  }
  FftGatherKernel<<<dim3(static_cast<unsigned>(v.images), static_cast<unsigned>(channels)),
                    kPlaneBlock, 0, static_cast<cudaStream_t>(stream)>>>(v, tensor, planes);
  return static_cast<int>(cudaGetLastError());
}

int LaunchFftScatter(const FftPlanesView& v, const float* planes, float alpha, float beta,
                     float* tensor, void* stream) {
  if (v.images == 0) return 0;
  // The images this pass's tile-images belong to (a pass may start or end inside one).
  const int64_t tiles = v.TilesPerImage();
  const int64_t n_first = v.first_image / tiles;
  int64_t n_last = (v.first_image + v.images - 1) / tiles;
  if (n_last >= v.n) n_last = v.n - 1;
  if (n_last < n_first || v.channels == 0) return 0;
  if (v.channels > 65535 || v.n * tiles > kMaxBlocks || v.first_image + v.images > kMaxBlocks ||
      v.axis[0].extent + v.axis[0].offset >= (int64_t{1} << 31) ||
      v.axis[1].extent + v.axis[1].offset >= (int64_t{1} << 31)) {
    return static_cast<int>(cudaErrorInvalidConfiguration);
  }
  FftScatterKernel<<<dim3(static_cast<unsigned>(n_last - n_first + 1),
                          static_cast<unsigned>(v.channels)),
                     kPlaneBlock, 0, static_cast<cudaStream_t>(stream)>>>(v, planes, alpha, beta,
                                                                          n_first, tensor);
  return static_cast<int>(cudaGetLastError());
}

int LaunchFftFilter(const FftFilterView& f, float* planes, void* stream) {
  const int64_t phased = f.c * f.phases[0] * f.phases[1];
  const int64_t inputs = f.backward_data ? f.k : phased, outputs = f.backward_data ? phased : f.k;
  if (inputs == 0 || outputs == 0) return 0;
  if (inputs > kMaxBlocks || outputs > 65535) {
    return static_cast<int>(cudaErrorInvalidConfiguration);
  }
  FftFilterKernel<<<dim3(static_cast<unsigned>(inputs), static_cast<unsigned>(outputs)),
                    kPlaneBlock, 0, static_cast<cudaStream_t>(stream)>>>(f, planes);
  return static_cast<int>(cudaGetLastError());
}

int LaunchFftFilterGradient(const FftFilterView& f, const float* planes, float alpha, float beta,
                            float* dw, void* stream) {
  const int64_t total = f.k * f.c * f.filter[0] * f.filter[1];
  if (total == 0) return 0;
  FftFilterGradientKernel<<<GridFor(total), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      f, planes, alpha, beta, dw);
  return static_cast<int>(cudaGetLastError());
}

int LaunchFftFilterSpectrum(const FftFilterView& f, void* spectrum, void* stream) {
  const int64_t phased = f.c * f.phases[0] * f.phases[1];
  const int64_t inputs = f.backward_data ? f.k : phased, planes = f.k * phased;
  if (planes == 0) return 0;
  if (!FftFilterSpectrumServes(f.taps, f.length) || f.length[0] > kMaxLength ||
      f.length[1] > kMaxLength || (planes + 31) / 32 > kMaxBlocks) {
    return static_cast<int>(cudaErrorInvalidConfiguration);
  }
  // About eight blocks per SM in all, the frequencies shared out when the planes are few.
  const int64_t plane_blocks = (planes + 31) / 32;
  const int64_t frequency_groups = (int64_t{f.length[0]} * (f.length[1] / 2 + 1) + 7) / 8;
  int64_t split = (132 * 4 + plane_blocks - 1) / plane_blocks;
  if (split > frequency_groups) split = frequency_groups;
  if (split > 65535) split = 65535;
  FftFilterSpectrumKernel<<<dim3(static_cast<unsigned>(plane_blocks), static_cast<unsigned>(split)),
                            dim3(32, 8), 0, static_cast<cudaStream_t>(stream)>>>(
      f, inputs, planes, static_cast<float2*>(spectrum));
  return static_cast<int>(cudaGetLastError());
}

int LaunchComplexTranspose(const void* in, int64_t rows, int64_t cols, void* out, void* stream) {
  const int64_t tiles = (rows + 31) / 32 * ((cols + 31) / 32);
  if (tiles == 0) return 0;
  ComplexTransposeKernel<<<static_cast<unsigned>(tiles < kMaxBlocks ? tiles : kMaxBlocks),
                           dim3(32, 8), 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const float2*>(in), rows, cols, static_cast<float2*>(out));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace cuda
}  // namespace kiln
