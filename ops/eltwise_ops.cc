// Eltwise over two or more inputs of one shape: sum (with optional per-input coefficients),
// product, or maximum, optionally followed by a fused ReLU.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {
absl::StatusOr<std::vector<TensorType>> InferEltwise(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input 0"));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dims() != x.dims() || ctx.input(i).dtype() != x.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " ", ctx.input(i).ToString(),
                                                     " differs from input 0 ", x.ToString()));
    }
  }
  const std::string& op = ctx.GetString("operation");
  if (op != "sum" && op != "prod" && op != "max") {
    return absl::InvalidArgumentError(
        absl::StrCat("operation must be \"sum\", \"prod\" or \"max\", got \"", op, "\""));
  }
  const auto& coeffs = ctx.GetFloats("coeffs");
  if (!coeffs.empty()) {
    if (op != "sum") return absl::InvalidArgumentError("coeffs are only allowed with sum");
    if (static_cast<int>(coeffs.size()) != ctx.num_inputs()) {
      return absl::InvalidArgumentError(
          absl::StrCat(coeffs.size(), " coeffs for ", ctx.num_inputs(), " inputs"));
    }
  }
  const std::string& activation = ctx.GetString("activation");
  if (activation != "none" && activation != "relu") {
    return absl::InvalidArgumentError(
        absl::StrCat("activation must be \"none\" or \"relu\", got \"", activation, "\""));
  }
  // The gradient reads the ReLU's mask off the output, which needs a slope that keeps signs.
  if (activation == "relu" && !(ctx.GetFloat("negative_slope") >= 0.0)) {
    return absl::InvalidArgumentError(absl::StrCat("a fused ReLU needs negative_slope >= 0, got ",
                                                   ctx.GetFloat("negative_slope")));
  }
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(x, x.dims()));
  return std::vector<TensorType>{result};
}
}  // namespace

absl::Status RegisterEltwiseOps(OpRegistry& registry) {
  OpDef def;
  def.name = "Eltwise";
  def.family = "eltwise";
  def.input_names = {"inputs..."};
  def.min_inputs = 2;
  def.max_inputs = -1;
  def.attrs = {{"operation", AttrKind::kString, AttrValue(std::string("sum"))},
               {"coeffs", AttrKind::kFloats, AttrValue(std::vector<double>{})},
               // A ReLU fused after the operation (passes/fuse_eltwise_relu.cc): "none" or "relu".
               {"activation", AttrKind::kString, AttrValue(std::string("none"))},
               {"negative_slope", AttrKind::kFloat, AttrValue(0.0)}};
  def.infer_types = InferEltwise;
  def.differentiable = true;
  def.summary =
      "Element-wise sum (with coefficients), product or max of N inputs, then an optional ReLU.";
  return registry.Register(std::move(def));
}

}  // namespace kiln
