// Gradient builders of the losses. A loss is where backward starts: its gradient is the
// constant Caffe calls loss_weight, which the backward op takes as an attribute. A loss whose
// value feeds another op (rather than the objective) has no gradient here.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/gradients/all_gradients.h"
#include "ops/gradients/gradient_request.h"

namespace kiln {

namespace {

using Grads = std::vector<Value>;

absl::StatusOr<double> SeedOf(const GradientRequest& r) {
  if (r.has_output_grad(0)) {
    return NoGradientFor(*r.node, "a loss used as another op's input is not differentiated");
  }
  return r.loss_weights.empty() ? 0.0 : r.loss_weights[0];
}

// The loss's own attributes plus its weight, for the backward op.
AttrMap LossAttrs(const Node& n, double weight, std::initializer_list<const char*> names) {
  AttrMap a = PickAttrs(n, names);
  a["loss_weight"] = AttrValue(weight);
  return a;
}

absl::StatusOr<Grads> SoftmaxWithLossGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(double w, SeedOf(r));
  Grads g(2);  // Labels get none.
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(
        g[0], AddGradientNode(b, n, "grad_x", "SoftmaxWithLossGradient", {n.input(0), n.input(1)},
                              LossAttrs(n, w, {"axis", "ignore_label", "normalization"})));
  }
  return g;
}

// d/da = w (a - b) / N and d/db = -d/da.
absl::StatusOr<Grads> EuclideanLossGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(double w, SeedOf(r));
  Grads g(2);
  if (!r.needs_grad[0] && !r.needs_grad[1]) return g;
  KILN_ASSIGN_OR_RETURN(Value da, AddGradientNode(b, n, "grad_a", "EuclideanLossGradient",
                                                  {n.input(0), n.input(1)}, LossAttrs(n, w, {})));
  if (r.needs_grad[0]) g[0] = da;
  if (r.needs_grad[1]) {
    KILN_ASSIGN_OR_RETURN(g[1], AddGradientNode(b, n, "grad_b", "Power", {da},
                                                {{"power", AttrValue(1.0)},
                                                 {"scale", AttrValue(-1.0)},
                                                 {"shift", AttrValue(0.0)}}));
  }
  return g;
}

absl::StatusOr<Grads> SigmoidCrossEntropyGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(double w, SeedOf(r));
  Grads g(2);  // Caffe gives the targets no gradient.
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(
        g[0],
        AddGradientNode(b, n, "grad_x", "SigmoidCrossEntropyLossGradient", {n.input(0), n.input(1)},
                        LossAttrs(n, w, {"ignore_label", "normalization"})));
  }
  return g;
}

absl::StatusOr<Grads> ContrastiveLossGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(double w, SeedOf(r));
  Grads g(3);
  if (!r.needs_grad[0] && !r.needs_grad[1]) return g;
  KILN_ASSIGN_OR_RETURN(std::vector<Value> both,
                        AddGradientNodes(b, n, "grad", "ContrastiveLossGradient",
                                         {n.input(0), n.input(1), n.input(2)},
                                         LossAttrs(n, w, {"margin", "legacy_version"})));
  if (r.needs_grad[0]) g[0] = both[0];
  if (r.needs_grad[1]) g[1] = both[1];
  return g;
}

// CTC: the activations' gradient only; labels and lengths are indices, which have none.
absl::StatusOr<Grads> CtcLossGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(double w, SeedOf(r));
  Grads g(4);
  if (r.needs_grad[0]) {
    KILN_ASSIGN_OR_RETURN(
        g[0], AddGradientNode(b, n, "grad_x", "CTCLossGradient",
                              {n.input(0), n.input(1), n.input(2), n.input(3)},
                              LossAttrs(n, w, {"blank", "reduction", "zero_infinity"})));
  }
  return g;
}

}  // namespace

absl::Status RegisterLossGradients(OpRegistry& registry) {
  KILN_RETURN_IF_ERROR(registry.SetGradient("CTCLoss", CtcLossGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("SoftmaxWithLoss", SoftmaxWithLossGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("EuclideanLoss", EuclideanLossGradient));
  KILN_RETURN_IF_ERROR(
      registry.SetGradient("SigmoidCrossEntropyLoss", SigmoidCrossEntropyGradient));
  return registry.SetGradient("ContrastiveLoss", ContrastiveLossGradient);
}

}  // namespace kiln
