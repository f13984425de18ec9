#include "tests/ops/convolution/conv_cases.h"

#include <cstdlib>
#include <iostream>

#include "base/dtype.h"

namespace kiln {
namespace testing {

namespace {

template <typename T>
T Must(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) {
    std::cerr << "bad test case " << what << ": " << v.status() << "\n";
    std::abort();
  }
  return *std::move(v);
}

struct Spec {
  std::string name;
  std::vector<int64_t> x;  // N, C, [D,] H, W
  int64_t k;
  std::vector<int64_t> filter;  // [T,] R, S
  std::vector<int64_t> pad, stride, dilation;
  int64_t groups = 1;
  dnn::TensorFormat format = dnn::TensorFormat::kNCHW;
  bool sub_region = false;  // x and y are views into larger buffers
  bool convolution = false;
  float alpha = 1, beta = 0;
  std::vector<int64_t> pad_end = {};  // asymmetric padding after each dim (empty: = pad)
};

// Strides of `dims` as a window of a larger packed tensor (each dim padded by 1..3 elements), so
// consecutive rows/planes/images are not adjacent.
std::vector<int64_t> SubRegionStrides(const std::vector<int64_t>& dims, dnn::TensorFormat format) {
  std::vector<int64_t> outer = dims;
  for (size_t i = 0; i < outer.size(); ++i) outer[i] += 1 + i % 3;
  std::vector<int64_t> strides(dims.size());
  const size_t rank = dims.size();
  std::vector<size_t> order;  // slowest to fastest
  order.push_back(0);
  if (format == dnn::TensorFormat::kNCHW) {
    for (size_t i = 1; i < rank; ++i) order.push_back(i);
  } else {
    for (size_t i = 2; i < rank; ++i) order.push_back(i);
    order.push_back(1);
  }
  int64_t s = 1;
  for (size_t j = order.size(); j-- > 0;) {
    strides[order[j]] = s;
    s *= outer[order[j]];
  }
  return strides;
}

}  // namespace

std::vector<ConvCase> ConvTestCases(DataType dtype, dnn::MathMode math) {
  using F = dnn::TensorFormat;
  std::vector<Spec> specs = {
      {"basic_3x3", {2, 8, 9, 11}, 12, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"odd_5x5_stride2", {3, 5, 13, 10}, 7, {5, 5}, {2, 1}, {2, 2}, {1, 1}},
      {"stride3_pad0", {2, 6, 17, 14}, 9, {3, 2}, {0, 0}, {3, 3}, {1, 1}},
      {"stride4_11x11", {1, 3, 31, 27}, 8, {11, 11}, {0, 0}, {4, 4}, {1, 1}},
      {"dilation2", {2, 7, 15, 12}, 10, {3, 3}, {2, 2}, {1, 1}, {2, 2}},
      {"dilation2_stride2", {2, 4, 16, 15}, 6, {3, 3}, {1, 2}, {2, 2}, {2, 2}},
      {"groups2", {2, 12, 10, 9}, 16, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2},
      // CaffeNet's conv2 in small: FFT and Winograd run it group by group.
      {"groups2_5x5", {2, 8, 11, 10}, 12, {5, 5}, {2, 2}, {1, 1}, {1, 1}, 2},
      {"depthwise", {2, 9, 12, 11}, 9, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 9},
      {"one_by_one", {3, 16, 7, 9}, 24, {1, 1}, {0, 0}, {1, 1}, {1, 1}},
      {"one_by_one_stride2", {2, 10, 9, 9}, 6, {1, 1}, {0, 0}, {2, 2}, {1, 1}},
      // GEMM_1X1 at unequal strides whose grid misses the last row or column, blending into dx.
      {"one_by_one_stride3x2_alpha_beta",
       {2, 7, 10, 8},
       5,
       {1, 1},
       {0, 0},
       {3, 2},
       {1, 1},
       1,
       F::kNCHW,
       false,
       false,
       0.5f,
       1.25f},
      {"batch1", {1, 13, 8, 8}, 5, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"conv3d", {2, 4, 5, 7, 6}, 6, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
      {"conv3d_strided", {1, 3, 7, 8, 9}, 5, {3, 2, 3}, {1, 0, 1}, {2, 2, 1}, {1, 1, 2}},
      {"nhwc", {2, 16, 9, 10}, 12, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, F::kNHWC},
      {"nhwc_odd_c", {2, 5, 11, 9}, 7, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 1, F::kNHWC},
      {"nhwc_groups2", {2, 16, 8, 9}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, F::kNHWC},
      // Groups wide enough for the wgmma kernel (48 channels each, f16 and TF32), run group by
      // group, with a tail of channels in the second k tile.
      {"nhwc_groups2_wide", {2, 96, 7, 9}, 64, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, F::kNHWC},
      {"sub_region_nchw", {2, 6, 9, 8}, 5, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, F::kNCHW, true},
      {"sub_region_nhwc", {2, 8, 7, 9}, 6, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 1, F::kNHWC, true},
      {"true_convolution",
       {2, 5, 9, 8},
       6,
       {3, 2},
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       F::kNCHW,
       false,
       true},
      {"alpha_beta",
       {2, 8, 9, 9},
       8,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       F::kNCHW,
       false,
       false,
       0.75f,
       -0.5f},
      {"nhwc_alpha_beta_3d",
       {1, 8, 4, 6, 5},
       8,
       {2, 3, 3},
       {0, 1, 1},
       {1, 2, 1},
       {1, 1, 1},
       1,
       F::kNHWC,
       false,
       false,
       1.5f,
       0.25f},
      {"wide_k_reduction", {2, 64, 6, 6}, 40, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
      // Sized for the tensor-core tiles: channels that end inside a k tile, filters that end
      // inside a column tile, several row tiles, and a long reduction over few rows (split-K).
      {"nhwc_c72_k136", {2, 72, 7, 9}, 136, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, F::kNHWC},
      {"nhwc_stride2_dilation2", {2, 24, 17, 15}, 40, {3, 3}, {2, 2}, {2, 2}, {2, 2}, 1, F::kNHWC},
      {"nhwc_many_rows", {3, 16, 20, 21}, 24, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, F::kNHWC},
      {"nhwc_long_reduction", {1, 256, 6, 6}, 64, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, F::kNHWC},
      // 1x1: NCHW with 16-byte pixel runs (backward filter straight on x and dy), and NHWC.
      {"one_by_one_hw48", {2, 24, 6, 8}, 40, {1, 1}, {0, 0}, {1, 1}, {1, 1}},
      {"nhwc_one_by_one", {2, 24, 5, 6}, 16, {1, 1}, {0, 0}, {1, 1}, {1, 1}, 1, F::kNHWC},
      // Strided backward data by phases, with enough filters for the tensor-core tiles.
      {"stride2_k40_even_filter", {2, 12, 14, 11}, 40, {4, 4}, {1, 1}, {2, 2}, {1, 1}},
      {"nhwc_stride2_k40", {2, 16, 15, 13}, 40, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 1, F::kNHWC},
      // Few filters (the 8- and 16-wide tiles): forward with K = 6 and 13, and backward data
      // into 3 channels from 40, as in a first layer's gradient.
      {"nhwc_k6", {2, 40, 9, 10}, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, F::kNHWC},
      {"nhwc_k13", {1, 72, 8, 7}, 13, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, F::kNHWC},
      {"stride4_11x11_k40", {1, 3, 23, 23}, 40, {11, 11}, {0, 0}, {4, 4}, {1, 1}},
      // Deconvolutions as FCN upsamples (backward data: x is the deconvolution's output): few
      // channels, filter = 2 x stride, for the direct gather's phase walk; and a dilated one
      // whose taps of one phase are stride / gcd(stride, dilation) apart.
      {"deconv_s8_16x16", {2, 5, 42, 44}, 6, {16, 16}, {4, 4}, {8, 8}, {1, 1}},
      {"nhwc_deconv_s2_4x4", {2, 21, 18, 17}, 21, {4, 4}, {1, 1}, {2, 2}, {1, 1}, 1, F::kNHWC},
      {"deconv_s4_dilation2", {1, 3, 23, 21}, 4, {5, 5}, {3, 2}, {4, 4}, {2, 2}},
      // 5x5 at unit stride (Winograd F(2x2, 5x5)).
      {"five_by_five", {2, 6, 11, 10}, 7, {5, 5}, {2, 2}, {1, 1}, {1, 1}},
      // Enough 2x2 tiles (800) that Winograd backward filter splits them into chunks.
      {"many_tiles_3x3", {8, 8, 20, 20}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}},
      // True convolution with a 3x3 filter (Winograd reverses the filter in its transform).
      {"true_convolution_3x3",
       {2, 6, 8, 7},
       5,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       F::kNCHW,
       false,
       true},
      // Channels-last depthwise (the depthwise kernels of DIRECT, all three directions): the
      // compiled shapes (3x3 and 5x5 at stride 1 and 2) with 16-byte channel vectors, 2-element
      // vectors (6 channels), single channels (7), run-time shapes (dilation 2, 3x5 at unequal
      // strides), a sub-region, a true convolution with alpha/beta, and enough pixels that the
      // filter gradient splits its reduction.
      {"nhwc_depthwise_3x3", {2, 32, 13, 11}, 32, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 32, F::kNHWC},
      {"nhwc_depthwise_3x3_s2", {3, 24, 14, 15}, 24, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 24, F::kNHWC},
      {"nhwc_depthwise_5x5", {2, 16, 12, 9}, 16, {5, 5}, {2, 2}, {1, 1}, {1, 1}, 16, F::kNHWC},
      {"nhwc_depthwise_5x5_s2", {2, 40, 11, 13}, 40, {5, 5}, {2, 2}, {2, 2}, {1, 1}, 40, F::kNHWC},
      {"nhwc_depthwise_c6", {2, 6, 8, 9}, 6, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, F::kNHWC},
      {"nhwc_depthwise_c7_s2", {2, 7, 9, 10}, 7, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 7, F::kNHWC},
      {"nhwc_depthwise_dilation2",
       {2, 16, 12, 12},
       16,
       {3, 3},
       {2, 2},
       {1, 1},
       {2, 2},
       16,
       F::kNHWC},
      {"nhwc_depthwise_3x5_s2x1", {2, 8, 10, 11}, 8, {3, 5}, {1, 2}, {2, 1}, {1, 1}, 8, F::kNHWC},
      {"nhwc_depthwise_sub_region",
       {2, 16, 9, 8},
       16,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       16,
       F::kNHWC,
       true},
      {"nhwc_depthwise_true_convolution_alpha_beta",
       {2, 24, 7, 9},
       24,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       24,
       F::kNHWC,
       false,
       true,
       0.75f,
       -0.5f},
      {"nhwc_depthwise_many_pixels",
       {3, 64, 24, 24},
       64,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       64,
       F::kNHWC},
      // Wider than the largest FFT size, so the FFT algorithm tiles the rows (overlap-save), at
      // unit stride and at stride 2 (phases).
      {"fft_tiles_5x5", {1, 3, 9, 140}, 4, {5, 5}, {2, 2}, {1, 1}, {1, 1}},
      {"fft_tiles_7x7_stride2", {2, 3, 11, 291}, 5, {7, 7}, {3, 2}, {2, 2}, {1, 1}},
      // 81 taps: the FFT algorithm transforms the filter through cuFFT, not its direct DFT.
      {"fft_9x9", {2, 3, 12, 13}, 4, {9, 9}, {4, 4}, {1, 1}, {1, 1}},
      // Padding beyond the filter at stride 8: FCN-8s's upscore8 as
      // passes/shrink_deconvolution_to_crop leaves it (its backward data is the Deconvolution);
      // the sub-pixel phases of backward data get negative padding.
      {"pad_beyond_filter_16x16_s8", {2, 5, 18, 24}, 8, {16, 16}, {31, 20}, {8, 8}, {1, 1}},
      // First layers (the small-channel kernels; f32 forward up to 4 channels): 4 channels per tap
      // at even strides, 8 at odd ones; several pixel tiles and filter chunks; NCHW and NHWC
      // inputs.
      {"first_layer_nhwc_7x7_s2", {2, 3, 40, 37}, 64, {7, 7}, {3, 3}, {2, 2}, {1, 1}, 1, F::kNHWC},
      {"first_layer_11x11_s4_k96", {2, 3, 71, 67}, 96, {11, 11}, {0, 0}, {4, 4}, {1, 1}},
      {"first_layer_7x7_s2", {2, 3, 36, 38}, 64, {7, 7}, {3, 3}, {2, 2}, {1, 1}},
      {"first_layer_nhwc_3x3_s1", {2, 3, 19, 21}, 20, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, F::kNHWC},
      {"first_layer_c1_5x5", {3, 1, 14, 13}, 10, {5, 5}, {0, 0}, {1, 1}, {1, 1}},
      {"first_layer_c6_s2_k136", {1, 6, 23, 20}, 136, {5, 4}, {2, 1}, {2, 3}, {1, 1}, 1, F::kNHWC},
      {"first_layer_true_convolution",
       {2, 2, 15, 17},
       12,
       {5, 3},
       {2, 1},
       {2, 2},
       {1, 1},
       1,
       F::kNHWC,
       false,
       true},
      // 1x1 at stride 2 (ResNet's downsampling shortcuts): backward data's sub-pixel phases
      // include ones no tap reaches (odd rows and columns), which must come out 0 (or beta
      // times their old value).
      {"nhwc_one_by_one_stride2", {2, 24, 9, 10}, 40, {1, 1}, {0, 0}, {2, 2}, {1, 1}, 1, F::kNHWC},
      {"one_by_one_stride2_alpha_beta",
       {2, 16, 11, 8},
       24,
       {1, 1},
       {0, 0},
       {2, 2},
       {1, 1},
       1,
       F::kNCHW,
       false,
       false,
       0.75f,
       -0.5f},
      // Bands of rows with asymmetric padding (passes/split_rows_for_memory computes a
      // convolution's output a band at a time): the first band (top padding, none below) and the
      // last (the reverse), through Winograd (f32 3x3), the tensor-core kernels (NHWC, 72
      // channels) and the first-layer kernels (11x11 s4, 7x7 s2).
      {"band_first_3x3",
       {2, 8, 12, 10},
       16,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       F::kNCHW,
       false,
       false,
       1.0f,
       0.0f,
       {0, 1}},
      {"band_last_3x3",
       {2, 8, 12, 10},
       16,
       {3, 3},
       {0, 1},
       {1, 1},
       {1, 1},
       1,
       F::kNCHW,
       false,
       false,
       1.0f,
       0.0f,
       {1, 1}},
      {"nhwc_band_first_c72_k136",
       {2, 72, 9, 7},
       136,
       {3, 3},
       {1, 1},
       {1, 1},
       {1, 1},
       1,
       F::kNHWC,
       false,
       false,
       1.0f,
       0.0f,
       {0, 1}},
      {"band_first_layer_11x11_s4",
       {2, 3, 31, 67},
       96,
       {11, 11},
       {2, 0},
       {4, 4},
       {1, 1},
       1,
       F::kNCHW,
       false,
       false,
       1.0f,
       0.0f,
       {0, 0}},
      {"nhwc_band_last_7x7_s2",
       {2, 3, 20, 37},
       64,
       {7, 7},
       {0, 3},
       {2, 2},
       {1, 1},
       1,
       F::kNHWC,
       false,
       false,
       1.0f,
       0.0f,
       {3, 3}},
      {"first_layer_alpha_beta",
       {1, 4, 18, 16},
       18,
       {3, 3},
       {1, 1},
       {2, 2},
       {1, 1},
       1,
       F::kNHWC,
       false,
       false,
       0.75f,
       -0.5f},
  };
  std::vector<ConvCase> cases;
  for (const Spec& s : specs) {
    ConvCase c;
    c.name = s.name;
    c.alpha = s.alpha;
    c.beta = s.beta;
    c.conv = Must(
        dnn::ConvolutionDescriptor::Create(s.pad, s.stride, s.dilation, s.groups,
                                           s.convolution ? dnn::ConvolutionMode::kConvolution
                                                         : dnn::ConvolutionMode::kCrossCorrelation,
                                           math),
        s.name);
    if (!s.pad_end.empty()) c.conv = Must(c.conv.WithPadsEnd(s.pad_end), s.name);
    std::vector<int64_t> wdims = {s.k, s.x[1] / s.groups};
    wdims.insert(wdims.end(), s.filter.begin(), s.filter.end());
    c.w = Must(dnn::FilterDescriptor::Create(dtype, s.format, wdims), s.name);
    if (s.sub_region) {
      c.x =
          Must(dnn::TensorDescriptor::Create(dtype, s.x, SubRegionStrides(s.x, s.format)), s.name);
    } else {
      c.x = Must(dnn::TensorDescriptor::CreatePacked(dtype, s.format, s.x), s.name);
    }
    std::vector<int64_t> ydims = Must(dnn::ConvolutionOutputDims(c.x, c.w, c.conv), s.name);
    if (s.sub_region) {
      c.y = Must(dnn::TensorDescriptor::Create(dtype, ydims, SubRegionStrides(ydims, s.format)),
                 s.name);
    } else {
      c.y = Must(dnn::TensorDescriptor::CreatePacked(dtype, s.format, ydims), s.name);
    }
    c.problem = Must(dnn::MakeConvProblem(c.x, c.w, c.conv, c.y, "test case"), s.name);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<float> RandomValues(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

void RoundTo(DataType dtype, std::vector<float>& values) {
  for (float& v : values) {
    if (dtype == DataType::kF16) v = HalfToFloat(FloatToHalf(v));
    if (dtype == DataType::kBF16) v = BFloat16ToFloat(FloatToBFloat16(v));
  }
}

}  // namespace testing
}  // namespace kiln
