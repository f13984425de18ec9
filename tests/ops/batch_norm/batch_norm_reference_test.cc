// BatchNorm: stored statistics with Caffe's scale factor, and batch statistics: the reference
// backend against independent, straightforward formulas written here with double accumulation over
// logical multi-indices (strides, layouts and dtypes are handled by HostTensor, not by the code
// under test), on fresh random inputs of odd sizes and poisoned outputs. Part of
// //tests/kernels:reference_test.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

using Dims = std::vector<int64_t>;

TEST(ReferenceBatchNormTest, CaffeThreeBlobFormDividesByScaleFactor) {
  HostTensor x = RandomTensor(F32({2, 3, 2, 5}), 61);
  HostTensor mean = *HostTensor::FromF32(F32({3}), {0.5f, -1.0f, 2.0f});
  HostTensor var = *HostTensor::FromF32(F32({3}), {4.0f, 1.0f, 0.5f});
  HostTensor s = *HostTensor::FromF32(F32({1}), {2.0f});
  auto out = RunReference("BatchNorm", {x, mean, var, s}, {{"eps", 1e-3}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 60; ++i) {
    const int64_t c = (i / 10) % 3;
    const double m = mean.GetFloat(c) / 2.0, v = var.GetFloat(c) / 2.0;
    expected.push_back((x.GetFloat(i) - m) / std::sqrt(v + 1e-3));
  }
  ExpectClose(out[0], expected);
}

TEST(ReferenceBatchNormTest, ZeroScaleFactorMeansZeroStatistics) {
  HostTensor x = RandomTensor(F32({2, 2}), 62);
  HostTensor stats = *HostTensor::FromF32(F32({2}), {5.0f, 5.0f});
  HostTensor s = *HostTensor::FromF32(F32({1}), {0.0f});
  auto out = RunReference("BatchNorm", {x, stats, stats, s}, {});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 4; ++i) expected.push_back(x.GetFloat(i) / std::sqrt(1e-5));
  ExpectClose(out[0], expected);
}

TEST(ReferenceBatchNormTest, TrainingUsesBiasedBatchStatistics) {
  for (const char* mode : {"spatial", "per_activation"}) {
    HostTensor x = RandomTensor(F32({3, 2, 4}), 63);
    Dims stat_dims = std::string(mode) == "spatial" ? Dims{2} : Dims{2, 4};
    HostTensor ignored = RandomTensor(F32(stat_dims), 64);
    auto out = RunReference("BatchNorm", {x, ignored, ignored},
                            {{"use_global_stats", false}, {"mode", std::string(mode)}});
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> expected;
    for (int64_t i = 0; i < 24; ++i) {
      const Dims idx = Unflatten(i, {3, 2, 4});
      std::vector<double> group;
      for (int64_t n = 0; n < 3; ++n) {
        for (int64_t w = 0; w < 4; ++w) {
          if (std::string(mode) == "per_activation" && w != idx[2]) continue;
          group.push_back(x.GetFloat(Flatten({n, idx[1], w}, {3, 2, 4})));
        }
      }
      double m = 0, v = 0;
      for (double g : group) m += g / group.size();
      for (double g : group) v += (g - m) * (g - m) / group.size();
      expected.push_back((x.GetFloat(i) - m) / std::sqrt(v + 1e-5));
    }
    ExpectClose(out[0], expected);
  }
}

}  // namespace
}  // namespace testing
}  // namespace kiln
