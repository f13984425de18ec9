// The primitives' CPU reference, the harness: the conventions of the library as a whole (alpha/beta
// blending, the refusal of bad descriptors and calls across the families). Each op family's
// reference tests (gradients by finite differences, Caffe/cuDNN semantics) are in
// tests/ops/<family>/<family>_primitive_reference_test.cc, linked into this binary.
#include <cmath>
#include <string>
#include <vector>

#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_reference_check.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST(PrimitivesReferenceTest, BlendingUsesAlphaBetaAndIgnoresPoisonWhenBetaIsZero) {
  const LaidOut t = testing::MakeLayout(DataType::kF32, {1, 2, 2, 2}, Layout::kPacked);
  const auto relu = *dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu);
  Vec x = {1, -1, 2, -2, 3, -3, 4, -4}, y(8, NAN);
  ASSERT_OK(ref::ActivationForward(relu, 2, t.desc, x.data(), 0, t.desc, y.data()));
  EXPECT_EQ(y, (Vec{2, 0, 4, 0, 6, 0, 8, 0}));
  ASSERT_OK(ref::ActivationForward(relu, 1, t.desc, x.data(), 0.5, t.desc, y.data()));
  EXPECT_EQ(y, (Vec{2, 0, 4, 0, 6, 0, 8, 0}));  // 1 relu + 0.5 (2 relu) = 2 relu
}

TEST(PrimitivesReferenceTest, BadCallsAreRefusedWithTheirReason) {
  auto expect_invalid = [](const absl::Status& s, const std::string& text) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(text), std::string::npos) << s;
  };
  expect_invalid(
      dnn::PoolingDescriptor::Create(dnn::PoolingMode::kMax, {2, 2}, {2, 0}, {1, 1}).status(),
      "pad 0 is 2");
  expect_invalid(dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 4, 1, 1, 1).status(),
                 "size is 4");
  expect_invalid(dnn::DropoutDescriptor::Create(1.0, 0).status(), "ratio is 1");
  expect_invalid(dnn::ActivationDescriptor::Create(dnn::ActivationMode::kClippedRelu, 0).status(),
                 "ceiling");
  const TensorDescriptor a =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 2, 3, 4});
  const TensorDescriptor b =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 2, 3, 5});
  Vec buf(64);
  const auto relu = *dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu);
  expect_invalid(ref::ActivationForward(relu, 1, a, buf.data(), 0, b, buf.data()),
                 "ActivationForward: y");
  expect_invalid(ref::SoftmaxForward(dnn::SoftmaxDescriptor::Axis(dnn::SoftmaxAlgorithm::kLog, 4),
                                     1, a, buf.data(), 0, a, buf.data()),
                 "axes [4, 4]");
  const auto pool = *dnn::PoolingDescriptor::Create(dnn::PoolingMode::kMax, {2, 2}, {0, 0}, {2, 2});
  expect_invalid(ref::PoolingForward(pool, 1, a, buf.data(), 0, a, buf.data()), "should have dims");
  expect_invalid(dnn::CheckConcat(1, {a, a}, a, "ConcatForward"), "add up to 4");
  expect_invalid(dnn::CheckEltwise(dnn::EltwiseOp::kMax, {a, a}, {1, 2}, a, "EltwiseForward"),
                 "coefficients");
  expect_invalid(dnn::CheckBatchNormParam(dnn::BatchNormMode::kSpatial, a, a, "BatchNorm"),
                 "should be f32 with dims [1,2,1,1]");
  expect_invalid(TensorDescriptor::Create(DataType::kF32, {1, 2, 3, 4, 5, 6, 7, 8, 9},
                                          std::vector<int64_t>(9, 1))
                     .status(),
                 "rank 9");
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
