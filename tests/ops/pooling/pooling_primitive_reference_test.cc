// Pooling: the CPU reference of the primitives against finite differences and Caffe/cuDNN
// semantics. Cases of //tests/kernels:primitives_reference_test
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

TEST(PrimitivesReferenceTest, PoolingGradients) {
  using P = dnn::PoolingMode;
  struct Case {
    std::vector<int64_t> dims, window, pads, strides;
    dnn::PoolingRounding rounding;
    bool global;
  };
  const Case cases[] = {
      {{2, 3, 7, 6}, {3, 3}, {0, 0}, {2, 2}, dnn::PoolingRounding::kFloor, false},
      {{1, 2, 7, 8}, {3, 2}, {1, 1}, {2, 3}, dnn::PoolingRounding::kCeil, false},
      {{2, 2, 5, 5}, {2, 2}, {1, 0}, {1, 1}, dnn::PoolingRounding::kCeil, false},
      {{1, 2, 4, 5, 6}, {2, 3, 2}, {1, 1, 0}, {2, 2, 2}, dnn::PoolingRounding::kFloor, false},
      {{2, 3, 4, 5}, {1, 1}, {0, 0}, {1, 1}, dnn::PoolingRounding::kFloor, true},
  };
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    for (P mode : {P::kMax, P::kAverageIncludePadding, P::kAverageExcludePadding}) {
      for (Layout layout : kLayouts) {
        dnn::PoolingDescriptor pool =
            c.global
                ? dnn::PoolingDescriptor::Global(mode, static_cast<int>(c.window.size()))
                : *dnn::PoolingDescriptor::Create(mode, c.window, c.pads, c.strides, c.rounding);
        const LaidOut in = testing::MakeLayout(DataType::kF32, c.dims, layout);
        const LaidOut out =
            testing::MakeLayout(DataType::kF32, *dnn::PoolingOutputDims(pool, in.desc), layout);
        UnaryOp op{absl::StrCat("pool ", pool.ToString(), " ", testing::LayoutName(layout)), in,
                   out};
        op.forward = [&](const Vec& x, Vec& y) {
          ASSERT_OK(ref::PoolingForward(pool, 1, in.desc, x.data() + in.offset, 0, out.desc,
                                        y.data() + out.offset));
        };
        op.backward = [&](const Vec& x, const Vec& y, const Vec& dy, Vec& dx) {
          ASSERT_OK(ref::PoolingBackward(pool, 1, out.desc, y.data() + out.offset, out.desc,
                                         dy.data() + out.offset, in.desc, x.data() + in.offset, 0,
                                         in.desc, dx.data() + in.offset));
        };
        CheckUnary(op, testing::Distinct(in.BufferElements(), 0.01, rng));
      }
    }
  }
}

TEST(PrimitivesReferenceTest, PoolingFollowsCaffeRounding) {
  const TensorDescriptor x =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 6, 6});
  auto dims = [&](dnn::PoolingRounding r, int64_t pad) {
    return *dnn::PoolingOutputDims(
        *dnn::PoolingDescriptor::Create(dnn::PoolingMode::kMax, {3, 3}, {pad, pad}, {2, 2}, r), x);
  };
  // (6 - 3) / 2: floor 1 + 1 = 2, ceil 2 + 1 = 3.
  EXPECT_EQ(dims(dnn::PoolingRounding::kFloor, 0), (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(dims(dnn::PoolingRounding::kCeil, 0), (std::vector<int64_t>{1, 1, 3, 3}));
  // With pad 1: ceil((6 + 2 - 3) / 2) + 1 = 4, and the 4th window starts at 6 - 1 + ... = 5 < 7.
  EXPECT_EQ(dims(dnn::PoolingRounding::kCeil, 1), (std::vector<int64_t>{1, 1, 4, 4}));
  // Caffe's clip: in 5, pad 1, window 2, stride 2 -> ceil(5/2)+1 = 4, but window 4 would start at
  // 6 - 1 = 5 >= in 5 + ... no: (4-1)*2 = 6 >= 5 + 1, so 3.
  const TensorDescriptor x5 =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 5, 5});
  EXPECT_EQ(*dnn::PoolingOutputDims(
                *dnn::PoolingDescriptor::Create(dnn::PoolingMode::kMax, {2, 2}, {1, 1}, {2, 2},
                                                dnn::PoolingRounding::kCeil),
                x5),
            (std::vector<int64_t>{1, 1, 3, 3}));
  // Average including padding divides by the window clipped to the padded input: a 3x3 window at
  // the corner with pad 1 covers 4 inputs and 9 padded positions.
  Vec ones(36, 1.0), y(16, 0.0);
  const auto avg = *dnn::PoolingDescriptor::Create(dnn::PoolingMode::kAverageIncludePadding, {3, 3},
                                                   {1, 1}, {2, 2}, dnn::PoolingRounding::kCeil);
  const TensorDescriptor yd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 4, 4});
  ASSERT_OK(ref::PoolingForward(avg, 1, x, ones.data(), 0, yd, y.data()));
  EXPECT_DOUBLE_EQ(y[0], 4.0 / 9.0);
  // The last window starts at 5 and is clipped to [5, 7): 1 input of 2 padded rows/cols.
  EXPECT_DOUBLE_EQ(y[15], 1.0 / 4.0);
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
