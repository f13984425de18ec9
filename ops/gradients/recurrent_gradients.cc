// The RNN op's gradient: one RNNGradient node computes every input's gradient at once (the
// backward of a recurrence walks the steps once for all of them), from whichever of y, h_T and
// c_T receive a gradient.
#include "base/status_macros.h"
#include "ops/gradients/all_gradients.h"
#include "ops/gradients/gradient_request.h"
#include "ops/recurrent_params.h"

namespace kiln {

namespace {

using Grads = std::vector<Value>;

absl::StatusOr<Grads> RnnGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  KILN_ASSIGN_OR_RETURN(RecurrentAttrs a, RecurrentAttrsOf(n, /*gradient=*/false));
  Grads g(n.num_inputs());
  a.has_dy = r.has_output_grad(0);
  a.has_dh = r.has_output_grad(1);
  a.has_dc = a.lstm() && r.has_output_grad(2);
  bool wanted = false;
  for (bool need : r.needs_grad) wanted = wanted || need;
  if (!wanted || !(a.has_dy || a.has_dh || a.has_dc)) return g;
  std::vector<Value> inputs = n.inputs();
  if (a.has_dy) inputs.push_back(r.output_grads[0]);
  if (a.has_dh) inputs.push_back(r.output_grads[1]);
  if (a.has_dc) inputs.push_back(r.output_grads[2]);
  AttrMap attrs =
      PickAttrs(n, {"cell", "hidden_size", "bias", "gate_order", "has_cont", "has_initial_state"});
  attrs["has_dy"] = AttrValue(a.has_dy);
  attrs["has_dh"] = AttrValue(a.has_dh);
  attrs["has_dc"] = AttrValue(a.has_dc);
  KILN_ASSIGN_OR_RETURN(std::vector<Value> out,
                        AddGradientNodes(b, n, "grad", "RNNGradient", inputs, attrs));
  const RecurrentPorts p = RecurrentPortsOf(a);
  // Input index -> RNNGradient output index; cont gets none (it is data, not learned).
  const std::pair<int, int> map[] = {{p.x, 0},          {p.w_ih, 1},       {p.w_hh, 2},
                                     {p.b_ih, p.db_ih}, {p.b_hh, p.db_hh}, {p.h0, p.dh0},
                                     {p.c0, p.dc0}};
  for (const auto& [input, output] : map) {
    if (input >= 0 && r.needs_grad[input]) g[input] = out[output];
  }
  return g;
}

}  // namespace

absl::Status RegisterRecurrentGradients(OpRegistry& registry) {
  return registry.SetGradient("RNN", RnnGradient);
}

}  // namespace kiln
