// The primitive API's descriptors, modelled on cuDNN's: a tensor is a dtype, dimensions and
// element strides (so NCHW, NHWC and sub-regions of larger tensors are all one descriptor), a
// filter is a dtype, a layout and dimensions, and a convolution is padding, strides, dilation,
// groups, mode and math mode. Creation validates and returns InvalidArgument naming the field.
#ifndef KILN_DNN_DESCRIPTORS_H_
#define KILN_DNN_DESCRIPTORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"

namespace kiln {
namespace dnn {

// The order of a packed 4-d/5-d tensor's dimensions in memory.
enum class TensorFormat { kNCHW, kNHWC };

// The most dimensions a tensor descriptor may have.
constexpr int kMaxTensorRank = 8;

// A tensor of rank 1 to 8. Convolution and pooling want rank 4 (N, C, H, W) or 5 (N, C, D, H, W);
// dims are always listed in that logical order, whatever the memory order the strides describe
// (so NHWC is a matter of strides). Strides are in elements; a stride of 0 broadcasts.
struct TensorDescriptor {
  DataType dtype = DataType::kF32;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;

  // Validates rank (1 to 8), positive dims, non-negative strides and a floating-point dtype.
  static absl::StatusOr<TensorDescriptor> Create(DataType dtype, std::vector<int64_t> dims,
                                                 std::vector<int64_t> strides);
  // Packed strides for `format`; dims in logical order (N, C, spatial...); kNHWC wants rank >= 3.
  static absl::StatusOr<TensorDescriptor> CreatePacked(DataType dtype, TensorFormat format,
                                                       std::vector<int64_t> dims);

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t ElementCount() const;
  // Elements between the first and one past the last addressed element: what the buffer must
  // hold.
  int64_t ElementSpan() const;
  std::string ToString() const;
};

// A packed filter (K, C/groups, [T,] R, S) stored as KCRS or KRSC (the latter is `kNHWC`).
struct FilterDescriptor {
  DataType dtype = DataType::kF32;
  TensorFormat format = TensorFormat::kNCHW;
  std::vector<int64_t> dims;

  static absl::StatusOr<FilterDescriptor> Create(DataType dtype, TensorFormat format,
                                                 std::vector<int64_t> dims);
  int rank() const { return static_cast<int>(dims.size()); }
  int64_t ElementCount() const;
  // Element strides in logical (K, C, [T,] R, S) order.
  std::vector<int64_t> Strides() const;
  std::string ToString() const;
};

// Cross-correlation (what deep-learning frameworks call convolution) or true convolution (the
// filter flipped in every spatial dimension).
enum class ConvolutionMode { kCrossCorrelation, kConvolution };

// How f32 data is multiplied: strict IEEE FP32 fused multiply-adds, or TF32 tensor cores (10-bit
// mantissa inputs, f32 accumulation). f16 and bf16 data always use tensor cores with f32
// accumulation, whatever this says.
enum class MathMode { kFp32, kTf32 };

// Padding, strides and dilation per spatial dimension (2 or 3 of each), groups and modes.
struct ConvolutionDescriptor {
  std::vector<int64_t> pads;  // before each spatial dim (and after it, unless pads_end is set)
  // Padding after each spatial dim when it differs from `pads` (empty: symmetric, as in cuDNN).
  // Lets a graph compute a band of an output (passes/split_rows_for_memory.cc); the forward
  // direction serves it, the backward directions refuse it.
  std::vector<int64_t> pads_end;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  int64_t groups = 1;
  ConvolutionMode mode = ConvolutionMode::kCrossCorrelation;
  MathMode math = MathMode::kFp32;

  static absl::StatusOr<ConvolutionDescriptor> Create(
      std::vector<int64_t> pads, std::vector<int64_t> strides, std::vector<int64_t> dilations,
      int64_t groups = 1, ConvolutionMode mode = ConvolutionMode::kCrossCorrelation,
      MathMode math = MathMode::kFp32);
  // The same descriptor with pads_end: asymmetric padding (forward only). Each entry >= 0.
  absl::StatusOr<ConvolutionDescriptor> WithPadsEnd(std::vector<int64_t> end) const;
  int spatial_rank() const { return static_cast<int>(pads.size()); }
  int64_t PadEnd(int i) const { return pads_end.empty() ? pads[i] : pads_end[i]; }
  bool IsSymmetric() const { return pads_end.empty() || pads_end == pads; }
  std::string ToString() const;
};

// The output dims (N, K, [O,] P, Q) of convolving `x` with `w` under `conv`, as cuDNN's
// GetConvolutionNdForwardOutputDim: out = (in + 2 pad - dilation (filter - 1) - 1) / stride + 1
// (pad + pad_end in place of 2 pad when the padding is asymmetric).
// InvalidArgument when ranks, channels or groups disagree or an output dim would be < 1.
absl::StatusOr<std::vector<int64_t>> ConvolutionOutputDims(const TensorDescriptor& x,
                                                           const FilterDescriptor& w,
                                                           const ConvolutionDescriptor& conv);

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_DESCRIPTORS_H_
