// The RNN op's attributes and where each of its optional inputs and outputs sits (the op is one
// recurrent layer, one or both directions: ops/recurrent_ops.cc). Shared by its shape rule, its
// gradient builder and its kernels, which all read a node the same way.
//
//   RNN(x [T, N, I], w_ih [G H, I], w_hh [G H, H], b_ih [G H]?, b_hh [G H]?,
//       (bidirectional: the reverse direction's w_ih_r, w_hh_r, b_ih_r?, b_hh_r?,)
//       cont [T, N]?, h0 [N, H]?, c0 [N, H]? (LSTM))
//       -> y [T, N, H], h_T [N, H], c_T [N, H] (LSTM)
//   RNNGradient(the RNN's inputs..., dy?, dh_T?, dc_T?)
//       -> dx, dw_ih, dw_hh, db_ih?, db_hh?, (dw_ih_r, dw_hh_r, db_ih_r?, db_hh_r?,) dh0?, dc0?
//
// `bias` says which biases are present ("double": both, "input": b_ih, "none"), `has_cont` and
// `has_initial_state` the other optional inputs, in the order above. `bidirectional` adds the
// reverse direction, which reads each sequence from t = T - 1 back to 0 (PyTorch's and cuDNN's
// bidirectional layer over full-length sequences): y is then [T, N, 2H] (the forward
// direction's H features first), and the states h0, c0, h_T, c_T are [2, N, H] (forward, then
// reverse). It takes no `cont` (a restart inside a row has no meaning read backwards).
#ifndef KILN_OPS_RECURRENT_PARAMS_H_
#define KILN_OPS_RECURRENT_PARAMS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace kiln {

struct RecurrentAttrs {
  std::string cell;  // "lstm", "gru", "rnn_tanh", "rnn_relu"
  int64_t hidden_size = 0;
  std::string bias;        // "double", "input", "none"
  std::string gate_order;  // LSTM: "ifgo" (PyTorch, cuDNN) or "ifog" (Caffe)
  bool has_cont = false, has_initial_state = false, bidirectional = false;
  // RNNGradient only: which output gradients it receives.
  bool has_dy = false, has_dh = false, has_dc = false;

  bool lstm() const { return cell == "lstm"; }
  int gates() const { return cell == "lstm" ? 4 : cell == "gru" ? 3 : 1; }
  int biases() const { return bias == "double" ? 2 : bias == "input" ? 1 : 0; }
  int directions() const { return bidirectional ? 2 : 1; }
};

// Input and output indices (-1: absent).
struct RecurrentPorts {
  int x = 0, w_ih = 1, w_hh = 2, b_ih = -1, b_hh = -1, cont = -1, h0 = -1, c0 = -1;
  // The reverse direction's weights (bidirectional).
  int w_ih_r = -1, w_hh_r = -1, b_ih_r = -1, b_hh_r = -1;
  int forward_inputs = 3;
  int dy = -1, dh = -1, dc = -1;  // RNNGradient's inputs after the forward's
  int gradient_inputs = 3;
  int forward_outputs = 2;  // y, h_T (, c_T)
  // RNNGradient's outputs: dx 0, dw_ih 1, dw_hh 2, then these.
  int db_ih = -1, db_hh = -1, dw_ih_r = -1, dw_hh_r = -1, db_ih_r = -1, db_hh_r = -1, dh0 = -1,
      dc0 = -1;
  int gradient_outputs = 3;
};

inline RecurrentPorts RecurrentPortsOf(const RecurrentAttrs& a) {
  RecurrentPorts p;
  int next = 3;
  if (a.biases() >= 1) p.b_ih = next++;
  if (a.biases() == 2) p.b_hh = next++;
  if (a.bidirectional) {
    p.w_ih_r = next++;
    p.w_hh_r = next++;
    if (a.biases() >= 1) p.b_ih_r = next++;
    if (a.biases() == 2) p.b_hh_r = next++;
  }
  if (a.has_cont) p.cont = next++;
  if (a.has_initial_state) {
    p.h0 = next++;
    if (a.lstm()) p.c0 = next++;
  }
  p.forward_inputs = next;
  if (a.has_dy) p.dy = next++;
  if (a.has_dh) p.dh = next++;
  if (a.has_dc && a.lstm()) p.dc = next++;
  p.gradient_inputs = next;
  p.forward_outputs = a.lstm() ? 3 : 2;
  int out = 3;
  if (a.biases() >= 1) p.db_ih = out++;
  if (a.biases() == 2) p.db_hh = out++;
  if (a.bidirectional) {
    p.dw_ih_r = out++;
    p.dw_hh_r = out++;
    if (a.biases() >= 1) p.db_ih_r = out++;
    if (a.biases() == 2) p.db_hh_r = out++;
  }
  if (a.has_initial_state) {
    p.dh0 = out++;
    if (a.lstm()) p.dc0 = out++;
  }
  p.gradient_outputs = out;
  return p;
}

// Reads and checks the attributes through anything with GetString / GetInt / GetBool (a Node or
// an InferContext); `gradient` also reads RNNGradient's has_* attributes.
template <typename Attrs>
absl::StatusOr<RecurrentAttrs> RecurrentAttrsOf(const Attrs& n, bool gradient) {
  RecurrentAttrs a;
  a.cell = n.GetString("cell");
  a.hidden_size = n.GetInt("hidden_size");
  a.bias = n.GetString("bias");
  a.gate_order = n.GetString("gate_order");
  a.has_cont = n.GetBool("has_cont");
  a.has_initial_state = n.GetBool("has_initial_state");
  a.bidirectional = n.GetBool("bidirectional");
  if (gradient) {
    a.has_dy = n.GetBool("has_dy");
    a.has_dh = n.GetBool("has_dh");
    a.has_dc = n.GetBool("has_dc");
  }
  if (a.cell != "lstm" && a.cell != "gru" && a.cell != "rnn_tanh" && a.cell != "rnn_relu") {
    return absl::InvalidArgumentError(
        absl::StrCat("cell '", a.cell, "': use lstm, gru, rnn_tanh or rnn_relu"));
  }
  if (a.hidden_size < 1 || a.hidden_size > (int64_t{1} << 28)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden_size ", a.hidden_size, " (must be 1..2^28)"));
  }
  if (a.bias != "double" && a.bias != "input" && a.bias != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("bias '", a.bias, "': use double, input or none"));
  }
  if (a.gate_order != "ifgo" && !(a.gate_order == "ifog" && a.lstm())) {
    return absl::InvalidArgumentError(
        absl::StrCat("gate_order '", a.gate_order, "': use ifgo, or ifog (Caffe's) for an LSTM"));
  }
  if (a.bidirectional && a.has_cont) {
    return absl::InvalidArgumentError(
        "a bidirectional layer takes no cont (its reverse direction would read a restart "
        "backwards)");
  }
  return a;
}

}  // namespace kiln

#endif  // KILN_OPS_RECURRENT_PARAMS_H_
