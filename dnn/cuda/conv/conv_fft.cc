#include "dnn/cuda/conv/conv_fft.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/conv/conv_fft_launch.h"
#include "dnn/cuda/conv/fft_plans.h"

namespace kiln {
namespace dnn {

namespace {

using cuda::FftAxisMap;
using cuda::FftFilterView;
using cuda::FftPlanesView;
using Shape = FftPlanCache::Shape;

// FFT sizes tried per axis: even products of 2, 3, 5 and 7, which cuFFT transforms fastest.
constexpr int kLengths[] = {8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128};
// One pass's planes and spectra stay within this many bytes (or one tile-image, if larger). A
// variable only so that tests can force several passes on small problems. 128 MiB: at 1 GiB,
// ResNet-18's one FFT (res4a's backward data, batch 64) took 453 MB of workspace in one pass
// and set the training plan's peak; at 256 MiB CaffeNet's fp32 inference plan (b128) peaked at
// 663 MiB, 554 at 128 with the same speed (H100, docs/PERF.md).
int64_t pass_bytes = int64_t{128} << 20;
// Sizes whose workspace would pass this are not considered; none left means unsupported.
constexpr int64_t kMaxWorkspace = int64_t{4} << 30;
// The cost model's rates (H100-like): complex GEMM flop/s, bytes/s, seconds per pass.
constexpr double kGemmRate = 35e12, kByteRate = 2e12, kPassSeconds = 30e-6;

size_t Align256(int64_t bytes) { return static_cast<size_t>((bytes + 255) / 256 * 256); }

// Everything a run needs, derived from the problem alone.
struct FftGeometry {
  int64_t phases[2] = {1, 1};   // the stride, folded into phases
  int64_t taps[2] = {1, 1};     // sub-filter extent, ceil(R / s)
  int64_t outputs[2] = {1, 1};  // correlation outputs needed per axis (per phase)
  int64_t origin[2] = {0, 0};   // backward data: the first phase point dx needs (pad / stride)
  int length[2] = {0, 0};
  int64_t step[2] = {1, 1}, tiles[2] = {1, 1};
  int64_t cin = 0, cout = 0;  // plane channels of the correlation's input and output
  int64_t images = 0;         // tile-images in all
  int64_t chunk = 0, passes = 0;
  int64_t Frequencies() const { return int64_t{length[0]} * (length[1] / 2 + 1); }
  int64_t Points() const { return int64_t{length[0]} * length[1]; }
  bool gradient = false;  // backward filter
  // Bytes of one tile-image in each half of a pass's region: the spectra of its input and output
  // channels (backward filter: of x's and dy's), which also hold the planes (fewer bytes).
  int64_t SideBytes() const {
    return (gradient ? cin + cout : std::max(cin, cout)) * Frequencies() * 8;
  }
  int64_t FilterSpectrumBytes() const { return cin * cout * Frequencies() * 8; }
};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Fills lengths, tiles and passes for the given FFT sizes; false when they do not fit.
bool Tile(FftGeometry* g, int n, int lh, int lw) {
  g->length[0] = lh;
  g->length[1] = lw;
  for (int d = 0; d < 2; ++d) {
    g->step[d] = g->length[d] - g->taps[d] + 1;
    if (g->step[d] < 1) return false;
    g->tiles[d] = CeilDiv(g->outputs[d], g->step[d]);
  }
  g->images = n * g->tiles[0] * g->tiles[1];
  // The plane kernels number tile-images (and passes' padding past them) in 32 bits.
  if (g->images >= (int64_t{1} << 30)) return false;
  const int64_t per_image = 2 * g->SideBytes();
  const int64_t most = std::max<int64_t>(1, pass_bytes / per_image);
  g->passes = CeilDiv(g->images, most);
  g->chunk = CeilDiv(g->images, g->passes);
  return true;
}

// A pass's region: two halves, each the larger of the pass's spectra and the filter's (which go
// through it before the passes, and after them in backward filter).
int64_t PassBytes(const FftGeometry& g) {
  return 2 *
         std::max<int64_t>(Align256(g.chunk * g.SideBytes()), Align256(g.FilterSpectrumBytes()));
}

// Bytes apart from cuFFT's work area.
int64_t LayoutBytes(const FftGeometry& g) {
  return Align256(g.FilterSpectrumBytes()) + Align256(PassBytes(g));
}

double CostSeconds(const FftGeometry& g) {
  const double f = static_cast<double>(g.Frequencies());
  const double gemm = 8.0 * g.chunk * g.passes * f * g.cin * g.cout / kGemmRate;
  // Per channel of a tile-image: planes written and read twice, spectra four times (cuFFT,
  // transpose, GEMM).
  const double points = static_cast<double>(g.Points());
  const double planes = g.chunk * g.passes * (g.cin + g.cout) * (8.0 * points + 32.0 * f);
  const double filter = g.cin * g.cout * (8.0 * points + (24.0 + 8.0 * g.passes) * f);
  return gemm + (planes + filter) / kByteRate + g.passes * kPassSeconds;
}

// The geometry for `direction` of `p`, or why there is none.
absl::Status Plan(ConvDirection direction, const ConvProblem& p, FftGeometry* g) {
  if (p.dtype != DataType::kF32) return absl::UnimplementedError("serves f32 only");
  if (p.groups != 1) return absl::UnimplementedError("serves ungrouped convolutions only");
  if (p.in[0] != 1 || p.filter[0] != 1 || p.out[0] != 1) {
    return absl::UnimplementedError("serves 2-d convolutions only");
  }
  for (int d = 0; d < 2; ++d) {
    const int64_t s = p.stride[d + 1], r = p.filter[d + 1];
    if (p.dilation[d + 1] != 1) return absl::UnimplementedError("needs unit dilation");
    g->phases[d] = s;
    g->taps[d] = CeilDiv(r, s);
    if (direction == ConvDirection::kBackwardData) {
      // Phase points of dx from the first one inside the padding to the last one dy reaches.
      g->origin[d] = p.pad[d + 1] / s;
      const int64_t last_point = (p.in[d + 1] - 1 + p.pad[d + 1]) / s;
      g->outputs[d] = std::min(last_point + 1, p.out[d + 1] + g->taps[d] - 1) - g->origin[d];
    } else {
      g->outputs[d] = p.out[d + 1];
    }
    if (g->outputs[d] < 1) return absl::UnimplementedError("needs a non-empty output");
  }
  const int64_t phases = g->phases[0] * g->phases[1];
  g->gradient = direction == ConvDirection::kBackwardFilter;
  g->cin = direction == ConvDirection::kBackwardData ? p.k : p.c * phases;
  g->cout = direction == ConvDirection::kBackwardData ? p.c * phases : p.k;
  if (g->cin > 65535 || g->cout > 65535) {
    return absl::UnimplementedError("serves at most 65535 channels (times stride_h x stride_w)");
  }
  // The cheapest FFT sizes whose workspace fits.
  double best = std::numeric_limits<double>::infinity();
  FftGeometry chosen;
  for (int lh : kLengths) {
    for (int lw : kLengths) {
      FftGeometry t = *g;
      if (!Tile(&t, static_cast<int>(p.n), lh, lw)) continue;
      if (LayoutBytes(t) > kMaxWorkspace) continue;
      // cuFFT's plans and cuBLAS's batched strides are 64-bit, its m, n, k and lda 32-bit.
      if (t.chunk * std::max(t.cin, t.cout) >= (int64_t{1} << 31)) continue;
      const double cost = CostSeconds(t);
      if (cost < best) {
        best = cost;
        chosen = t;
      }
    }
  }
  if (chosen.length[0] == 0) {
    return absl::UnimplementedError(absl::StrCat(
        "needs more than ", kMaxWorkspace >> 30, " GiB of workspace at every FFT size up to ",
        kLengths[sizeof(kLengths) / sizeof(kLengths[0]) - 1]));
  }
  *g = chosen;
  return absl::OkStatus();
}

// The cuFFT plans one run uses.
struct FftShapes {
  Shape input, filter, output;  // backward filter: x, dy, dw
};
FftShapes ShapesOf(ConvDirection direction, const FftGeometry& g) {
  const int lh = g.length[0], lw = g.length[1];
  using D = FftPlanCache::Direction;
  FftShapes s;
  s.input = {lh, lw, g.chunk * g.cin, D::kRealToSpectrum};
  if (direction == ConvDirection::kBackwardFilter) {
    s.filter = {lh, lw, g.chunk * g.cout, D::kRealToSpectrum};
    s.output = {lh, lw, g.cin * g.cout, D::kSpectrumToReal};
  } else {
    s.filter = {lh, lw, g.cin * g.cout, D::kRealToSpectrum};
    s.output = {lh, lw, g.chunk * g.cout, D::kSpectrumToReal};
  }
  return s;
}

absl::StatusOr<size_t> WorkAreaBytes(FftPlanCache& plans, const FftShapes& s) {
  size_t most = 0;
  for (const Shape& shape : {s.input, s.filter, s.output}) {
    KILN_ASSIGN_OR_RETURN(const size_t bytes, plans.WorkBytes(shape));
    most = std::max(most, bytes);
  }
  return most;
}

// x (`x_side`) or y of `p` as planes of geometry `g`; per axis, the tensor's phases, the offset
// of plane point 0 and the window past which plane points are zero.
FftPlanesView PlanesView(const ConvProblem& p, const FftGeometry& g, bool x_side,
                         const int64_t phases[2], const int64_t offset[2],
                         const int64_t window[2]) {
  const int64_t* strides = x_side ? p.x_stride : p.y_stride;
  FftPlanesView v;
  v.n = p.n;
  v.channels = x_side ? p.c : p.k;
  v.n_stride = strides[0];
  v.c_stride = strides[1];
  for (int d = 0; d < 2; ++d) {
    FftAxisMap& a = v.axis[d];
    a.extent = x_side ? p.in[d + 1] : p.out[d + 1];
    a.stride = strides[d + 3];
    a.phases = phases[d];
    a.offset = offset[d];
    a.step = g.step[d];
    a.origin = g.origin[d];
    a.window = window[d];
    a.tiles = g.tiles[d];
    a.length = g.length[d];
  }
  return v;
}

// x (forward and backward filter: phases, padding) or dx (backward data) as planes.
FftPlanesView XView(const ConvProblem& p, const FftGeometry& g) {
  const int64_t pad[2] = {p.pad[1], p.pad[2]}, window[2] = {g.length[0], g.length[1]};
  return PlanesView(p, g, /*x_side=*/true, g.phases, pad, window);
}

// y or dy as planes: backward data shifts dy right by taps - 1 for the full convolution, less the
// phase points dx does not need; `outputs_only` zeroes points past a tile's outputs (backward
// filter).
FftPlanesView YView(const ConvProblem& p, const FftGeometry& g, bool backward_data,
                    bool outputs_only) {
  const int64_t one[2] = {1, 1};
  int64_t offset[2], window[2];
  for (int d = 0; d < 2; ++d) {
    offset[d] = backward_data ? g.taps[d] - 1 - g.origin[d] : 0;
    window[d] = outputs_only ? g.step[d] : g.length[d];
  }
  return PlanesView(p, g, /*x_side=*/false, one, offset, window);
}

FftFilterView FilterView(const ConvProblem& p, const FftGeometry& g, const float* w,
                         bool backward_data) {
  FftFilterView f;
  f.w = w;
  f.k = p.k;
  f.c = p.c;
  f.k_stride = p.w_stride[0];
  f.c_stride = p.w_stride[1];
  for (int d = 0; d < 2; ++d) {
    f.tap_stride[d] = p.w_stride[d + 3];
    f.filter[d] = p.filter[d + 1];
    f.phases[d] = g.phases[d];
    f.taps[d] = g.taps[d];
    f.length[d] = g.length[d];
  }
  f.convolution = p.mode == ConvolutionMode::kConvolution;
  f.backward_data = backward_data;
  return f;
}

absl::Status Launched(int error, const char* what) {
  if (error == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, " launch failed: ", cudaGetErrorString(static_cast<cudaError_t>(error))));
}

absl::Status CublasOk(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: ", cublasGetStatusString(s)));
}

// Spectra [rows][cols] -> [cols][rows].
absl::Status Transpose(Handle& h, const void* in, int64_t rows, int64_t cols, void* out) {
  return Launched(cuda::LaunchComplexTranspose(in, rows, cols, out, h.stream()),
                  "FFT spectra transpose");
}

// Per frequency f (batched over all of them): c[f] = op_a(a[f]) op_b(b[f]) (+ c[f] when
// accumulate), column-major complex matrices as cuBLAS takes them.
absl::Status SpectrumProducts(Handle& h, const ConvProblem& p, const FftGeometry& g,
                              cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n,
                              int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
                              bool accumulate, void* c, int64_t ldc) {
  const float2 one = {1.0f, 0.0f}, beta = {accumulate ? 1.0f : 0.0f, 0.0f};
  const cublasComputeType_t compute =
      p.math == MathMode::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const int64_t a_rows = op_a == CUBLAS_OP_N ? m : k, b_rows = op_b == CUBLAS_OP_N ? k : n;
  return CublasOk(
      cublasGemmStridedBatchedEx(
          static_cast<cublasHandle_t>(h.cublas()), op_a, op_b, static_cast<int>(m),
          static_cast<int>(n), static_cast<int>(k), &one, a, CUDA_C_32F, static_cast<int>(lda),
          a_rows * (op_a == CUBLAS_OP_N ? k : m), b, CUDA_C_32F, static_cast<int>(ldb),
          b_rows * (op_b == CUBLAS_OP_N ? n : k), &beta, c, CUDA_C_32F, static_cast<int>(ldc),
          m * n, static_cast<int>(g.Frequencies()), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx (FFT convolution)");
}

// The workspace's regions: the filter's spectra (frequency-major), then a pass's two halves, then
// cuFFT's work area.
struct Regions {
  char* filter_spectrum;
  char* side_one;
  char* side_two;
  char* work;
};
Regions RegionsOf(const FftGeometry& g, char* ws) {
  Regions r;
  r.filter_spectrum = ws;
  r.side_one = ws + Align256(g.FilterSpectrumBytes());
  r.side_two = r.side_one + PassBytes(g) / 2;
  r.work = r.side_one + Align256(PassBytes(g));
  return r;
}

// Forward and backward data: the correlation of `in` (x, or dy shifted) with the filter planes,
// scattered into `out_view`'s tensor.
absl::Status Correlate(Handle& h, const ConvProblem& p, const FftGeometry& g,
                       const FftShapes& shapes, FftPlanesView in_view, const float* in,
                       const float* w, bool backward_data, FftPlanesView out_view, float alpha,
                       float beta, float* out, char* ws) {
  FftPlanCache& plans = h.fft_plans();
  const Regions r = RegionsOf(g, ws);
  const int64_t f = g.Frequencies();
  // The filter's spectra, frequency-major: straight from small sub-filters; otherwise as planes
  // (in the spectra's region, which is larger) through cuFFT and a transpose.
  const FftFilterView filter = FilterView(p, g, w, backward_data);
  if (cuda::FftFilterSpectrumServes(g.taps, g.length)) {
    KILN_RETURN_IF_ERROR(Launched(
        cuda::LaunchFftFilterSpectrum(filter, r.filter_spectrum, h.stream()), "FFT filter DFT"));
  } else {
    KILN_RETURN_IF_ERROR(Launched(
        cuda::LaunchFftFilter(filter, reinterpret_cast<float*>(r.filter_spectrum), h.stream()),
        "FFT filter planes"));
    KILN_RETURN_IF_ERROR(
        plans.Execute(shapes.filter, h.stream(), r.filter_spectrum, r.side_one, r.work));
    KILN_RETURN_IF_ERROR(Transpose(h, r.side_one, g.cout * g.cin, f, r.filter_spectrum));
  }
  // cuFFT leaves the inverse unnormalized: divide by the points once, in the scatter.
  const float scale = alpha / static_cast<float>(g.Points());
  for (int64_t pass = 0; pass < g.passes; ++pass) {
    in_view.first_image = out_view.first_image = pass * g.chunk;
    in_view.images = out_view.images = g.chunk;
    KILN_RETURN_IF_ERROR(Launched(
        cuda::LaunchFftGather(in_view, in, reinterpret_cast<float*>(r.side_one), h.stream()),
        "FFT gather"));
    KILN_RETURN_IF_ERROR(plans.Execute(shapes.input, h.stream(), r.side_one, r.side_two, r.work));
    KILN_RETURN_IF_ERROR(Transpose(h, r.side_two, g.chunk * g.cin, f, r.side_one));
    // Per frequency: out (cout x chunk) = conj(filter) (cout x cin) in (cin x chunk). The
    // conjugate makes the circular product a cross-correlation.
    KILN_RETURN_IF_ERROR(SpectrumProducts(h, p, g, CUBLAS_OP_C, CUBLAS_OP_N, g.cout, g.chunk, g.cin,
                                          r.filter_spectrum, g.cin, r.side_one, g.cin, false,
                                          r.side_two, g.cout));
    KILN_RETURN_IF_ERROR(Transpose(h, r.side_two, f, g.chunk * g.cout, r.side_one));
    KILN_RETURN_IF_ERROR(plans.Execute(shapes.output, h.stream(), r.side_one, r.side_two, r.work));
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchFftScatter(out_view, reinterpret_cast<const float*>(r.side_two), scale,
                                        beta, out, h.stream()),
                 "FFT scatter"));
  }
  return absl::OkStatus();
}

// Backward filter: per pass, the spectra of x's phases and of dy's tiles; their products summed
// over the tile-images of every pass (in pass order) give the sub-filters' gradient spectra.
absl::Status FilterGradient(Handle& h, const ConvProblem& p, const FftGeometry& g,
                            const FftShapes& shapes, const float* x, const float* dy, float alpha,
                            float beta, float* dw, char* ws) {
  FftPlanCache& plans = h.fft_plans();
  const Regions r = RegionsOf(g, ws);
  FftPlanesView x_view = XView(p, g);
  FftPlanesView dy_view = YView(p, g, /*backward_data=*/false, /*outputs_only=*/true);
  const int64_t f = g.Frequencies();
  // Within each half: x's planes (then spectra) first, dy's after them.
  char* x_planes = r.side_one;
  char* dy_planes = x_planes + g.chunk * g.cin * g.Points() * 4;
  char* x_spectra = r.side_two;
  char* dy_spectra = x_spectra + g.chunk * g.cin * f * 8;
  char* x_by_frequency = r.side_one;
  char* dy_by_frequency = x_by_frequency + g.chunk * g.cin * f * 8;
  for (int64_t pass = 0; pass < g.passes; ++pass) {
    x_view.first_image = dy_view.first_image = pass * g.chunk;
    x_view.images = dy_view.images = g.chunk;
    KILN_RETURN_IF_ERROR(
        Launched(cuda::LaunchFftGather(x_view, x, reinterpret_cast<float*>(x_planes), h.stream()),
                 "FFT gather (x)"));
    KILN_RETURN_IF_ERROR(Launched(
        cuda::LaunchFftGather(dy_view, dy, reinterpret_cast<float*>(dy_planes), h.stream()),
        "FFT gather (dy)"));
    KILN_RETURN_IF_ERROR(plans.Execute(shapes.input, h.stream(), x_planes, x_spectra, r.work));
    KILN_RETURN_IF_ERROR(plans.Execute(shapes.filter, h.stream(), dy_planes, dy_spectra, r.work));
    KILN_RETURN_IF_ERROR(Transpose(h, x_spectra, g.chunk * g.cin, f, x_by_frequency));
    KILN_RETURN_IF_ERROR(Transpose(h, dy_spectra, g.chunk * g.cout, f, dy_by_frequency));
    // Per frequency: dW (cin x cout) += x (cin x chunk) conj(dy) (chunk x cout).
    KILN_RETURN_IF_ERROR(SpectrumProducts(h, p, g, CUBLAS_OP_N, CUBLAS_OP_C, g.cin, g.cout, g.chunk,
                                          x_by_frequency, g.cin, dy_by_frequency, g.cout, pass > 0,
                                          r.filter_spectrum, g.cin));
  }
  KILN_RETURN_IF_ERROR(Transpose(h, r.filter_spectrum, f, g.cout * g.cin, r.side_one));
  KILN_RETURN_IF_ERROR(plans.Execute(shapes.output, h.stream(), r.side_one, r.side_two, r.work));
  return Launched(cuda::LaunchFftFilterGradient(
                      FilterView(p, g, nullptr, false), reinterpret_cast<const float*>(r.side_two),
                      alpha / static_cast<float>(g.Points()), beta, dw, h.stream()),
                  "FFT filter gradient");
}

absl::StatusOr<size_t> WholeFftWorkspaceBytes(const Handle& handle, ConvDirection direction,
                                              const ConvProblem& p) {
  FftGeometry g;
  KILN_RETURN_IF_ERROR(Plan(direction, p, &g));
  KILN_ASSIGN_OR_RETURN(const size_t work,
                        WorkAreaBytes(handle.fft_plans(), ShapesOf(direction, g)));
  return static_cast<size_t>(LayoutBytes(g)) + work;
}

// One FFT convolution of the whole of `p`, planned as `g`.
absl::Status RunWholeFft(Handle& handle, ConvDirection direction, const ConvProblem& p,
                         const FftGeometry& g, float alpha, float beta, void* x, void* w, void* y,
                         void* workspace) {
  const FftShapes shapes = ShapesOf(direction, g);
  char* ws = static_cast<char*>(workspace);
  switch (direction) {
    case ConvDirection::kForward:
      return Correlate(handle, p, g, shapes, XView(p, g), static_cast<const float*>(x),
                       static_cast<const float*>(w), /*backward_data=*/false,
                       YView(p, g, false, false), alpha, beta, static_cast<float*>(y), ws);
    case ConvDirection::kBackwardData: {
      // dx's phases are the outputs: the x view, with nothing read past the tensor.
      return Correlate(handle, p, g, shapes, YView(p, g, /*backward_data=*/true, false),
                       static_cast<const float*>(y), static_cast<const float*>(w),
                       /*backward_data=*/true, XView(p, g), alpha, beta, static_cast<float*>(x),
                       ws);
    }
    case ConvDirection::kBackwardFilter:
      return FilterGradient(handle, p, g, shapes, static_cast<const float*>(x),
                            static_cast<const float*>(y), alpha, beta, static_cast<float*>(w), ws);
  }
  return absl::InvalidArgumentError("unknown convolution direction");
}

// Forward keeps the spectra of all the filters (C x K x frequencies, 8 bytes each) for its whole
// run: 4 GiB for FCN-8s's fc6 (512 -> 4096 channels, 7x7 over 22x22 planes), which alone set
// that plan's peak memory. Above this many bytes, forward runs as several FFT convolutions over
// slices of the output channels, each with its slice's filters (the input's spectra are made
// again per slice, a small cost where the filters dominate). A variable only so that tests can
// force slices on small problems.
int64_t filter_slice_bytes = int64_t{256} << 20;

// Output channels per slice of forward (all of p.k when it takes no slices), balanced so that the
// last slice is not a sliver.
int64_t ForwardSliceChannels(ConvDirection direction, const ConvProblem& p, const FftGeometry& g) {
  if (direction != ConvDirection::kForward || p.k <= 1 ||
      g.FilterSpectrumBytes() <= filter_slice_bytes) {
    return p.k;
  }
  const int64_t per_channel = std::max<int64_t>(1, g.FilterSpectrumBytes() / p.k);
  const int64_t slices = CeilDiv(p.k, std::max<int64_t>(1, filter_slice_bytes / per_channel));
  return CeilDiv(p.k, slices);
}

ConvProblem OutputChannels(const ConvProblem& p, int64_t k) {
  ConvProblem q = p;
  q.k = k;
  return q;
}

}  // namespace

absl::Status FftSupport(ConvDirection direction, const ConvProblem& p) {
  FftGeometry g;
  return Plan(direction, p, &g);
}

void SetFftPassBytesForTesting(int64_t bytes) { pass_bytes = bytes; }

void SetFftFilterSliceBytesForTesting(int64_t bytes) { filter_slice_bytes = bytes; }

int64_t FftForwardSlicesForTesting(const ConvProblem& p) {
  FftGeometry g;
  if (!Plan(ConvDirection::kForward, p, &g).ok()) return 0;
  return CeilDiv(p.k, ForwardSliceChannels(ConvDirection::kForward, p, g));
}

int64_t FftPassesForTesting(ConvDirection direction, const ConvProblem& p) {
  FftGeometry g;
  return Plan(direction, p, &g).ok() ? g.passes : 0;
}

absl::StatusOr<size_t> FftWorkspaceBytes(const Handle& handle, ConvDirection direction,
                                         const ConvProblem& p) {
  FftGeometry g;
  KILN_RETURN_IF_ERROR(Plan(direction, p, &g));
  const int64_t slice = ForwardSliceChannels(direction, p, g);
  if (slice == p.k) return WholeFftWorkspaceBytes(handle, direction, p);
  // Every slice has `slice` channels but the last, which may have fewer (and plan differently).
  KILN_ASSIGN_OR_RETURN(const size_t full,
                        WholeFftWorkspaceBytes(handle, direction, OutputChannels(p, slice)));
  const int64_t last = p.k - (CeilDiv(p.k, slice) - 1) * slice;
  KILN_ASSIGN_OR_RETURN(const size_t rest,
                        WholeFftWorkspaceBytes(handle, direction, OutputChannels(p, last)));
  return std::max(full, rest);
}

absl::Status RunFft(Handle& handle, ConvDirection direction, const ConvProblem& p, float alpha,
                    float beta, void* x, void* w, void* y, void* workspace) {
  FftGeometry g;
  KILN_RETURN_IF_ERROR(Plan(direction, p, &g));
  const int64_t slice = ForwardSliceChannels(direction, p, g);
  if (slice == p.k) return RunWholeFft(handle, direction, p, g, alpha, beta, x, w, y, workspace);
  // Output channels k0 on: the filters from k0 on, written from channel k0 of y.
  for (int64_t k0 = 0; k0 < p.k; k0 += slice) {
    const ConvProblem q = OutputChannels(p, std::min(slice, p.k - k0));
    FftGeometry qg;
    KILN_RETURN_IF_ERROR(Plan(direction, q, &qg));
    KILN_RETURN_IF_ERROR(RunWholeFft(handle, direction, q, qg, alpha, beta, x,
                                     static_cast<float*>(w) + k0 * p.w_stride[0],
                                     static_cast<float*>(y) + k0 * p.y_stride[1], workspace));
  }
  return absl::OkStatus();
}

}  // namespace dnn
}  // namespace kiln
