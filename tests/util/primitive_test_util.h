// Shared by the CPU and GPU tests of the primitives beyond convolution: descriptors of one
// logical shape in several memory layouts, random host data, and a Caffe-style finite-difference
// gradient checker.
#ifndef KILN_TESTS_UTIL_PRIMITIVE_TEST_UTIL_H_
#define KILN_TESTS_UTIL_PRIMITIVE_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dnn/descriptors.h"
#include "dnn/primitive_descriptors.h"
#include "dnn/primitive_reference.h"

namespace kiln {
namespace testing {

// kPacked: row-major (NCHW for rank 4). kChannelsLast: NHWC (rank >= 3). kStrided: a sub-region
// of a larger tensor whose dims are ordered C, N, spatial..., each extent one larger than needed,
// starting at element 1, so no dim is contiguous with the next and gaps lie between rows.
enum class Layout { kPacked, kChannelsLast, kStrided };
const char* LayoutName(Layout layout);

// The descriptor, and the element offset its first element has in the buffer (kStrided: 1).
struct LaidOut {
  dnn::TensorDescriptor desc;
  int64_t offset = 0;
  // Buffer elements needed: offset + span.
  int64_t BufferElements() const { return offset + desc.ElementSpan(); }
};
LaidOut MakeLayout(DataType dtype, const std::vector<int64_t>& dims, Layout layout);

// Every activation mode, with non-trivial coefficients (ReLU plain and leaky, clipped at 0.4, ELU
// 0.7, power (2 + 0.5 x)^2.5), as both the CPU and GPU tests run them.
std::vector<dnn::ActivationDescriptor> TestActivations();

// Uniform values in [lo, hi).
std::vector<double> Uniform(int64_t count, double lo, double hi, std::mt19937& rng);
// Distinct values at least `gap` apart in random order, centred on 0 and offset from 0 by
// gap / 2 (so max-type ops have a unique winner and ReLU-type ops no input at the kink).
std::vector<double> Distinct(int64_t count, double gap, std::mt19937& rng);

// Finite-difference check of a gradient: with L(x) = Σ dy_j f(x)_j, compares analytic dL/dx_i
// with (L(x + h e_i) - L(x - h e_i)) / 2h for every i not skipped. Reports (and counts) the
// first few mismatches as test failures labelled `what`; returns the number checked.
struct GradientCheck {
  double step = 1e-6;
  double atol = 1e-6, rtol = 1e-5;
  std::function<bool(int64_t i)> skip;  // kink band: components not to check
};
int64_t ExpectGradient(const std::string& what, const GradientCheck& check, std::vector<double> x,
                       const std::function<std::vector<double>(const std::vector<double>&)>& f,
                       const std::vector<double>& dy, const std::vector<double>& analytic);

}  // namespace testing

// The names the primitive tests (tests/ops/<family>/<family>_primitive_*_test.cc) use
// unqualified, and the layouts they all run.
namespace primitives_test {

namespace ref = dnn::reference;
using dnn::TensorDescriptor;
using testing::LaidOut;
using testing::Layout;
using Vec = std::vector<double>;

inline constexpr Layout kLayouts[] = {Layout::kPacked, Layout::kChannelsLast, Layout::kStrided};

}  // namespace primitives_test
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_PRIMITIVE_TEST_UTIL_H_
