// The table-driven kernel tests of one backend against the reference backend: each case is an
// op, the dims of its seeded random f32 inputs, its attributes and the kernel the plan must
// choose. The TEST_P bodies live once in the backend's binary (tests/kernels/cpu_test.cc,
// cuda_test.cc); each op family instantiates its cases in tests/ops/<family>/<family>_cpu_test.cc
// and <family>_cuda_test.cc.
#ifndef KILN_TESTS_UTIL_KERNEL_CASES_H_
#define KILN_TESTS_UTIL_KERNEL_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/attribute.h"

namespace kiln {
namespace testing {

struct KernelCase {
  std::string label;
  std::string op;
  std::vector<std::vector<int64_t>> inputs;
  AttrMap attrs;
  std::string expected_kernel;
};

// The fast CPU kernels against the reference (runs everywhere).
class CpuVsReferenceTest : public ::testing::TestWithParam<KernelCase> {};

// The CUDA kernels against the reference (skips where no CUDA device is usable).
class CudaVsReferenceTest : public ::testing::TestWithParam<KernelCase> {};

// The case's label, as the test's name.
inline std::string KernelCaseName(const ::testing::TestParamInfo<KernelCase>& i) {
  return i.param.label;
}

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_KERNEL_CASES_H_
