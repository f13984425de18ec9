// Dropout: the CPU reference of the primitives against finite differences and Caffe/cuDNN
// semantics. Cases of //tests/kernels:primitives_reference_test
// (tests/util/primitive_reference_check.h).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/dropout_mask.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_reference_check.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST(PrimitivesReferenceTest, DropoutMaskIsLayoutIndependentAndScales) {
  const auto dropout = *dnn::DropoutDescriptor::Create(0.3, 1234);
  std::mt19937 rng(9);
  const std::vector<int64_t> dims = {4, 8, 9, 10};
  const LaidOut a = testing::MakeLayout(DataType::kF32, dims, Layout::kPacked);
  const LaidOut b = testing::MakeLayout(DataType::kF32, dims, Layout::kChannelsLast);
  Vec ones(a.BufferElements(), 1.0), ya(a.BufferElements()), yb(b.BufferElements());
  ASSERT_OK(ref::DropoutForward(dropout, 1, a.desc, ones.data(), 0, a.desc, ya.data()));
  ASSERT_OK(ref::DropoutForward(dropout, 1, b.desc, ones.data(), 0, b.desc, yb.data()));
  Vec back(a.BufferElements());  // channels-last result read back in packed order
  ASSERT_OK(ref::TransformTensor(1, b.desc, yb.data(), 0, a.desc, back.data()));
  EXPECT_EQ(ya, back);
  int64_t kept = 0;
  for (double v : ya) {
    EXPECT_TRUE(v == 0 || std::fabs(v - 1 / 0.7) < 1e-6) << v;
    kept += v != 0;
  }
  const double fraction = static_cast<double>(kept) / ya.size();
  EXPECT_NEAR(fraction, 0.7, 0.03);
  // Dropout is linear in x, so backward is forward applied to dy: check it by differences.
  const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, Layout::kStrided);
  UnaryOp op{"dropout", t, t};
  op.forward = [&](const Vec& x, Vec& y) {
    ASSERT_OK(ref::DropoutForward(dropout, 1, t.desc, x.data() + 1, 0, t.desc, y.data() + 1));
  };
  op.backward = [&](const Vec&, const Vec&, const Vec& dy, Vec& dx) {
    ASSERT_OK(ref::DropoutForward(dropout, 1, t.desc, dy.data() + 1, 0, t.desc, dx.data() + 1));
  };
  CheckUnary(op, testing::Uniform(t.BufferElements(), -1, 1, rng));
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
