// The data-movement ops: the gradient cases (tests/util/gradient_cases.h), checked against finite
// differences on the reference backend (//tests/training:gradient_check_test) and against the
// reference on CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> TensorGradientCases() {
  std::vector<GradientCase> out;
  out.push_back(Case("concat", "Concat", {{2, 2, 3}, {2, 3, 3}, {2, 1, 3}}));
  out.push_back(Case("concat_axis0", "Concat", {{1, 3}, {2, 3}}, {{"axis", I(0)}}));
  out.push_back(Case("slice", "Slice", {{2, 6, 3}}, {{"slice_points", Is({1, 4})}}));
  out.push_back(Case("split", "Split", {{2, 3, 4}}, {{"num_outputs", I(3)}}));
  out.push_back(Case("flatten", "Flatten", {{2, 3, 2, 2}}));
  out.push_back(Case("reshape", "Reshape", {{2, 3, 4}}, {{"shape", Is({0, -1, 2})}}));
  GradientCase crop = Case("crop", "Crop", {{2, 3, 6, 7}, {1, 1, 3, 4}}, {{"offset", Is({2, 1})}});
  crop.fixed_inputs[1] = Constant(0.0f);
  out.push_back(crop);
  out.push_back(Case("tile", "Tile", {{2, 3, 2}}, {{"tiles", I(3)}}));
  out.push_back(Case("tile_last_axis", "Tile", {{3, 4}}, {{"axis", I(-1)}, {"tiles", I(2)}}));
  // Its gradient is the inverse shuffle (C / group groups).
  out.push_back(Case("channel_shuffle", "ChannelShuffle", {{2, 6, 2, 3}}, {{"group", I(3)}}));
  out.push_back(
      Case("reduction_sum", "Reduction", {{2, 3, 4}}, {{"axis", I(1)}, {"coeff", F(0.5)}}));
  out.push_back(
      Case("reduction_asum", "Reduction", {{3, 5}}, {{"operation", S("asum")}, {"axis", I(1)}}));
  out.push_back(Case("reduction_sumsq_all", "Reduction", {{2, 3}}, {{"operation", S("sumsq")}}));
  out.push_back(Case("reduction_mean", "Reduction", {{2, 2, 3}},
                     {{"operation", S("mean")}, {"axis", I(2)}, {"coeff", F(-2.0)}}));
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
