// Dropout in training: the reference backend against independent, straightforward formulas written
// here with double accumulation over logical multi-indices (strides, layouts and dtypes are
// handled by HostTensor, not by the code under test), on fresh random inputs of odd sizes and
// poisoned outputs. Part of //tests/kernels:reference_test.
#include <vector>

#include "base/dropout_mask.h"
#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

TEST(ReferenceDropoutTest, TrainingScalesKeptElementsAndDropsTheRest) {
  HostTensor x = RandomTensor(F32({40, 50}), 72, 0.5, 1.5);
  auto out =
      RunReference("Dropout", {x}, {{"ratio", 0.25}, {"training", true}, {"seed", int64_t{9}}});
  ASSERT_EQ(out.size(), 1u);
  int64_t kept = 0;
  std::vector<double> expected;
  for (int64_t i = 0; i < 2000; ++i) {
    const bool keep = DropoutKeep(9, static_cast<uint64_t>(i), 0.25f);
    kept += keep;
    expected.push_back(keep ? x.GetFloat(i) / 0.75 : 0.0);
  }
  ExpectClose(out[0], expected);
  EXPECT_NEAR(kept / 2000.0, 0.75, 0.03);  // The mask really drops about a quarter.
}

}  // namespace
}  // namespace testing
}  // namespace kiln
