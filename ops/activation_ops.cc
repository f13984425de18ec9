// Element-wise activations and Dropout. Each keeps the input's shape, dtype and layout family.
//   ReLU         y = max(x,0) + negative_slope*min(x,0)
//   PReLU        y = x > 0 ? x : slope[c] * x   (slope [C], or [1] when channel_shared)
//   Sigmoid      y = 1 / (1 + exp(-x))
//   TanH         y = tanh(x)
//   ELU          y = x > 0 ? x : alpha*(exp(x)-1)
//   ClippedReLU  y = min(max(x,0), ceiling)
//   Power        y = (shift + scale*x)^power
//   AbsVal       y = |x|
//   Dropout      identity unless training; in training y = x*keep/(1-ratio) with the mask of
//                ops/dropout_mask.h (Caffe's inverted dropout scaling).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::StatusOr<std::vector<TensorType>> InferSameAsInput(const InferContext& ctx) {
  KILN_RETURN_IF_ERROR(RequireFloat(ctx.input(0), "input"));
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(ctx.input(0), ctx.input(0).dims()));
  return std::vector<TensorType>{result};
}

absl::StatusOr<std::vector<TensorType>> InferPRelu(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  if (x.rank() < 2) return absl::InvalidArgumentError("PReLU input needs a channel dim");
  const int64_t expected = ctx.GetBool("channel_shared") ? 1 : x.dim(1);
  KILN_RETURN_IF_ERROR(RequireDims(ctx.input(1), {expected}, "slope"));
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(x, x.dims()));
  return std::vector<TensorType>{result};
}

absl::StatusOr<std::vector<TensorType>> InferClippedRelu(const InferContext& ctx) {
  if (ctx.GetFloat("ceiling") <= 0) return absl::InvalidArgumentError("ceiling must be > 0");
  return InferSameAsInput(ctx);
}

absl::StatusOr<std::vector<TensorType>> InferDropout(const InferContext& ctx) {
  const double ratio = ctx.GetFloat("ratio");
  if (ratio < 0 || ratio >= 1) {
    return absl::InvalidArgumentError(absl::StrCat("ratio must be in [0, 1), got ", ratio));
  }
  if (ctx.num_inputs() > 1) {
    KILN_RETURN_IF_ERROR(RequireFloat(ctx.input(1), "seed_offset"));
    if (ctx.input(1).num_elements() != 1) {
      return absl::InvalidArgumentError("seed_offset must hold one value");
    }
  }
  return InferSameAsInput(ctx);
}

absl::StatusOr<std::vector<TensorType>> InferElu(const InferContext& ctx) {
  if (ctx.GetFloat("alpha") < 0) return absl::InvalidArgumentError("alpha must be >= 0");
  return InferSameAsInput(ctx);
}

OpDef Unary(const std::string& name, std::vector<AttrDef> attrs, InferTypesFn infer,
            const std::string& summary) {
  return MakeOpDef(name, "activation", std::move(attrs), std::move(infer), summary);
}

}  // namespace

absl::Status RegisterActivationOps(OpRegistry& registry) {
  std::vector<OpDef> defs;
  defs.push_back(Unary("ReLU", {{"negative_slope", AttrKind::kFloat, AttrValue(0.0)}},
                       InferSameAsInput, "max(x,0) + negative_slope*min(x,0)."));
  OpDef prelu = Unary("PReLU", {{"channel_shared", AttrKind::kBool, AttrValue(false)}}, InferPRelu,
                      "Per-channel (or shared) learned slope for x <= 0.");
  prelu.input_names = {"x", "slope"};
  prelu.min_inputs = prelu.max_inputs = 2;
  prelu.weight_inputs = {1};
  defs.push_back(std::move(prelu));
  defs.push_back(Unary("Sigmoid", {}, InferSameAsInput, "1 / (1 + exp(-x))."));
  defs.push_back(Unary("TanH", {}, InferSameAsInput, "tanh(x)."));
  defs.push_back(Unary("ELU", {{"alpha", AttrKind::kFloat, AttrValue(1.0)}}, InferElu,
                       "x for x > 0, alpha*(exp(x)-1) otherwise."));
  defs.push_back(Unary("ClippedReLU", {{"ceiling", AttrKind::kFloat, AttrValue(6.0)}},
                       InferClippedRelu, "min(max(x,0), ceiling)."));
  defs.push_back(Unary("Power",
                       {{"power", AttrKind::kFloat, AttrValue(1.0)},
                        {"scale", AttrKind::kFloat, AttrValue(1.0)},
                        {"shift", AttrKind::kFloat, AttrValue(0.0)}},
                       InferSameAsInput, "(shift + scale*x)^power."));
  defs.push_back(Unary("AbsVal", {}, InferSameAsInput, "|x|."));
  // The optional seed_offset (one number, read when the step runs) is added to `seed`: a
  // training plan feeds the iteration there, so each iteration draws a new mask.
  OpDef dropout = Unary("Dropout",
                        {{"ratio", AttrKind::kFloat, AttrValue(0.5)},
                         {"training", AttrKind::kBool, AttrValue(false)},
                         {"seed", AttrKind::kInt, AttrValue(int64_t{0})}},
                        InferDropout, "Identity at inference; inverted dropout in training.");
  dropout.input_names = {"x", "seed_offset"};
  dropout.max_inputs = 2;
  defs.push_back(std::move(dropout));
  for (OpDef& def : defs) KILN_RETURN_IF_ERROR(registry.Register(std::move(def)));
  return absl::OkStatus();
}

}  // namespace kiln
