// LSTMUnit: the reference backend against Caffe's cell equations written out here (gates i, f,
// o, g in that order along x's last axis; cont multiplies the forget gate), a cell worked by
// hand, and LSTMUnitGradient's dh-only form against central differences of <dh, h>. Part of
// //tests/kernels:reference_test (the other gradient forms are gradient cases).
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

using Ints = std::vector<int64_t>;

double Sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }

TEST(ReferenceLstmUnitTest, WorkedCell) {
  // x = 0: i = f = o = 1/2, g = 0, so c = c_prev / 2 (0 where cont is 0) and h = tanh(c) / 2.
  HostTensor c_prev(F32({1, 2, 1}));
  c_prev.SetFloat(0, 2);
  c_prev.SetFloat(1, 2);
  HostTensor x(F32({1, 2, 4}));
  for (int i = 0; i < 8; ++i) x.SetFloat(i, 0);
  HostTensor cont(F32({1, 2}));
  cont.SetFloat(0, 1);
  cont.SetFloat(1, 0);
  auto out = RunReference("LSTMUnit", {c_prev, x, cont}, {});
  ASSERT_EQ(out.size(), 2u);
  ExpectClose(out[0], {1.0, 0.0});
  ExpectClose(out[1], {0.5 * std::tanh(1.0), 0.0});
}

TEST(ReferenceLstmUnitTest, CaffeEquations) {
  const int64_t T = 2, N = 3, D = 4;
  HostTensor c_prev = RandomTensor(F32({T, N, D}), 301, -2, 2);
  HostTensor x = RandomTensor(F32({T, N, 4 * D}), 302, -3, 3);
  HostTensor cont(F32({T, N}));
  for (int r = 0; r < T * N; ++r) cont.SetFloat(r, r % 2 == 0 ? 1.0f : 0.0f);
  auto out = RunReference("LSTMUnit", {c_prev, x, cont}, {});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].type().dims(), (Ints{T, N, D}));
  EXPECT_EQ(out[1].type().dims(), (Ints{T, N, D}));
  std::vector<double> c, h;
  for (int r = 0; r < T * N; ++r) {
    for (int d = 0; d < D; ++d) {
      auto gate = [&](int k) { return double{x.GetFloat(r * 4 * D + k * D + d)}; };
      const double cell = cont.GetFloat(r) * Sig(gate(1)) * c_prev.GetFloat(r * D + d) +
                          Sig(gate(0)) * std::tanh(gate(3));
      c.push_back(cell);
      h.push_back(Sig(gate(2)) * std::tanh(cell));
    }
  }
  ExpectClose(out[0], c);
  ExpectClose(out[1], h);
}

// <dh, h> as a function of the inputs, in double through the reference backend's f32 outputs.
double Objective(const HostTensor& c_prev, const HostTensor& x, const HostTensor& cont,
                 const HostTensor& dh) {
  auto out = RunReference("LSTMUnit", {c_prev, x, cont}, {});
  if (out.size() != 2) return 0;
  double sum = 0;
  for (int64_t e = 0; e < dh.type().num_elements(); ++e) sum += out[1].GetFloat(e) * dh.GetFloat(e);
  return sum;
}

TEST(ReferenceLstmUnitTest, GradientFromDhAloneMatchesFiniteDifferences) {
  HostTensor c_prev = RandomTensor(F32({1, 3, 2}), 311, -1, 1);
  HostTensor x = RandomTensor(F32({1, 3, 8}), 312, -1, 1);
  HostTensor cont(F32({1, 3}));
  for (int r = 0; r < 3; ++r) cont.SetFloat(r, r == 1 ? 0.0f : 1.0f);
  HostTensor dh = RandomTensor(F32({1, 3, 2}), 313, -1, 1);
  auto grads = RunReference("LSTMUnitGradient", {c_prev, x, cont, dh}, {{"has_dc", false}});
  ASSERT_EQ(grads.size(), 2u);
  const double step = 1e-2;
  for (int which = 0; which < 2; ++which) {
    HostTensor& in = which == 0 ? c_prev : x;
    std::vector<double> numeric;
    for (int64_t e = 0; e < in.type().num_elements(); ++e) {
      const float saved = in.GetFloat(e);
      in.SetFloat(e, static_cast<float>(saved + step));
      const double plus = Objective(c_prev, x, cont, dh);
      in.SetFloat(e, static_cast<float>(saved - step));
      const double minus = Objective(c_prev, x, cont, dh);
      in.SetFloat(e, saved);
      numeric.push_back((plus - minus) / (2 * step));
    }
    const double ratio = ToleranceRatio(grads[which], numeric, 1e-3, 1e-2);
    EXPECT_GE(ratio, 0) << which;
    EXPECT_LE(ratio, 1.0) << (which == 0 ? "dc_prev" : "dx");
  }
  // The restarted row (cont 0) passes nothing to c_prev.
  for (int d = 0; d < 2; ++d) EXPECT_EQ(grads[0].GetFloat(2 + d), 0.0f);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
