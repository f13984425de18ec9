// InnerProduct (Caffe semantics): x is flattened from `axis` on to [M, K]; y[M, N] = x * W^T
// (+ b) with W [N, K], or x * W with W [K, N] when transpose is set. Output dims are
// x.dims[:axis] + [N].
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {
absl::StatusOr<std::vector<TensorType>> InferInnerProduct(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "input"));
  if (w.dtype() != x.dtype()) return absl::InvalidArgumentError("weight dtype differs from input");
  KILN_ASSIGN_OR_RETURN(int axis, NormalizeAxis(ctx.GetInt("axis"), x.rank(), "axis"));
  const int64_t k = ProductOfDims(x.dims(), axis, x.rank());
  if (w.rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight must be 2-d, got ", DimsToString(w.dims())));
  }
  const bool transpose = ctx.GetBool("transpose");
  const int64_t w_k = transpose ? w.dim(0) : w.dim(1);
  const int64_t n = transpose ? w.dim(1) : w.dim(0);
  if (w_k != k) {
    return absl::InvalidArgumentError(absl::StrCat("weight ", DimsToString(w.dims()), " needs ", k,
                                                   " inputs per output (input ",
                                                   DimsToString(x.dims()), " flattened from axis ",
                                                   axis, ")", transpose ? " [transposed]" : ""));
  }
  if (ctx.num_inputs() == 3) {
    if (ctx.input(2).dtype() != x.dtype()) {
      return absl::InvalidArgumentError("bias dtype differs from input");
    }
    KILN_RETURN_IF_ERROR(RequireDims(ctx.input(2), {n}, "bias"));
  }
  std::vector<int64_t> out(x.dims().begin(), x.dims().begin() + axis);
  out.push_back(n);
  KILN_ASSIGN_OR_RETURN(TensorType result, OutputLike(x, out));
  return std::vector<TensorType>{result};
}
}  // namespace

absl::Status RegisterInnerProductOps(OpRegistry& registry) {
  OpDef def;
  def.name = "InnerProduct";
  def.family = "inner_product";
  def.input_names = {"x", "weight", "bias"};
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.attrs = {{"axis", AttrKind::kInt, AttrValue(int64_t{1})},
               {"transpose", AttrKind::kBool, AttrValue(false)}};
  def.infer_types = InferInnerProduct;
  def.differentiable = true;
  def.weight_inputs = {1, 2};
  def.summary = "Fully connected layer over the axes from `axis` on (Caffe InnerProduct).";
  return registry.Register(std::move(def));
}

}  // namespace kiln
