// Gradient builders of the element-wise ops: the activations, PReLU, Dropout and Eltwise.
//
// An activation's gradient reads the forward output where the formula allows (Sigmoid, TanH,
// and ReLU/ClippedReLU/ELU, whose sign tests give the same answer on y as on x), so the input
// can die at the forward op and the planner may run it in place, as Caffe's in-place ReLU does.
// Power and AbsVal (and a ReLU with a negative slope below 0) need the input itself.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/gradients/all_gradients.h"
#include "ops/gradients/gradient_request.h"

namespace kiln {

namespace {

using Grads = std::vector<Value>;

bool ReadsOutput(const Node& n) {
  switch (n.kind()) {
    case OpKind::kReLU:
      return n.GetFloat("negative_slope") >= 0;
    case OpKind::kELU:
      return n.GetFloat("alpha") >= 0;
    case OpKind::kSigmoid:
    case OpKind::kTanH:
    case OpKind::kClippedReLU:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<Grads> ActivationGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(1);
  if (!r.needs_grad[0]) return g;
  const bool output = ReadsOutput(n);
  AttrMap a = PickAttrs(n, {"negative_slope", "ceiling", "alpha", "power", "scale", "shift"});
  a["activation"] = AttrValue(n.op());
  a["saved"] = AttrValue(std::string(output ? "output" : "input"));
  KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "ActivationGradient",
                                              {output ? OutputOf(n) : n.input(0), dy}, a));
  return g;
}

absl::StatusOr<Grads> PReluGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  KILN_ASSIGN_OR_RETURN(
      std::vector<Value> both,
      AddGradientNodes(b, n, "grad", "PReLUGradient", {n.input(0), n.input(1), dy},
                       PickAttrs(n, {"channel_shared"})));
  Grads g(2);
  if (r.needs_grad[0]) g[0] = both[0];
  if (r.needs_grad[1]) g[1] = both[1];
  return g;
}

absl::StatusOr<Grads> DropoutGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  Grads g(n.num_inputs());
  if (!r.needs_grad[0]) return g;
  if (!n.GetBool("training")) {
    g[0] = dy;  // Identity at inference.
    return g;
  }
  std::vector<Value> in = {dy};
  if (n.num_inputs() > 1) in.push_back(n.input(1));  // The per-iteration seed offset.
  KILN_ASSIGN_OR_RETURN(g[0], AddGradientNode(b, n, "grad_x", "DropoutGradient", in,
                                              PickAttrs(n, {"ratio", "seed"})));
  return g;
}

// SUM: dx_i = coeff_i dy. PROD: dx_i = dy times the other inputs. MAX: dy where x_i won. A
// fused ReLU's backward comes first, reading its mask off the output (as a ReLU's does).
absl::StatusOr<Grads> EltwiseGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(Value dy, SingleOutputGradient(r));
  bool any = false;
  for (int i = 0; i < n.num_inputs(); ++i) any = any || r.needs_grad[i];
  if (any && n.GetString("activation") == "relu") {
    KILN_ASSIGN_OR_RETURN(
        dy, AddGradientNode(b, n, "grad_relu", "ActivationGradient", {OutputOf(n), dy},
                            {{"activation", AttrValue(std::string("ReLU"))},
                             {"saved", AttrValue(std::string("output"))},
                             {"negative_slope", AttrValue(n.GetFloat("negative_slope"))}}));
  }
  const std::string& op = n.GetString("operation");
  const std::vector<double>& coeffs = n.GetFloats("coeffs");
  Grads g(n.num_inputs());
  for (int i = 0; i < n.num_inputs(); ++i) {
    if (!r.needs_grad[i]) continue;
    const std::string suffix = absl::StrCat("grad_", i);
    if (op == "sum") {
      const double c = coeffs.empty() ? 1.0 : coeffs[i];
      if (c == 1.0) {
        g[i] = dy;
      } else {
        KILN_ASSIGN_OR_RETURN(g[i], AddGradientNode(b, n, suffix, "Power", {dy},
                                                    {{"power", AttrValue(1.0)},
                                                     {"scale", AttrValue(c)},
                                                     {"shift", AttrValue(0.0)}}));
      }
    } else if (op == "prod") {
      std::vector<Value> in = {dy};
      for (int j = 0; j < n.num_inputs(); ++j) {
        if (j != i) in.push_back(n.input(j));
      }
      KILN_ASSIGN_OR_RETURN(g[i], AddGradientNode(b, n, suffix, "Eltwise", in,
                                                  {{"operation", AttrValue(std::string("prod"))}}));
    } else if (op == "max") {
      std::vector<Value> in = n.inputs();
      in.push_back(dy);
      KILN_ASSIGN_OR_RETURN(g[i], AddGradientNode(b, n, suffix, "EltwiseMaxGradient", in,
                                                  {{"which", AttrValue(int64_t{i})}}));
    } else {
      return NoGradientFor(n, absl::StrCat("operation '", op, "'"));
    }
  }
  return g;
}

}  // namespace

absl::Status RegisterPointwiseGradients(OpRegistry& registry) {
  for (const char* op : {"ReLU", "Sigmoid", "TanH", "ELU", "ClippedReLU", "Power", "AbsVal"}) {
    KILN_RETURN_IF_ERROR(registry.SetGradient(op, ActivationGradient));
  }
  KILN_RETURN_IF_ERROR(registry.SetGradient("PReLU", PReluGradient));
  KILN_RETURN_IF_ERROR(registry.SetGradient("Dropout", DropoutGradient));
  return registry.SetGradient("Eltwise", EltwiseGradient);
}

}  // namespace kiln
