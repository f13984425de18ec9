#include "ops/shape_util.h"

#include "absl/strings/str_cat.h"

namespace kiln {

absl::StatusOr<std::vector<int64_t>> ExpandSpatial(const std::vector<int64_t>& values,
                                                   int num_spatial, const std::string& what) {
  if (values.size() == 1) return std::vector<int64_t>(num_spatial, values[0]);
  if (static_cast<int>(values.size()) == num_spatial) return values;
  return absl::InvalidArgumentError(absl::StrCat(
      what, " has ", values.size(), " values; give 1 or one per spatial dim (", num_spatial, ")"));
}

absl::StatusOr<int> NormalizeAxis(int64_t axis, int rank, const std::string& what) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", axis, " is out of range for rank ", rank));
  }
  return static_cast<int>(a);
}

absl::StatusOr<TensorType> OutputLike(const TensorType& like, const std::vector<int64_t>& dims) {
  // Channels-last when `like` keeps its channels innermost: packed NHWC, or a channel range of
  // a larger NHWC buffer (a Concat's producers write into one).
  const bool channels_minor = (like.rank() == 4 || like.rank() == 5) && like.dim(1) > 1 &&
                              like.stride(1) == 1 && !like.IsContiguous();
  const Layout layout = (like.IsChannelsLast() || channels_minor) && !like.IsContiguous() &&
                                dims.size() == static_cast<size_t>(like.rank())
                            ? Layout::kChannelsLast
                            : Layout::kRowMajor;
  // Dims computed from attributes (a pad of 2e9) may not make a tensor: an error, not an abort.
  return TensorType::CreateWithLayout(like.dtype(), dims, layout);
}

absl::Status CheckFusedActivation(const InferContext& ctx) {
  if (!ctx.attrs().count("activation")) return absl::OkStatus();
  const std::string& act = ctx.GetString("activation");
  if (act != "none" && act != "relu") {
    return absl::InvalidArgumentError(
        absl::StrCat("activation '", act, "': use \"none\" or \"relu\""));
  }
  if (act == "none" && ctx.GetFloat("negative_slope") != 0) {
    return absl::InvalidArgumentError("negative_slope needs activation \"relu\"");
  }
  return absl::OkStatus();
}

absl::Status RequireFloat(const TensorType& t, const std::string& what) {
  if (IsFloatingPoint(t.dtype())) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be f32, f16 or bf16, got ", t.ToString()));
}

absl::Status RequireDims(const TensorType& t, const std::vector<int64_t>& dims,
                         const std::string& what) {
  if (t.dims() == dims) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " must have shape ", DimsToString(dims),
                                                 ", got ", DimsToString(t.dims())));
}

int64_t ProductOfDims(const std::vector<int64_t>& dims, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= dims[i];
  return p;
}

}  // namespace kiln
