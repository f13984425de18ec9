// The CTC loss's CPU reference (dnn/ctc/ctc_loss.h): hand-summed alignments, its gradient against
// finite differences of its loss in every mode, impossible alignments with and without
// zero_infinity, and every bad argument refused by name.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dnn/ctc/ctc_loss.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace {

using dnn::CtcLossDescriptor;
using dnn::CtcLossInputs;
using dnn::CtcReduction;
using Vec = std::vector<double>;

// One batch: the labels per sample, concatenated by Inputs().
struct Problem {
  int64_t T = 1, C = 2;
  std::vector<std::vector<int32_t>> targets;
  std::vector<int32_t> input_lengths;

  std::vector<int32_t> labels, label_lengths;
  int64_t N() const { return static_cast<int64_t>(targets.size()); }
  CtcLossInputs Inputs() {
    labels.clear();
    label_lengths.clear();
    for (const auto& t : targets) {
      labels.insert(labels.end(), t.begin(), t.end());
      label_lengths.push_back(static_cast<int32_t>(t.size()));
    }
    CtcLossInputs in;
    in.max_time = T;
    in.batch = N();
    in.classes = C;
    in.labels = labels;
    in.label_lengths = label_lengths;
    in.input_lengths = input_lengths;
    return in;
  }
};

struct Result {
  Vec losses, grad;
};

Result RunReference(const CtcLossDescriptor& desc, Problem& p, const Vec& x) {
  Result r;
  const CtcLossInputs in = p.Inputs();
  r.losses.assign(dnn::CtcLossOutputCount(desc, p.N()), std::nan(""));
  r.grad.assign(x.size(), std::nan(""));
  const absl::Status s =
      dnn::reference::CtcLoss(desc, in, x.data(), r.losses.data(), r.grad.data());
  EXPECT_TRUE(s.ok()) << s;
  return r;
}

// Log-probabilities of per-frame probabilities given as [T][N][C].
Vec LogOf(const std::vector<std::vector<std::vector<double>>>& probs) {
  Vec out;
  for (const auto& frame : probs) {
    for (const auto& row : frame) {
      for (double v : row) out.push_back(std::log(v));
    }
  }
  return out;
}

CtcLossDescriptor LogProbInputs() {
  CtcLossDescriptor d;
  d.inputs_are_log_probs = true;
  return d;
}

// T = 2, C = 2, label "1": the alignments are 11, 1-, -1 (- the blank).
TEST(CtcReferenceTest, SingleLabelSummedByHand) {
  const double y[2][2] = {{0.4, 0.6}, {0.3, 0.7}};
  Problem p;
  p.T = 2;
  p.C = 2;
  p.targets = {{1}};
  p.input_lengths = {2};
  const Vec lp = LogOf({{{y[0][0], y[0][1]}}, {{y[1][0], y[1][1]}}});
  const double prob = y[0][1] * y[1][1] + y[0][1] * y[1][0] + y[0][0] * y[1][1];
  EXPECT_NEAR(prob, 0.88, 1e-15);
  // The posterior of each class per frame, from the same three alignments.
  const double gamma[2][2] = {{y[0][0] * y[1][1] / prob, (prob - y[0][0] * y[1][1]) / prob},
                              {y[0][1] * y[1][0] / prob, (prob - y[0][1] * y[1][0]) / prob}};
  const Result r = RunReference(LogProbInputs(), p, lp);
  EXPECT_NEAR(r.losses[0], -std::log(prob), 1e-13);
  for (int t = 0; t < 2; ++t) {
    for (int c = 0; c < 2; ++c) {
      EXPECT_NEAR(r.grad[t * 2 + c], y[t][c] - gamma[t][c], 1e-13) << "t " << t << " c " << c;
    }
  }
  // As logits, shifted per row: the log_softmax inside takes the shifts out.
  Vec logits = lp;
  for (size_t i = 0; i < logits.size(); ++i) logits[i] += i < 2 ? 3.7 : -1.25;
  const Result r2 = RunReference(CtcLossDescriptor(), p, logits);
  EXPECT_NEAR(r2.losses[0], -std::log(prob), 1e-13);
  for (size_t i = 0; i < r.grad.size(); ++i) EXPECT_NEAR(r2.grad[i], r.grad[i], 1e-13) << i;
}

// T = 3, C = 3, two samples: "1 1" has the one alignment 1-1 (a repeat needs a blank between);
// "1 2" has 112, 122, 1-2, -12, 12-.
TEST(CtcReferenceTest, RepeatAndPairSummedByHand) {
  const std::vector<std::vector<double>> y0 = {{0.2, 0.5, 0.3}, {0.6, 0.1, 0.3}};
  const std::vector<std::vector<double>> y1 = {{0.5, 0.25, 0.25}, {0.2, 0.3, 0.5}};
  const std::vector<std::vector<double>> y2 = {{0.1, 0.7, 0.2}, {0.3, 0.3, 0.4}};
  Problem p;
  p.T = 3;
  p.C = 3;
  p.targets = {{1, 1}, {1, 2}};
  p.input_lengths = {3, 3};
  const Vec lp = LogOf({y0, y1, y2});
  const double repeat = y0[0][1] * y1[0][0] * y2[0][1];
  auto b = [&](int t, int c) { return (t == 0 ? y0 : t == 1 ? y1 : y2)[1][c]; };
  const double pair = b(0, 1) * b(1, 1) * b(2, 2) + b(0, 1) * b(1, 2) * b(2, 2) +
                      b(0, 1) * b(1, 0) * b(2, 2) + b(0, 0) * b(1, 1) * b(2, 2) +
                      b(0, 1) * b(1, 2) * b(2, 0);
  const Result r = RunReference(LogProbInputs(), p, lp);
  EXPECT_NEAR(r.losses[0], -std::log(repeat), 1e-13);
  EXPECT_NEAR(r.losses[1], -std::log(pair), 1e-13);
  // "1 1" has one alignment, so its posteriors are 0/1: grad = y - onehot(1-1).
  const int path[3] = {1, 0, 1};
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 3; ++c) {
      const double want = (t == 0 ? y0 : t == 1 ? y1 : y2)[0][c] - (c == path[t] ? 1 : 0);
      EXPECT_NEAR(r.grad[(t * 2 + 0) * 3 + c], want, 1e-13) << "t " << t << " c " << c;
    }
  }
}

// blank = 2, label "0", T = 2; an empty label over 3 frames is all blanks; an empty label over
// no frames has probability 1; the kinds of reduction over them.
TEST(CtcReferenceTest, BlankNotZeroEmptyLabelsAndReductions) {
  const std::vector<std::vector<double>> y0 = {{0.6, 0.1, 0.3}, {0.2, 0.5, 0.3}, {0.1, 0.1, 0.8}};
  const std::vector<std::vector<double>> y1 = {{0.3, 0.3, 0.4}, {0.4, 0.4, 0.2}, {0.5, 0.3, 0.2}};
  const std::vector<std::vector<double>> y2 = {{0.2, 0.2, 0.6}, {0.1, 0.1, 0.8}, {0.3, 0.3, 0.4}};
  Problem p;
  p.T = 3;
  p.C = 3;
  p.targets = {{0}, {}, {}};
  p.input_lengths = {2, 3, 0};
  CtcLossDescriptor d = LogProbInputs();
  d.blank = 2;
  const Result r = RunReference(d, p, LogOf({y0, y1, y2}));
  const double one = y0[0][0] * y1[0][0] + y0[0][0] * y1[0][2] + y0[0][2] * y1[0][0];
  const double empty = y0[1][2] * y1[1][2] * y2[1][2];
  const double want[3] = {-std::log(one), -std::log(empty), 0};
  for (int n = 0; n < 3; ++n) EXPECT_NEAR(r.losses[n], want[n], 1e-13) << n;
  // Sample 0's frame 2 and all of sample 2 lie past their input lengths: zero gradient.
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(r.grad[(2 * 3 + 0) * 3 + c], 0.0);
    for (int t = 0; t < 3; ++t) EXPECT_EQ(r.grad[(t * 3 + 2) * 3 + c], 0.0);
  }
  d.reduction = CtcReduction::kSum;
  EXPECT_NEAR(RunReference(d, p, LogOf({y0, y1, y2})).losses[0], want[0] + want[1], 1e-13);
  d.reduction = CtcReduction::kMeanByTargetLength;
  // Target lengths clamped to >= 1: the empty labels divide by 1.
  EXPECT_NEAR(RunReference(d, p, LogOf({y0, y1, y2})).losses[0], (want[0] + want[1]) / 3, 1e-13);
}

// Random labels of the given lengths over classes other than blank; `repeats` makes every
// second label repeat the one before (so the path needs a blank between).
std::vector<int32_t> RandomLabels(int length, int64_t classes, int32_t blank, bool repeats,
                                  std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(classes) - 2);
  std::vector<int32_t> out;
  for (int i = 0; i < length; ++i) {
    if (repeats && i % 2 == 1) {
      out.push_back(out.back());
      continue;
    }
    const int32_t v = pick(rng);
    out.push_back(v >= blank ? v + 1 : v);
  }
  return out;
}

Vec LogSoftmaxRows(Vec x, int64_t C) {
  for (size_t r = 0; r < x.size(); r += C) {
    double m = x[r];
    for (int64_t c = 1; c < C; ++c) m = std::max(m, x[r + c]);
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::exp(x[r + c] - m);
    for (int64_t c = 0; c < C; ++c) x[r + c] -= m + std::log(s);
  }
  return x;
}

struct FdCase {
  int64_t T, C;
  int32_t blank;
  std::vector<int> label_lengths;
  std::vector<int32_t> input_lengths;
  bool repeats;
};

// The gradient against central differences of the reported loss: L(x) = grad_scale Σ losses.
// With log-probability inputs the exact derivative is -posterior, and the reported gradient is
// PyTorch's exp(lp) - posterior: the check takes scale_n exp(lp) out of the valid rows first.
TEST(CtcReferenceTest, GradientMatchesFiniteDifferences) {
  const std::vector<FdCase> cases = {
      {4, 3, 0, {1}, {4}, false},
      {5, 4, 0, {2, 2}, {5, 5}, true},         // "a a": a blank between
      {6, 5, 3, {3, 0, 2}, {6, 4, 3}, false},  // blank 3, an empty label, short inputs
      {7, 6, 5, {4, 2, 1}, {7, 6, 2}, true},   // blank C-1, repeats, ragged
      {6, 3, 1, {2, 3}, {5, 6}, false},
  };
  std::mt19937 rng(7);
  int checked = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const FdCase& fc = cases[k];
    Problem p;
    p.T = fc.T;
    p.C = fc.C;
    p.input_lengths = fc.input_lengths;
    for (int L : fc.label_lengths)
      p.targets.push_back(RandomLabels(L, fc.C, fc.blank, fc.repeats, rng));
    const int64_t N = p.N(), size = fc.T * N * fc.C;
    for (bool log_probs : {false, true}) {
      for (CtcReduction red :
           {CtcReduction::kNone, CtcReduction::kSum, CtcReduction::kMeanByTargetLength}) {
        CtcLossDescriptor d;
        d.blank = fc.blank;
        d.inputs_are_log_probs = log_probs;
        d.reduction = red;
        d.grad_scale = 0.75f;
        Vec x = testing::Uniform(size, -2, 2, rng);
        if (log_probs) x = LogSoftmaxRows(x, fc.C);
        const Result r = RunReference(d, p, x);
        for (double l : r.losses) ASSERT_TRUE(std::isfinite(l));
        Vec analytic = r.grad;
        for (int64_t t = 0; t < fc.T; ++t) {
          for (int64_t n = 0; n < N; ++n) {
            const double scale = dnn::CtcGradientScale(d, N, p.label_lengths[n]);
            for (int64_t c = 0; c < fc.C; ++c) {
              const int64_t i = (t * N + n) * fc.C + c;
              if (t >= p.input_lengths[n]) {
                EXPECT_EQ(r.grad[i], 0.0) << "past the input length: " << i;
              } else if (log_probs) {
                analytic[i] -= scale * std::exp(x[i]);
              }
            }
          }
        }
        auto losses = [&](const Vec& at) { return RunReference(d, p, at).losses; };
        const Vec dy(r.losses.size(), d.grad_scale);
        testing::GradientCheck check;
        check.step = 1e-5;
        check.atol = 1e-8;
        check.rtol = 1e-6;
        const std::string what = absl::StrCat("case ", k, log_probs ? " log-probs" : " logits",
                                              " reduction ", static_cast<int>(red));
        checked += testing::ExpectGradient(what, check, x, losses, dy, analytic);
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// Sample 0 needs more frames than it has ("1 1 2" needs 4, "1 1" needs 3); sample 1 does not.
TEST(CtcReferenceTest, ImpossibleAlignmentsAndZeroInfinity) {
  std::mt19937 rng(11);
  Problem p;
  p.T = 4;
  p.C = 3;
  p.targets = {{1, 1, 2}, {2, 1}};
  p.input_lengths = {3, 4};
  const Vec x = testing::Uniform(p.T * 2 * p.C, -1, 1, rng);
  CtcLossDescriptor d;
  const Result inf = RunReference(d, p, x);
  EXPECT_TRUE(std::isinf(inf.losses[0]) && inf.losses[0] > 0) << inf.losses[0];
  ASSERT_TRUE(std::isfinite(inf.losses[1]));
  // As in PyTorch, the impossible sample's gradient is NaN in its valid frames, 0 past them.
  for (int64_t t = 0; t < p.T; ++t) {
    for (int64_t c = 0; c < p.C; ++c) {
      const double g = inf.grad[(t * 2 + 0) * p.C + c];
      if (t < 3) {
        EXPECT_TRUE(std::isnan(g)) << t;
      } else {
        EXPECT_EQ(g, 0.0);
      }
    }
  }
  d.zero_infinity = true;
  const Result zero = RunReference(d, p, x);
  EXPECT_EQ(zero.losses[0], 0.0);
  EXPECT_EQ(zero.losses[1], inf.losses[1]);
  for (int64_t t = 0; t < p.T; ++t) {
    for (int64_t c = 0; c < p.C; ++c) {
      EXPECT_EQ(zero.grad[(t * 2 + 0) * p.C + c], 0.0);
      EXPECT_EQ(zero.grad[(t * 2 + 1) * p.C + c], inf.grad[(t * 2 + 1) * p.C + c]);
    }
  }
  d.reduction = CtcReduction::kMeanByTargetLength;
  EXPECT_NEAR(RunReference(d, p, x).losses[0], (0 + inf.losses[1] / 2) / 2, 1e-13);
  d.zero_infinity = false;
  EXPECT_TRUE(std::isinf(RunReference(d, p, x).losses[0]));
  // A label longer than the input, and a repeat without room for its blank.
  Problem q;
  q.T = 2;
  q.C = 3;
  q.targets = {{1, 2, 1}, {1, 1}};
  q.input_lengths = {2, 2};
  const Result r = RunReference(CtcLossDescriptor(), q, testing::Uniform(2 * 2 * 3, -1, 1, rng));
  EXPECT_TRUE(std::isinf(r.losses[0]));
  EXPECT_TRUE(std::isinf(r.losses[1]));
}

// Each bad argument gives InvalidArgument naming it and its value.
TEST(CtcReferenceTest, RefusesBadArguments) {
  struct Bad {
    std::string name;
    std::function<void(CtcLossDescriptor&, CtcLossInputs&, std::vector<int32_t>&)> edit;
    std::vector<std::string> says;
  };
  const std::vector<Bad> bads = {
      {"T 0", [](auto&, auto& in, auto&) { in.max_time = 0; }, {"max_time", "0"}},
      {"N 0", [](auto&, auto& in, auto&) { in.batch = 0; }, {"batch", "0"}},
      {"C 0", [](auto&, auto& in, auto&) { in.classes = 0; }, {"classes", "0"}},
      {"huge", [](auto&, auto& in, auto&) { in.classes = int64_t{1} << 40; }, {"too many"}},
      {"dtype", [](auto&, auto& in, auto&) { in.dtype = DataType::kI32; }, {"dtype", "i32"}},
      {"blank", [](auto& d, auto&, auto&) { d.blank = 4; }, {"blank 4", "[0, 4)"}},
      {"blank<0", [](auto& d, auto&, auto&) { d.blank = -1; }, {"blank -1"}},
      {"reduction",
       [](auto& d, auto&, auto&) { d.reduction = static_cast<CtcReduction>(7); },
       {"reduction 7"}},
      {"scale", [](auto& d, auto&, auto&) { d.grad_scale = NAN; }, {"grad_scale", "nan"}},
      {"label_lengths size",
       [](auto&, auto& in, auto&) { in.label_lengths = in.label_lengths.subspan(1); },
       {"label_lengths has 1 values", "batch (N) is 2"}},
      {"input_lengths size",
       [](auto&, auto& in, auto&) { in.input_lengths = in.input_lengths.subspan(1); },
       {"input_lengths has 1"}},
      {"input_length > T", [](auto&, auto&, auto& v) { v[3] = 6; }, {"input_lengths[1] = 6"}},
      {"input_length < 0", [](auto&, auto&, auto& v) { v[2] = -1; }, {"input_lengths[0] = -1"}},
      {"label_length < 0", [](auto&, auto&, auto& v) { v[1] = -2; }, {"label_lengths[1] = -2"}},
      {"label_length huge",
       [](auto&, auto&, auto& v) { v[1] = dnn::kCtcMaxLabelLength + 1; },
       {"label_lengths[1] = 4097"}},
      {"sum", [](auto&, auto&, auto& v) { v[1] = 1; }, {"labels has 3 values", "sum", "2"}},
      {"label >= C", [](auto&, auto&, auto& v) { v[5] = 4; }, {"labels[1] = 4", "[0, 4)"}},
      {"label < 0", [](auto&, auto&, auto& v) { v[4] = -3; }, {"labels[0] = -3"}},
      {"label blank", [](auto&, auto&, auto& v) { v[6] = 0; }, {"labels[2] = 0", "blank"}},
  };
  for (const Bad& bad : bads) {
    // storage: label_lengths {1, 2}, input_lengths {3, 5}, labels {1, 2, 3}
    std::vector<int32_t> v = {1, 2, 3, 5, 1, 2, 3};
    CtcLossDescriptor d;
    CtcLossInputs in;
    in.max_time = 5;
    in.batch = 2;
    in.classes = 4;
    in.label_lengths = absl::MakeConstSpan(v.data(), 2);
    in.input_lengths = absl::MakeConstSpan(v.data() + 2, 2);
    in.labels = absl::MakeConstSpan(v.data() + 4, 3);
    ASSERT_TRUE(dnn::CheckCtcLoss(d, in, "test").ok());
    bad.edit(d, in, v);
    const Vec x(5 * 2 * 4, 0.0);
    Vec losses(2), grad(x.size());
    const absl::Status s = dnn::reference::CtcLoss(d, in, x.data(), losses.data(), grad.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.name << ": " << s;
    for (const std::string& part : bad.says) {
      EXPECT_NE(std::string(s.message()).find(part), std::string::npos)
          << bad.name << ": '" << s.message() << "' does not say '" << part << "'";
    }
    EXPECT_FALSE(dnn::CtcLossWorkspaceBytes(d, in).ok()) << bad.name;
  }
  // Null operands, and the workspace of good ones.
  std::vector<int32_t> v = {1, 2, 3, 5, 1, 2, 3};
  CtcLossInputs in;
  in.max_time = 5;
  in.batch = 2;
  in.classes = 4;
  in.label_lengths = absl::MakeConstSpan(v.data(), 2);
  in.input_lengths = absl::MakeConstSpan(v.data() + 2, 2);
  in.labels = absl::MakeConstSpan(v.data() + 4, 3);
  Vec x(40), losses(2);
  const CtcLossDescriptor d;
  absl::Status s = dnn::reference::CtcLoss(d, in, nullptr, losses.data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("activations"), std::string::npos) << s;
  s = dnn::reference::CtcLoss(d, in, x.data(), nullptr, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("losses"), std::string::npos) << s;
  EXPECT_TRUE(dnn::reference::CtcLoss(d, in, x.data(), losses.data(), nullptr).ok());
  absl::StatusOr<size_t> bytes = dnn::CtcLossWorkspaceBytes(d, in);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  // alpha and beta: 3 * 3 + 5 * 5 floats each, at least.
  EXPECT_GE(*bytes, 2 * (3 * 3 + 5 * 5) * sizeof(float) + 2 * sizeof(double));
  EXPECT_EQ(dnn::CtcLossOutputCount(d, 2), 2);
  CtcLossDescriptor sum;
  sum.reduction = CtcReduction::kSum;
  EXPECT_EQ(dnn::CtcLossOutputCount(sum, 2), 1);
}

}  // namespace
}  // namespace kiln
