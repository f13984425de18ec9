// RNN and RNNGradient: the cases of the graph CUDA kernel tests (tests/util/cuda_graph_cases.h):
// every case runs on CUDA against the reference backend in f32, f16 and bf16. Weights are data
// inputs here (the op wants them in x's dtype); cont is all ones (restarts are covered by the
// primitive's test, tests/ops/rnn/rnn_primitive_cuda_test.cc).
#include <string>
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

namespace {

AttrMap Rnn(const char* cell, int64_t hidden, const char* bias, bool cont, bool state,
            const char* order = "ifgo") {
  return {{"cell", Str(cell)},        {"hidden_size", hidden}, {"bias", Str(bias)},
          {"gate_order", Str(order)}, {"has_cont", cont},      {"has_initial_state", state}};
}

}  // namespace

// Part of //tests/kernels:cuda_graph_nn_test, after the other families (their seeds unchanged).
std::vector<GraphKernelCase> RecurrentGraphCases() {
  const float w = 0.4f;  // weights in [-w, w]: gates away from saturation
  GraphKernelCase lstm{"LstmCaffe",
                       "RNN",
                       {Data({6, 3, 5}), Data({16, 5}, -w, w), Data({16, 4}, -w, w),
                        Data({16}, -w, w), Data({6, 3}, 1, 1), Data({3, 4}), Data({3, 4})},
                       Rnn("lstm", 4, "input", true, true, "ifog")};
  lstm.nhwc = false;
  GraphKernelCase gru{"Gru",
                      "RNN",
                      {Data({5, 4, 6}), Data({21, 6}, -w, w), Data({21, 7}, -w, w),
                       Data({21}, -w, w), Data({21}, -w, w)},
                      Rnn("gru", 7, "double", false, false)};
  gru.nhwc = false;
  GraphKernelCase tanh{"RnnTanhNoBias",
                       "RNN",
                       {Data({4, 2, 3}), Data({5, 3}, -w, w), Data({5, 5}, -w, w)},
                       Rnn("rnn_tanh", 5, "none", false, false)};
  tanh.nhwc = false;
  AttrMap lstm_grad = Rnn("lstm", 4, "double", true, true);
  lstm_grad["has_dy"] = true;
  lstm_grad["has_dh"] = true;
  lstm_grad["has_dc"] = true;
  GraphKernelCase lstm_backward{
      "LstmGradient",
      "RNNGradient",
      {Data({5, 3, 6}), Data({16, 6}, -w, w), Data({16, 4}, -w, w), Data({16}, -w, w),
       Data({16}, -w, w), Data({5, 3}, 1, 1), Data({3, 4}), Data({3, 4}), Data({5, 3, 4}),
       Data({3, 4}), Data({3, 4})},
      lstm_grad};
  lstm_backward.nhwc = false;
  lstm_backward.tolerance_scale = 4;  // weight gradients sum T x N terms
  AttrMap gru_grad = Rnn("gru", 5, "input", false, false);
  gru_grad["has_dy"] = true;
  GraphKernelCase gru_backward{"GruGradient",
                               "RNNGradient",
                               {Data({6, 2, 4}), Data({15, 4}, -w, w), Data({15, 5}, -w, w),
                                Data({15}, -w, w), Data({6, 2, 5})},
                               gru_grad};
  gru_backward.nhwc = false;
  gru_backward.tolerance_scale = 4;
  // Both directions, forward and backward (the reverse direction's weights after the forward's).
  AttrMap both = Rnn("lstm", 4, "double", false, true);
  both["bidirectional"] = true;
  GraphKernelCase lstm_both{
      "LstmBidirectional",
      "RNN",
      {Data({5, 3, 6}), Data({16, 6}, -w, w), Data({16, 4}, -w, w), Data({16}, -w, w),
       Data({16}, -w, w), Data({16, 6}, -w, w), Data({16, 4}, -w, w), Data({16}, -w, w),
       Data({16}, -w, w), Data({2, 3, 4}), Data({2, 3, 4})},
      both};
  lstm_both.nhwc = false;
  AttrMap both_grad = Rnn("gru", 5, "input", false, false);
  both_grad["bidirectional"] = true;
  both_grad["has_dy"] = true;
  GraphKernelCase gru_both_backward{
      "GruBidirectionalGradient",
      "RNNGradient",
      {Data({6, 2, 4}), Data({15, 4}, -w, w), Data({15, 5}, -w, w), Data({15}, -w, w),
       Data({15, 4}, -w, w), Data({15, 5}, -w, w), Data({15}, -w, w), Data({6, 2, 10})},
      both_grad};
  gru_both_backward.nhwc = false;
  gru_both_backward.tolerance_scale = 4;
  return {lstm, gru, tanh, lstm_backward, gru_backward, lstm_both, gru_both_backward};
}

}  // namespace testing
}  // namespace kiln
