// Embed (Caffe semantics): a lookup table. x holds row indices (integers stored as numbers, any
// shape); y = x.dims + [D] with y[m] = W[x[m]] (+ b), W [V, D]. An index that is not an integer
// in [0, V) is an error the kernels report (the reference as a Status, CUDA as NaN rows: the
// device cannot stop mid-plan). EmbedGradient(x, dy) -> dW [V, D] sums dy's rows into the rows
// x names, in index order (deterministic).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::StatusOr<std::vector<TensorType>> InferEmbed(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "indices"));
  KILN_RETURN_IF_ERROR(RequireFloat(w, "weight"));
  if (w.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight must be [V, D], got ", DimsToString(w.dims())));
  }
  if (ctx.num_inputs() == 3) {
    if (ctx.input(2).dtype() != w.dtype()) {
      return absl::InvalidArgumentError("bias dtype differs from the weight's");
    }
    KILN_RETURN_IF_ERROR(RequireDims(ctx.input(2), {w.dim(1)}, "bias"));
  }
  std::vector<int64_t> out = x.dims();
  out.push_back(w.dim(1));
  KILN_ASSIGN_OR_RETURN(TensorType y, OutputLike(w, out));
  return std::vector<TensorType>{y};
}

absl::StatusOr<std::vector<TensorType>> InferEmbedGradient(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& dy = ctx.input(1);
  const std::vector<int64_t>& w = ctx.GetInts("weight_dims");
  if (w.size() != 2 || w[0] < 1 || w[1] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight_dims must be [V, D], got ", DimsToString(w)));
  }
  std::vector<int64_t> want = x.dims();
  want.push_back(w[1]);
  KILN_RETURN_IF_ERROR(RequireDims(dy, want, "dy"));
  KILN_ASSIGN_OR_RETURN(TensorType dw, OutputLike(dy, w));
  return std::vector<TensorType>{dw};
}

}  // namespace

absl::Status RegisterEmbedOps(OpRegistry& registry) {
  OpDef embed;
  embed.name = "Embed";
  embed.family = "embed";
  embed.input_names = {"x", "weight", "bias"};
  embed.min_inputs = 2;
  embed.max_inputs = 3;
  embed.infer_types = InferEmbed;
  embed.differentiable = true;
  embed.weight_inputs = {1, 2};
  embed.summary = "Lookup table: y[m] = W[x[m]] (+ b) (Caffe Embed).";
  KILN_RETURN_IF_ERROR(registry.Register(std::move(embed)));
  OpDef grad;
  grad.name = "EmbedGradient";
  grad.family = "embed";
  grad.input_names = {"x", "dy"};
  grad.min_inputs = 2;
  grad.max_inputs = 2;
  grad.attrs = {{"weight_dims", AttrKind::kInts, std::nullopt}};
  grad.infer_types = InferEmbedGradient;
  grad.summary = "Gradient of an Embed's table: dy's rows summed into the rows x names.";
  return registry.Register(std::move(grad));
}

}  // namespace kiln
