// Reduction (Caffe semantics): x's dims from `axis` on are reduced, y = x.dims[:axis] (a scalar
// when axis is 0): y[o] = coeff Σ_i f(x[o, i]) with f(v) = v (sum), |v| (asum), v^2 (sumsq), or
// v / inner (mean). ReductionGradient(x, dy) -> dx = coeff dy[o] f'(x[o, i]) (sign(0) = 0, as
// Caffe).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::Status CheckOperation(const InferContext& ctx) {
  const std::string& op = ctx.GetString("operation");
  if (op != "sum" && op != "asum" && op != "sumsq" && op != "mean") {
    return absl::InvalidArgumentError(
        absl::StrCat("operation '", op, "': use sum, asum, sumsq or mean"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorType>> InferReduction(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "x"));
  KILN_RETURN_IF_ERROR(CheckOperation(ctx));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  std::vector<int64_t> out(x.dims().begin(), x.dims().begin() + axis);
  KILN_ASSIGN_OR_RETURN(TensorType y, OutputLike(x, out));
  return std::vector<TensorType>{y};
}

absl::StatusOr<std::vector<TensorType>> InferReductionGradient(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(CheckOperation(ctx));
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  KILN_RETURN_IF_ERROR(RequireDims(
      ctx.input(1), std::vector<int64_t>(x.dims().begin(), x.dims().begin() + axis), "dy"));
  KILN_ASSIGN_OR_RETURN(TensorType dx, OutputLike(x, x.dims()));
  return std::vector<TensorType>{dx};
}

std::vector<AttrDef> ReductionAttrs() {
  return {{"operation", AttrKind::kString, AttrValue(std::string("sum"))},
          {"axis", AttrKind::kInt, AttrValue(int64_t{0})},
          {"coeff", AttrKind::kFloat, AttrValue(1.0)}};
}

}  // namespace

absl::Status RegisterReductionOps(OpRegistry& registry) {
  OpDef reduction = MakeOpDef("Reduction", "reduction", ReductionAttrs(), InferReduction,
                              "Sum, absolute sum, sum of squares or mean over the axes from "
                              "`axis` on, times coeff (Caffe Reduction).");
  KILN_RETURN_IF_ERROR(registry.Register(std::move(reduction)));
  OpDef grad = MakeOpDef("ReductionGradient", "reduction", ReductionAttrs(), InferReductionGradient,
                         "Gradient of a Reduction's input.");
  grad.input_names = {"x", "dy"};
  grad.min_inputs = 2;
  grad.max_inputs = 2;
  grad.differentiable = false;
  return registry.Register(std::move(grad));
}

}  // namespace kiln
