// Activations and PReLU: the CPU reference of the primitives against finite differences and
// Caffe/cuDNN semantics. Cases of //tests/kernels:primitives_reference_test
// (tests/util/primitive_reference_check.h).
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_reference_check.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST(PrimitivesReferenceTest, ActivationGradients) {
  const std::vector<dnn::ActivationDescriptor> acts = testing::TestActivations();
  std::mt19937 rng(1);
  for (const auto& act : acts) {
    for (Layout layout : kLayouts) {
      const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, layout);
      const int64_t o = t.offset;
      UnaryOp op{absl::StrCat(act.ToString(), " ", testing::LayoutName(layout)), t, t};
      op.forward = [&](const Vec& x, Vec& y) {
        ASSERT_OK(ref::ActivationForward(act, 1, t.desc, x.data() + o, 0, t.desc, y.data() + o));
      };
      op.backward = [&](const Vec& x, const Vec& y, const Vec& dy, Vec& dx) {
        ASSERT_OK(ref::ActivationBackward(act, 1, t.desc, y.data() + o, t.desc, dy.data() + o,
                                          t.desc, x.data() + o, 0, t.desc, dx.data() + o));
      };
      // Inputs at least 0.01 apart and 0.005 away from 0 and from the clipping ceiling 0.4.
      CheckUnary(op, testing::Distinct(t.BufferElements(), 0.01, rng));
    }
  }
}

TEST(PrimitivesReferenceTest, PReluGradients) {
  std::mt19937 rng(2);
  for (bool shared : {false, true}) {
    const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 3, 3, 4}, Layout::kStrided);
    const TensorDescriptor sd =
        *TensorDescriptor::Create(DataType::kF32, {1, shared ? 1 : 3, 1, 1}, {3, 1, 1, 1});
    Vec x = testing::Distinct(t.BufferElements(), 0.01, rng);
    Vec slope = testing::Uniform(sd.ElementCount(), 0.1, 0.5, rng);
    const Vec dy = testing::Uniform(t.BufferElements(), -1, 1, rng);
    Vec dx(x.size(), 0.0), dslope(slope.size(), 0.0);
    ASSERT_OK(ref::PReluBackward(t.desc, x.data() + 1, t.desc, dy.data() + 1, sd, slope.data(), 1,
                                 0, t.desc, dx.data() + 1, 1, 0, dslope.data()));
    auto through_x = [&](const Vec& at) {
      Vec y(at.size(), 0.0);
      EXPECT_OK(
          ref::PReluForward(t.desc, at.data() + 1, sd, slope.data(), 1, 0, t.desc, y.data() + 1));
      return y;
    };
    auto through_slope = [&](const Vec& s) {
      Vec y(x.size(), 0.0);
      EXPECT_OK(ref::PReluForward(t.desc, x.data() + 1, sd, s.data(), 1, 0, t.desc, y.data() + 1));
      return y;
    };
    testing::ExpectGradient("prelu dx", {}, x, through_x, dy, dx);
    testing::ExpectGradient("prelu dslope", {}, slope, through_slope, dy, dslope);
  }
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
