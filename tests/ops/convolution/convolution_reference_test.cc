// Convolution and deconvolution: the reference backend against independent, straightforward
// formulas written here with double accumulation over logical multi-indices (strides, layouts and
// dtypes are handled by HostTensor, not by the code under test), on fresh random inputs of odd
// sizes and poisoned outputs. Part of //tests/kernels:reference_test.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

using Dims = std::vector<int64_t>;
using Ints = std::vector<int64_t>;

// ---- Convolution: N-d, groups, stride, pad, dilation, flip, any layout and dtype. ----

struct ConvCase {
  std::string label;
  Dims x, w;
  Ints stride, pad, dilation;
  int64_t group;
  bool bias, flip, nhwc;
  DataType dtype;
};

std::vector<double> ConvFormula(const HostTensor& x, const HostTensor& w, const HostTensor* b,
                                const ConvCase& c, const Dims& out_dims) {
  const int ns = static_cast<int>(x.type().rank()) - 2;
  const Dims filter(w.type().dims().begin() + 2, w.type().dims().end());
  int64_t taps = 1;
  for (int64_t f : filter) taps *= f;
  const int64_t cg = x.type().dim(1) / c.group, kg = out_dims[1] / c.group;
  auto at = [&](const Ints& v, int i) { return v.size() == 1 ? v[0] : v[i]; };
  std::vector<double> y;
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  for (int64_t o = 0; o < total; ++o) {
    const Dims oi = Unflatten(o, out_dims);
    const int64_t k = oi[1];
    double acc = b ? b->GetFloat(k) : 0.0;
    for (int64_t ci = 0; ci < cg; ++ci) {
      for (int64_t t = 0; t < taps; ++t) {
        const Dims r = Unflatten(t, filter);
        Dims xi = {oi[0], (k / kg) * cg + ci};
        bool inside = true;
        for (int d = 0; d < ns; ++d) {
          const int64_t pos = oi[2 + d] * at(c.stride, d) - at(c.pad, d) + r[d] * at(c.dilation, d);
          inside &= pos >= 0 && pos < x.type().dim(2 + d);
          xi.push_back(pos);
        }
        if (!inside) continue;
        Dims wi = {k, ci};
        for (int d = 0; d < ns; ++d) wi.push_back(c.flip ? filter[d] - 1 - r[d] : r[d]);
        acc += double{x.GetFloat(Flatten(xi, x.type().dims()))} *
               w.GetFloat(Flatten(wi, w.type().dims()));
      }
    }
    y.push_back(acc);
  }
  return y;
}

class ReferenceConvTest : public ::testing::TestWithParam<ConvCase> {
 public:
  static int64_t Product(const Dims& d) {
    int64_t p = 1;
    for (int64_t v : d) p *= v;
    return p;
  }
};

TEST_P(ReferenceConvTest, MatchesDirectFormula) {
  const ConvCase& c = GetParam();
  const TensorType xt = c.nhwc ? Nhwc(c.x, c.dtype) : *TensorType::Create(c.dtype, c.x);
  HostTensor x = RandomTensor(xt, 11);
  HostTensor w = RandomTensor(*TensorType::Create(c.dtype, c.w), 12);
  HostTensor b = RandomTensor(*TensorType::Create(c.dtype, {c.w[0]}), 13);
  std::vector<HostTensor> in = {x, w};
  if (c.bias) in.push_back(b);
  AttrMap attrs = {{"stride", c.stride},
                   {"pad", c.pad},
                   {"dilation", c.dilation},
                   {"group", c.group},
                   {"mode", std::string(c.flip ? "convolution" : "cross_correlation")}};
  auto out = RunReference("Convolution", in, attrs);
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], ConvFormula(x, w, c.bias ? &b : nullptr, c, out[0].type().dims()));
  if (c.nhwc) {
    EXPECT_TRUE(out[0].type().IsChannelsLast());
  }
}

std::string ConvName(const ::testing::TestParamInfo<ConvCase>& i) { return i.param.label; }

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferenceConvTest,
    ::testing::Values(
        ConvCase{"Basic3x3", {2, 3, 7, 9}, {4, 3, 3, 3}, {1}, {0}, {1}, 1, true, false, false, DataType::kF32},
        ConvCase{"StridePad", {1, 3, 11, 10}, {5, 3, 5, 3}, {2, 3}, {2, 1}, {1}, 1, true, false, false, DataType::kF32},
        ConvCase{"Dilated", {1, 2, 13, 13}, {3, 2, 3, 3}, {1}, {2}, {2}, 1, false, false, false, DataType::kF32},
        ConvCase{"Groups", {2, 6, 7, 7}, {9, 2, 3, 3}, {1}, {1}, {1}, 3, true, false, false, DataType::kF32},
        ConvCase{"Depthwise", {1, 5, 9, 8}, {5, 1, 3, 3}, {2}, {1}, {1}, 5, true, false, false, DataType::kF32},
        ConvCase{"TrueConvolution", {1, 2, 6, 7}, {3, 2, 3, 2}, {1}, {1}, {1}, 1, false, true, false, DataType::kF32},
        ConvCase{"Nhwc", {2, 3, 7, 5}, {4, 3, 3, 3}, {1}, {1}, {1}, 1, true, false, true, DataType::kF32},
        ConvCase{"Conv1d", {2, 3, 17}, {4, 3, 5}, {2}, {2}, {1}, 1, true, false, false, DataType::kF32},
        ConvCase{"Conv3d", {1, 2, 5, 6, 7}, {3, 2, 3, 2, 3}, {1, 2, 1}, {1, 0, 1}, {1}, 1, true, false, false, DataType::kF32},
        ConvCase{"Conv3dNdhwc", {1, 3, 4, 5, 3}, {2, 3, 2, 2, 2}, {1}, {1}, {1}, 1, false, false, true, DataType::kF32},
        ConvCase{"F16", {1, 3, 7, 7}, {4, 3, 3, 3}, {1}, {1}, {1}, 1, true, false, false, DataType::kF16},
        ConvCase{"BF16Nhwc", {1, 4, 6, 6}, {4, 2, 3, 3}, {1}, {0}, {1}, 2, true, false, true, DataType::kBF16},
        ConvCase{"OneByOne", {3, 8, 5, 5}, {7, 8, 1, 1}, {1}, {0}, {1}, 1, true, false, false, DataType::kF32}),
    ConvName);
// clang-format on

// ---- Deconvolution: defined as the adjoint of convolution. ----

TEST(ReferenceDeconvTest, IsTheAdjointOfConvolution) {
  // <deconv(x, W), y> == <x, conv(y, W)> for the same W, stride, pad, dilation and groups.
  for (int64_t group : {1, 2}) {
    HostTensor x = RandomTensor(F32({2, 4, 5, 6}), 21);
    HostTensor w = RandomTensor(F32({4, 3, 3, 2}), 22);  // [C_in, K/group, R, S]
    AttrMap attrs = {
        {"stride", Ints{2, 3}}, {"pad", Ints{1, 0}}, {"dilation", Ints{1, 2}}, {"group", group}};
    auto dx = RunReference("Deconvolution", {x, w}, attrs);
    ASSERT_EQ(dx.size(), 1u);
    HostTensor y = RandomTensor(dx[0].type(), 23);
    // The adjoint is a Convolution from the K output channels back to the C input channels,
    // whose filter [C, K/group, R, S] is exactly W.
    auto cy = RunReference("Convolution", {y, w}, attrs);
    ASSERT_EQ(cy.size(), 1u);
    ASSERT_EQ(cy[0].type().dims(), x.type().dims());
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < y.type().num_elements(); ++i)
      lhs += double{dx[0].GetFloat(i)} * y.GetFloat(i);
    for (int64_t i = 0; i < x.type().num_elements(); ++i)
      rhs += double{x.GetFloat(i)} * cy[0].GetFloat(i);
    EXPECT_NEAR(lhs, rhs, 1e-3 * std::max(1.0, std::fabs(rhs))) << "group " << group;
  }
}

TEST(ReferenceDeconvTest, BiasAndOutputSize) {
  HostTensor x = RandomTensor(F32({1, 2, 3, 3}), 31);
  HostTensor w = HostTensor(F32({2, 1, 2, 2}));  // Zero filter: output is the bias.
  HostTensor b = *HostTensor::FromF32(F32({1}), {0.25f});
  auto out = RunReference("Deconvolution", {x, w, b}, {{"stride", Ints{2}}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type().dims(), (Dims{1, 1, 6, 6}));
  ExpectClose(out[0], std::vector<double>(36, 0.25));
}

}  // namespace
}  // namespace testing
}  // namespace kiln
