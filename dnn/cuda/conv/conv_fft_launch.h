// Plain C++ entry points of the FFT convolution's data movement (conv_fft.cu). The FFT algorithm
// runs every direction as a unit-stride cross-correlation between dense real "planes" that cuFFT
// transforms:
//   - a stride s is folded into phases: phase a of an axis holds the points s t + a, so the
//     s_h x s_w phases become extra channels (plane channel c * s_h s_w + a_h s_w + a_w) and the
//     filter splits into ceil(R / s)-tap sub-filters;
//   - each axis is cut into overlap-save tiles: tile j's plane point t is the source point
//     j step + t, and a tile yields `step` outputs from `length` points (the FFT size);
//   - a tile-image is (n, tile_h, tile_w), numbered n-major; a pass handles a run of them.
// Planes are [tile-image][channel][length_h][length_w] f32. Each entry returns the launch's
// cudaError_t as an int.
#ifndef KILN_DNN_CUDA_CONV_CONV_FFT_LAUNCH_H_
#define KILN_DNN_CUDA_CONV_CONV_FFT_LAUNCH_H_

#include <cstdint>

#include "dnn/host_device.h"

namespace kiln {
namespace cuda {

// How one spatial axis of a tensor maps onto plane points.
struct FftAxisMap {
  int64_t extent = 1;  // the tensor's size on this axis
  int64_t stride = 0;  // its element stride in the tensor
  int64_t phases = 1;  // s: phase a's point t is tensor index s t + a - offset
  int64_t offset = 0;
  int64_t step = 1;    // points of a tile that are its outputs (tile j starts at j step)
  int64_t origin = 0;  // scatter: the phase point where tile 0 starts
  int64_t window = 1;  // plane points at or past `window` are zero
  int64_t tiles = 1;
  int length = 1;  // the FFT size
};

// A run of tile-images of an NC(H)(W) tensor view, or the planes they fill.
struct FftPlanesView {
  int64_t n = 0, channels = 0;  // the tensor's images and channels (phases not counted)
  int64_t n_stride = 0, c_stride = 0;
  FftAxisMap axis[2];                   // h, w
  int64_t first_image = 0, images = 0;  // tile-images of this pass (past the last: zero)
  // Kernels take the plane channels (channels x phases) and images as grid dimensions: at most
  // 65535 channels, 2^31 - 1 images per pass.
  KILN_HD int64_t PhaseCount() const { return axis[0].phases * axis[1].phases; }
  KILN_HD int64_t TilesPerImage() const { return axis[0].tiles * axis[1].tiles; }
};

// planes[image][c * phases + phase][t_h][t_w] = the tensor's point, zero outside it, outside the
// window and past the last tile-image.
int LaunchFftGather(const FftPlanesView& v, const float* tensor, float* planes, void* stream);

// tensor = alpha * planes (at the point each tensor element maps to; zero where it maps past the
// last tile) + beta * tensor, for the tensor elements whose tile-image is in this pass. beta == 0
// does not read the tensor.
int LaunchFftScatter(const FftPlanesView& v, const float* planes, float alpha, float beta,
                     float* tensor, void* stream);

// The filter as planes [outputs][inputs][length_h][length_w]: sub-filter taps of each phase at
// the plane's origin, zero elsewhere.
struct FftFilterView {
  const float* w = nullptr;
  int64_t k = 0, c = 0;
  int64_t k_stride = 0, c_stride = 0, tap_stride[2] = {};
  int64_t filter[2] = {};  // R, S
  int64_t phases[2] = {};  // stride h, w
  int64_t taps[2] = {};    // ceil(R / s): sub-filter extent
  int length[2] = {};
  bool convolution = false;  // true convolution: the filter is reversed first
  // Forward: outputs k, inputs c x phases. Backward data: outputs c x phases, inputs k, and each
  // sub-filter's taps reversed within `taps` (dx is dy fully convolved with the sub-filter).
  bool backward_data = false;
};
int LaunchFftFilter(const FftFilterView& f, float* planes, void* stream);

// The filter's spectra (cuFFT's forward DFT of the planes above, unnormalized), computed straight
// from the taps: spectrum[frequency][output][input], complex f32. Serves sub-filters of at most
// 64 taps whose rows' spectra (taps_h x (length_w / 2 + 1)) number at most 144 (shared memory),
// FFT sizes up to 128.
constexpr int kFftDirectFilterTaps = 64, kFftDirectFilterRowSpectra = 144;
KILN_HD bool FftFilterSpectrumServes(const int64_t taps[2], const int length[2]) {
  return taps[0] * taps[1] <= kFftDirectFilterTaps &&
         taps[0] * (length[1] / 2 + 1) <= kFftDirectFilterRowSpectra;
}
int LaunchFftFilterSpectrum(const FftFilterView& f, void* spectrum, void* stream);

// Backward filter: dw = alpha * planes (sub-filter tap of each phase, [k][c x phases][t_h][t_w])
// + beta * dw; `w` in `f` is unused, dw is written through f's strides.
int LaunchFftFilterGradient(const FftFilterView& f, const float* planes, float alpha, float beta,
                            float* dw, void* stream);

// out[col][row] = in[row][col] for rows x cols matrices of complex f32 (float2): spectra between
// plane-major [plane][frequency] and frequency-major [frequency][plane].
int LaunchComplexTranspose(const void* in, int64_t rows, int64_t cols, void* out, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_CONV_FFT_LAUNCH_H_
