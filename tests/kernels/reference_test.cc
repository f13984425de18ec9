// The reference backend against independent, straightforward formulas written here with double
// accumulation over logical multi-indices (so strides, layouts and dtypes are handled by
// HostTensor, not by the code under test). Inputs are fresh random tensors of odd sizes; outputs
// are poisoned before every run.
#include <cfloat>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "base/dropout_mask.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::Flatten;
using testing::Nhwc;
using testing::RandomTensor;
using testing::ToleranceRatio;
using testing::Unflatten;
using Dims = std::vector<int64_t>;
using Ints = std::vector<int64_t>;

// Tolerances per dtype of the tensors involved (outputs are rounded to that dtype).
double Atol(DataType d) { return d == DataType::kF32 ? 2e-5 : d == DataType::kF16 ? 2e-3 : 1.5e-2; }
double Rtol(DataType d) { return d == DataType::kF32 ? 2e-5 : d == DataType::kF16 ? 2e-3 : 1e-2; }

std::vector<HostTensor> RunReference(const std::string& op, const std::vector<HostTensor>& in,
                                     const AttrMap& attrs) {
  auto out = testing::RunOp(op, in, attrs, BackendChoice::kReference);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  return out.ok() ? *out : std::vector<HostTensor>{};
}

std::vector<double> Doubles(const HostTensor& t) {
  std::vector<double> out;
  for (float v : t.ToF32Vector()) out.push_back(v);
  return out;
}

void ExpectClose(const HostTensor& actual, const std::vector<double>& expected) {
  const DataType d = actual.type().dtype();
  const double ratio = ToleranceRatio(actual, expected, Atol(d), Rtol(d));
  EXPECT_GE(ratio, 0) << "element count differs";
  EXPECT_LE(ratio, 1.0) << "worst error / tolerance = " << ratio;
}

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

// ---- Pooling. ----

struct PoolCase {
  std::string label;
  Dims x;
  Ints kernel, stride, pad;
  std::string mode, rounding;
  bool nhwc;
};

std::vector<double> PoolFormula(const HostTensor& x, const PoolCase& c, const Dims& out_dims) {
  const int ns = static_cast<int>(c.x.size()) - 2;
  auto at = [&](const Ints& v, int i) { return v.size() == 1 ? v[0] : v[i]; };
  std::vector<double> y;
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  for (int64_t o = 0; o < total; ++o) {
    const Dims oi = Unflatten(o, out_dims);
    Dims lo(ns), hi(ns);
    int64_t padded = 1, window = 1;
    for (int d = 0; d < ns; ++d) {
      const int64_t start = oi[2 + d] * at(c.stride, d) - at(c.pad, d);
      const int64_t end = std::min(start + at(c.kernel, d), c.x[2 + d] + at(c.pad, d));
      padded *= end - start;
      lo[d] = std::max<int64_t>(start, 0);
      hi[d] = std::min(end, c.x[2 + d]);
      window *= hi[d] - lo[d];
    }
    double sum = 0, max = -FLT_MAX;
    for (int64_t t = 0; t < window; ++t) {
      Dims sizes(ns);
      for (int d = 0; d < ns; ++d) sizes[d] = hi[d] - lo[d];
      Dims r = Unflatten(t, sizes);
      Dims xi = {oi[0], oi[1]};
      for (int d = 0; d < ns; ++d) xi.push_back(lo[d] + r[d]);
      const double v = x.GetFloat(Flatten(xi, c.x));
      sum += v;
      max = std::max(max, v);
    }
    y.push_back(c.mode == "max" ? max : c.mode == "avg" ? sum / padded : sum / window);
  }
  return y;
}

class ReferencePoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(ReferencePoolTest, MatchesWindowFormula) {
  const PoolCase& c = GetParam();
  HostTensor x = RandomTensor(c.nhwc ? Nhwc(c.x) : F32(c.x), 41);
  auto out = RunReference("Pooling", {x},
                          {{"kernel", c.kernel},
                           {"stride", c.stride},
                           {"pad", c.pad},
                           {"mode", c.mode},
                           {"rounding", c.rounding}});
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], PoolFormula(x, c, out[0].type().dims()));
}

std::string PoolName(const ::testing::TestParamInfo<PoolCase>& i) { return i.param.label; }

// One case per line reads better than the formatter's layout.
// clang-format off
INSTANTIATE_TEST_SUITE_P(
    Shapes, ReferencePoolTest,
    ::testing::Values(PoolCase{"MaxCeil", {2, 3, 9, 11}, {3}, {2}, {0}, "max", "ceil", false},
                      PoolCase{"MaxPadded", {1, 2, 8, 7}, {3}, {2}, {1}, "max", "ceil", false},
                      PoolCase{"AvgCaffePadded", {1, 2, 7, 7}, {3}, {2}, {1}, "avg", "ceil", false},
                      PoolCase{"AvgExcludePad", {1, 2, 7, 8}, {3}, {2}, {1}, "avg_exclude_pad", "floor", false},
                      PoolCase{"AvgFloorNhwc", {2, 5, 9, 9}, {2, 3}, {2, 1}, {0}, "avg", "floor", true},
                      PoolCase{"Max1d", {2, 3, 13}, {4}, {3}, {1}, "max", "ceil", false},
                      PoolCase{"Avg3d", {1, 2, 5, 6, 7}, {2}, {2}, {0, 1, 1}, "avg", "ceil", false}),
    PoolName);
// clang-format on

TEST(ReferencePoolTest, GlobalAverage) {
  HostTensor x = RandomTensor(F32({2, 3, 5, 7}), 42);
  auto out = RunReference("Pooling", {x}, {{"global", true}, {"mode", std::string("avg")}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t p = 0; p < 6; ++p) {
    double s = 0;
    for (int64_t i = 0; i < 35; ++i) s += x.GetFloat(p * 35 + i);
    expected.push_back(s / 35);
  }
  ExpectClose(out[0], expected);
}

// ---- LRN and BatchNorm. ----

TEST(ReferenceLrnTest, AcrossChannelsCaffeFormula) {
  HostTensor x = RandomTensor(Nhwc({2, 7, 3, 4}), 51);
  const double alpha = 0.3, beta = 0.75, k = 2.0;
  const int64_t n = 5;
  auto out =
      RunReference("LRN", {x}, {{"local_size", n}, {"alpha", alpha}, {"beta", beta}, {"k", k}});
  ASSERT_EQ(out.size(), 1u);
  const Dims dims = {2, 7, 3, 4};
  std::vector<double> expected;
  for (int64_t i = 0; i < 168; ++i) {
    Dims idx = Unflatten(i, dims);
    double sum = 0;
    for (int64_t c = idx[1] - 2; c <= idx[1] + 2; ++c) {
      if (c < 0 || c >= 7) continue;
      Dims j = idx;
      j[1] = c;
      sum += std::pow(x.GetFloat(Flatten(j, dims)), 2);
    }
    expected.push_back(x.GetFloat(i) * std::pow(k + alpha / n * sum, -beta));
  }
  ExpectClose(out[0], expected);
}

TEST(ReferenceLrnTest, WithinChannelCaffeFormula) {
  HostTensor x = RandomTensor(F32({1, 2, 5, 6}), 52);
  const double alpha = 0.5, beta = 0.75;
  auto out = RunReference("LRN", {x},
                          {{"local_size", int64_t{3}},
                           {"alpha", alpha},
                           {"beta", beta},
                           {"k", 7.0},  // k is ignored here.
                           {"region", std::string("within_channel")}});
  ASSERT_EQ(out.size(), 1u);
  const Dims dims = {1, 2, 5, 6};
  std::vector<double> expected;
  for (int64_t i = 0; i < 60; ++i) {
    Dims idx = Unflatten(i, dims);
    double sum = 0;
    for (int64_t u = idx[2] - 1; u <= idx[2] + 1; ++u) {
      for (int64_t v = idx[3] - 1; v <= idx[3] + 1; ++v) {
        if (u < 0 || u >= 5 || v < 0 || v >= 6) continue;
        sum += std::pow(x.GetFloat(Flatten({idx[0], idx[1], u, v}, dims)), 2);
      }
    }
    expected.push_back(x.GetFloat(i) * std::pow(1 + alpha * sum / 9, -beta));
  }
  ExpectClose(out[0], expected);
}

TEST(ReferenceBatchNormTest, CaffeThreeBlobFormDividesByScaleFactor) {
  HostTensor x = RandomTensor(F32({2, 3, 2, 5}), 61);
  HostTensor mean = *HostTensor::FromF32(F32({3}), {0.5f, -1.0f, 2.0f});
  HostTensor var = *HostTensor::FromF32(F32({3}), {4.0f, 1.0f, 0.5f});
  HostTensor s = *HostTensor::FromF32(F32({1}), {2.0f});
  auto out = RunReference("BatchNorm", {x, mean, var, s}, {{"eps", 1e-3}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 60; ++i) {
    const int64_t c = (i / 10) % 3;
    const double m = mean.GetFloat(c) / 2.0, v = var.GetFloat(c) / 2.0;
    expected.push_back((x.GetFloat(i) - m) / std::sqrt(v + 1e-3));
  }
  ExpectClose(out[0], expected);
}

TEST(ReferenceBatchNormTest, ZeroScaleFactorMeansZeroStatistics) {
  HostTensor x = RandomTensor(F32({2, 2}), 62);
  HostTensor stats = *HostTensor::FromF32(F32({2}), {5.0f, 5.0f});
  HostTensor s = *HostTensor::FromF32(F32({1}), {0.0f});
  auto out = RunReference("BatchNorm", {x, stats, stats, s}, {});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 4; ++i) expected.push_back(x.GetFloat(i) / std::sqrt(1e-5));
  ExpectClose(out[0], expected);
}

TEST(ReferenceBatchNormTest, TrainingUsesBiasedBatchStatistics) {
  for (const char* mode : {"spatial", "per_activation"}) {
    HostTensor x = RandomTensor(F32({3, 2, 4}), 63);
    Dims stat_dims = std::string(mode) == "spatial" ? Dims{2} : Dims{2, 4};
    HostTensor ignored = RandomTensor(F32(stat_dims), 64);
    auto out = RunReference("BatchNorm", {x, ignored, ignored},
                            {{"use_global_stats", false}, {"mode", std::string(mode)}});
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> expected;
    for (int64_t i = 0; i < 24; ++i) {
      const Dims idx = Unflatten(i, {3, 2, 4});
      std::vector<double> group;
      for (int64_t n = 0; n < 3; ++n) {
        for (int64_t w = 0; w < 4; ++w) {
          if (std::string(mode) == "per_activation" && w != idx[2]) continue;
          group.push_back(x.GetFloat(Flatten({n, idx[1], w}, {3, 2, 4})));
        }
      }
      double m = 0, v = 0;
      for (double g : group) m += g / group.size();
      for (double g : group) v += (g - m) * (g - m) / group.size();
      expected.push_back((x.GetFloat(i) - m) / std::sqrt(v + 1e-5));
    }
    ExpectClose(out[0], expected);
  }
}

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

// ---- Scale, Bias, Softmax, InnerProduct. ----

TEST(ReferenceScaleTest, BroadcastOverAxisRange) {
  HostTensor x = RandomTensor(F32({2, 3, 4, 5}), 81);
  HostTensor s = RandomTensor(F32({3, 4}), 82);
  HostTensor b = RandomTensor(F32({3, 4}), 83);
  auto out = RunReference("Scale", {x, s, b}, {{"num_axes", int64_t{2}}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 120; ++i) {
    const int64_t c = (i / 5) % 12;
    expected.push_back(double{x.GetFloat(i)} * s.GetFloat(c) + b.GetFloat(c));
  }
  ExpectClose(out[0], expected);
  auto bias_only = RunReference("Bias", {x, b}, {{"num_axes", int64_t{2}}});
  ASSERT_EQ(bias_only.size(), 1u);
  for (int64_t i = 0; i < 120; ++i) expected[i] = double{x.GetFloat(i)} + b.GetFloat((i / 5) % 12);
  ExpectClose(bias_only[0], expected);
}

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

TEST(ReferenceInnerProductTest, AxisAndTranspose) {
  HostTensor x = RandomTensor(Nhwc({2, 3, 2, 2}), 101);
  HostTensor w = RandomTensor(F32({5, 12}), 102);
  HostTensor wt = RandomTensor(F32({12, 5}), 103);
  HostTensor b = RandomTensor(F32({5}), 104);
  auto out = RunReference("InnerProduct", {x, w, b}, {});
  auto out_t = RunReference("InnerProduct", {x, wt}, {{"transpose", true}});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out_t.size(), 1u);
  std::vector<double> expected, expected_t;
  for (int64_t m = 0; m < 2; ++m) {
    for (int64_t n = 0; n < 5; ++n) {
      double acc = b.GetFloat(n), acc_t = 0;
      for (int64_t k = 0; k < 12; ++k) {
        acc += double{x.GetFloat(m * 12 + k)} * w.GetFloat(n * 12 + k);
        acc_t += double{x.GetFloat(m * 12 + k)} * wt.GetFloat(k * 5 + n);
      }
      expected.push_back(acc);
      expected_t.push_back(acc_t);
    }
  }
  ExpectClose(out[0], expected);
  ExpectClose(out_t[0], expected_t);
}

// ---- Data movement and Eltwise. ----

TEST(ReferenceTensorOpsTest, ConcatThenSliceRoundTrips) {
  HostTensor a = RandomTensor(F32({2, 3, 4}), 111);
  HostTensor b3 = RandomTensor(F32({2, 5, 4}), 112);
  auto cat = RunReference("Concat", {a, b3}, {{"axis", int64_t{1}}});
  ASSERT_EQ(cat.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 64; ++i) {
    Dims idx = Unflatten(i, {2, 8, 4});
    expected.push_back(idx[1] < 3 ? a.GetFloat(Flatten(idx, {2, 3, 4}))
                                  : b3.GetFloat(Flatten({idx[0], idx[1] - 3, idx[2]}, {2, 5, 4})));
  }
  ExpectClose(cat[0], expected);
  auto parts = RunReference("Slice", {cat[0]}, {{"slice_points", Ints{3}}});
  ASSERT_EQ(parts.size(), 2u);
  ExpectClose(parts[0], Doubles(a));
  ExpectClose(parts[1], Doubles(b3));
}

TEST(ReferenceTensorOpsTest, SplitFlattenReshapeKeepLogicalOrder) {
  HostTensor x = RandomTensor(Nhwc({2, 3, 2, 2}), 113);
  const std::vector<double> logical = Doubles(x);
  for (const auto& [op, attrs] :
       std::vector<std::pair<std::string, AttrMap>>{{"Split", {{"num_outputs", int64_t{2}}}},
                                                    {"Flatten", {}},
                                                    {"Reshape", {{"shape", Ints{4, -1}}}}}) {
    auto out = RunReference(op, {x}, attrs);
    ASSERT_FALSE(out.empty()) << op;
    for (const HostTensor& o : out) ExpectClose(o, logical);
  }
}

TEST(ReferenceTensorOpsTest, CropAtOffsets) {
  HostTensor x = RandomTensor(F32({1, 2, 7, 8}), 114);
  HostTensor ref = RandomTensor(F32({1, 1, 3, 4}), 115);
  auto out = RunReference("Crop", {x, ref}, {{"offset", Ints{2, 3}}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 24; ++i) {
    Dims idx = Unflatten(i, {1, 2, 3, 4});
    expected.push_back(x.GetFloat(Flatten({0, idx[1], idx[2] + 2, idx[3] + 3}, {1, 2, 7, 8})));
  }
  ExpectClose(out[0], expected);
}

TEST(ReferenceEltwiseTest, SumProdMax) {
  HostTensor a = RandomTensor(F32({3, 7}), 121);
  HostTensor b2 = RandomTensor(F32({3, 7}), 122), c = RandomTensor(F32({3, 7}), 123);
  for (const std::string op : {"sum", "prod", "max"}) {
    AttrMap attrs = {{"operation", op}};
    if (op == "sum") attrs["coeffs"] = std::vector<double>{0.5, -2.0, 1.0};
    auto out = RunReference("Eltwise", {a, b2, c}, attrs);
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> expected;
    for (int64_t i = 0; i < 21; ++i) {
      const double x = a.GetFloat(i), y = b2.GetFloat(i), z = c.GetFloat(i);
      expected.push_back(op == "sum"    ? 0.5 * x - 2 * y + z
                         : op == "prod" ? x * y * z
                                        : std::max({x, y, z}));
    }
    ExpectClose(out[0], expected);
  }
}

// ---- Losses. ----

TEST(ReferenceLossTest, SoftmaxWithLossNormalizationsAndIgnoreLabel) {
  HostTensor x = RandomTensor(F32({2, 4, 3}), 131, -3, 3);  // Softmax over axis 1, 6 positions.
  HostTensor labels = *HostTensor::FromF32(F32({2, 3}), {0, 3, 1, 2, 1, 1});
  double sum = 0;
  int valid = 0;
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t l = static_cast<int64_t>(labels.GetFloat(n * 3 + i));
      if (l == 1) continue;  // ignore_label below.
      double denom = 0;
      for (int64_t c = 0; c < 4; ++c) denom += std::exp(double{x.GetFloat((n * 4 + c) * 3 + i)});
      sum -= std::log(std::exp(double{x.GetFloat((n * 4 + l) * 3 + i)}) / denom);
      ++valid;
    }
  }
  const std::vector<std::pair<std::string, double>> norms = {
      {"valid", valid}, {"full", 6}, {"batch_size", 2}, {"none", 1}};
  for (const auto& [mode, normalizer] : norms) {
    auto out = RunReference("SoftmaxWithLoss", {x, labels},
                            {{"ignore_label", Ints{1}}, {"normalization", mode}});
    ASSERT_EQ(out.size(), 1u);
    ExpectClose(out[0], {sum / normalizer});
  }
}

TEST(ReferenceLossTest, AccuracyTopK) {
  HostTensor x = *HostTensor::FromF32(F32({3, 4}), {0.1f, 0.5f, 0.3f, 0.1f,    //
                                                    0.9f, 0.0f, 0.05f, 0.05f,  //
                                                    0.2f, 0.2f, 0.3f, 0.3f});
  HostTensor labels = *HostTensor::FromF32(F32({3}), {2, 0, 0});
  auto top1 = RunReference("Accuracy", {x, labels}, {});
  auto top2 = RunReference("Accuracy", {x, labels}, {{"top_k", int64_t{2}}});
  auto top3 = RunReference("Accuracy", {x, labels}, {{"top_k", int64_t{3}}});
  ASSERT_EQ(top1.size() + top2.size() + top3.size(), 3u);
  ExpectClose(top1[0], {1.0 / 3});  // Only row 1.
  ExpectClose(top2[0], {2.0 / 3});  // Row 0 too (one class above it).
  ExpectClose(top3[0], {1.0});      // Row 2: two classes strictly above.
}

TEST(ReferenceLossTest, EuclideanLoss) {
  HostTensor a = RandomTensor(F32({4, 3}), 141), b = RandomTensor(F32({4, 3}), 142);
  auto out = RunReference("EuclideanLoss", {a, b}, {});
  ASSERT_EQ(out.size(), 1u);
  double s = 0;
  for (int64_t i = 0; i < 12; ++i) s += std::pow(double{a.GetFloat(i)} - b.GetFloat(i), 2);
  ExpectClose(out[0], {s / 8});
}

TEST(ReferenceLossTest, SigmoidCrossEntropyLoss) {
  HostTensor x = *HostTensor::FromF32(F32({2, 3}), {-30.0f, 0.0f, 2.0f, 1.5f, -0.5f, 40.0f});
  HostTensor t = *HostTensor::FromF32(F32({2, 3}), {0.0f, 1.0f, 0.25f, 1.0f, -1.0f, 1.0f});
  // Direct formula in double: -(t log s + (1-t) log(1-s)), with s = sigmoid(x).
  auto term = [](double xv, double tv) {
    const double s = 1.0 / (1.0 + std::exp(-xv));
    const double log_s = xv > 0 ? -std::log1p(std::exp(-xv)) : xv - std::log1p(std::exp(xv));
    const double log_1s = xv > 0 ? -xv - std::log1p(std::exp(-xv)) : -std::log1p(std::exp(xv));
    (void)s;
    return -(tv * log_s + (1 - tv) * log_1s);
  };
  double all = 0, kept = 0;
  for (int i = 0; i < 6; ++i) {
    const double v = term(x.GetFloat(i), t.GetFloat(i));
    all += v;
    if (t.GetFloat(i) != -1.0f) kept += v;
  }
  auto batch = RunReference("SigmoidCrossEntropyLoss", {x, t}, {});
  ASSERT_EQ(batch.size(), 1u);
  ExpectClose(batch[0], {all / 2});
  auto valid = RunReference("SigmoidCrossEntropyLoss", {x, t},
                            {{"ignore_label", Ints{-1}}, {"normalization", std::string("valid")}});
  ASSERT_EQ(valid.size(), 1u);
  ExpectClose(valid[0], {kept / 5});
}

TEST(ReferenceLossTest, ContrastiveLossBothVersions) {
  HostTensor a = *HostTensor::FromF32(F32({3, 2}), {0, 0, 1, 1, 0.1f, 0});
  HostTensor b = *HostTensor::FromF32(F32({3, 2}), {3, 4, 1, 2, 0.4f, 0.4f});
  HostTensor sim = *HostTensor::FromF32(F32({3}), {1, 0, 0});
  // Row distances: 5 (similar), 1 (dissimilar), 0.5 (dissimilar); margin 2.
  const double modern = (25.0 + 1.0 + 1.5 * 1.5) / 6.0;
  const double legacy = (25.0 + 1.0 + (2.0 - 0.25)) / 6.0;
  auto m = RunReference("ContrastiveLoss", {a, b, sim}, {{"margin", 2.0}});
  auto l =
      RunReference("ContrastiveLoss", {a, b, sim}, {{"margin", 2.0}, {"legacy_version", true}});
  ASSERT_EQ(m.size() + l.size(), 2u);
  ExpectClose(m[0], {modern});
  ExpectClose(l[0], {legacy});
}

}  // namespace
}  // namespace kiln
