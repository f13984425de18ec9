// The losses: the gradient cases (tests/util/gradient_cases.h), checked against finite differences
// on the reference backend (//tests/training:gradient_check_test) and against the reference on
// CUDA in every precision (//tests/kernels:cuda_gradient_test).
#include <string>
#include <vector>

#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace gradient_cases {

std::vector<GradientCase> LossGradientCases() {
  std::vector<GradientCase> out;
  GradientCase swl = Case("softmax_loss", "SoftmaxWithLoss", {{4, 5}, {4}});
  swl.fixed_inputs[1] = Labels(5);
  swl.loss_weight = 1.5;
  out.push_back(swl);
  GradientCase swl_spatial =
      Case("softmax_loss_spatial_ignore", "SoftmaxWithLoss", {{2, 4, 3, 2}, {2, 1, 3, 2}},
           {{"ignore_label", Is({2})}, {"normalization", S("full")}});
  swl_spatial.fixed_inputs[1] = Labels(4, 3, 2);
  swl_spatial.loss_weight = 0.7;
  out.push_back(swl_spatial);
  GradientCase euclid = Case("euclidean_loss", "EuclideanLoss", {{3, 4}, {3, 4}});
  euclid.loss_weight = 2.0;
  out.push_back(euclid);
  GradientCase sce = Case("sigmoid_cross_entropy", "SigmoidCrossEntropyLoss", {{3, 5}, {3, 5}});
  sce.fixed_inputs[1] = Uniform(0.0f, 1.0f);
  sce.loss_weight = 1.0;
  out.push_back(sce);
  GradientCase con =
      Case("contrastive", "ContrastiveLoss", {{4, 3}, {4, 3}, {4}}, {{"margin", F(2.0)}});
  con.fixed_inputs[2] = [](HostTensor& t) {
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, i % 2 ? 1.0f : 0.0f);
  };
  con.loss_weight = 1.0;
  out.push_back(con);
  GradientCase con_legacy = con;
  con_legacy.name = "contrastive_legacy";
  con_legacy.attrs["legacy_version"] = B(true);
  con_legacy.attrs["margin"] = F(3.0);
  out.push_back(con_legacy);
  return out;
}

}  // namespace gradient_cases
}  // namespace testing
}  // namespace kiln
