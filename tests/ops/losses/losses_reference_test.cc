// The losses and Accuracy: the reference backend against independent, straightforward formulas
// written here with double accumulation over logical multi-indices (strides, layouts and dtypes are
// handled by HostTensor, not by the code under test), on fresh random inputs of odd sizes and
// poisoned outputs. Part of //tests/kernels:reference_test.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

using Ints = std::vector<int64_t>;

TEST(ReferenceLossTest, SoftmaxWithLossNormalizationsAndIgnoreLabel) {
  HostTensor x = RandomTensor(F32({2, 4, 3}), 131, -3, 3);  // Softmax over axis 1, 6 positions.
  HostTensor labels = *HostTensor::FromF32(F32({2, 3}), {0, 3, 1, 2, 1, 1});
  double sum = 0;
  int valid = 0;
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t l = static_cast<int64_t>(labels.GetFloat(n * 3 + i));
      if (l == 1) continue;  // ignore_label below.
      double denom = 0;
      for (int64_t c = 0; c < 4; ++c) denom += std::exp(double{x.GetFloat((n * 4 + c) * 3 + i)});
      sum -= std::log(std::exp(double{x.GetFloat((n * 4 + l) * 3 + i)}) / denom);
      ++valid;
    }
  }
  const std::vector<std::pair<std::string, double>> norms = {
      {"valid", valid}, {"full", 6}, {"batch_size", 2}, {"none", 1}};
  for (const auto& [mode, normalizer] : norms) {
    auto out = RunReference("SoftmaxWithLoss", {x, labels},
                            {{"ignore_label", Ints{1}}, {"normalization", mode}});
    ASSERT_EQ(out.size(), 1u);
    ExpectClose(out[0], {sum / normalizer});
  }
}

TEST(ReferenceLossTest, AccuracyTopK) {
  HostTensor x = *HostTensor::FromF32(F32({3, 4}), {0.1f, 0.5f, 0.3f, 0.1f,    //
                                                    0.9f, 0.0f, 0.05f, 0.05f,  //
                                                    0.2f, 0.2f, 0.3f, 0.3f});
  HostTensor labels = *HostTensor::FromF32(F32({3}), {2, 0, 0});
  auto top1 = RunReference("Accuracy", {x, labels}, {});
  auto top2 = RunReference("Accuracy", {x, labels}, {{"top_k", int64_t{2}}});
  auto top3 = RunReference("Accuracy", {x, labels}, {{"top_k", int64_t{3}}});
  ASSERT_EQ(top1.size() + top2.size() + top3.size(), 3u);
  ExpectClose(top1[0], {1.0 / 3});  // Only row 1.
  ExpectClose(top2[0], {2.0 / 3});  // Row 0 too (one class above it).
  ExpectClose(top3[0], {1.0});      // Row 2: two classes strictly above.
}

TEST(ReferenceLossTest, EuclideanLoss) {
  HostTensor a = RandomTensor(F32({4, 3}), 141), b = RandomTensor(F32({4, 3}), 142);
  auto out = RunReference("EuclideanLoss", {a, b}, {});
  ASSERT_EQ(out.size(), 1u);
  double s = 0;
  for (int64_t i = 0; i < 12; ++i) s += std::pow(double{a.GetFloat(i)} - b.GetFloat(i), 2);
  ExpectClose(out[0], {s / 8});
}

TEST(ReferenceLossTest, SigmoidCrossEntropyLoss) {
  HostTensor x = *HostTensor::FromF32(F32({2, 3}), {-30.0f, 0.0f, 2.0f, 1.5f, -0.5f, 40.0f});
  HostTensor t = *HostTensor::FromF32(F32({2, 3}), {0.0f, 1.0f, 0.25f, 1.0f, -1.0f, 1.0f});
  // Direct formula in double: -(t log s + (1-t) log(1-s)), with s = sigmoid(x).
  auto term = [](double xv, double tv) {
    const double s = 1.0 / (1.0 + std::exp(-xv));
    const double log_s = xv > 0 ? -std::log1p(std::exp(-xv)) : xv - std::log1p(std::exp(xv));
    const double log_1s = xv > 0 ? -xv - std::log1p(std::exp(-xv)) : -std::log1p(std::exp(xv));
    (void)s;
    return -(tv * log_s + (1 - tv) * log_1s);
  };
  double all = 0, kept = 0;
  for (int i = 0; i < 6; ++i) {
    const double v = term(x.GetFloat(i), t.GetFloat(i));
    all += v;
    if (t.GetFloat(i) != -1.0f) kept += v;
  }
  auto batch = RunReference("SigmoidCrossEntropyLoss", {x, t}, {});
  ASSERT_EQ(batch.size(), 1u);
  ExpectClose(batch[0], {all / 2});
  auto valid = RunReference("SigmoidCrossEntropyLoss", {x, t},
                            {{"ignore_label", Ints{-1}}, {"normalization", std::string("valid")}});
  ASSERT_EQ(valid.size(), 1u);
  ExpectClose(valid[0], {kept / 5});
}

TEST(ReferenceLossTest, ContrastiveLossBothVersions) {
  HostTensor a = *HostTensor::FromF32(F32({3, 2}), {0, 0, 1, 1, 0.1f, 0});
  HostTensor b = *HostTensor::FromF32(F32({3, 2}), {3, 4, 1, 2, 0.4f, 0.4f});
  HostTensor sim = *HostTensor::FromF32(F32({3}), {1, 0, 0});
  // Row distances: 5 (similar), 1 (dissimilar), 0.5 (dissimilar); margin 2.
  const double modern = (25.0 + 1.0 + 1.5 * 1.5) / 6.0;
  const double legacy = (25.0 + 1.0 + (2.0 - 0.25)) / 6.0;
  auto m = RunReference("ContrastiveLoss", {a, b, sim}, {{"margin", 2.0}});
  auto l =
      RunReference("ContrastiveLoss", {a, b, sim}, {{"margin", 2.0}, {"legacy_version", true}});
  ASSERT_EQ(m.size() + l.size(), 2u);
  ExpectClose(m[0], {modern});
  ExpectClose(l[0], {legacy});
}

}  // namespace
}  // namespace testing
}  // namespace kiln
