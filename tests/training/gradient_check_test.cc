// Finite-difference checks of every op's gradient on the reference backend: for each case of
// tests/util/gradient_cases.h, the gradient graph's input gradients against central differences
// of the objective Σ_j <dy_j, y_j> (or the loss itself, times its weight, for a loss op), with
// the forward outputs computed by the same plan.
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tests/util/all_gradient_cases.h"
#include "tests/util/gradient_cases.h"

namespace kiln {
namespace testing {
namespace {

// The objective at the current inputs, in double.
double Objective(const GradientCase& c, const GradientInputs& in,
                 const std::map<std::string, HostTensor>& outputs) {
  double sum = 0.0;
  if (c.loss_weight != 0) return c.loss_weight * outputs.at("y0").GetFloat(0);
  for (size_t j = 0; j < in.output_grads.size(); ++j) {
    const HostTensor& y = outputs.at(absl::StrCat("y", j));
    for (int64_t k = 0; k < y.type().num_elements(); ++k) {
      sum += double{y.GetFloat(k)} * in.output_grads[j].GetFloat(k);
    }
  }
  return sum;
}

// The worst |analytic - numeric| / (2e-3 + 1e-2 |numeric|) over the probed elements of every
// input gradient of `c` (<= 1 passes), with each analytic value first passed through `tamper`.
double WorstRatio(const GradientCase& c, const std::function<double(double)>& tamper,
                  int* elements) {
  auto in = MakeGradientInputs(c, 1234);
  EXPECT_TRUE(in.ok()) << in.status();
  if (!in.ok()) return 1e9;
  std::vector<int> grads;
  auto graph = BuildGradientGraph(c, *in, &grads);
  EXPECT_TRUE(graph.ok()) << graph.status();
  if (!graph.ok()) return 1e9;
  EXPECT_FALSE(grads.empty());
  CompileOptions options;
  options.backend = BackendChoice::kReference;
  auto plan = Compile(**graph, DefaultKernelRegistry(), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return 1e9;
  ContextOptions context_options;
  context_options.poison_buffers = true;
  auto ctx = ExecutionContext::Create(**plan, context_options);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  if (!ctx.ok()) return 1e9;
  auto analytic = (*ctx)->Run(GradientBindings(*in));
  EXPECT_TRUE(analytic.ok()) << analytic.status();
  if (!analytic.ok()) return 1e9;
  // A step small enough for the kinks the inputs keep clear of (gradient_cases.cc spaces
  // values 2/n apart), large enough that f32 rounding of the outputs stays below 1e-4.
  const double h = 2e-3;
  double worst = 0;
  for (int i : grads) {
    const HostTensor& g = analytic->at(absl::StrCat("grad", i));
    HostTensor& x = in->inputs[i];
    const int64_t n = x.type().num_elements();
    EXPECT_EQ(g.type().num_elements(), n);
    // At most 24 probes per input, spread over it.
    const int64_t step = std::max<int64_t>(1, n / 24);
    for (int64_t k = 0; k < n; k += step) {
      const float saved = x.GetFloat(k);
      x.SetFloat(k, static_cast<float>(saved + h));
      auto plus = (*ctx)->Run(GradientBindings(*in));
      x.SetFloat(k, static_cast<float>(saved - h));
      auto minus = (*ctx)->Run(GradientBindings(*in));
      x.SetFloat(k, saved);
      EXPECT_TRUE(plus.ok() && minus.ok());
      if (!plus.ok() || !minus.ok()) return 1e9;
      // The step actually taken, after rounding to f32.
      const double taken = double{static_cast<float>(saved + h)} - static_cast<float>(saved - h);
      const double numeric = (Objective(c, *in, *plus) - Objective(c, *in, *minus)) / taken;
      const double got = tamper(g.GetFloat(k));
      const double ratio = std::fabs(got - numeric) / (2e-3 + 1e-2 * std::fabs(numeric));
      if (ratio > 1) {
        ADD_FAILURE() << c.name << ": input " << i << " element " << k << ": analytic " << got
                      << " numeric " << numeric;
      }
      worst = std::max(worst, ratio);
      ++*elements;
    }
  }
  return worst;
}

TEST(GradientCheck, EveryCaseMatchesFiniteDifferences) {
  int cases = 0, elements = 0;
  for (const GradientCase& c : AllGradientCases()) {
    SCOPED_TRACE(c.name);
    EXPECT_LE(WorstRatio(
                  c, [](double v) { return v; }, &elements),
              1.0);
    ++cases;
  }
  std::printf("gradient check: %d cases, %d elements against finite differences\n", cases,
              elements);
  EXPECT_GE(cases, 40);
}

// The comparison is tight enough to reject a gradient 5% off (the check can fail).
TEST(GradientCheck, RejectsAGradientFivePercentOff) {
  int elements = 0;
  for (const GradientCase& c : AllGradientCases()) {
    if (c.name != "conv_3x3_pad1") continue;
    ::testing::TestPartResultArray failures;
    double worst = 0;
    {
      // The expected failures are collected here instead of failing this test.
      ::testing::ScopedFakeTestPartResultReporter swallow(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      worst = WorstRatio(
          c, [](double v) { return 1.05 * v; }, &elements);
    }
    EXPECT_GT(worst, 1.0);
    EXPECT_GT(failures.size(), 0);
  }
  EXPECT_GT(elements, 0);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
