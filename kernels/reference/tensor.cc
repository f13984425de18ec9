// Reference data-movement ops: Concat, Slice, Split, Flatten, Reshape, Crop, Convert; and
// CropGradient.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::Status Concat(const Node& node, const DenseArgs& a) {
  const TensorType& out = a.out_types[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), out.rank(), "axis"));
  const int64_t outer = ProductOfDims(out.dims(), 0, axis);
  const int64_t inner = ProductOfDims(out.dims(), axis + 1, out.rank());
  int64_t at = 0;  // Position along the axis.
  for (size_t i = 0; i < a.in.size(); ++i) {
    const int64_t len = a.in_types[i].dim(axis) * inner;
    for (int64_t o = 0; o < outer; ++o) {
      std::copy(a.in[i] + o * len, a.in[i] + (o + 1) * len,
                a.out[0] + o * out.dim(axis) * inner + at * inner);
    }
    at += a.in_types[i].dim(axis);
  }
  return absl::OkStatus();
}

absl::Status Slice(const Node& node, const DenseArgs& a) {
  const TensorType& in = a.in_types[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), in.rank(), "axis"));
  const int64_t outer = ProductOfDims(in.dims(), 0, axis);
  const int64_t inner = ProductOfDims(in.dims(), axis + 1, in.rank());
  int64_t at = 0;
  for (size_t i = 0; i < a.out.size(); ++i) {
    const int64_t len = a.out_types[i].dim(axis) * inner;
    for (int64_t o = 0; o < outer; ++o) {
      const float* src = a.in[0] + o * in.dim(axis) * inner + at * inner;
      std::copy(src, src + len, a.out[i] + o * len);
    }
    at += a.out_types[i].dim(axis);
  }
  return absl::OkStatus();
}

// Split, Flatten and Reshape keep the row-major element order: each output is a copy.
absl::Status CopyToEveryOutput(const Node&, const DenseArgs& a) {
  const int64_t n = a.in_types[0].num_elements();
  for (float* out : a.out) std::copy(a.in[0], a.in[0] + n, out);
  return absl::OkStatus();
}

absl::Status Crop(const Node& node, const DenseArgs& a) {
  const TensorType& in = a.in_types[0];
  const TensorType& out = a.out_types[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), in.rank(), "axis"));
  const auto& offsets = node.GetInts("offset");
  std::vector<int64_t> offset(in.rank(), 0);
  for (int d = axis; d < in.rank(); ++d) {
    offset[d] = offsets.empty() ? 0 : offsets.size() == 1 ? offsets[0] : offsets[d - axis];
  }
  std::vector<int64_t> index(out.rank(), 0);
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    int64_t rest = i, src = 0;
    for (int d = out.rank() - 1; d >= 0; --d) {
      index[d] = rest % out.dim(d);
      rest /= out.dim(d);
    }
    for (int d = 0; d < in.rank(); ++d) src = src * in.dim(d) + index[d] + offset[d];
    a.out[0][i] = a.in[0][src];
  }
  return absl::OkStatus();
}

absl::Status CropGradient(const Node& node, const DenseArgs& a) {
  const TensorType& dy = a.in_types[0];
  const TensorType& dx = a.out_types[0];
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(node.GetInt("axis"), dx.rank(), "axis"));
  const auto& offsets = node.GetInts("offset");
  std::vector<int64_t> offset(dx.rank(), 0);
  for (int d = axis; d < dx.rank(); ++d) {
    offset[d] = offsets.empty() ? 0 : offsets.size() == 1 ? offsets[0] : offsets[d - axis];
    if (offset[d] + dy.dim(d) > dx.dim(d)) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node.name(), "': offset ", offset[d],
                                                     " on axis ", d, " runs past the input"));
    }
  }
  std::fill(a.out[0], a.out[0] + dx.num_elements(), 0.0f);
  std::vector<int64_t> index(dy.rank(), 0);
  for (int64_t i = 0; i < dy.num_elements(); ++i) {
    int64_t rest = i, dst = 0;
    for (int d = dy.rank() - 1; d >= 0; --d) {
      index[d] = rest % dy.dim(d);
      rest /= dy.dim(d);
    }
    for (int d = 0; d < dx.rank(); ++d) dst = dst * dx.dim(d) + index[d] + offset[d];
    a.out[0][dst] = a.in[0][i];
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceTensor(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Concat", Concat, "copy"));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Slice", Slice, "copy"));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Split", CopyToEveryOutput, "copy"));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Flatten", CopyToEveryOutput, "copy"));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Reshape", CopyToEveryOutput, "copy"));
  // The frame gathers and scatters any dtype and strides, so a conversion is a plain copy.
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Convert", CopyToEveryOutput, "copy"));
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Crop", Crop, "copy"));
  return RegisterReference(registry, "CropGradient", CropGradient, "copy");
}

}  // namespace kiln
