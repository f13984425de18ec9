// RNN: the gradient cases (tests/util/gradient_cases.h), checked against finite differences on
// the reference backend (//tests/training:gradient_check_test) and against the reference on
// CUDA in every precision (//tests/kernels:cuda_gradient_test). One RNNGradient node gives the
// gradients of x, the weights, the biases and the initial state from those of y, h_T and c_T.
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

namespace {

AttrMap Rnn(const char* cell, int64_t hidden, const char* bias, bool cont, bool state,
            const char* order = "ifgo") {
  return {{"cell", S(cell)},        {"hidden_size", I(hidden)}, {"bias", S(bias)},
          {"gate_order", S(order)}, {"has_cont", B(cont)},      {"has_initial_state", B(state)}};
}

// Caffe's continuation markers: 0 at the first step of every sequence and at one restart.
std::function<void(HostTensor&)> ContMarkers(int64_t batch) {
  return [batch](HostTensor& t) {
    for (int64_t i = 0; i < t.type().num_elements(); ++i) {
      t.SetFloat(i, i < batch || i == batch + 1 ? 0.0f : 1.0f);
    }
  };
}

}  // namespace

std::vector<GradientCase> RecurrentGradientCases() {
  std::vector<GradientCase> out;
  // x [T, N, I], w_ih, w_hh, b_ih, (b_hh), (cont), (h0, c0).
  GradientCase lstm =
      Case("rnn_lstm_caffe", "RNN", {{4, 3, 5}, {12, 5}, {12, 3}, {12}, {4, 3}, {3, 3}, {3, 3}},
           Rnn("lstm", 3, "input", true, true, "ifog"));
  lstm.fixed_inputs[4] = ContMarkers(3);
  out.push_back(lstm);
  out.push_back(Case("rnn_gru", "RNN", {{3, 2, 4}, {15, 4}, {15, 5}, {15}, {15}},
                     Rnn("gru", 5, "double", false, false)));
  out.push_back(Case("rnn_tanh_state", "RNN", {{5, 2, 3}, {4, 3}, {4, 4}, {2, 4}},
                     Rnn("rnn_tanh", 4, "none", false, true)));
  // Both directions: x, the forward's w_ih, w_hh, b_ih, b_hh, the reverse's, then h0 and c0
  // [2, N, H]; y is [T, N, 2H].
  AttrMap both = Rnn("lstm", 2, "double", false, true);
  both["bidirectional"] = B(true);
  out.push_back(Case(
      "rnn_lstm_bidirectional", "RNN",
      {{4, 2, 3}, {8, 3}, {8, 2}, {8}, {8}, {8, 3}, {8, 2}, {8}, {8}, {2, 2, 2}, {2, 2, 2}}, both));
  AttrMap gru_both = Rnn("gru", 3, "none", false, false);
  gru_both["bidirectional"] = B(true);
  out.push_back(
      Case("rnn_gru_bidirectional", "RNN", {{3, 2, 4}, {9, 4}, {9, 3}, {9, 4}, {9, 3}}, gru_both));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
