// Pooling: the reference backend against independent, straightforward formulas written
// here with double accumulation over logical multi-indices (strides, layouts and dtypes are
// handled by HostTensor, not by the code under test), on fresh random inputs of odd sizes and
// poisoned outputs. Part of //tests/kernels:reference_test.
#include <algorithm>
#include <cfloat>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

using Dims = std::vector<int64_t>;
using Ints = std::vector<int64_t>;

// ---- Pooling. ----

struct PoolCase {
  std::string label;
  Dims x;
  Ints kernel, stride, pad;
  std::string mode, rounding;
  bool nhwc;
};

std::vector<double> PoolFormula(const HostTensor& x, const PoolCase& c, const Dims& out_dims) {
  const int ns = static_cast<int>(c.x.size()) - 2;
  auto at = [&](const Ints& v, int i) { return v.size() == 1 ? v[0] : v[i]; };
  std::vector<double> y;
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  for (int64_t o = 0; o < total; ++o) {
    const Dims oi = Unflatten(o, out_dims);
    Dims lo(ns), hi(ns);
    int64_t padded = 1, window = 1;
    for (int d = 0; d < ns; ++d) {
      const int64_t start = oi[2 + d] * at(c.stride, d) - at(c.pad, d);
      const int64_t end = std::min(start + at(c.kernel, d), c.x[2 + d] + at(c.pad, d));
      padded *= end - start;
      lo[d] = std::max<int64_t>(start, 0);
      hi[d] = std::min(end, c.x[2 + d]);
      window *= hi[d] - lo[d];
    }
    double sum = 0, max = -FLT_MAX;
    for (int64_t t = 0; t < window; ++t) {
      Dims sizes(ns);
      for (int d = 0; d < ns; ++d) sizes[d] = hi[d] - lo[d];
      Dims r = Unflatten(t, sizes);
      Dims xi = {oi[0], oi[1]};
      for (int d = 0; d < ns; ++d) xi.push_back(lo[d] + r[d]);
      const double v = x.GetFloat(Flatten(xi, c.x));
      sum += v;
      max = std::max(max, v);
    }
    y.push_back(c.mode == "max" ? max : c.mode == "avg" ? sum / padded : sum / window);
  }
  return y;
}

class ReferencePoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(ReferencePoolTest, MatchesWindowFormula) {
  const PoolCase& c = GetParam();
  HostTensor x = RandomTensor(c.nhwc ? Nhwc(c.x) : F32(c.x), 41);
  auto out = RunReference("Pooling", {x},
                          {{"kernel", c.kernel},
                           {"stride", c.stride},
                           {"pad", c.pad},
                           {"mode", c.mode},
                           {"rounding", c.rounding}});
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], PoolFormula(x, c, out[0].type().dims()));
}

std::string PoolName(const ::testing::TestParamInfo<PoolCase>& i) { return i.param.label; }

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferencePoolTest,
    ::testing::Values(PoolCase{"MaxCeil", {2, 3, 9, 11}, {3}, {2}, {0}, "max", "ceil", false},
                      PoolCase{"MaxPadded", {1, 2, 8, 7}, {3}, {2}, {1}, "max", "ceil", false},
                      PoolCase{"AvgCaffePadded", {1, 2, 7, 7}, {3}, {2}, {1}, "avg", "ceil", false},
                      PoolCase{"AvgExcludePad", {1, 2, 7, 8}, {3}, {2}, {1}, "avg_exclude_pad", "floor", false},
                      PoolCase{"AvgFloorNhwc", {2, 5, 9, 9}, {2, 3}, {2, 1}, {0}, "avg", "floor", true},
                      PoolCase{"Max1d", {2, 3, 13}, {4}, {3}, {1}, "max", "ceil", false},
                      PoolCase{"Avg3d", {1, 2, 5, 6, 7}, {2}, {2}, {0, 1, 1}, "avg", "ceil", false}),
    PoolName);
// clang-format on

TEST(ReferencePoolTest, GlobalAverage) {
  HostTensor x = RandomTensor(F32({2, 3, 5, 7}), 42);
  auto out = RunReference("Pooling", {x}, {{"global", true}, {"mode", std::string("avg")}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t p = 0; p < 6; ++p) {
    double s = 0;
    for (int64_t i = 0; i < 35; ++i) s += x.GetFloat(p * 35 + i);
    expected.push_back(s / 35);
  }
  ExpectClose(out[0], expected);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
