// Gradient builders of the layers with parameters or windows: Convolution, Deconvolution,
// InnerProduct, Pooling, LRN, BatchNorm, Scale, Bias, Softmax. Each asks only for the forward
// values its backward op reads (ops/gradient_ops.cc), so the planner can free the rest.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/gradients/all_gradients.h"
#include "ops/gradients/gradient_request.h"

namespace kiln {

namespace {

using Grads = std::vector<Value>;

AttrMap ConvAttrsOf(const Node& n) {
  return PickAttrs(n, {"stride", "pad", "dilation", "group", "mode"});
}

// A bias or scale-style parameter's gradient: dy summed to `param`'s dims.
absl::StatusOr<Value> ParamGradient(GraphBuilder& b, const Node& n, const std::string& suffix,
                                    const char* op, std::vector<Value> inputs, Value param,
                                    int64_t axis, int64_t num_axes) {
  AttrMap attrs = {{"axis", AttrValue(axis)},
                   {"num_axes", AttrValue(num_axes)},
                   {"param_dims", AttrValue(param.type().dims())}};
  return AddGradientNode(b, n, suffix, op, std::move(inputs), attrs);
}

absl::Status RequireUnfused(const Node& n) {
  if ((n.attrs().count("activation") && n.GetString("activation") != "none") ||
      (n.kind() == OpKind::kConvolution && n.num_inputs() > 3)) {
    return NoGradientFor(n, "fused epilogues are inference-only; train the unrewritten graph");
  }
  if (n.attrs().count("pad_end") && !n.GetInts("pad_end").empty()) {
    return NoGradientFor(n, "asymmetric padding (pad_end) is inference-only");
  }
  return absl::OkStatus();
}

absl::StatusOr<Grads> ConvolutionGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_RETURN_IF_ERROR(RequireUnfused(n));
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(n.num_inputs());
  if (r.needs_grad[0]) {
    AttrMap a = ConvAttrsOf(n);
    a["input_dims"] = AttrValue(n.input(0).type().dims());
    KILN_ASSIGN_OR_RETURN(
        g[0], AddGradientNode(b, n, "grad_x", "ConvolutionBackwardData", {dy, n.input(1)}, a));
  }
  if (r.needs_grad[1]) {
    AttrMap a = ConvAttrsOf(n);
    a["filter_dims"] = AttrValue(n.input(1).type().dims());
    KILN_ASSIGN_OR_RETURN(g[1], AddGradientNode(b, n, "grad_filter", "ConvolutionBackwardFilter",
                                                {n.input(0), dy}, a));
  }
  if (n.num_inputs() > 2 && r.needs_grad[2]) {
    KILN_ASSIGN_OR_RETURN(g[2],
                          ParamGradient(b, n, "grad_bias", "BiasGradient", {dy}, n.input(2), 1, 1));
  }
  return g;
}

// Deconvolution is the backward-data direction of the convolution from its output to its
// input: its input gradient is that convolution's forward, its filter gradient the same
// convolution's filter gradient with the roles of x and dy swapped.
absl::StatusOr<Grads> DeconvolutionGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(n.num_inputs());
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(
        g[0], AddGradientNode(b, n, "grad_x", "Convolution", {dy, n.input(1)}, ConvAttrsOf(n)));
  }
  if (r.needs_grad[1]) {
    AttrMap a = ConvAttrsOf(n);
    a["filter_dims"] = AttrValue(n.input(1).type().dims());
    KILN_ASSIGN_OR_RETURN(g[1], AddGradientNode(b, n, "grad_filter", "ConvolutionBackwardFilter",
                                                {dy, n.input(0)}, a));
  }
  if (n.num_inputs() > 2 && r.needs_grad[2]) {
    KILN_ASSIGN_OR_RETURN(g[2],
                          ParamGradient(b, n, "grad_bias", "BiasGradient", {dy}, n.input(2), 1, 1));
  }
  return g;
}

absl::StatusOr<Grads> InnerProductGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(n.num_inputs());
  AttrMap a = PickAttrs(n, {"axis", "transpose"});
  if (r.needs_grad[0]) {
    AttrMap data = a;
    data["input_dims"] = AttrValue(n.input(0).type().dims());
    KILN_ASSIGN_OR_RETURN(
        g[0], AddGradientNode(b, n, "grad_x", "InnerProductBackwardData", {dy, n.input(1)}, data));
  }
  if (r.needs_grad[1]) {
    KILN_ASSIGN_OR_RETURN(g[1], AddGradientNode(b, n, "grad_weight", "InnerProductBackwardFilter",
                                                {n.input(0), dy}, a));
  }
  if (n.num_inputs() > 2 && r.needs_grad[2]) {
    // y is x.dims[:axis] + [N]: the bias spans y's last axis.
    KILN_ASSIGN_OR_RETURN(g[2], ParamGradient(b, n, "grad_bias", "BiasGradient", {dy}, n.input(2),
                                              dy.type().rank() - 1, 1));
  }
  return g;
}

// Embed: the table's gradient from the indices and dy; the bias's over every axis but the last;
// none for the indices.
absl::StatusOr<Grads> EmbedGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(n.num_inputs());
  if (r.needs_grad[1]) {
    KILN_ASSIGN_OR_RETURN(g[1], AddGradientNode(b, n, "grad_weight", "EmbedGradient",
                                                {n.input(0), dy},
                                                {{"weight_dims", n.input(1).type().dims()}}));
  }
  if (n.num_inputs() > 2 && r.needs_grad[2]) {
    KILN_ASSIGN_OR_RETURN(g[2], ParamGradient(b, n, "grad_bias", "BiasGradient", {dy}, n.input(2),
                                              dy.type().rank() - 1, 1));
  }
  return g;
}

absl::StatusOr<Grads> PoolingGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(1);
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(
        g[0],
        AddGradientNode(b, n, "grad_x", "PoolingGradient", {n.input(0), OutputOf(n), dy},
                        PickAttrs(n, {"mode", "kernel", "stride", "pad", "global", "rounding"})));
  }
  return g;
}

absl::StatusOr<Grads> LrnGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(1);
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(
        g[0], AddGradientNode(b, n, "grad_x", "LRNGradient", {n.input(0), dy},
                              PickAttrs(n, {"region", "local_size", "alpha", "beta", "k"})));
  }
  return g;
}

// Only x gets a gradient: the statistics are not learned by gradient descent (Caffe gives them
// lr_mult 0 and updates them as moving averages instead).
absl::StatusOr<Grads> BatchNormGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(n.num_inputs());
  if (r.needs_grad[0]) {
    std::vector<Value> in = {n.input(0), dy, n.input(1), n.input(2)};
    if (n.num_inputs() > 3) in.push_back(n.input(3));
    KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "BatchNormGradient", in,
                                                PickAttrs(n, {"eps", "mode", "use_global_stats"})));
  }
  return g;
}

// One node gives all three gradients: the reductions that dx needs are dscale and dbias. It reads
// the batch statistics the forward saved (its last two outputs) rather than summing x again.
absl::StatusOr<Grads> AffineBatchNormGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(n.num_inputs());
  if (!r.needs_grad[0] && !r.needs_grad[4] && !r.needs_grad[5]) return g;
  const int saved = n.num_outputs() - 2;
  std::vector<Value> in = {n.input(0), dy, n.input(4), OutputOf(n, saved), OutputOf(n, saved + 1)};
  // A fused ReLU's mask comes from the output itself (y > 0), as Caffe's ReLU backward reads it.
  const bool relu = n.GetBool("relu");
  if (relu) in.push_back(OutputOf(n, 0));
  KILN_ASSIGN_OR_RETURN(
      std::vector<Value> d,
      AddGradientNodes(b, n, "grad", "AffineBatchNormGradient", in, {{"relu", AttrValue(relu)}}));
  if (r.needs_grad[0]) g[0] = d[0];
  if (r.needs_grad[4]) g[4] = d[1];
  if (r.needs_grad[5]) g[5] = d[2];
  return g;
}

// Scale: dx = dy * scale (a Scale without bias), dscale = Σ x dy, dbias = Σ dy.
absl::StatusOr<Grads> ScaleGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_RETURN_IF_ERROR(RequireUnfused(n));
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  const int64_t axis = n.GetInt("axis"), num_axes = n.GetInt("num_axes");
  Grads g(n.num_inputs());
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "Scale", {dy, n.input(1)},
                                                PickAttrs(n, {"axis", "num_axes"})));
  }
  if (r.needs_grad[1]) {
    KILN_ASSIGN_OR_RETURN(g[1], ParamGradient(b, n, "grad_scale", "ScaleParamGradient",
                                              {n.input(0), dy}, n.input(1), axis, num_axes));
  }
  if (n.num_inputs() > 2 && r.needs_grad[2]) {
    KILN_ASSIGN_OR_RETURN(
        g[2], ParamGradient(b, n, "grad_bias", "BiasGradient", {dy}, n.input(2), axis, num_axes));
  }
  return g;
}

absl::StatusOr<Grads> BiasGradientOf(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(2);
  if (r.needs_grad[0]) g[0] = dy;
  if (r.needs_grad[1]) {
    KILN_ASSIGN_OR_RETURN(g[1], ParamGradient(b, n, "grad_bias", "BiasGradient", {dy}, n.input(1),
                                              n.GetInt("axis"), n.GetInt("num_axes")));
  }
  return g;
}

absl::StatusOr<Grads> SoftmaxGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(1);
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "SoftmaxGradient",
                                                {OutputOf(n), dy}, PickAttrs(n, {"axis", "log"})));
  }
  return g;
}

}  // namespace

absl::Status RegisterNnGradients(OpRegistry& registry) {
  KILN_RETURN_IF_ERROR(registry.SetGradient("Convolution", ConvolutionGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Deconvolution", DeconvolutionGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("InnerProduct", InnerProductGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Embed", EmbedGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Pooling", PoolingGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("LRN", LrnGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("BatchNorm", BatchNormGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Scale", ScaleGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("AffineBatchNorm", AffineBatchNormGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Bias", BiasGradientOf));
  return registry.SetGradient("Softmax", SoftmaxGradient);
}

}  // namespace kiln
