// The CPU reference tests of the primitives beyond convolution
// (tests/ops/<family>/<family>_primitive_reference_test.cc, linked into
// //tests/kernels:primitives_reference_test): a one-input op's backward against finite
// differences of its forward, and status assertions.
#ifndef KILN_TESTS_UTIL_PRIMITIVE_REFERENCE_CHECK_H_
#define KILN_TESTS_UTIL_PRIMITIVE_REFERENCE_CHECK_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {

// A one-input, one-output op on host buffers: forward(x) -> y, backward(x, y, dy) -> dx.
struct UnaryOp {
  std::string name;
  LaidOut in, out;
  std::function<void(const Vec& x, Vec& y)> forward;
  std::function<void(const Vec& x, const Vec& y, const Vec& dy, Vec& dx)> backward;
};

// Checks `op`'s backward against finite differences of its forward on input `x`.
void CheckUnary(const UnaryOp& op, const Vec& x, testing::GradientCheck check = {});

}  // namespace primitives_test
}  // namespace kiln

#define ASSERT_OK(expr)                          \
  do {                                           \
    const absl::Status _s = (expr);              \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s; \
  } while (0)
#define EXPECT_OK(expr)                          \
  do {                                           \
    const absl::Status _s = (expr);              \
    EXPECT_TRUE(_s.ok()) << #expr << ": " << _s; \
  } while (0)

#endif  // KILN_TESTS_UTIL_PRIMITIVE_REFERENCE_CHECK_H_
