// Softmax over one axis (every other axis independent), accurate (max-subtracted) or log.
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {
absl::StatusOr<std::vector<TensorType>> InferSoftmax(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  KILN_RETURN_IF_ERROR(NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis").status());
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(x, x.dims()));
  return std::vector<TensorType>{result};
}
}  // namespace

absl::Status RegisterSoftmaxOps(OpRegistry& registry) {
  OpDef def;
  def.name = "Softmax";
  def.family = "softmax";
  def.input_names = {"x"};
  def.attrs = {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
               {"log", AttrKind::kBool, AttrValue(false)}};
  def.infer_types = InferSoftmax;
  def.differentiable = true;
  def.summary = "Softmax or log-softmax over one axis, max-subtracted.";
  return registry.Register(std::move(def));
}

}  // namespace kiln
