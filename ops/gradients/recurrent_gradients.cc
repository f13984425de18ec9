// The RNN op's gradient: one RNNGradient node computes every input's gradient at once (the
// backward of a recurrence walks the steps once for all of them), from whichever of y, h_T and
// c_T receive a gradient. LSTMUnit's likewise, from whichever of c and h receive one.
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
  AttrMap attrs = PickAttrs(n, {"cell", "hidden_size", "bias", "gate_order", "has_cont",
                                "has_initial_state", "bidirectional"});
  attrs["has_dy"] = AttrValue(a.has_dy);
  attrs["has_dh"] = AttrValue(a.has_dh);
  attrs["has_dc"] = AttrValue(a.has_dc);
  KILN_ASSIGN_OR_RETURN(std::vector<Value> out,
                        AddGradientNodes(b, n, "grad", "RNNGradient", inputs, attrs));
  const RecurrentPorts p = RecurrentPortsOf(a);
  // Input index -> RNNGradient output index; cont gets none (it is data, not learned).
  const std::pair<int, int> map[] = {{p.x, 0},
                                     {p.w_ih, 1},
                                     {p.w_hh, 2},
                                     {p.b_ih, p.db_ih},
                                     {p.b_hh, p.db_hh},
                                     {p.w_ih_r, p.dw_ih_r},
                                     {p.w_hh_r, p.dw_hh_r},
                                     {p.b_ih_r, p.db_ih_r},
                                     {p.b_hh_r, p.db_hh_r},
                                     {p.h0, p.dh0},
                                     {p.c0, p.dc0}};
  for (const auto& [input, output] : map) {
    if (input >= 0 && r.needs_grad[input]) g[input] = out[output];
  }
  return g;
}

// LSTMUnit: one LSTMUnitGradient node gives c_prev's and x's gradients together (they share
// the recomputed gates), from whichever of c and h receive a gradient; cont gets none.
absl::StatusOr<Grads> LstmUnitGradient(GraphBuilder& b, const GradientRequest& r) {
  const Node& n = *r.node;
  Grads g(n.num_inputs());
  const bool has_dc = r.has_output_grad(0), has_dh = r.has_output_grad(1);
  if (!(r.needs_grad[0] || r.needs_grad[1]) || !(has_dc || has_dh)) return g;
  std::vector<Value> inputs = n.inputs();
  if (has_dc) inputs.push_back(r.output_grads[0]);
  if (has_dh) inputs.push_back(r.output_grads[1]);
  KILN_ASSIGN_OR_RETURN(
      std::vector<Value> out,
      AddGradientNodes(b, n, "grad", "LSTMUnitGradient", inputs,
                       {{"has_dc", AttrValue(has_dc)}, {"has_dh", AttrValue(has_dh)}}));
  if (r.needs_grad[0]) g[0] = out[0];
  if (r.needs_grad[1]) g[1] = out[1];
  return g;
}

}  // namespace

absl::Status RegisterRecurrentGradients(OpRegistry& registry) {
  KILN_RETURN_IF_ERROR(registry.SetGradient("LSTMUnit", LstmUnitGradient));
  return registry.SetGradient("RNN", RnnGradient);
}

}  // namespace kiln
