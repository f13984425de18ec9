// The backward ops: what the gradient builders (ops/gradients/) put into a training graph. Each
// computes the gradient of one forward op's input (or parameter) from the gradient of its
// output and the forward values it needs, and nothing more, so the memory planner keeps alive
// only what backward really reads.
//
//   ConvolutionBackwardData(dy, filter) -> dx      attrs: the convolution's + input_dims
//   ConvolutionBackwardFilter(x, dy) -> dfilter    attrs: the convolution's + filter_dims
//   BiasGradient(dy) -> dparam                     Σ dy over the dims a Scale/Bias-style parameter
//                                                  of param_dims at [axis, axis+num_axes) is
//                                                  broadcast over (convolution/IP biases too)
//   ScaleParamGradient(x, dy) -> dscale            Σ x·dy over the same dims
//   InnerProductBackwardData(dy, weight) -> dx     attrs: axis, transpose, input_dims
//   InnerProductBackwardFilter(x, dy) -> dweight   attrs: axis, transpose
//   ActivationGradient(saved, dy...) -> dx         saved is the forward input or output (attr
//                                                  "saved"), whichever the formula needs; dy is
//                                                  the sum of the dy inputs (a gradient sum
//                                                  folded in by a training pass)
//   PReLUGradient(x, slope, dy) -> dx, dslope
//   DropoutGradient(dy, seed_offset?) -> dx        the forward mask regenerated from its seed
//   PoolingGradient(x, y, dy) -> dx
//   LRNGradient(x, dy) -> dx                       (y recomputed from x)
//   SoftmaxGradient(y, dy) -> dx
//   BatchNormGradient(x, dy, mean, variance, scale_factor?) -> dx
//   AffineBatchNormGradient(x, dy, scale, saved_mean, saved_inv_std, y?) -> dx, dscale, dbias
//                                                  the statistics the forward saved; with "relu",
//                                                  dy counts where y (the fused output) is > 0
//   EltwiseMaxGradient(x_0..x_{n-1}, dy) -> dx_which
//   CropGradient(dy) -> dx                          dy placed at the crop's offsets, zeros around
//   SoftmaxWithLossGradient(logits, labels) -> dlogits         loss_weight as an attribute: the
//   EuclideanLossGradient(a, b) -> da                          loss is the training objective, so
//   SigmoidCrossEntropyLossGradient(logits, targets) -> dx     its gradient is the constant seed
//   ContrastiveLossGradient(a, b, similar) -> da, db           Caffe calls loss_weight.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/broadcast_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

using Types = std::vector<TensorType>;

// A dense output of `dims` in dy's dtype and layout family.
absl::StatusOr<Types> DenseLike(const TensorType& like, const std::vector<int64_t>& dims) {
  KILN_RETURN_IF_ERROR(RequireFloat(like, "gradient"));
  for (int64_t d : dims) {
    if (d < 0)
      return absl::InvalidArgumentError(absl::StrCat("negative dim in ", DimsToString(dims)));
  }
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(like, dims));
  return Types{result};
}

absl::StatusOr<Types> InferConvBackwardData(const InferContext& ctx) {
  const std::vector<int64_t>& dims = ctx.GetInts("input_dims");
  if (static_cast<int>(dims.size()) != ctx.input(0).rank()) {
    return absl::InvalidArgumentError(absl::StrCat("input_dims ", DimsToString(dims),
                                                   " must have dy's rank ", ctx.input(0).rank()));
  }
  return DenseLike(ctx.input(0), dims);
}

absl::StatusOr<Types> InferConvBackwardFilter(const InferContext& ctx) {
  const std::vector<int64_t>& dims = ctx.GetInts("filter_dims");
  if (static_cast<int>(dims.size()) != ctx.input(0).rank()) {
    return absl::InvalidArgumentError(absl::StrCat("filter_dims ", DimsToString(dims),
                                                   " must have x's rank ", ctx.input(0).rank()));
  }
  if (ctx.input(1).dim(0) != ctx.input(0).dim(0)) {
    return absl::InvalidArgumentError("x and dy differ in batch size");
  }
  return DenseLike(ctx.input(1), dims);
}

// The parameter type a BiasGradient/ScaleParamGradient produces, checked against x's dims.
absl::StatusOr<Types> InferParamGradient(const InferContext& ctx, const TensorType& x) {
  KILN_ASSIGN_OR_RETURN(TensorType param, TensorType::Create(x.dtype(), ctx.GetInts("param_dims")));
  KILN_RETURN_IF_ERROR(
      BroadcastParams::Create(x, param, ctx.GetInt("axis"), ctx.GetInt("num_axes")).status());
  return DenseLike(x, param.dims());
}

absl::StatusOr<Types> InferBiasGradient(const InferContext& ctx) {
  return InferParamGradient(ctx, ctx.input(0));
}

absl::StatusOr<Types> InferScaleParamGradient(const InferContext& ctx) {
  if (ctx.input(0).dims() != ctx.input(1).dims()) {
    return absl::InvalidArgumentError(absl::StrCat("x ", DimsToString(ctx.input(0).dims()),
                                                   " and dy ", DimsToString(ctx.input(1).dims()),
                                                   " differ"));
  }
  return InferParamGradient(ctx, ctx.input(1));
}

absl::StatusOr<Types> InferIpBackwardData(const InferContext& ctx) {
  const std::vector<int64_t>& dims = ctx.GetInts("input_dims");
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), dims.size(), "axis"));
  const int64_t k = ProductOfDims(dims, axis, dims.size());
  const TensorType& w = ctx.input(1);
  const bool transpose = ctx.GetBool("transpose");
  if (w.rank() != 2 || (transpose ? w.dim(0) : w.dim(1)) != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weight ", DimsToString(w.dims()), " does not match input_dims ", DimsToString(dims)));
  }
  return DenseLike(ctx.input(0), dims);
}

absl::StatusOr<Types> InferIpBackwardFilter(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& dy = ctx.input(1);
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  if (dy.rank() != axis + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("dy ", DimsToString(dy.dims()), " must have rank axis + 1 = ", axis + 1));
  }
  const int64_t k = ProductOfDims(x.dims(), axis, x.rank());
  const int64_t n = dy.dim(axis);
  const std::vector<int64_t> dims =
      ctx.GetBool("transpose") ? std::vector<int64_t>{k, n} : std::vector<int64_t>{n, k};
  return DenseLike(dy, dims);
}

// Output i has the type of input `like` (made dense).
InferTypesFn LikeInput(std::vector<int> like) {
  return [like](const InferContext& ctx) -> absl::StatusOr<Types> {
    Types out;
    for (int i : like) {
      KILN_RETURN_IF_ERROR(RequireFloat(ctx.input(i), "gradient input"));
      KILN_ASSIGN_OR_RETURN(TensorType t, OutputLike(ctx.input(i), ctx.input(i).dims()));
      out.push_back(t);
    }
    return out;
  };
}

// dy (the last input) and input 0 must have the same dims; the output is like input 0.
absl::StatusOr<Types> InferSameAsDy(const InferContext& ctx) {
  const TensorType& dy = ctx.input(ctx.num_inputs() - 1);
  if (ctx.input(0).dims() != dy.dims()) {
    return absl::InvalidArgumentError(absl::StrCat("forward value ",
                                                   DimsToString(ctx.input(0).dims()), " and dy ",
                                                   DimsToString(dy.dims()), " differ"));
  }
  return DenseLike(dy, dy.dims());
}

absl::StatusOr<Types> InferActivationGradient(const InferContext& ctx) {
  const std::string& act = ctx.GetString("activation");
  static const char* const kKnown[] = {"ReLU", "ClippedReLU", "Sigmoid", "TanH",
                                       "ELU",  "Power",       "AbsVal"};
  bool known = false;
  for (const char* k : kKnown) known = known || act == k;
  if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown activation \"", act, "\""));
  const std::string& saved = ctx.GetString("saved");
  if (saved != "input" && saved != "output") {
    return absl::InvalidArgumentError("saved must be \"input\" or \"output\"");
  }
  // Several dy inputs are summed (a gradient sum folded in): they must agree with the first.
  const TensorType& dy = ctx.input(1);
  for (int i = 2; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dims() != dy.dims() || ctx.input(i).dtype() != dy.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("dy input ", i, " ", ctx.input(i).ToString(),
                                                     " differs from ", dy.ToString()));
    }
  }
  if (ctx.input(0).dims() != dy.dims()) {
    return absl::InvalidArgumentError(absl::StrCat("forward value ",
                                                   DimsToString(ctx.input(0).dims()), " and dy ",
                                                   DimsToString(dy.dims()), " differ"));
  }
  return DenseLike(dy, dy.dims());
}

absl::StatusOr<Types> InferPReluGradient(const InferContext& ctx) {
  if (ctx.input(0).dims() != ctx.input(2).dims()) {
    return absl::InvalidArgumentError("x and dy differ in shape");
  }
  KILN_ASSIGN_OR_RETURN(TensorType dx, OutputLike(ctx.input(2), ctx.input(0).dims()));
  KILN_ASSIGN_OR_RETURN(TensorType dslope, OutputLike(ctx.input(1), ctx.input(1).dims()));
  return Types{dx, dslope};
}

absl::StatusOr<Types> InferPoolingGradient(const InferContext& ctx) {
  if (ctx.input(1).dims() != ctx.input(2).dims()) {
    return absl::InvalidArgumentError("y and dy differ in shape");
  }
  return DenseLike(ctx.input(2), ctx.input(0).dims());
}

absl::StatusOr<Types> InferBatchNormGradient(const InferContext& ctx) {
  if (ctx.input(0).dims() != ctx.input(1).dims()) {
    return absl::InvalidArgumentError("x and dy differ in shape");
  }
  return DenseLike(ctx.input(1), ctx.input(1).dims());
}

absl::StatusOr<Types> InferAffineBatchNormGradient(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  if (x.dims() != ctx.input(1).dims())
    return absl::InvalidArgumentError("x and dy differ in shape");
  if (x.rank() < 2) return absl::InvalidArgumentError("x needs at least N and C dims");
  const char* names[] = {"", "", "scale", "saved_mean", "saved_inv_std"};
  for (int i = 2; i < 5; ++i) KILN_RETURN_IF_ERROR(RequireDims(ctx.input(i), {x.dim(1)}, names[i]));
  for (int i = 3; i < 5; ++i) {
    if (ctx.input(i).dtype() != DataType::kF32) {
      return absl::InvalidArgumentError(
          absl::StrCat(names[i], " must be f32 (AffineBatchNorm saves its statistics in f32)"));
    }
  }
  if (ctx.GetBool("relu") != (ctx.num_inputs() == 6)) {
    return absl::InvalidArgumentError("y (input 5) is given exactly when relu is set");
  }
  if (ctx.num_inputs() == 6 && ctx.input(5).dims() != x.dims()) {
    return absl::InvalidArgumentError("x and y differ in shape");
  }
  KILN_ASSIGN_OR_RETURN(Types out, DenseLike(ctx.input(1), ctx.input(1).dims()));
  // The parameter gradients in the parameter's own dtype and shape.
  out.push_back(ctx.input(2).Contiguous());
  out.push_back(ctx.input(2).Contiguous());
  return out;
}

absl::StatusOr<Types> InferEltwiseMaxGradient(const InferContext& ctx) {
  const int n = ctx.num_inputs() - 1;
  const int64_t which = ctx.GetInt("which");
  if (n < 1 || which < 0 || which >= n) {
    return absl::InvalidArgumentError(absl::StrCat("which ", which, " outside [0, ", n, ")"));
  }
  for (int i = 0; i < n; ++i) {
    if (ctx.input(i).dims() != ctx.input(n).dims()) {
      return absl::InvalidArgumentError("inputs and dy differ in shape");
    }
  }
  return DenseLike(ctx.input(n), ctx.input(n).dims());
}

absl::StatusOr<Types> InferCropGradient(const InferContext& ctx) {
  const std::vector<int64_t>& dims = ctx.GetInts("input_dims");
  const TensorType& dy = ctx.input(0);
  if (static_cast<int>(dims.size()) != dy.rank()) {
    return absl::InvalidArgumentError("input_dims must have dy's rank");
  }
  for (int i = 0; i < dy.rank(); ++i) {
    if (dy.dim(i) > dims[i]) return absl::InvalidArgumentError("dy is larger than the input");
  }
  return DenseLike(dy, dims);
}

absl::StatusOr<Types> InferLossGradient(const InferContext& ctx) {
  Types out;
  for (int i : {0, 1}) {
    if (i == 1 && ctx.num_inputs() < 3) break;  // Only ContrastiveLoss has two gradients.
    KILN_RETURN_IF_ERROR(RequireFloat(ctx.input(i), "input"));
    KILN_ASSIGN_OR_RETURN(TensorType t, OutputLike(ctx.input(i), ctx.input(i).dims()));
    out.push_back(t);
  }
  return out;
}

OpDef Gradient(std::string name, std::vector<std::string> ports, int min_inputs, int max_inputs,
               std::vector<AttrDef> attrs, InferTypesFn infer, std::string summary) {
  OpDef def = MakeOpDef(std::move(name), "gradient", std::move(attrs), std::move(infer),
                        std::move(summary));
  def.differentiable = false;  // No second derivatives.
  def.input_names = std::move(ports);
  def.min_inputs = min_inputs;
  def.max_inputs = max_inputs;
  return def;
}

std::vector<AttrDef> ConvAttrs(const char* dims_attr) {
  return {{"stride", AttrKind::kInts, AttrValue(std::vector<int64_t>{1})},
          {"pad", AttrKind::kInts, AttrValue(std::vector<int64_t>{0})},
          {"dilation", AttrKind::kInts, AttrValue(std::vector<int64_t>{1})},
          {"group", AttrKind::kInt, AttrValue(int64_t{1})},
          {"mode", AttrKind::kString, AttrValue(std::string("cross_correlation"))},
          {dims_attr, AttrKind::kInts, std::nullopt}};
}

std::vector<AttrDef> ParamAttrs() {
  return {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
          {"num_axes", AttrKind::kInt, AttrValue(int64_t{1})},
          {"param_dims", AttrKind::kInts, std::nullopt}};
}

AttrDef LossWeight() { return {"loss_weight", AttrKind::kFloat, AttrValue(1.0)}; }

}  // namespace

absl::Status RegisterGradientOps(OpRegistry& registry) {
  std::vector<OpDef> defs;
  defs.push_back(Gradient("ConvolutionBackwardData", {"dy", "filter"}, 2, 2,
                          ConvAttrs("input_dims"), InferConvBackwardData,
                          "Gradient of a convolution's input."));
  defs.push_back(Gradient("ConvolutionBackwardFilter", {"x", "dy"}, 2, 2, ConvAttrs("filter_dims"),
                          InferConvBackwardFilter, "Gradient of a convolution's filter."));
  defs.push_back(Gradient("BiasGradient", {"dy"}, 1, 1, ParamAttrs(), InferBiasGradient,
                          "Sum of dy over the dims a broadcast parameter spans."));
  defs.push_back(Gradient("ScaleParamGradient", {"x", "dy"}, 2, 2, ParamAttrs(),
                          InferScaleParamGradient,
                          "Sum of x*dy over the dims a broadcast scale spans."));
  defs.push_back(Gradient("InnerProductBackwardData", {"dy", "weight"}, 2, 2,
                          {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
                           {"transpose", AttrKind::kBool, AttrValue(false)},
                           {"input_dims", AttrKind::kInts, std::nullopt}},
                          InferIpBackwardData, "Gradient of an inner product's input."));
  defs.push_back(Gradient("InnerProductBackwardFilter", {"x", "dy"}, 2, 2,
                          {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
                           {"transpose", AttrKind::kBool, AttrValue(false)}},
                          InferIpBackwardFilter, "Gradient of an inner product's weight."));
  defs.push_back(Gradient("ActivationGradient", {"saved", "dy..."}, 2, -1,
                          {{"activation", AttrKind::kString, std::nullopt},
                           {"saved", AttrKind::kString, AttrValue(std::string("input"))},
                           {"negative_slope", AttrKind::kFloat, AttrValue(0.0)},
                           {"ceiling", AttrKind::kFloat, AttrValue(6.0)},
                           {"alpha", AttrKind::kFloat, AttrValue(1.0)},
                           {"power", AttrKind::kFloat, AttrValue(1.0)},
                           {"scale", AttrKind::kFloat, AttrValue(1.0)},
                           {"shift", AttrKind::kFloat, AttrValue(0.0)}},
                          InferActivationGradient,
                          "Gradient of an element-wise activation from its input or output."));
  OpDef prelu = Gradient("PReLUGradient", {"x", "slope", "dy"}, 3, 3,
                         {{"channel_shared", AttrKind::kBool, AttrValue(false)}},
                         InferPReluGradient, "Gradients of PReLU's input and slope.");
  defs.push_back(std::move(prelu));
  defs.push_back(Gradient("DropoutGradient", {"dy", "seed_offset"}, 1, 2,
                          {{"ratio", AttrKind::kFloat, AttrValue(0.5)},
                           {"seed", AttrKind::kInt, AttrValue(int64_t{0})}},
                          LikeInput({0}), "dy times the forward pass's dropout mask and scale."));
  defs.push_back(Gradient("PoolingGradient", {"x", "y", "dy"}, 3, 3,
                          {{"mode", AttrKind::kString, AttrValue(std::string("max"))},
                           {"kernel", AttrKind::kInts, AttrValue(std::vector<int64_t>{})},
                           {"stride", AttrKind::kInts, AttrValue(std::vector<int64_t>{1})},
                           {"pad", AttrKind::kInts, AttrValue(std::vector<int64_t>{0})},
                           {"global", AttrKind::kBool, AttrValue(false)},
                           {"rounding", AttrKind::kString, AttrValue(std::string("floor"))}},
                          InferPoolingGradient, "Gradient of a pooling's input."));
  defs.push_back(Gradient("LRNGradient", {"x", "dy"}, 2, 2,
                          {{"region", AttrKind::kString, AttrValue(std::string("across_channels"))},
                           {"local_size", AttrKind::kInt, AttrValue(int64_t{5})},
                           {"alpha", AttrKind::kFloat, AttrValue(1.0)},
                           {"beta", AttrKind::kFloat, AttrValue(0.75)},
                           {"k", AttrKind::kFloat, AttrValue(1.0)}},
                          InferSameAsDy, "Gradient of LRN's input (y recomputed from x)."));
  defs.push_back(Gradient(
      "SoftmaxGradient", {"y", "dy"}, 2, 2,
      {{"axis", AttrKind::kInt, AttrValue(int64_t{1})}, {"log", AttrKind::kBool, AttrValue(false)}},
      InferSameAsDy, "Gradient of a softmax's input from its output."));
  defs.push_back(Gradient("BatchNormGradient", {"x", "dy", "mean", "variance", "scale_factor"}, 4,
                          5,
                          {{"eps", AttrKind::kFloat, AttrValue(1e-5)},
                           {"mode", AttrKind::kString, AttrValue(std::string("spatial"))},
                           {"use_global_stats", AttrKind::kBool, AttrValue(false)}},
                          InferBatchNormGradient,
                          "Gradient of BatchNorm's input (through the batch statistics in "
                          "training mode)."));
  defs.push_back(
      Gradient("AffineBatchNormGradient", {"x", "dy", "scale", "saved_mean", "saved_inv_std", "y"},
               5, 6, {{"relu", AttrKind::kBool, AttrValue(false)}}, InferAffineBatchNormGradient,
               "Gradients of AffineBatchNorm's input, scale and bias (through the batch "
               "statistics its forward saved, and its fused ReLU)."));
  defs.push_back(Gradient("EltwiseMaxGradient", {"inputs...", "dy"}, 2, -1,
                          {{"which", AttrKind::kInt, std::nullopt}}, InferEltwiseMaxGradient,
                          "dy where input `which` is the first maximum, else 0."));
  defs.push_back(Gradient("CropGradient", {"dy"}, 1, 1,
                          {{"axis", AttrKind::kInt, AttrValue(int64_t{2})},
                           {"offset", AttrKind::kInts, AttrValue(std::vector<int64_t>{})},
                           {"input_dims", AttrKind::kInts, std::nullopt}},
                          InferCropGradient, "dy placed where the crop took it, zeros elsewhere."));
  defs.push_back(Gradient("SoftmaxWithLossGradient", {"logits", "labels"}, 2, 2,
                          {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
                           {"ignore_label", AttrKind::kInts, AttrValue(std::vector<int64_t>{})},
                           {"normalization", AttrKind::kString, AttrValue(std::string("valid"))},
                           LossWeight()},
                          InferLossGradient, "loss_weight (softmax - onehot) / normalizer."));
  defs.push_back(Gradient("EuclideanLossGradient", {"a", "b"}, 2, 2, {LossWeight()},
                          InferLossGradient, "loss_weight (a - b) / N."));
  defs.push_back(
      Gradient("SigmoidCrossEntropyLossGradient", {"logits", "targets"}, 2, 2,
               {{"ignore_label", AttrKind::kInts, AttrValue(std::vector<int64_t>{})},
                {"normalization", AttrKind::kString, AttrValue(std::string("batch_size"))},
                LossWeight()},
               InferLossGradient, "loss_weight (sigmoid(x) - t) / normalizer."));
  defs.push_back(Gradient("ContrastiveLossGradient", {"a", "b", "similar"}, 3, 3,
                          {{"margin", AttrKind::kFloat, AttrValue(1.0)},
                           {"legacy_version", AttrKind::kBool, AttrValue(false)},
                           LossWeight()},
                          InferLossGradient, "Gradients of the contrastive loss's two inputs."));
  for (OpDef& def : defs) KILN_RETURN_IF_ERROR(registry.Register(std::move(def)));
  return absl::OkStatus();
}

}  // namespace kiln
