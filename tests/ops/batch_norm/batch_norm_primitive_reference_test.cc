// Batch normalization: the CPU reference of the primitives against finite differences and
// Caffe/cuDNN semantics. Cases of //tests/kernels:primitives_reference_test
// (tests/util/primitive_reference_check.h).
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_reference_check.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST(PrimitivesReferenceTest, BatchNormGradients) {
  std::mt19937 rng(5);
  for (auto mode : {dnn::BatchNormMode::kSpatial, dnn::BatchNormMode::kPerActivation}) {
    for (Layout layout : kLayouts) {
      const LaidOut t = testing::MakeLayout(DataType::kF32, {3, 4, 2, 3}, layout);
      std::vector<int64_t> pdims = {1, 4, 1, 1};
      if (mode == dnn::BatchNormMode::kPerActivation) pdims = {1, 4, 2, 3};
      const TensorDescriptor pd =
          *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, pdims);
      const int64_t o = t.offset, features = pd.ElementCount();
      Vec x = testing::Uniform(t.BufferElements(), -2, 2, rng);
      Vec scale = testing::Uniform(features, 0.5, 1.5, rng);
      Vec bias = testing::Uniform(features, -1, 1, rng);
      const Vec dy = testing::Uniform(t.BufferElements(), -1, 1, rng);
      for (bool relu : {false, true}) {
        dnn::BatchNormTraining bn;
        bn.mode = mode;
        bn.epsilon = 1e-3;
        if (relu) {
          // The fused ReLU: forward max(0, .), backward through its derivative read from y.
          bn.ops = dnn::BatchNormOps::kBatchNormActivation;
          bn.activation = *dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu);
        }
        auto forward = [&](const Vec& at, const Vec& s, const Vec& b) {
          Vec y(at.size(), 0.0);
          EXPECT_OK(ref::BatchNormForwardTraining(bn, 1, 0, t.desc, at.data() + o, t.desc,
                                                  y.data() + o, pd, s.data(), b.data(), nullptr,
                                                  nullptr, nullptr, nullptr, nullptr));
          return y;
        };
        Vec save_mean(features), save_inv_std(features);
        Vec y(x.size(), 0.0);
        ASSERT_OK(ref::BatchNormForwardTraining(
            bn, 1, 0, t.desc, x.data() + o, t.desc, y.data() + o, pd, scale.data(), bias.data(),
            nullptr, nullptr, nullptr, save_mean.data(), save_inv_std.data()));
        for (bool saved : {true, false}) {
          Vec dx(x.size(), 0.0), dscale(features, 0.0), dbias(features, 0.0);
          ASSERT_OK(ref::BatchNormBackward(
              bn, 1, 0, 1, 0, t.desc, x.data() + o, t.desc, y.data() + o, t.desc, dy.data() + o,
              t.desc, dx.data() + o, pd, scale.data(), dscale.data(), dbias.data(),
              saved ? save_mean.data() : nullptr, saved ? save_inv_std.data() : nullptr));
          const std::string what =
              absl::StrCat("batch norm ", static_cast<int>(mode), " ", testing::LayoutName(layout),
                           saved ? " saved" : "", relu ? " relu" : "");
          testing::ExpectGradient(
              what + " dx", {}, x, [&](const Vec& at) { return forward(at, scale, bias); }, dy, dx);
          testing::ExpectGradient(
              what + " dscale", {}, scale, [&](const Vec& s) { return forward(x, s, bias); }, dy,
              dscale);
          testing::ExpectGradient(
              what + " dbias", {}, bias, [&](const Vec& b) { return forward(x, scale, b); }, dy,
              dbias);
        }
      }
    }
  }
}

TEST(PrimitivesReferenceTest, BatchNormRunningStatisticsFollowCudnnAndCaffe) {
  const TensorDescriptor xd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {2, 1, 1, 2});
  const TensorDescriptor pd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 1, 1});
  const Vec x = {1, 2, 3, 6};  // mean 3, biased var 3.5, unbiased 14/3
  Vec y(4), scale = {1}, bias = {0};
  dnn::BatchNormTraining bn;
  bn.factor = 0.25;
  Vec rm = {1}, rv = {2}, caffe_factor = {0};
  ASSERT_OK(ref::BatchNormForwardTraining(bn, 1, 0, xd, x.data(), xd, y.data(), pd, scale.data(),
                                          bias.data(), rm.data(), rv.data(), nullptr, nullptr,
                                          nullptr));
  EXPECT_DOUBLE_EQ(rm[0], 0.75 * 1 + 0.25 * 3);
  EXPECT_DOUBLE_EQ(rv[0], 0.75 * 2 + 0.25 * 14.0 / 3.0);
  EXPECT_NEAR(y[0], (1 - 3) / std::sqrt(3.5 + bn.epsilon), 1e-12);

  bn.rule = dnn::RunningStatsRule::kCaffeSum;
  bn.factor = 0.999;  // moving_average_fraction
  rm = {0};
  rv = {0};
  for (int step = 0; step < 2; ++step) {
    ASSERT_OK(ref::BatchNormForwardTraining(bn, 1, 0, xd, x.data(), xd, y.data(), pd, scale.data(),
                                            bias.data(), rm.data(), rv.data(), caffe_factor.data(),
                                            nullptr, nullptr));
  }
  EXPECT_DOUBLE_EQ(caffe_factor[0], 0.999 + 1);
  EXPECT_DOUBLE_EQ(rm[0], 0.999 * 3 + 3);
  EXPECT_DOUBLE_EQ(rv[0], 0.999 * 14.0 / 3.0 + 14.0 / 3.0);
  // Inference divides Caffe's sums by the factor: mean 3, var 14/3.
  ASSERT_OK(ref::BatchNormForwardInference(dnn::BatchNormMode::kSpatial, 1, 0, xd, x.data(), xd,
                                           y.data(), pd, scale.data(), bias.data(), rm.data(),
                                           rv.data(), 1e-5, caffe_factor.data()));
  EXPECT_NEAR(y[3], (6 - 3) / std::sqrt(14.0 / 3.0 + 1e-5), 1e-12);
  // Caffe refuses the sum rule without its scale-factor blob.
  EXPECT_FALSE(ref::BatchNormForwardTraining(bn, 1, 0, xd, x.data(), xd, y.data(), pd, scale.data(),
                                             bias.data(), rm.data(), rv.data(), nullptr, nullptr,
                                             nullptr)
                   .ok());
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
