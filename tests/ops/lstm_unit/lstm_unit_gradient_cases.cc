// LSTMUnit: the gradient cases (tests/util/gradient_cases.h): c_prev's and the gates' gradients
// against finite differences on the reference backend, and CUDA against the reference in every
// precision. cont is a fixed input (it gets no gradient) with 0 rows among the 1s: a restarted
// sequence, whose c_prev and forget gate get zero gradients.
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

namespace {

// 1, 0, 1, 1, 0, 1, ...: every third (t, n) restarts.
void RestartEveryThird(HostTensor& t) {
  for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, i % 3 == 1 ? 0.0f : 1.0f);
}

}  // namespace

std::vector<GradientCase> LstmUnitGradientCases() {
  std::vector<GradientCase> out;
  // Caffe's shapes: one step, N = 3, D = 4; both c and h get gradients.
  GradientCase step = Case("lstm_unit", "LSTMUnit", {{1, 3, 4}, {1, 3, 16}, {1, 3}});
  step.fixed_inputs[2] = RestartEveryThird;
  out.push_back(step);
  // Two steps at once, only c gets a gradient (h is compared, not differentiated): the node's
  // has_dh = false form.
  GradientCase c_only = Case("lstm_unit_dc_only", "LSTMUnit", {{2, 2, 3}, {2, 2, 12}, {2, 2}});
  c_only.fixed_inputs[2] = RestartEveryThird;
  c_only.gradient_outputs = 1;
  out.push_back(c_only);
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
