// Pooling: max, average including padding (Caffe AVE), average excluding padding, and global
// pooling, over 1 to 3 spatial dims, with Caffe's ceil rounding or floor rounding.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/pooling_params.h"
#include "ops/shape_util.h"

namespace kiln {

int64_t PooledSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_rounding,
                   bool any_pad) {
  const int64_t span = in + 2 * pad - kernel;
  int64_t out = (ceil_rounding ? (span + stride - 1) / stride : span / stride) + 1;
  if (any_pad && (out - 1) * stride >= in + pad) --out;
  return out;
}

absl::StatusOr<PoolingParams> PoolingParams::Create(const AttrMap& attrs, const TensorType& input) {
  PoolingParams p;
  const int ns = input.rank() - 2;
  const std::string& mode = std::get<std::string>(attrs.at("mode"));
  if (mode == "max") {
    p.mode = PoolingMode::kMax;
  } else if (mode == "avg") {
    p.mode = PoolingMode::kAverageIncludePad;
  } else if (mode == "avg_exclude_pad") {
    p.mode = PoolingMode::kAverageExcludePad;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("mode must be \"max\", \"avg\" or \"avg_exclude_pad\", got \"", mode, "\""));
  }
  const std::string& rounding = std::get<std::string>(attrs.at("rounding"));
  if (rounding != "floor" && rounding != "ceil") {
    return absl::InvalidArgumentError(
        absl::StrCat("rounding must be \"floor\" or \"ceil\", got \"", rounding, "\""));
  }
  auto ints = [&](const char* name) { return std::get<std::vector<int64_t>>(attrs.at(name)); };
  if (std::get<bool>(attrs.at("global"))) {
    KILN_ASSIGN_OR_RETURN(auto pad, ExpandSpatial(ints("pad"), ns, "pad"));
    KILN_ASSIGN_OR_RETURN(auto stride, ExpandSpatial(ints("stride"), ns, "stride"));
    for (int i = 0; i < ns; ++i) {
      if (pad[i] != 0 || stride[i] != 1) {
        return absl::InvalidArgumentError("global pooling needs pad 0 and stride 1");
      }
    }
    p.kernel.assign(input.dims().begin() + 2, input.dims().end());
    p.stride.assign(ns, 1);
    p.pad.assign(ns, 0);
  } else {
    if (ints("kernel").empty()) {
      return absl::InvalidArgumentError("kernel is required unless global is true");
    }
    KILN_ASSIGN_OR_RETURN(p.kernel, ExpandSpatial(ints("kernel"), ns, "kernel"));
    KILN_ASSIGN_OR_RETURN(p.stride, ExpandSpatial(ints("stride"), ns, "stride"));
    KILN_ASSIGN_OR_RETURN(p.pad, ExpandSpatial(ints("pad"), ns, "pad"));
  }
  bool any_pad = false;
  for (int i = 0; i < ns; ++i) any_pad |= p.pad[i] > 0;
  for (int i = 0; i < ns; ++i) {
    if (p.kernel[i] < 1) return absl::InvalidArgumentError("kernel must be >= 1");
    if (p.stride[i] < 1) return absl::InvalidArgumentError("stride must be >= 1");
    if (p.pad[i] < 0) return absl::InvalidArgumentError("pad must be >= 0");
    if (p.pad[i] >= p.kernel[i]) {
      return absl::InvalidArgumentError(absl::StrCat("pad ", p.pad[i],
                                                     " must be smaller than kernel ", p.kernel[i],
                                                     " (spatial dim ", i, ")"));
    }
    const int64_t in = input.dim(2 + i);
    if (in + 2 * p.pad[i] < p.kernel[i]) {
      return absl::InvalidArgumentError(absl::StrCat("spatial dim ", i, ": padded input ",
                                                     in + 2 * p.pad[i], " is smaller than kernel ",
                                                     p.kernel[i]));
    }
    p.output.push_back(
        PooledSize(in, p.kernel[i], p.stride[i], p.pad[i], rounding == "ceil", any_pad));
  }
  return p;
}

namespace {

absl::StatusOr<std::vector<TensorType>> InferPooling(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  if (x.rank() < 3 || x.rank() > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("input must be N,C plus 1 to 3 spatial dims, got ", DimsToString(x.dims())));
  }
  KILN_ASSIGN_OR_RETURN(PoolingParams p, PoolingParams::Create(ctx.attrs(), x));
  std::vector<int64_t> out = {x.dim(0), x.dim(1)};
  out.insert(out.end(), p.output.begin(), p.output.end());
  return std::vector<TensorType>{OutputLike(x, out)};
}

}  // namespace

absl::Status RegisterPoolingOps(OpRegistry& registry) {
  OpDef def;
  def.name = "Pooling";
  def.family = "pooling";
  def.input_names = {"x"};
  def.attrs = {{"mode", AttrKind::kString, AttrValue(std::string("max"))},
               {"kernel", AttrKind::kInts, AttrValue(std::vector<int64_t>{})},
               {"stride", AttrKind::kInts, AttrValue(std::vector<int64_t>{1})},
               {"pad", AttrKind::kInts, AttrValue(std::vector<int64_t>{0})},
               {"global", AttrKind::kBool, AttrValue(false)},
               {"rounding", AttrKind::kString, AttrValue(std::string("floor"))}};
  def.infer_types = InferPooling;
  def.differentiable = true;
  def.summary = "Max / average (incl. or excl. padding) / global pooling; floor or ceil rounding.";
  return registry.Register(std::move(def));
}

}  // namespace kiln
