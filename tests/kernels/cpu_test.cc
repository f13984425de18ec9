// The fast CPU kernels against the reference backend, on fresh random inputs of odd sizes. The
// cases are the op families' (tests/ops/<family>/<family>_cpu_test.cc, linked into this binary).
#include <string>

#include "gtest/gtest.h"
#include "tests/util/kernel_cases.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::CpuVsReferenceTest;
using testing::KernelCase;

TEST_P(CpuVsReferenceTest, Agrees) {
  const KernelCase& c = GetParam();
  std::string kernel;
  auto ratio = testing::CompareWithReference(c.op, c.inputs, c.attrs, BackendChoice::kCpu, 200,
                                             1e-4, 1e-4, &kernel);
  ASSERT_TRUE(ratio.ok()) << ratio.status();
  EXPECT_EQ(kernel, c.expected_kernel);
  EXPECT_GE(*ratio, 0) << "element count differs";
  EXPECT_LE(*ratio, 1.0) << "worst error / tolerance";
}

}  // namespace
}  // namespace kiln
