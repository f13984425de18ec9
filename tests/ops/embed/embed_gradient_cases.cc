// Embed: the gradient cases (tests/util/gradient_cases.h): the table's and the bias's gradients
// against finite differences on the reference backend, and CUDA against the reference in every
// precision. The indices are a fixed input (they get no gradient), with repeats.
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> EmbedGradientCases() {
  std::vector<GradientCase> out;
  GradientCase with_bias = Case("embed", "Embed", {{3, 4}, {7, 5}, {5}});
  with_bias.fixed_inputs[0] = Labels(7);
  out.push_back(with_bias);
  GradientCase plain = Case("embed_3d_indices", "Embed", {{2, 2, 3}, {4, 6}});
  plain.fixed_inputs[0] = Labels(4);
  out.push_back(plain);
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
