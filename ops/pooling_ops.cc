// Pooling: max, average including padding (Caffe AVE), average excluding padding, and global
// pooling, over 1 to 3 spatial dims, with Caffe's ceil rounding or floor rounding.
#include "absl/strings/str_cat.h"
#include "base/checked_int.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/pooling_params.h"
#include "ops/shape_util.h"

namespace kiln {

absl::StatusOr<int64_t> PooledSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                   bool ceil_rounding, bool any_pad) {
  // Checked: kernel, stride and pad come from the user's file. With in + 2 pad >= kernel (the
  // caller's check), span >= 0 and every later value is at most span + stride.
  const std::optional<int64_t> padded = CheckedAdd(in, pad);
  const std::optional<int64_t> span = padded ? CheckedSub(*padded - kernel, -pad) : std::nullopt;
  const std::optional<int64_t> rounded = span ? CheckedAdd(*span, stride - 1) : std::nullopt;
  if (!rounded) {
    return absl::InvalidArgumentError(absl::StrCat("input ", in, " with pad ", pad, ", kernel ",
                                                   kernel, " and stride ", stride,
                                                   " overflows 64-bit sizes"));
  }
  int64_t out = (ceil_rounding ? *rounded / stride : *span / stride) + 1;
  if (any_pad && (out - 1) * stride >= *padded) --out;
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
    // in + 2 pad < kernel, without forming the sum: pad < kernel, so kernel - 2 pad fits.
    if (in < (p.kernel[i] - p.pad[i]) - p.pad[i]) {
      return absl::InvalidArgumentError(absl::StrCat("spatial dim ", i, ": input ", in,
                                                     " padded by ", p.pad[i],
                                                     " on each side is "
                                                     "smaller than kernel ",
                                                     p.kernel[i]));
    }
    absl::StatusOr<int64_t> size =
        PooledSize(in, p.kernel[i], p.stride[i], p.pad[i], rounding == "ceil", any_pad);
    if (!size.ok()) return Annotate(size.status(), absl::StrCat("spatial dim ", i));
    p.output.push_back(*size);
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
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(x, out));
  return std::vector<TensorType>{result};
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
