// ArgMax (Caffe semantics; ops/argmax_params.h has the geometry): the top_k entries of each row
// of x, best first, as indices (stored as numbers, as Caffe does) or, with out_max_val, values.
//
// Order: by value, larger first; equal values by index, the HIGHER index first. That is Caffe's
// order exactly: it sorts (value, index) pairs with std::greater, so a tie on the value is
// broken by the larger index. A NaN ranks above every number (so it shows as the maximum instead
// of vanishing; Caffe's order is undefined there), NaNs among themselves by index likewise.
//
// The output is always f32, whatever x's dtype: indices past 2048 are not all representable in
// f16 (nor past 256 in bf16). x is read in its own dtype (the plan's precision) and the values
// out_max_val writes are x's values, exact in f32. No gradient: Caffe's layer has no backward
// (the op is not differentiable, like Accuracy).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"
#include "ops/argmax_params.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

absl::StatusOr<std::vector<TensorType>> InferArgMax(const InferContext& ctx) {
  const TensorType& x = ctx.input(0);
  KILN_RETURN_IF_ERROR(RequireFloat(x, "x"));
  KILN_ASSIGN_OR_RETURN(ArgMaxGeometry g,
                        ArgMaxGeometryOf(x.dims(), ctx.GetInt("top_k"), ctx.GetInts("axis"),
                                         ctx.GetBool("out_max_val")));
  // Row-major f32 whatever x's dtype and layout: the kernels write Caffe's top layout.
  KILN_ASSIGN_OR_RETURN(TensorType y, TensorType::Create(DataType::kF32, g.out_dims));
  return std::vector<TensorType>{y};
}

}  // namespace

absl::Status RegisterArgMaxOps(OpRegistry& registry) {
  OpDef argmax;
  argmax.name = "ArgMax";
  argmax.family = "argmax";
  argmax.input_names = {"x"};
  argmax.min_inputs = argmax.max_inputs = 1;
  argmax.attrs = {{"top_k", AttrKind::kInt, AttrValue(int64_t{1})},
                  {"out_max_val", AttrKind::kBool, AttrValue(false)},
                  // Zero or one entry; empty is Caffe's form without an axis.
                  {"axis", AttrKind::kInts, AttrValue(std::vector<int64_t>{})}};
  argmax.infer_types = InferArgMax;
  argmax.differentiable = false;  // Caffe's ArgMax has no backward
  argmax.summary = "Top-k indices (or values) along an axis or over each item (Caffe ArgMax).";
  return registry.Register(std::move(argmax));
}

}  // namespace kiln
