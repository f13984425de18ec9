// Softmax: the reference backend against independent, straightforward formulas written
// here with double accumulation over logical multi-indices (strides, layouts and dtypes are
// handled by HostTensor, not by the code under test), on fresh random inputs of odd sizes and
// poisoned outputs. Part of //tests/kernels:reference_test.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

using Dims = std::vector<int64_t>;

TEST(ReferenceSoftmaxTest, EveryAxisAndLog) {
  const Dims dims = {3, 4, 5};
  HostTensor x = RandomTensor(F32(dims), 91, -20, 20);
  for (int axis = 0; axis < 3; ++axis) {
    for (bool log : {false, true}) {
      auto out = RunReference("Softmax", {x}, {{"axis", int64_t{axis}}, {"log", log}});
      ASSERT_EQ(out.size(), 1u);
      std::vector<double> expected;
      for (int64_t i = 0; i < 60; ++i) {
        Dims idx = Unflatten(i, dims);
        double denom = 0;
        for (int64_t j = 0; j < dims[axis]; ++j) {
          Dims k = idx;
          k[axis] = j;
          denom += std::exp(double{x.GetFloat(Flatten(k, dims))});
        }
        const double p = std::exp(double{x.GetFloat(i)}) / denom;
        expected.push_back(log ? std::log(p) : p);
      }
      ExpectClose(out[0], expected);
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace kiln
