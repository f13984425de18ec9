// Whole-network gradient checks on the reference backend: a Caffe net imported for the TRAIN
// phase, its learnable blobs turned into graph inputs, the backward of its loss built by
// BuildBackward, and every parameter's gradient (and the data's) compared with central finite
// differences of the total loss. The per-op checks (gradient_check_test.cc) cannot catch a
// mistake in how BuildBackward chains ops, sums gradients of values used twice (a residual
// branch, an in-place ReLU) or seeds the loss; this does.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "tests/training/whole_nets.h"

namespace kiln {
namespace {

using testing::CheckedNet;
using testing::kCtc;
using testing::kLenet;
using testing::kRecurrent;
using testing::kResidual;
using testing::MaxPoolWatch;
using testing::Prepare;

// Which side of every kink the forward pass is on: the sign of each ReLU input and the winner of
// each max-pooling window (Caffe's first maximum).
std::vector<int> KinkPattern(const CheckedNet& net, const std::map<std::string, HostTensor>& run) {
  std::vector<int> pattern;
  for (const std::string& name : net.relu_ins) {
    const HostTensor& x = run.at(name);
    for (int64_t i = 0; i < x.type().num_elements(); ++i) pattern.push_back(x.GetFloat(i) > 0);
  }
  for (const MaxPoolWatch& w : net.pools) {
    const HostTensor& x = run.at(w.output);
    const int64_t channels = w.in_dims[0] * w.in_dims[1], height = w.in_dims[2],
                  width = w.in_dims[3];
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t oy = 0; oy < w.out_dims[2]; ++oy) {
        for (int64_t ox = 0; ox < w.out_dims[3]; ++ox) {
          const int64_t y0 = std::max<int64_t>(0, oy * w.stride[0] - w.pad[0]);
          const int64_t x0 = std::max<int64_t>(0, ox * w.stride[1] - w.pad[1]);
          const int64_t y1 = std::min(height, oy * w.stride[0] - w.pad[0] + w.kernel[0]);
          const int64_t x1 = std::min(width, ox * w.stride[1] - w.pad[1] + w.kernel[1]);
          int64_t best = -1;
          float best_value = 0;
          for (int64_t y = y0; y < y1; ++y) {
            for (int64_t xx = x0; xx < x1; ++xx) {
              const int64_t at = (c * height + y) * width + xx;
              if (best < 0 || x.GetFloat(at) > best_value) best = at, best_value = x.GetFloat(at);
            }
          }
          pattern.push_back(static_cast<int>(best));
        }
      }
    }
  }
  return pattern;
}

struct CheckResult {
  double worst = 0;     // the worst |analytic - numeric| / (2e-3 + 1e-2 |numeric|)
  int checked = 0;      // probes compared
  int straddling = 0;   // probes skipped because a kink lay between x - h and x + h
  bool failed = false;  // a run failed
};

// Probes up to `per_input` elements of every checked input, spread over it. Each analytic value
// passes through `tamper` first (to show the comparison can fail).
CheckResult CheckNet(const char* text, uint64_t seed, int per_input,
                     const std::function<double(double)>& tamper, bool fuse = false,
                     int* affine_batchnorms = nullptr) {
  CheckResult result;
  CheckedNet net;
  const absl::Status prepared = Prepare(text, seed, net, fuse);
  if (affine_batchnorms != nullptr) *affine_batchnorms = net.affine_batchnorms;
  EXPECT_TRUE(prepared.ok()) << prepared;
  if (!prepared.ok()) return result.failed = true, result;
  auto base = net.ctx->Run(net.bindings);
  EXPECT_TRUE(base.ok()) << base.status();
  if (!base.ok()) return result.failed = true, result;
  const std::vector<int> base_pattern = KinkPattern(net, *base);
  // The step of gradient_check_test.cc: f32 rounding of a loss near 1 then stays below 1e-4 of
  // the difference, and the curvature term (h^2) is negligible.
  const double h = 2e-3;
  for (const std::string& name : net.checked) {
    // Copied: the run below reads the analytic gradient while the inputs change.
    const HostTensor analytic = base->at(absl::StrCat("grad/", name)).Clone();
    HostTensor& x = net.bindings.at(name);
    const int64_t n = x.type().num_elements();
    EXPECT_EQ(analytic.type().num_elements(), n) << name;
    const int64_t stride = std::max<int64_t>(1, n / per_input);
    for (int64_t k = 0; k < n; k += stride) {
      const float saved = x.GetFloat(k);
      x.SetFloat(k, static_cast<float>(saved + h));
      auto plus = net.ctx->Run(net.bindings);
      x.SetFloat(k, static_cast<float>(saved - h));
      auto minus = net.ctx->Run(net.bindings);
      x.SetFloat(k, saved);
      EXPECT_TRUE(plus.ok() && minus.ok());
      if (!plus.ok() || !minus.ok()) return result.failed = true, result;
      // A weight moves thousands of pre-activations at once, so no choice of inputs keeps every
      // one of them farther than the step from 0 (BatchNorm re-centres them around 0 anyway).
      // Instead each probe checks that no ReLU input changes sign and no pooling window changes
      // its winner between x - h, x and x + h: then the loss is smooth on [x - h, x + h] and the
      // central difference is a valid reference. A probe that straddles a kink is skipped and
      // counted; the callers bound how many may be.
      if (KinkPattern(net, *plus) != base_pattern || KinkPattern(net, *minus) != base_pattern) {
        ++result.straddling;
        continue;
      }
      const double taken = double{static_cast<float>(saved + h)} - static_cast<float>(saved - h);
      const double numeric =
          (double{plus->at("objective").GetFloat(0)} - minus->at("objective").GetFloat(0)) / taken;
      const double got = tamper(analytic.GetFloat(k));
      const double ratio = std::fabs(got - numeric) / (2e-3 + 1e-2 * std::fabs(numeric));
      if (ratio > 1) {
        ADD_FAILURE() << name << " element " << k << ": analytic " << got << " numeric " << numeric;
      }
      result.worst = std::max(result.worst, ratio);
      ++result.checked;
    }
  }
  return result;
}

double Identity(double v) { return v; }

TEST(WholeNetGradient, LenetMatchesFiniteDifferences) {
  const CheckResult r = CheckNet(kLenet, 7, 24, Identity);
  ASSERT_FALSE(r.failed);
  std::printf("lenet: %d probes checked, %d straddled a kink, worst ratio %.3f\n", r.checked,
              r.straddling, r.worst);
  EXPECT_LE(r.worst, 1.0);
  // 8 parameter blobs and the data, up to 24 probes each; few may straddle a kink.
  EXPECT_GE(r.checked, 140);
  EXPECT_LE(r.straddling * 8, r.checked);
}

TEST(WholeNetGradient, ResidualBatchNormNetMatchesFiniteDifferences) {
  const CheckResult r = CheckNet(kResidual, 11, 24, Identity);
  ASSERT_FALSE(r.failed);
  std::printf("residual: %d probes checked, %d straddled a kink, worst ratio %.3f\n", r.checked,
              r.straddling, r.worst);
  EXPECT_LE(r.worst, 1.0);
  // 3 convolutions, 3 Scale layers (scale and bias), the classifier (weight and bias) and the
  // data: 12 inputs.
  EXPECT_GE(r.checked, 130);
  EXPECT_LE(r.straddling * 8, r.checked);
}

// The same net with each BatchNorm + Scale fused into one AffineBatchNorm, and the ReLU after it
// where there is one (the CLI's training plans): its own backward (dx, dscale and dbias from one
// node, through the fused ReLU) against finite differences.
TEST(WholeNetGradient, FusedResidualBatchNormNetMatchesFiniteDifferences) {
  int fused = 0;
  const CheckResult r = CheckNet(kResidual, 11, 24, Identity, /*fuse=*/true, &fused);
  ASSERT_FALSE(r.failed);
  std::printf("residual fused: %d probes checked, %d straddled a kink, worst ratio %.3f\n",
              r.checked, r.straddling, r.worst);
  EXPECT_EQ(fused, 3);
  EXPECT_LE(r.worst, 1.0);
  EXPECT_GE(r.checked, 130);
  EXPECT_LE(r.straddling * 8, r.checked);
}

// Caffe's Embed, LSTM and RNN layers (RNN ops with cont markers, the LSTM in Caffe's gate
// order) and their backward (EmbedGradient, one-node RNNGradient) inside a whole net.
TEST(WholeNetGradient, RecurrentNetMatchesFiniteDifferences) {
  const CheckResult r = CheckNet(kRecurrent, 13, 24, Identity);
  ASSERT_FALSE(r.failed);
  std::printf("recurrent: %d probes checked, %d straddled a kink, worst ratio %.3f\n", r.checked,
              r.straddling, r.worst);
  EXPECT_LE(r.worst, 1.0);
  // Embed (W, b), LSTM (W_xc, b_c, W_xc_static, W_hc), RNN (W_xh, b_h, W_hh, W_ho, b_o), the
  // classifier and the static input: 14 inputs, no kinks (tanh and sigmoid only).
  EXPECT_GE(r.checked, 150);
  EXPECT_EQ(r.straddling, 0);
}

// CTCLoss at the end of a net: BuildBackward seeds it with its loss weight and chains its
// CTCLossGradient (the activations' gradient only) into the InnerProducts' backward.
TEST(WholeNetGradient, CtcNetMatchesFiniteDifferences) {
  const CheckResult r = CheckNet(kCtc, 17, 24, Identity);
  ASSERT_FALSE(r.failed);
  std::printf("ctc: %d probes checked, %d straddled a kink, worst ratio %.3f\n", r.checked,
              r.straddling, r.worst);
  EXPECT_LE(r.worst, 1.0);
  // hidden (W 24, b 6), score (W 30, b 5) and the data (60): no kinks (TanH only).
  EXPECT_GE(r.checked, 80);
  EXPECT_EQ(r.straddling, 0);
}

// The comparison rejects a gradient 5% off: the whole-net check can fail.
TEST(WholeNetGradient, RejectsAGradientFivePercentOff) {
  ::testing::TestPartResultArray failures;
  CheckResult r;
  {
    // The expected failures are collected here instead of failing this test.
    ::testing::ScopedFakeTestPartResultReporter swallow(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    r = CheckNet(kLenet, 7, 16, [](double v) { return 1.05 * v; });
  }
  EXPECT_FALSE(r.failed);
  EXPECT_GT(r.worst, 1.0);
  EXPECT_GT(failures.size(), 0);
}

}  // namespace
}  // namespace kiln
