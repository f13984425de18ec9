#include "tests/util/all_gradient_cases.h"

namespace kiln {
namespace testing {

std::vector<GradientCase> AllGradientCases() {
  std::vector<GradientCase> out;
  for (const std::vector<GradientCase>& family : {
           gradient_cases::ConvolutionGradientCases(),
           gradient_cases::InnerProductGradientCases(),
           gradient_cases::PoolingGradientCases(),
           gradient_cases::LrnGradientCases(),
           gradient_cases::SoftmaxGradientCases(),
           gradient_cases::BatchNormGradientCases(),
           gradient_cases::ScaleBiasGradientCases(),
           gradient_cases::ActivationGradientCases(),
           gradient_cases::DropoutGradientCases(),
           gradient_cases::EltwiseGradientCases(),
           gradient_cases::TensorGradientCases(),
           gradient_cases::LossGradientCases(),
           gradient_cases::RecurrentGradientCases(),
           gradient_cases::EmbedGradientCases(),
           gradient_cases::CtcGradientCases(),
           gradient_cases::LstmUnitGradientCases(),
       }) {
    out.insert(out.end(), family.begin(), family.end());
  }
  return out;
}

}  // namespace testing
}  // namespace kiln
