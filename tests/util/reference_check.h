// The reference backend's checks against independent formulas (tests/ops/*/*_reference_test.cc):
// run one op on the reference backend, and compare an output with values computed in double.
#ifndef KILN_TESTS_UTIL_REFERENCE_CHECK_H_
#define KILN_TESTS_UTIL_REFERENCE_CHECK_H_

#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/host_tensor.h"

namespace kiln {
namespace testing {

// Runs `op` on the reference backend; a failure is reported through gtest and gives no outputs.
std::vector<HostTensor> RunReference(const std::string& op, const std::vector<HostTensor>& in,
                                     const AttrMap& attrs);

// The logical elements of `t`, in row-major order.
std::vector<double> Doubles(const HostTensor& t);

// Expects `actual` within the tolerance of its dtype (outputs are rounded to it) of `expected`.
void ExpectClose(const HostTensor& actual, const std::vector<double>& expected);

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_REFERENCE_CHECK_H_
