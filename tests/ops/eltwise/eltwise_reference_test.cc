// Scale, Bias and Eltwise: the reference backend against independent, straightforward formulas
// written here with double accumulation over logical multi-indices (strides, layouts and dtypes are
// handled by HostTensor, not by the code under test), on fresh random inputs of odd sizes and
// poisoned outputs. Part of //tests/kernels:reference_test.
#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

TEST(ReferenceScaleTest, BroadcastOverAxisRange) {
  HostTensor x = RandomTensor(F32({2, 3, 4, 5}), 81);
  HostTensor s = RandomTensor(F32({3, 4}), 82);
  HostTensor b = RandomTensor(F32({3, 4}), 83);
  auto out = RunReference("Scale", {x, s, b}, {{"num_axes", int64_t{2}}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 120; ++i) {
    const int64_t c = (i / 5) % 12;
    expected.push_back(double{x.GetFloat(i)} * s.GetFloat(c) + b.GetFloat(c));
  }
  ExpectClose(out[0], expected);
  auto bias_only = RunReference("Bias", {x, b}, {{"num_axes", int64_t{2}}});
  ASSERT_EQ(bias_only.size(), 1u);
  for (int64_t i = 0; i < 120; ++i) expected[i] = double{x.GetFloat(i)} + b.GetFloat((i / 5) % 12);
  ExpectClose(bias_only[0], expected);
}

TEST(ReferenceEltwiseTest, SumProdMax) {
  HostTensor a = RandomTensor(F32({3, 7}), 121);
  HostTensor b2 = RandomTensor(F32({3, 7}), 122), c = RandomTensor(F32({3, 7}), 123);
  for (const std::string op : {"sum", "prod", "max"}) {
    AttrMap attrs = {{"operation", op}};
    if (op == "sum") attrs["coeffs"] = std::vector<double>{0.5, -2.0, 1.0};
    auto out = RunReference("Eltwise", {a, b2, c}, attrs);
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> expected;
    for (int64_t i = 0; i < 21; ++i) {
      const double x = a.GetFloat(i), y = b2.GetFloat(i), z = c.GetFloat(i);
      expected.push_back(op == "sum"    ? 0.5 * x - 2 * y + z
                         : op == "prod" ? x * y * z
                                        : std::max({x, y, z}));
    }
    ExpectClose(out[0], expected);
  }
}

}  // namespace
}  // namespace testing
}  // namespace kiln
