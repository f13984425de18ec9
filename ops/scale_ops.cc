// Scale and Bias (Caffe semantics): a parameter tensor covering axes [axis, axis+num_axes) of x
// is broadcast over the other axes. Scale: y = x*s (+ b); Bias: y = x + b. num_axes -1 means "to
// the last axis"; 0 means a scalar parameter (shape [] or [1]).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/broadcast_params.h"
#include "ops/shape_util.h"

namespace kiln {

absl::StatusOr<BroadcastParams> BroadcastParams::Create(const TensorType& x,
                                                        const TensorType& param, int64_t axis,
                                                        int64_t num_axes) {
  BroadcastParams b;
  if (param.rank() == 0 || (num_axes == 0 && param.num_elements() == 1)) {
    if (num_axes != 0 && param.rank() != 0) {
      return absl::InvalidArgumentError("scalar parameter needs num_axes 0");
    }
    b.outer = x.num_elements();
    b.channels = 1;
    b.inner = 1;
    return b;
  }
  KILN_ASSIGN_OR_RETURN(int a, NormalizeAxis(axis, x.rank(), "axis"));
  const int n = num_axes < 0 ? x.rank() - a : static_cast<int>(num_axes);
  if (num_axes < -1 || a + n > x.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_axes ", num_axes, " from axis ", a, " exceeds rank ", x.rank()));
  }
  const std::vector<int64_t> expected(x.dims().begin() + a, x.dims().begin() + a + n);
  if (param.dims() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("parameter shape ", DimsToString(param.dims()),
                                                   " must equal input dims ",
                                                   DimsToString(expected), " (axes ", a, " to ",
                                                   a + n - 1, " of ", DimsToString(x.dims()), ")"));
  }
  b.outer = ProductOfDims(x.dims(), 0, a);
  b.channels = ProductOfDims(x.dims(), a, a + n);
  b.inner = ProductOfDims(x.dims(), a + n, x.rank());
  return b;
}

namespace {

absl::StatusOr<std::vector<TensorType>> InferScaleLike(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(RequireFloat(ctx.input(i), "parameter"));
    KILN_RETURN_IF_ERROR(
        BroadcastParams::Create(x, ctx.input(i), ctx.GetInt("axis"), ctx.GetInt("num_axes"))
            .status());
  }
  if (ctx.num_inputs() == 3 && ctx.input(1).dims() != ctx.input(2).dims()) {
    return absl::InvalidArgumentError("scale and bias must have the same shape");
  }
  KILN_RETURN_IF_ERROR(CheckFusedActivation(ctx));
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(x, x.dims()));
  return std::vector<TensorType>{result};
}

}  // namespace

absl::Status RegisterScaleOps(OpRegistry& registry) {
  const std::vector<AttrDef> attrs = {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
                                      {"num_axes", AttrKind::kInt, AttrValue(int64_t{1})}};
  OpDef scale;
  scale.name = "Scale";
  scale.family = "scale";
  scale.input_names = {"x", "scale", "bias"};
  scale.min_inputs = 2;
  scale.max_inputs = 3;
  scale.attrs = attrs;
  // The activation the pointwise fusion pass folds in: y = act(x * scale + bias).
  scale.attrs.push_back({"activation", AttrKind::kString, AttrValue(std::string("none"))});
  scale.attrs.push_back({"negative_slope", AttrKind::kFloat, AttrValue(0.0)});
  scale.infer_types = InferScaleLike;
  scale.differentiable = true;
  scale.weight_inputs = {1, 2};
  scale.summary =
      "x * scale (+ bias), the parameter broadcast from an axis (Caffe Scale); fused: + ReLU.";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(scale)));

  OpDef bias;
  bias.name = "Bias";
  bias.family = "scale";
  bias.input_names = {"x", "bias"};
  bias.min_inputs = bias.max_inputs = 2;
  bias.attrs = attrs;
  bias.infer_types = InferScaleLike;
  bias.differentiable = true;
  bias.weight_inputs = {1};
  bias.summary = "x + bias, broadcast from an axis (Caffe Bias).";
  return registry.Register(std::move(bias));
}

}  // namespace kiln
