// InnerProduct: the reference backend against independent, straightforward formulas written
// here with double accumulation over logical multi-indices (strides, layouts and dtypes are
// handled by HostTensor, not by the code under test), on fresh random inputs of odd sizes and
// poisoned outputs. Part of //tests/kernels:reference_test.
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

TEST(ReferenceInnerProductTest, AxisAndTranspose) {
  HostTensor x = RandomTensor(Nhwc({2, 3, 2, 2}), 101);
  HostTensor w = RandomTensor(F32({5, 12}), 102);
  HostTensor wt = RandomTensor(F32({12, 5}), 103);
  HostTensor b = RandomTensor(F32({5}), 104);
  auto out = RunReference("InnerProduct", {x, w, b}, {});
  auto out_t = RunReference("InnerProduct", {x, wt}, {{"transpose", true}});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out_t.size(), 1u);
  std::vector<double> expected, expected_t;
  for (int64_t m = 0; m < 2; ++m) {
    for (int64_t n = 0; n < 5; ++n) {
      double acc = b.GetFloat(n), acc_t = 0;
      for (int64_t k = 0; k < 12; ++k) {
        acc += double{x.GetFloat(m * 12 + k)} * w.GetFloat(n * 12 + k);
        acc_t += double{x.GetFloat(m * 12 + k)} * wt.GetFloat(k * 5 + n);
      }
      expected.push_back(acc);
      expected_t.push_back(acc_t);
    }
  }
  ExpectClose(out[0], expected);
  ExpectClose(out_t[0], expected_t);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
