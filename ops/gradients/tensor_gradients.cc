// Gradient builders of the data-movement ops, each the op that moves the gradient back:
// Concat <-> Slice, Split -> sum, Flatten/Reshape -> Reshape to x's dims, Crop -> CropGradient,
// Convert -> Convert back. An output of Slice that no gradient reaches contributes zeros.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/gradients/all_gradients.h"
#include "ops/gradients/gradient_request.h"

namespace kiln {

namespace {

using Grads = std::vector<Value>;

absl::StatusOr<int> AxisOf(const Node& n, const TensorType& t) {
  int64_t axis = n.GetInt("axis");
  if (axis < 0) axis += t.rank();
  if (axis < 0 || axis >= t.rank()) return NoGradientFor(n, "axis out of range");
  return static_cast<int>(axis);
}

absl::StatusOr<Grads> ConcatGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(n.num_inputs());
  if (n.num_inputs() == 1) {
    g[0] = dy;
    return g;
  }
  KILN_ASSIGN_OR_RETURN(int axis, AxisOf(n, n.output_types()[0]));
  std::vector<int64_t> points;
  int64_t at = 0;
  for (int i = 0; i + 1 < n.num_inputs(); ++i) {
    at += n.input(i).type().dim(axis);
    points.push_back(at);
  }
  KILN_ASSIGN_OR_RETURN(
      std::vector<Value> parts,
      AddGradientNodes(b, n, "grad", "Slice", {dy},
                       {{"axis", AttrValue(int64_t{axis})}, {"slice_points", AttrValue(points)}}));
  for (int i = 0; i < n.num_inputs(); ++i) {
    if (r.needs_grad[i]) g[i] = parts[i];
  }
  return g;
}

// Zeros shaped like `like` (an output no gradient reached): 0 * like.
absl::StatusOr<Value> ZerosLike(GraphBuilder& b, const Node& n, int i, Value like) {
  return AddGradientNode(
      b, n, absl::StrCat("zeros_", i), "Power", {like},
      {{"power", AttrValue(1.0)}, {"scale", AttrValue(0.0)}, {"shift", AttrValue(0.0)}});
}

absl::StatusOr<Grads> SliceGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  Grads g(1);
  if (!r.needs_grad[0]) return g;
  std::vector<Value> parts;
  for (int i = 0; i < n.num_outputs(); ++i) {
    if (r.has_output_grad(i)) {
      parts.push_back(r.output_grads[i]);
    } else {
      KILN_ASSIGN_OR_RETURN(Value zeros, ZerosLike(b, n, i, OutputOf(n, i)));
      parts.push_back(zeros);
    }
  }
  KILN_ASSIGN_OR_RETURN(int axis, AxisOf(n, n.input(0).type()));
  KILN_ASSIGN_OR_RETURN(
      g[0], AddGradientNode(b, n, "grad_x", "Concat", parts, {{"axis", AttrValue(int64_t{axis})}}));
  return g;
}

// Reduction: dy broadcast back over the reduced axes, through |x|' or (x^2)' where they apply.
absl::StatusOr<Grads> ReductionGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(1);
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(g[0],
                          AddGradientNode(b, n, "grad_x", "ReductionGradient", {n.input(0), dy},
                                          PickAttrs(n, {"operation", "axis", "coeff"})));
  }
  return g;
}

// Tile: the copies of dy summed (TileGradient).
absl::StatusOr<Grads> TileGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(1);
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "TileGradient", {dy},
                                                PickAttrs(n, {"axis", "tiles"})));
  }
  return g;
}

// ChannelShuffle: the inverse shuffle, C / group groups, of dy.
absl::StatusOr<Grads> ChannelShuffleGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(1);
  if (r.needs_grad[0]) {
    const int64_t inverse = n.input(0).type().dim(1) / n.GetInt("group");
    KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "ChannelShuffle", {dy},
                                                {{"group", AttrValue(inverse)}}));
  }
  return g;
}

absl::StatusOr<Grads> SplitGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  Grads g(1);
  if (!r.needs_grad[0]) return g;
  std::vector<Value> parts;
  for (int i = 0; i < n.num_outputs(); ++i) {
    if (r.has_output_grad(i)) parts.push_back(r.output_grads[i]);
  }
  if (parts.empty()) return g;
  if (parts.size() == 1) {
    g[0] = parts[0];
    return g;
  }
  KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "Eltwise", parts,
                                              {{"operation", AttrValue(std::string("sum"))}}));
  return g;
}

absl::StatusOr<Grads> ReshapeGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(1);
  if (!r.needs_grad[0]) return g;
  KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "Reshape", {dy},
                                              {{"shape", AttrValue(n.input(0).type().dims())}}));
  return g;
}

absl::StatusOr<Grads> CropGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(2);  // The reference input only gives a shape: no gradient.
  if (!r.needs_grad[0]) return g;
  AttrMap a = PickAttrs(n, {"axis", "offset"});
  a["input_dims"] = AttrValue(n.input(0).type().dims());
  KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "CropGradient", {dy}, a));
  return g;
}

absl::StatusOr<Grads> ConvertGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(1);
  if (!r.needs_grad[0]) return g;
  const TensorType& x = n.input(0).type();
  KILN_ASSIGN_OR_RETURN(
      g[0],
      AddGradientNode(
          b, n, "grad_x", "Convert", {dy},
          {{"dtype", AttrValue(std::string(DataTypeName(x.dtype())))},
           {"layout", AttrValue(std::string(x.IsChannelsLast() && x.rank() >= 4 ? "channels_last"
                                                                                : "row_major"))}}));
  return g;
}

}  // namespace

absl::Status RegisterTensorGradients(OpRegistry& registry) {
  KILN_RETURN_IF_ERROR(registry.SetGradient("Concat", ConcatGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Slice", SliceGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Split", SplitGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Tile", TileGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("ChannelShuffle", ChannelShuffleGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Reduction", ReductionGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Flatten", ReshapeGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Reshape", ReshapeGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Crop", CropGradient));
  return registry.SetGradient("Convert", ConvertGradient);
}

}  // namespace kiln
