// The host solver update (kernels/dnn/solver_update.h) against numbers worked out by hand from
// Caffe's formulas: every solver type over three iterations on two elements, L2 and L1 decay,
// grad_scale, Adam's bias correction at t = 1 and t = 3, and the refusals. The expected values
// were computed in double with the hyper-parameters first rounded to f32 (Caffe holds them as
// the blob's Dtype), so the f32 implementation agrees to a few ulps; the tolerance is 2e-6
// relative. Each case's comment shows the first step's arithmetic.
// Cases of //tests/kernels:solver_update_test.
#include "dnn/solver_update.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace dnn {
namespace {

using Floats = std::vector<float>;

// The state after one iteration: weights, the applied update (grad's new content) and the
// histories (history2 empty for one-history solvers).
struct After {
  Floats param, update, history, history2;
};

void ExpectClose(const Floats& got, const Floats& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-6 * std::fabs(want[i]) + 1e-9) << what << "[" << i << "]";
  }
}

// Runs one iteration per entry of `grads` from `param` and zero histories, with step.iter
// counting up from its value, and compares against `want` after each.
void RunSteps(SolverStep step, Floats param, const std::vector<Floats>& grads,
              const std::vector<After>& want) {
  ASSERT_EQ(grads.size(), want.size());
  const size_t n = param.size();
  Floats history(n, 0.0f), history2(n, 0.0f);
  const bool two = HistoryCount(step.type) == 2;
  for (size_t k = 0; k < grads.size(); ++k) {
    Floats grad = grads[k];
    ASSERT_TRUE(SolverUpdateHost(step, static_cast<int64_t>(n), param.data(), grad.data(),
                                 history.data(), two ? history2.data() : nullptr)
                    .ok());
    const std::string at =
        std::string(SolverTypeName(step.type)) + " iteration " + std::to_string(k) + " ";
    ExpectClose(param, want[k].param, at + "param");
    ExpectClose(grad, want[k].update, at + "update");
    ExpectClose(history, want[k].history, at + "history");
    if (two) ExpectClose(history2, want[k].history2, at + "history2");
    ++step.iter;
  }
}

// The gradient sequence of the adaptive cases: big, then one element zero, then the other.
const std::vector<Floats> kAdaptiveGrads = {{3, -4}, {4, 0}, {0, 3}};

TEST(SolverUpdateTest, HistoryCounts) {
  EXPECT_EQ(HistoryCount(SolverType::kSgd), 1);
  EXPECT_EQ(HistoryCount(SolverType::kNesterov), 1);
  EXPECT_EQ(HistoryCount(SolverType::kAdaGrad), 1);
  EXPECT_EQ(HistoryCount(SolverType::kRmsProp), 1);
  EXPECT_EQ(HistoryCount(SolverType::kAdaDelta), 2);
  EXPECT_EQ(HistoryCount(SolverType::kAdam), 2);
}

TEST(SolverUpdateTest, SgdWithMomentum) {
  // h = 0.1 g + 0.9 h: 0.05, -0.1; w = 1 - 0.05, -2 + 0.1. Then h = 0.05 + 0.045 = 0.095, ...
  SolverStep step;
  step.type = SolverType::kSgd;
  step.local_rate = 0.1;
  step.momentum = 0.9;
  RunSteps(step, {1, -2}, {{0.5f, -1}, {0.5f, -1}, {1, 0}},
           {{{0.95f, -1.9f}, {0.05f, -0.1f}, {0.05f, -0.1f}, {}},
            {{0.855f, -1.71f}, {0.095f, -0.19f}, {0.095f, -0.19f}, {}},
            {{0.6695f, -1.539f}, {0.1855f, -0.171f}, {0.1855f, -0.171f}, {}}});
}

TEST(SolverUpdateTest, Nesterov) {
  // h = 0.05, -0.1 as SGD; update = 1.9 h - 0.9 h_previous = 0.095, -0.19.
  SolverStep step;
  step.type = SolverType::kNesterov;
  step.local_rate = 0.1;
  step.momentum = 0.9;
  RunSteps(step, {1, -2}, {{0.5f, -1}, {0.5f, -1}, {1, 0}},
           {{{0.905f, -1.81f}, {0.0950000002f, -0.19f}, {0.0500000007f, -0.100000001f}, {}},
            {{0.769500001f, -1.539f}, {0.135499999f, -0.270999997f}, {0.0950000002f, -0.19f}, {}},
            {{0.502550005f, -1.38510001f},
             {0.266949997f, -0.153899992f},
             {0.185499999f, -0.170999996f},
             {}}});
}

TEST(SolverUpdateTest, AdaGrad) {
  // h = 9, 16; update = 0.1 * 3 / (3 + 0.5) = 0.0857142857, 0.1 * -4 / (4 + 0.5) = -0.0888889.
  SolverStep step;
  step.type = SolverType::kAdaGrad;
  step.local_rate = 0.1;
  step.delta = 0.5;
  RunSteps(step, {1, -2}, kAdaptiveGrads,
           {{{0.914285713f, -1.91111111f}, {0.085714287f, -0.0888888902f}, {9, 16}, {}},
            {{0.841558439f, -1.91111111f}, {0.0727272738f, 0}, {25, 16}, {}},
            {{0.841558439f, -1.96565657f}, {0, 0.0545454554f}, {25, 25}, {}}});
}

TEST(SolverUpdateTest, RmsProp) {
  // h = 0.1 * 9 + 0.9 * 0 = 0.9; update = 0.1 * 3 / (sqrt(0.9) + 0.5) = 0.2070846.
  SolverStep step;
  step.type = SolverType::kRmsProp;
  step.local_rate = 0.1;
  step.delta = 0.5;
  step.rms_decay = 0.9;
  RunSteps(step, {1, -2}, kAdaptiveGrads,
           {{{0.792915414f, -1.7733597f},
             {0.207084586f, -0.226640299f},
             {0.900000215f, 1.60000038f},
             {}},
            {{0.598023304f, -1.7733597f}, {0.19489211f, 0}, {2.41000055f, 1.44000031f}, {}},
            {{0.598023304f, -1.9247303f}, {0, 0.1513706f}, {2.16900044f, 2.19600045f}, {}}});
}

TEST(SolverUpdateTest, AdaDelta) {
  // h = 0.1 * 9 = 0.9; u = 3 sqrt((0 + 0.01) / (0.9 + 0.01)) = 0.3144854; h2 = 0.1 u² =
  // 0.00989011; update = 0.5 u = 0.1572427 (the rate scales after h2 has learnt u).
  SolverStep step;
  step.type = SolverType::kAdaDelta;
  step.local_rate = 0.5;
  step.momentum = 0.9;
  step.delta = 0.01;
  RunSteps(step, {1, -2}, kAdaptiveGrads,
           {{{0.842757295f, -1.84237794f},
             {0.157242705f, -0.157622061f},
             {0.900000215f, 1.60000038f},
             {0.0098901097f, 0.00993788799f}},
            {{0.661439324f, -1.84237794f},
             {0.181317971f, 0},
             {2.41000055f, 1.44000031f},
             {0.0220515842f, 0.00894409896f}},
            {{0.661439324f, -1.98138134f},
             {0, 0.139003404f},
             {2.16900044f, 2.19600045f},
             {0.0198464253f, 0.0157784692f}}});
}

TEST(SolverUpdateTest, AdamCorrectionAtT1ToT3) {
  // t = 1: m = 0.1 * 3 = 0.3, v = 0.001 * 9 = 0.009, correction = sqrt(1 - 0.999) / (1 - 0.9)
  // = 0.3162257 (f32 betas), update = 0.01 * 0.3162257 * 0.3 / (sqrt(0.009) + 1e-8) ~= 0.01.
  // t = 2 and 3: corrections 0.2353152 and 0.2020093.
  SolverStep step;
  step.type = SolverType::kAdam;
  step.local_rate = 0.01;
  step.momentum = 0.9;
  step.momentum2 = 0.999;
  step.delta = 1e-8;
  RunSteps(step, {1, -2}, kAdaptiveGrads,
           {{{0.990000001f, -1.99f},
             {0.00999999872f, -0.00999999899f},
             {0.300000072f, -0.400000095f},
             {0.00899988413f, 0.015999794f}},
            {{0.980026773f, -1.98329942f},
             {0.00997322795f, -0.00670058175f},
             {0.670000153f, -0.360000076f},
             {0.0249906784f, 0.0159837944f}},
            {{0.972317439f, -1.98299259f},
             {0.00770933398f, -0.000306826623f},
             {0.603000121f, -0.0239999886f},
             {0.024965688f, 0.024967695f}}});
}

TEST(SolverUpdateTest, AdamCorrectionFollowsIterNotHistory) {
  // Fresh moments at iter = 2 (t = 3): the same m and v as the first step above, but the
  // correction is 0.2020093, so the update is 0.01 * 0.2020093 * 0.3 / sqrt(0.009) = 0.0063881.
  SolverStep step;
  step.type = SolverType::kAdam;
  step.local_rate = 0.01;
  step.momentum = 0.9;
  step.momentum2 = 0.999;
  step.iter = 2;
  RunSteps(step, {1, -2}, {{3, -4}},
           {{{0.993611865f, -1.99361186f},
             {0.00638813538f, -0.00638813554f},
             {0.300000072f, -0.400000095f},
             {0.00899988413f, 0.015999794f}}});
}

// Plain SGD (no momentum) makes the regularized gradient visible: update = 0.1 g'.
SolverStep PlainSgd(Regularization reg, double decay, double grad_scale) {
  SolverStep step;
  step.type = SolverType::kSgd;
  step.local_rate = 0.1;
  step.regularization = reg;
  step.local_decay = decay;
  step.grad_scale = grad_scale;
  return step;
}

TEST(SolverUpdateTest, L2Decay) {
  // g' = 0.5 + 0.01 w: 0.51, 0.48, 0.5 (w = 1, -2, 0).
  RunSteps(PlainSgd(Regularization::kL2, 0.01, 1), {1, -2, 0}, {{0.5f, 0.5f, 0.5f}},
           {{{0.949f, -2.048f, -0.05f}, {0.051f, 0.048f, 0.05f}, {0.051f, 0.048f, 0.05f}, {}}});
}

TEST(SolverUpdateTest, L1Decay) {
  // g' = 0.5 + 0.01 sign(w): 0.51, 0.49, 0.5 (sign(0) = 0, as caffe_cpu_sign).
  RunSteps(PlainSgd(Regularization::kL1, 0.01, 1), {1, -2, 0}, {{0.5f, 0.5f, 0.5f}},
           {{{0.949f, -2.049f, -0.05f}, {0.051f, 0.049f, 0.05f}, {0.051f, 0.049f, 0.05f}, {}}});
}

TEST(SolverUpdateTest, NoRegularizationOrZeroDecay) {
  for (const SolverStep& step :
       {PlainSgd(Regularization::kNone, 0.01, 1), PlainSgd(Regularization::kL2, 0, 1)}) {
    RunSteps(step, {1, -2}, {{0.5f, 0.5f}},
             {{{0.95f, -2.05f}, {0.05f, 0.05f}, {0.05f, 0.05f}, {}}});
  }
}

TEST(SolverUpdateTest, GradScaleComesBeforeDecay) {
  // g' = 0.25 * 0.5 + 0.01 w = 0.135, 0.105 (scaling after the decay would give 0.1275).
  RunSteps(PlainSgd(Regularization::kL2, 0.01, 0.25), {1, -2}, {{0.5f, 0.5f}},
           {{{0.9865f, -2.0105f}, {0.0135f, 0.0105f}, {0.0135f, 0.0105f}, {}}});
}

TEST(SolverUpdateTest, GradScaleWithAdaGrad) {
  // g' = 0.5 * 6 = 3: the same numbers as the AdaGrad case's first step.
  SolverStep step;
  step.type = SolverType::kAdaGrad;
  step.local_rate = 0.1;
  step.delta = 0.5;
  step.grad_scale = 0.5;
  RunSteps(step, {1, -2}, {{6, -8}},
           {{{0.914285713f, -1.91111111f}, {0.085714287f, -0.0888888902f}, {9, 16}, {}}});
}

TEST(SolverUpdateTest, SecondHistoryIsLeftAloneByOneHistorySolvers) {
  const float kPoison = std::numeric_limits<float>::quiet_NaN();
  for (SolverType type :
       {SolverType::kSgd, SolverType::kNesterov, SolverType::kAdaGrad, SolverType::kRmsProp}) {
    SolverStep step;
    step.type = type;
    step.local_rate = 0.1;
    Floats param = {1, 2}, grad = {0.5f, 0.5f}, history = {0, 0};
    Floats history2 = {kPoison, kPoison};
    ASSERT_TRUE(
        SolverUpdateHost(step, 2, param.data(), grad.data(), history.data(), history2.data()).ok());
    EXPECT_TRUE(std::isnan(history2[0]) && std::isnan(history2[1])) << SolverTypeName(type);
    EXPECT_TRUE(std::isfinite(param[0]) && std::isfinite(param[1])) << SolverTypeName(type);
  }
}

TEST(SolverUpdateTest, EmptyBlobNeedsNoBuffers) {
  SolverStep step;
  step.type = SolverType::kAdam;
  EXPECT_TRUE(SolverUpdateHost(step, 0, nullptr, nullptr, nullptr, nullptr).ok());
}

// The call is refused, nothing is written, and the message names `field`.
void ExpectRefused(const SolverStep& step, const std::string& field) {
  Floats param = {1}, grad = {1}, history = {0}, history2 = {0};
  const absl::Status status =
      SolverUpdateHost(step, 1, param.data(), grad.data(), history.data(), history2.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_NE(status.message().find(field), std::string::npos) << status;
  EXPECT_NE(status.message().find(SolverTypeName(step.type)), std::string::npos) << status;
  EXPECT_EQ(param[0], 1.0f);
  EXPECT_EQ(grad[0], 1.0f);
  EXPECT_EQ(history[0], 0.0f);
  EXPECT_EQ(CheckSolverStep(step).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SolverUpdateTest, RefusesBadHyperParameters) {
  SolverStep step;
  step.local_rate = std::numeric_limits<double>::quiet_NaN();
  ExpectRefused(step, "local_rate");
  step = SolverStep();
  step.grad_scale = std::numeric_limits<double>::infinity();
  ExpectRefused(step, "grad_scale");
  step = SolverStep();
  step.iter = -1;
  ExpectRefused(step, "iter");
  step = SolverStep();
  step.type = SolverType::kAdaGrad;
  step.momentum = 0.9;
  ExpectRefused(step, "momentum");
  step = SolverStep();
  step.type = SolverType::kRmsProp;
  step.rms_decay = 1;
  ExpectRefused(step, "rms_decay");
  step = SolverStep();
  step.type = SolverType::kAdaDelta;
  step.momentum = 1.5;
  ExpectRefused(step, "momentum");
  step = SolverStep();
  step.type = SolverType::kAdam;
  step.momentum = 1;
  ExpectRefused(step, "beta1");
  step = SolverStep();
  step.type = SolverType::kAdam;
  step.momentum = 0.9;
  step.momentum2 = -0.1;
  ExpectRefused(step, "beta2");
  step = SolverStep();
  step.type = SolverType::kAdam;
  step.momentum = 0.9;
  step.delta = 0;
  ExpectRefused(step, "delta");
  step = SolverStep();
  step.regularization = static_cast<Regularization>(7);
  ExpectRefused(step, "regularization");
}

TEST(SolverUpdateTest, RefusesMissingBuffers) {
  SolverStep step;
  step.type = SolverType::kAdam;
  step.momentum = 0.9;
  Floats a = {1}, b = {1}, c = {0};
  absl::Status status = SolverUpdateHost(step, 1, a.data(), b.data(), c.data(), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("history2"), std::string::npos) << status;
  status = SolverUpdateHost(step, -1, a.data(), b.data(), c.data(), c.data());
  EXPECT_NE(status.message().find("count"), std::string::npos) << status;
  step.type = SolverType::kSgd;
  status = SolverUpdateHost(step, 1, a.data(), nullptr, c.data(), nullptr);
  EXPECT_NE(status.message().find("grad"), std::string::npos) << status;
}

TEST(SolverUpdateTest, SumOfSquaresIsDouble) {
  const Floats x = {1, -2, 3};
  EXPECT_EQ(SumOfSquaresHost(3, x.data()), 14.0);
  EXPECT_EQ(SumOfSquaresHost(0, nullptr), 0.0);
  // 1e20² overflows f32 but not the double sum.
  const Floats big = {1e20f, 1e20f};
  const double b = static_cast<double>(1e20f);
  EXPECT_DOUBLE_EQ(SumOfSquaresHost(2, big.data()), 2 * b * b);
}

}  // namespace
}  // namespace dnn
}  // namespace kiln
