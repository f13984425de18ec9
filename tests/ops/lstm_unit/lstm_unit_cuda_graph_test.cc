// LSTMUnit and LSTMUnitGradient: the cases of the graph CUDA kernel tests
// (tests/util/cuda_graph_cases.h), on CUDA against the reference backend in f32, f16 and bf16.
// cont is a 0/1 label input that stays f32 while the data take the case's dtype (the op reads
// cont in any dtype).
#include <vector>

#include "tests/util/cuda_graph_cases.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test, after the ArgMax cases.
std::vector<GraphKernelCase> LstmUnitGraphCases() {
  // Gate pre-activations over [-3, 3): the sigmoids and tanh away from their flat ends too.
  const std::vector<CaseInput> forward = {Data({1, 33, 7}), Data({1, 33, 28}, -3, 3),
                                          Labels({1, 33}, 2)};
  GraphKernelCase unit{"LSTMUnit", "LSTMUnit", forward, {}};
  std::vector<CaseInput> both = forward;
  both.push_back(Data({1, 33, 7}));  // dc
  both.push_back(Data({1, 33, 7}));  // dh
  GraphKernelCase grad{"LSTMUnitGradient", "LSTMUnitGradient", both, {}};
  std::vector<CaseInput> dh_only = forward;
  dh_only.push_back(Data({1, 33, 7}));
  GraphKernelCase grad_dh{
      "LSTMUnitGradientDhOnly", "LSTMUnitGradient", dh_only, {{"has_dc", false}}};
  // Several steps at once (the op's general form; Caffe's layer takes one).
  GraphKernelCase steps{"LSTMUnitSteps",
                        "LSTMUnit",
                        {Data({3, 4, 5}), Data({3, 4, 20}, -3, 3), Labels({3, 4}, 2)},
                        {}};
  return {unit, grad, grad_dh, steps};
}

}  // namespace testing
}  // namespace kiln
