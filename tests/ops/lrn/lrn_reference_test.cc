// LRN, across and within channels: the reference backend against independent, straightforward
// formulas written here with double accumulation over logical multi-indices (strides, layouts and
// dtypes are handled by HostTensor, not by the code under test), on fresh random inputs of odd
// sizes and poisoned outputs. Part of //tests/kernels:reference_test.
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

TEST(ReferenceLrnTest, AcrossChannelsCaffeFormula) {
  HostTensor x = RandomTensor(Nhwc({2, 7, 3, 4}), 51);
  const double alpha = 0.3, beta = 0.75, k = 2.0;
  const int64_t n = 5;
  auto out =
      RunReference("LRN", {x}, {{"local_size", n}, {"alpha", alpha}, {"beta", beta}, {"k", k}});
  ASSERT_EQ(out.size(), 1u);
  const Dims dims = {2, 7, 3, 4};
  std::vector<double> expected;
  for (int64_t i = 0; i < 168; ++i) {
    Dims idx = Unflatten(i, dims);
    double sum = 0;
    for (int64_t c = idx[1] - 2; c <= idx[1] + 2; ++c) {
      if (c < 0 || c >= 7) continue;
      Dims j = idx;
      j[1] = c;
      sum += std::pow(x.GetFloat(Flatten(j, dims)), 2);
    }
    expected.push_back(x.GetFloat(i) * std::pow(k + alpha / n * sum, -beta));
  }
  ExpectClose(out[0], expected);
}

TEST(ReferenceLrnTest, WithinChannelCaffeFormula) {
  HostTensor x = RandomTensor(F32({1, 2, 5, 6}), 52);
  const double alpha = 0.5, beta = 0.75;
  auto out = RunReference("LRN", {x},
                          {{"local_size", int64_t{3}},
                           {"alpha", alpha},
                           {"beta", beta},
                           {"k", 7.0},  // k is ignored here.
                           {"region", std::string("within_channel")}});
  ASSERT_EQ(out.size(), 1u);
  const Dims dims = {1, 2, 5, 6};
  std::vector<double> expected;
  for (int64_t i = 0; i < 60; ++i) {
    Dims idx = Unflatten(i, dims);
    double sum = 0;
    for (int64_t u = idx[2] - 1; u <= idx[2] + 1; ++u) {
      for (int64_t v = idx[3] - 1; v <= idx[3] + 1; ++v) {
        if (u < 0 || u >= 5 || v < 0 || v >= 6) continue;
        sum += std::pow(x.GetFloat(Flatten({idx[0], idx[1], u, v}, dims)), 2);
      }
    }
    expected.push_back(x.GetFloat(i) * std::pow(1 + alpha * sum / 9, -beta));
  }
  ExpectClose(out[0], expected);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
