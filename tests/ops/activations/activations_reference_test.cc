// The element-wise activations and PReLU: the reference backend against independent,
// straightforward formulas written here with double accumulation over logical multi-indices
// (strides, layouts and dtypes are handled by HostTensor, not by the code under test), on fresh
// random inputs of odd sizes and poisoned outputs. Part of //tests/kernels:reference_test.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

// ---- Element-wise activations, each against its formula, on a strided bf16/f16/f32 mix. ----

struct PointwiseCase {
  std::string op;
  AttrMap attrs;
  std::function<double(double)> formula;
  DataType dtype;
};

class ReferencePointwiseTest : public ::testing::TestWithParam<PointwiseCase> {};

TEST_P(ReferencePointwiseTest, MatchesFormula) {
  const PointwiseCase& c = GetParam();
  // A sub-region: 3x5 window of a 3x8 buffer.
  HostTensor x = RandomTensor(*TensorType::CreateStrided(c.dtype, {3, 5}, {8, 1}), 71, -2, 2);
  auto out = RunReference(c.op, {x}, c.attrs);
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 15; ++i) expected.push_back(c.formula(x.GetFloat(i)));
  ExpectClose(out[0], expected);
}

std::string PointwiseName(const ::testing::TestParamInfo<PointwiseCase>& i) {
  return i.param.op + "_" + std::string(DataTypeName(i.param.dtype));
}

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Ops, ReferencePointwiseTest,
    ::testing::Values(
        PointwiseCase{"ReLU", {}, [](double x) { return x > 0 ? x : 0; }, DataType::kF32},
        PointwiseCase{"ReLU", {{"negative_slope", 0.1}}, [](double x) { return x > 0 ? x : 0.1 * x; }, DataType::kF16},
        PointwiseCase{"Sigmoid", {}, [](double x) { return 1 / (1 + std::exp(-x)); }, DataType::kF32},
        PointwiseCase{"TanH", {}, [](double x) { return std::tanh(x); }, DataType::kBF16},
        PointwiseCase{"ELU", {{"alpha", 0.7}}, [](double x) { return x > 0 ? x : 0.7 * (std::exp(x) - 1); }, DataType::kF32},
        PointwiseCase{"ClippedReLU", {{"ceiling", 1.5}}, [](double x) { return std::min(std::max(x, 0.0), 1.5); }, DataType::kF32},
        PointwiseCase{"Power", {{"power", 2.0}, {"scale", 0.5}, {"shift", 1.0}}, [](double x) { return std::pow(1 + 0.5 * x, 2); }, DataType::kF32},
        PointwiseCase{"AbsVal", {}, [](double x) { return std::fabs(x); }, DataType::kF16},
        PointwiseCase{"Dropout", {{"ratio", 0.4}}, [](double x) { return x; }, DataType::kF32}),
    PointwiseName);
// clang-format on

TEST(ReferencePReluTest, PerChannelAndShared) {
  HostTensor x = RandomTensor(F32({2, 3, 4}), 73);
  HostTensor slope = *HostTensor::FromF32(F32({3}), {0.1f, 0.2f, 0.3f});
  auto out = RunReference("PReLU", {x, slope}, {});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 24; ++i) {
    const double v = x.GetFloat(i);
    expected.push_back(v > 0 ? v : v * slope.GetFloat((i / 4) % 3));
  }
  ExpectClose(out[0], expected);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
