#include "dnn/descriptors.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace dnn {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 46;

absl::Status CheckFloat(DataType dtype, const char* what) {
  if (IsFloatingPoint(dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": dtype ", DataTypeName(dtype), " is not f32, f16 or bf16"));
}

// Tensors have rank 1 to kMaxTensorRank (convolution checks its own 4 or 5); filters 4 or 5.
absl::Status CheckDims(const std::vector<int64_t>& dims, const char* what, size_t min_rank,
                       size_t max_rank) {
  if (dims.size() < min_rank || dims.size() > max_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": rank ", dims.size(), " (want ", min_rank, " to ", max_rank, ")"));
  }
  int64_t count = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dim ", i, " is ", dims[i], " (must be >= 1)"));
    }
    if (dims[i] > kMaxElements / count) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": dims [", absl::StrJoin(dims, ", "), "] are too large"));
    }
    count *= dims[i];
  }
  return absl::OkStatus();
}

// Packed strides for logical dims (N, C, spatial...) laid out as `format`.
std::vector<int64_t> PackedStrides(TensorFormat format, const std::vector<int64_t>& dims) {
  const size_t rank = dims.size();
  std::vector<int64_t> strides(rank);
  if (format == TensorFormat::kNCHW) {
    int64_t s = 1;
    for (size_t i = rank; i-- > 0;) {
      strides[i] = s;
      s *= dims[i];
    }
  } else {  // N, spatial..., C
    int64_t s = 1;
    strides[1] = s;
    s *= dims[1];
    for (size_t i = rank; i-- > 2;) {
      strides[i] = s;
      s *= dims[i];
    }
    strides[0] = s;
  }
  return strides;
}

}  // namespace

absl::StatusOr<TensorDescriptor> TensorDescriptor::Create(DataType dtype, std::vector<int64_t> dims,
                                                          std::vector<int64_t> strides) {
  if (absl::Status s = CheckFloat(dtype, "tensor descriptor"); !s.ok()) return s;
  if (absl::Status s = CheckDims(dims, "tensor descriptor", 1, kMaxTensorRank); !s.ok()) {
    return s;
  }
  if (strides.size() != dims.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor descriptor: ", strides.size(), " strides for ", dims.size(), " dims"));
  }
  int64_t span = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (strides[i] < 0 || strides[i] > kMaxElements) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor descriptor: stride ", i, " is ", strides[i]));
    }
    span += (dims[i] - 1) * strides[i];
    if (span > kMaxElements) {
      return absl::InvalidArgumentError("tensor descriptor: strides address too many elements");
    }
  }
  TensorDescriptor d;
  d.dtype = dtype;
  d.dims = std::move(dims);
  d.strides = std::move(strides);
  return d;
}

absl::StatusOr<TensorDescriptor> TensorDescriptor::CreatePacked(DataType dtype, TensorFormat format,
                                                                std::vector<int64_t> dims) {
  const size_t min_rank = format == TensorFormat::kNHWC ? 3 : 1;
  if (absl::Status s = CheckDims(dims, "tensor descriptor", min_rank, kMaxTensorRank); !s.ok()) {
    return s;
  }
  std::vector<int64_t> strides = PackedStrides(format, dims);
  return Create(dtype, std::move(dims), std::move(strides));
}

int64_t TensorDescriptor::ElementCount() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t TensorDescriptor::ElementSpan() const {
  int64_t span = 1;
  for (size_t i = 0; i < dims.size(); ++i) span += (dims[i] - 1) * strides[i];
  return span;
}

std::string TensorDescriptor::ToString() const {
  return absl::StrCat(DataTypeName(dtype), "[", absl::StrJoin(dims, ","), "] strides [",
                      absl::StrJoin(strides, ","), "]");
}

absl::StatusOr<FilterDescriptor> FilterDescriptor::Create(DataType dtype, TensorFormat format,
                                                          std::vector<int64_t> dims) {
  if (absl::Status s = CheckFloat(dtype, "filter descriptor"); !s.ok()) return s;
  if (absl::Status s = CheckDims(dims, "filter descriptor", 4, 5); !s.ok()) return s;
  FilterDescriptor d;
  d.dtype = dtype;
  d.format = format;
  d.dims = std::move(dims);
  return d;
}

int64_t FilterDescriptor::ElementCount() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> FilterDescriptor::Strides() const { return PackedStrides(format, dims); }

std::string FilterDescriptor::ToString() const {
  return absl::StrCat(DataTypeName(dtype), format == TensorFormat::kNCHW ? " KCRS[" : " KRSC[",
                      absl::StrJoin(dims, ","), "]");
}

absl::StatusOr<ConvolutionDescriptor> ConvolutionDescriptor::Create(
    std::vector<int64_t> pads, std::vector<int64_t> strides, std::vector<int64_t> dilations,
    int64_t groups, ConvolutionMode mode, MathMode math) {
  const size_t nd = pads.size();
  if (nd != 2 && nd != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("convolution descriptor: ", nd, " pads (want 2 or 3 spatial dims)"));
  }
  if (strides.size() != nd || dilations.size() != nd) {
    return absl::InvalidArgumentError(absl::StrCat("convolution descriptor: ", nd, " pads, ",
                                                   strides.size(), " strides, ", dilations.size(),
                                                   " dilations (must all match)"));
  }
  for (size_t i = 0; i < nd; ++i) {
    if (pads[i] < 0 || pads[i] > (1 << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("convolution descriptor: pad ", i, " is ", pads[i]));
    }
    if (strides[i] < 1 || strides[i] > (1 << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("convolution descriptor: stride ", i, " is ", strides[i]));
    }
    if (dilations[i] < 1 || dilations[i] > (1 << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("convolution descriptor: dilation ", i, " is ", dilations[i]));
    }
  }
  if (groups < 1) {
    return absl::InvalidArgumentError(absl::StrCat("convolution descriptor: groups is ", groups));
  }
  ConvolutionDescriptor d;
  d.pads = std::move(pads);
  d.strides = std::move(strides);
  d.dilations = std::move(dilations);
  d.groups = groups;
  d.mode = mode;
  d.math = math;
  return d;
}

absl::StatusOr<ConvolutionDescriptor> ConvolutionDescriptor::WithPadsEnd(
    std::vector<int64_t> end) const {
  if (end.size() != pads.size()) {
    return absl::InvalidArgumentError(absl::StrCat("convolution descriptor: ", end.size(),
                                                   " end pads for ", pads.size(), " spatial dims"));
  }
  for (size_t i = 0; i < end.size(); ++i) {
    if (end[i] < 0 || end[i] > (1 << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("convolution descriptor: end pad ", i, " is ", end[i]));
    }
  }
  ConvolutionDescriptor d = *this;
  d.pads_end = std::move(end);
  return d;
}

std::string ConvolutionDescriptor::ToString() const {
  return absl::StrCat(
      "pad [", absl::StrJoin(pads, ","), "]",
      IsSymmetric() ? "" : absl::StrCat(" end [", absl::StrJoin(pads_end, ","), "]"), " stride [",
      absl::StrJoin(strides, ","), "] dilation [", absl::StrJoin(dilations, ","), "] groups ",
      groups, mode == ConvolutionMode::kConvolution ? " convolution" : "",
      math == MathMode::kTf32 ? " tf32" : "");
}

absl::StatusOr<std::vector<int64_t>> ConvolutionOutputDims(const TensorDescriptor& x,
                                                           const FilterDescriptor& w,
                                                           const ConvolutionDescriptor& conv) {
  const int nd = conv.spatial_rank();
  if (x.rank() != nd + 2 || w.rank() != nd + 2) {
    return absl::InvalidArgumentError(absl::StrCat("convolution: x has rank ", x.rank(),
                                                   ", filter rank ", w.rank(), ", convolution ", nd,
                                                   " spatial dims (want ", nd + 2, " for both)"));
  }
  if (w.dims[0] % conv.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "convolution: ", w.dims[0], " filters do not split into ", conv.groups, " groups"));
  }
  if (x.dims[1] != w.dims[1] * conv.groups) {
    return absl::InvalidArgumentError(absl::StrCat("convolution: x has ", x.dims[1],
                                                   " channels but the filter expects ", w.dims[1],
                                                   " x ", conv.groups, " groups"));
  }
  std::vector<int64_t> out = {x.dims[0], w.dims[0]};
  for (int i = 0; i < nd; ++i) {
    const int64_t extent = conv.dilations[i] * (w.dims[2 + i] - 1) + 1;
    const int64_t padded = x.dims[2 + i] + conv.pads[i] + conv.PadEnd(i);
    if (padded < extent) {
      return absl::InvalidArgumentError(absl::StrCat(
          "convolution: spatial dim ", i, ": input ", x.dims[2 + i], " + pads ", conv.pads[i],
          " and ", conv.PadEnd(i), " is smaller than the dilated filter extent ", extent));
    }
    out.push_back((padded - extent) / conv.strides[i] + 1);
  }
  return out;
}

}  // namespace dnn
}  // namespace kiln
