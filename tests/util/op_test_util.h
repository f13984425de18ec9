// Shared test fixtures: seeded random tensors of any layout, and a one-op graph compiled and run
// on a chosen backend through the real compiler and executor, with poisoned buffers.
#ifndef KILN_TESTS_UTIL_OP_TEST_UTIL_H_
#define KILN_TESTS_UTIL_OP_TEST_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/attribute.h"
#include "ir/host_tensor.h"
#include "runtime/compiler.h"

namespace kiln {
namespace testing {

// A tensor of `type` filled with uniform values in [lo, hi) from `seed`.
HostTensor RandomTensor(const TensorType& type, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// Shorthands for dense types.
TensorType F32(const std::vector<int64_t>& dims);
TensorType Nhwc(const std::vector<int64_t>& dims, DataType dtype = DataType::kF32);

// Builds Parameter inputs for `inputs`, one `op` node and its outputs, compiles it for
// `backend` and runs it with poisoned buffers. Outputs are in node output order.
absl::StatusOr<std::vector<HostTensor>> RunOp(const std::string& op,
                                              const std::vector<HostTensor>& inputs,
                                              const AttrMap& attrs, BackendChoice backend,
                                              std::string* kernel_name = nullptr);

// Runs `op` on `backend` and on the reference backend with the same seeded random f32 inputs
// of `input_dims`, and returns ToleranceRatio of the first output against the reference.
absl::StatusOr<double> CompareWithReference(const std::string& op,
                                            const std::vector<std::vector<int64_t>>& input_dims,
                                            const AttrMap& attrs, BackendChoice backend,
                                            uint32_t seed, double atol, double rtol,
                                            std::string* kernel_name);

// Runs `op` on `backend` and on the reference backend with the given inputs (any dtype and
// strides: an f16 NHWC input tests the kernel's f16 NHWC path) and returns the worst
// ToleranceRatio over every output, each compared with the reference's value of the same output.
absl::StatusOr<double> CompareOutputsWithReference(const std::string& op,
                                                   const std::vector<HostTensor>& inputs,
                                                   const AttrMap& attrs, BackendChoice backend,
                                                   double atol, double rtol,
                                                   std::string* kernel_name);

// Largest |a-b| / (atol + rtol*|b|) over all elements (<= 1 means within tolerance); -1 when
// the shapes differ, +inf when any element is NaN.
double ToleranceRatio(const HostTensor& actual, const std::vector<double>& expected, double atol,
                      double rtol);

// sqrt(sum (a - e)^2 / sum e^2) over the logical elements (the absolute L2 error when e is all
// zeros); +inf when the dims differ or any element of `actual` is not finite. How whole
// networks and rewritten graphs are compared with their oracle.
double RelativeL2(const HostTensor& actual, const HostTensor& expected);

// Logical multi-index <-> row-major flat index helpers for independent formulas.
std::vector<int64_t> Unflatten(int64_t flat, const std::vector<int64_t>& dims);
int64_t Flatten(const std::vector<int64_t>& index, const std::vector<int64_t>& dims);

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_OP_TEST_UTIL_H_
