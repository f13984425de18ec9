// Convolution and Deconvolution (transposed convolution) over 1 to 3 spatial dims.
//
// Convolution(x[N,C,S...], filter[K,C/group,R...], bias[K]?) -> y[N,K,O...] with
//   O = floor((S + 2*pad - (dilation*(R-1)+1)) / stride) + 1.
// Deconvolution(x[N,C,S...], filter[C,K/group,R...], bias[K]?) -> y[N,K,O...] with
//   O = stride*(S-1) + dilation*(R-1)+1 - 2*pad  (Caffe's formula; no output padding).
// mode "cross_correlation" (what Caffe and cuDNN's default compute) or "convolution" (the
// filter flipped in every spatial dim).
#include "absl/strings/str_cat.h"
#include "base/checked_int.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/convolution_params.h"
#include "ops/shape_util.h"

namespace kiln {

absl::StatusOr<ConvolutionParams> ConvolutionParams::FromAttrs(const AttrMap& attrs,
                                                               int num_spatial) {
  ConvolutionParams p;
  auto get = [&](const char* name) { return std::get<std::vector<int64_t>>(attrs.at(name)); };
  KILN_ASSIGN_OR_RETURN(p.stride, ExpandSpatial(get("stride"), num_spatial, "stride"));
  KILN_ASSIGN_OR_RETURN(p.pad, ExpandSpatial(get("pad"), num_spatial, "pad"));
  KILN_ASSIGN_OR_RETURN(p.dilation, ExpandSpatial(get("dilation"), num_spatial, "dilation"));
  // Only Convolution has the attribute (Deconvolution and the gradient ops are symmetric).
  const auto end = attrs.find("pad_end");
  p.asymmetric = end != attrs.end() && !std::get<std::vector<int64_t>>(end->second).empty();
  if (p.asymmetric) {
    KILN_ASSIGN_OR_RETURN(p.pad_end, ExpandSpatial(std::get<std::vector<int64_t>>(end->second),
                                                   num_spatial, "pad_end"));
  } else {
    p.pad_end = p.pad;
  }
  p.group = std::get<int64_t>(attrs.at("group"));
  const std::string& mode = std::get<std::string>(attrs.at("mode"));
  if (mode != "cross_correlation" && mode != "convolution") {
    return absl::InvalidArgumentError(
        absl::StrCat("mode must be \"cross_correlation\" or \"convolution\", got \"", mode, "\""));
  }
  p.flip_filter = mode == "convolution";
  for (int i = 0; i < num_spatial; ++i) {
    if (p.stride[i] < 1) return absl::InvalidArgumentError("stride must be >= 1");
    if (p.dilation[i] < 1) return absl::InvalidArgumentError("dilation must be >= 1");
    if (!p.asymmetric && p.pad[i] < 0) return absl::InvalidArgumentError("pad must be >= 0");
  }
  if (p.group < 1) return absl::InvalidArgumentError("group must be >= 1");
  return p;
}

namespace {

std::vector<AttrDef> ConvAttrs() {
  return {{"stride", AttrKind::kInts, AttrValue(std::vector<int64_t>{1})},
          {"pad", AttrKind::kInts, AttrValue(std::vector<int64_t>{0})},
          {"dilation", AttrKind::kInts, AttrValue(std::vector<int64_t>{1})},
          {"group", AttrKind::kInt, AttrValue(int64_t{1})},
          {"mode", AttrKind::kString, AttrValue(std::string("cross_correlation"))}};
}

// Checks shared by both directions; returns the number of spatial dims.
absl::StatusOr<int> CheckConvInputs(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  if (x.rank() < 3 || x.rank() > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("input must be N,C plus 1 to 3 spatial dims, got ", DimsToString(x.dims())));
  }
  if (w.rank() != x.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("filter ", DimsToString(w.dims()), " must have the input's rank ", x.rank()));
  }
  if (w.dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("filter dtype ", DataTypeName(w.dtype()),
                                                   " differs from input dtype ",
                                                   DataTypeName(x.dtype())));
  }
  for (int i = 0; i < w.rank(); ++i) {
    if (w.dim(i) < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("filter ", DimsToString(w.dims()), " has an empty dim"));
    }
  }
  return x.rank() - 2;
}

absl::Status CheckBias(const InferContext& ctx, int64_t k) {
  if (ctx.num_inputs() < 3) return absl::OkStatus();
  const TensorType& b = ctx.input(2);
  if (b.dtype() != ctx.input(0).dtype()) {
    return absl::InvalidArgumentError("bias dtype differs from input dtype");
  }
  return RequireDims(b, {k}, "bias");
}

// The fused epilogue a compiler pass may give a Convolution: y = act(conv + bias + residual).
absl::Status CheckEpilogue(const InferContext& ctx, const TensorType& y) {
  KILN_RETURN_IF_ERROR(CheckFusedActivation(ctx));
  if (ctx.num_inputs() < 4) return absl::OkStatus();
  const TensorType& r = ctx.input(3);
  if (r.dtype() != y.dtype() || r.dims() != y.dims()) {
    return absl::InvalidArgumentError(
        absl::StrCat("residual ", r.ToString(), " must match the output ", y.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorType>> InferConvolution(const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int ns, CheckConvInputs(ctx));
  KILN_ASSIGN_OR_RETURN(ConvolutionParams p, ConvolutionParams::FromAttrs(ctx.attrs(), ns));
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  const int64_t c = x.dim(1), k = w.dim(0);
  if (c % p.group != 0 || k % p.group != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", p.group, " must divide input channels ", c, " and filters ", k));
  }
  if (w.dim(1) != c / p.group) {
    return absl::InvalidArgumentError(absl::StrCat("filter ", DimsToString(w.dims()), " has ",
                                                   w.dim(1), " channels per group but input ", c,
                                                   " / group ", p.group, " = ", c / p.group));
  }
  KILN_RETURN_IF_ERROR(CheckBias(ctx, k));
  std::vector<int64_t> out = {x.dim(0), k};
  for (int i = 0; i < ns; ++i) {
    // Checked: pads and dilations come from the user's file.
    const std::optional<int64_t> dilated = CheckedMul(p.dilation[i], w.dim(2 + i) - 1);
    const std::optional<int64_t> padded_begin = CheckedAdd(x.dim(2 + i), p.pad[i]);
    const std::optional<int64_t> padded_both =
        padded_begin ? CheckedAdd(*padded_begin, p.pad_end[i]) : std::nullopt;
    if (!dilated || !padded_both) {
      return absl::InvalidArgumentError(
          absl::StrCat("spatial dim ", i, ": input ", x.dim(2 + i), ", pads ", p.pad[i], " and ",
                       p.pad_end[i], ", dilation ", p.dilation[i], " overflow 64-bit sizes"));
    }
    const int64_t extent = *dilated + 1;
    const int64_t padded = *padded_both;
    if (padded < extent) {
      return absl::InvalidArgumentError(absl::StrCat("spatial dim ", i, ": padded input ", padded,
                                                     " is smaller than the dilated filter ", extent,
                                                     " (no output)"));
    }
    out.push_back((padded - extent) / p.stride[i] + 1);
  }
  KILN_ASSIGN_OR_RETURN(TensorType y, OutputLike(x, out));
  KILN_RETURN_IF_ERROR(CheckEpilogue(ctx, y));
  return std::vector<TensorType>{y};
}

absl::StatusOr<std::vector<TensorType>> InferDeconvolution(const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(int ns, CheckConvInputs(ctx));
  KILN_ASSIGN_OR_RETURN(ConvolutionParams p, ConvolutionParams::FromAttrs(ctx.attrs(), ns));
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  const int64_t c = x.dim(1);
  if (w.dim(0) != c) {
    return absl::InvalidArgumentError(
        absl::StrCat("filter ", DimsToString(w.dims()), " must start with the input channels ", c));
  }
  if (c % p.group != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", p.group, " must divide input channels ", c));
  }
  const int64_t k = w.dim(1) * p.group;
  KILN_RETURN_IF_ERROR(CheckBias(ctx, k));
  std::vector<int64_t> out = {x.dim(0), k};
  for (int i = 0; i < ns; ++i) {
    // Checked: strides, pads and dilations come from the user's file.
    const std::optional<int64_t> dilated = CheckedMul(p.dilation[i], w.dim(2 + i) - 1);
    const std::optional<int64_t> strided = CheckedMul(p.stride[i], x.dim(2 + i) - 1);
    const std::optional<int64_t> spanned =
        dilated && strided ? CheckedAdd(*strided, *dilated + 1) : std::nullopt;
    const std::optional<int64_t> two_pads = CheckedMul(2, p.pad[i]);
    const std::optional<int64_t> sized =
        spanned && two_pads ? CheckedSub(*spanned, *two_pads) : std::nullopt;
    if (!sized) {
      return absl::InvalidArgumentError(
          absl::StrCat("spatial dim ", i, ": input ", x.dim(2 + i), ", stride ", p.stride[i],
                       ", pad ", p.pad[i], ", dilation ", p.dilation[i], " overflow 64-bit sizes"));
    }
    const int64_t o = *sized;
    if (o < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("spatial dim ", i, ": output size ", o, " is not positive"));
    }
    out.push_back(o);
  }
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(x, out));
  return std::vector<TensorType>{result};
}

}  // namespace

absl::Status RegisterConvolutionOps(OpRegistry& registry) {
  const std::pair<const char*, InferTypesFn> directions[] = {{"Convolution", InferConvolution},
                                                             {"Deconvolution", InferDeconvolution}};
  for (const auto& [name, infer] : directions) {
    const bool forward = std::string(name) == "Convolution";
    std::vector<AttrDef> attrs = ConvAttrs();
    if (forward) {
      // The epilogue the fusion passes fold in; Caffe files never set these.
      attrs.push_back({"activation", AttrKind::kString, AttrValue(std::string("none"))});
      attrs.push_back({"negative_slope", AttrKind::kFloat, AttrValue(0.0)});
      // Padding after each spatial dim when it differs from "pad" (see ConvolutionParams).
      attrs.push_back({"pad_end", AttrKind::kInts, AttrValue(std::vector<int64_t>{})});
    }
    OpDef def = MakeOpDef(name, "convolution", std::move(attrs), infer,
                          forward ? "N-d convolution (1-3 spatial dims), stride/pad/dilation/"
                                    "groups, optional bias; fused: act(conv + bias + residual)."
                                  : "Transposed convolution (Caffe's Deconvolution), filter "
                                    "[C, K/group, R...].");
    def.input_names = {"x", "filter", "bias"};
    if (forward) def.input_names.push_back("residual");
    def.min_inputs = 2;
    def.max_inputs = forward ? 4 : 3;
    def.weight_inputs = {1, 2};
    KILN_RETURN_IF_ERROR(registry.Register(std::move(def)));
  }
  return absl::OkStatus();
}

}  // namespace kiln
