// The CTCLoss op on the reference backend: against the loss written out here by enumerating
// every alignment of tiny inputs (ragged lengths, a repeated label, padding the op must ignore),
// its gradient op against central differences of that enumeration, both against the CTC
// primitive's own reference on a larger batch, zero_infinity, 16-bit activations, and the
// refusal of every kind of bad index value with a status naming the node and the element.
// Part of //tests/kernels:reference_test.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dnn/ctc/ctc_loss.h"
#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

// A CTC problem as the op takes it: activations [T, N, C], labels [N, L] padded, lengths.
struct Problem {
  int64_t T = 0, N = 0, C = 0, L = 0;
  std::vector<double> x;                 // T N C
  std::vector<std::vector<int>> labels;  // per sample, unpadded
  std::vector<int> input_lengths;        // per sample
  float padding = -1.0f;                 // what fills labels past a sample's length
};

std::vector<HostTensor> Inputs(const Problem& p, DataType dtype = DataType::kF32) {
  HostTensor x(*TensorType::Create(dtype, {p.T, p.N, p.C}));
  for (int64_t i = 0; i < p.T * p.N * p.C; ++i) x.SetFloat(i, static_cast<float>(p.x[i]));
  HostTensor labels(F32({p.N, p.L})), in_len(F32({p.N})), label_len(F32({p.N}));
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t i = 0; i < p.L; ++i) {
      const bool real = i < static_cast<int64_t>(p.labels[n].size());
      labels.SetFloat(n * p.L + i, real ? static_cast<float>(p.labels[n][i]) : p.padding);
    }
    in_len.SetFloat(n, static_cast<float>(p.input_lengths[n]));
    label_len.SetFloat(n, static_cast<float>(p.labels[n].size()));
  }
  return {x, labels, in_len, label_len};
}

// -log p(label | x_n) by brute force: every path over the first input_lengths[n] frames, kept
// when removing repeats and then blanks (blank 0) gives the label. No recursion shared with the
// primitive's alpha-beta.
double EnumeratedLoss(const Problem& p, int64_t n) {
  const int frames = p.input_lengths[n];
  std::vector<std::vector<double>> prob(frames, std::vector<double>(p.C));
  for (int t = 0; t < frames; ++t) {
    double z = 0;
    for (int64_t c = 0; c < p.C; ++c) z += std::exp(p.x[(t * p.N + n) * p.C + c]);
    for (int64_t c = 0; c < p.C; ++c) prob[t][c] = std::exp(p.x[(t * p.N + n) * p.C + c]) / z;
  }
  int64_t paths = 1;
  for (int t = 0; t < frames; ++t) paths *= p.C;
  double total = 0;
  for (int64_t code = 0; code < paths; ++code) {
    std::vector<int> path;
    int64_t rest = code;
    double pr = 1;
    for (int t = 0; t < frames; ++t) {
      path.push_back(static_cast<int>(rest % p.C));
      rest /= p.C;
      pr *= prob[t][path.back()];
    }
    std::vector<int> collapsed;
    for (int t = 0; t < frames; ++t) {
      if (path[t] != 0 && (t == 0 || path[t] != path[t - 1])) collapsed.push_back(path[t]);
    }
    if (collapsed == p.labels[n]) total += pr;
  }
  return -std::log(total);
}

// PyTorch's reductions of the enumerated losses.
double EnumeratedReduced(const Problem& p, bool mean) {
  double sum = 0;
  for (int64_t n = 0; n < p.N; ++n) {
    const double loss = EnumeratedLoss(p, n);
    sum += mean ? loss / std::max<size_t>(p.labels[n].size(), 1) : loss;
  }
  return mean ? sum / p.N : sum;
}

AttrMap Reduction(const char* r) { return {{"reduction", std::string(r)}}; }

// T = 3, C = 3 (blank 0), N = 3: label [1] over 3 frames, [2, 2] over 3 frames (the repeat
// needs the blank between, so 2 0 2 is its only path), [1, 2] over 2 frames.
Problem Tiny() {
  Problem p;
  p.T = 3, p.N = 3, p.C = 3, p.L = 2;
  const double values[] = {0.3,  -0.2, 0.5,  1.1,  0.0, -0.7, -0.4, 0.8,  0.2,
                           0.6,  0.1,  -0.9, -0.3, 0.9, 0.4,  0.7,  -0.5, 0.05,
                           -0.8, 0.35, 0.45, 0.2,  0.6, -0.1, 0.15, 0.25, -0.6};
  p.x.assign(values, values + 27);
  p.labels = {{1}, {2, 2}, {1, 2}};
  p.input_lengths = {3, 3, 2};
  return p;
}

TEST(ReferenceCtcTest, LossMatchesEnumeratedAlignments) {
  const Problem p = Tiny();
  for (const char* r : {"mean", "sum"}) {
    auto out = RunReference("CTCLoss", Inputs(p), Reduction(r));
    ASSERT_EQ(out.size(), 1u) << r;
    EXPECT_EQ(out[0].type().rank(), 0) << r;
    ExpectClose(out[0], {EnumeratedReduced(p, std::string(r) == "mean")});
  }
  // Sample 1 alone: its only path 2 0 2 gives exactly -log(p0(2) p1(0) p2(2)).
  Problem one = p;
  one.N = 1;
  one.x.clear();
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 3; ++c) one.x.push_back(p.x[(t * 3 + 1) * 3 + c]);
  }
  one.labels = {{2, 2}};
  one.input_lengths = {3};
  double expected = 0;
  const int path[] = {2, 0, 2};
  for (int t = 0; t < 3; ++t) {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(one.x[t * 3 + c]);
    expected -= std::log(std::exp(one.x[t * 3 + path[t]]) / z);
  }
  auto out = RunReference("CTCLoss", Inputs(one), Reduction("sum"));
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], {expected});
}

TEST(ReferenceCtcTest, GradientMatchesDifferencesOfTheEnumeration) {
  const Problem p = Tiny();
  for (const char* r : {"mean", "sum"}) {
    const bool mean = std::string(r) == "mean";
    AttrMap attrs = Reduction(r);
    attrs["loss_weight"] = AttrValue(0.75);
    auto grad = RunReference("CTCLossGradient", Inputs(p), attrs);
    ASSERT_EQ(grad.size(), 1u);
    std::vector<double> expected(p.x.size());
    for (size_t i = 0; i < p.x.size(); ++i) {
      Problem plus = p, minus = p;
      plus.x[i] += 1e-5;
      minus.x[i] -= 1e-5;
      expected[i] = 0.75 * (EnumeratedReduced(plus, mean) - EnumeratedReduced(minus, mean)) / 2e-5;
    }
    // Frames past a sample's input length get no gradient: sample 2 at t = 2.
    for (int64_t c = 0; c < p.C; ++c) EXPECT_EQ(expected[(2 * 3 + 2) * 3 + c], 0.0);
    ExpectClose(grad[0], expected);
  }
}

// A ragged batch larger than enumeration allows, against dnn::reference::CtcLoss called here
// with the same values: the op's padded labels and f32 lengths become the primitive's arrays.
TEST(ReferenceCtcTest, MatchesThePrimitiveReference) {
  Problem p;
  p.T = 9, p.N = 4, p.C = 6, p.L = 4;
  HostTensor random = RandomTensor(F32({p.T, p.N, p.C}), 301, -2.0f, 2.0f);
  for (int64_t i = 0; i < p.T * p.N * p.C; ++i) p.x.push_back(random.GetFloat(i));
  p.labels = {{3, 3, 1}, {5}, {}, {2, 4, 1, 4}};
  p.input_lengths = {9, 4, 6, 8};
  p.padding = 0;  // the blank: ignored past each length, so allowed there
  std::vector<int32_t> flat, label_lengths,
      input_lengths(p.input_lengths.begin(), p.input_lengths.end());
  for (const auto& l : p.labels) {
    flat.insert(flat.end(), l.begin(), l.end());
    label_lengths.push_back(static_cast<int32_t>(l.size()));
  }
  dnn::CtcLossInputs in;
  in.max_time = p.T, in.batch = p.N, in.classes = p.C;
  in.labels = flat;
  in.label_lengths = label_lengths;
  in.input_lengths = input_lengths;
  std::vector<double> x(p.x.begin(), p.x.end());
  for (const char* r : {"mean", "sum"}) {
    dnn::CtcLossDescriptor desc;
    desc.reduction =
        std::string(r) == "mean" ? dnn::CtcReduction::kMeanByTargetLength : dnn::CtcReduction::kSum;
    desc.grad_scale = 1.25f;
    double loss = 0;
    std::vector<double> grad(x.size());
    ASSERT_TRUE(dnn::reference::CtcLoss(desc, in, x.data(), &loss, grad.data()).ok());
    auto out = RunReference("CTCLoss", Inputs(p), Reduction(r));
    ASSERT_EQ(out.size(), 1u);
    ExpectClose(out[0], {loss});
    AttrMap attrs = Reduction(r);
    attrs["loss_weight"] = AttrValue(1.25);
    auto g = RunReference("CTCLossGradient", Inputs(p), attrs);
    ASSERT_EQ(g.size(), 1u);
    ExpectClose(g[0], grad);
  }
}

// Label [1, 1] needs 3 frames; with 2 the loss is infinite (and the gradient NaN), as in
// PyTorch, or both 0 with zero_infinity. The other sample is unaffected either way.
TEST(ReferenceCtcTest, ImpossibleAlignmentIsInfiniteOrZeroed) {
  Problem p = Tiny();
  p.labels = {{1}, {1, 1}, {2}};
  p.input_lengths = {3, 2, 2};
  auto inf = RunReference("CTCLoss", Inputs(p), Reduction("sum"));
  ASSERT_EQ(inf.size(), 1u);
  EXPECT_TRUE(std::isinf(inf[0].GetFloat(0)) && inf[0].GetFloat(0) > 0);
  AttrMap zero = Reduction("sum");
  zero["zero_infinity"] = AttrValue(true);
  auto out = RunReference("CTCLoss", Inputs(p), zero);
  ASSERT_EQ(out.size(), 1u);
  ExpectClose(out[0], {EnumeratedLoss(p, 0) + EnumeratedLoss(p, 2)});
  auto g = RunReference("CTCLossGradient", Inputs(p), zero);
  ASSERT_EQ(g.size(), 1u);
  for (int64_t t = 0; t < p.T; ++t) {
    for (int64_t c = 0; c < p.C; ++c) EXPECT_EQ(g[0].GetFloat((t * p.N + 1) * p.C + c), 0.0f);
  }
  auto nan = RunReference("CTCLossGradient", Inputs(p), Reduction("sum"));
  ASSERT_EQ(nan.size(), 1u);
  EXPECT_TRUE(std::isnan(nan[0].GetFloat((0 * p.N + 1) * p.C)));
  EXPECT_FALSE(std::isnan(nan[0].GetFloat((0 * p.N + 0) * p.C)));
}

TEST(ReferenceCtcTest, SixteenBitActivations) {
  const Problem p = Tiny();
  for (DataType dtype : {DataType::kF16, DataType::kBF16}) {
    std::vector<HostTensor> in = Inputs(p, dtype);
    Problem rounded = p;  // the loss of the activations as 16 bits hold them
    for (size_t i = 0; i < p.x.size(); ++i) rounded.x[i] = in[0].GetFloat(i);
    auto out = RunReference("CTCLoss", in, Reduction("mean"));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].type().dtype(), dtype);
    ExpectClose(out[0], {EnumeratedReduced(rounded, true)});
  }
}

// Every bad value is InvalidArgument naming the node ('op', RunOp's) and the element.
TEST(ReferenceCtcTest, RefusesBadIndices) {
  struct Bad {
    const char* what;
    int input;      // 1 labels, 2 input lengths, 3 label lengths
    int64_t index;  // flat element of that input
    float value;
    const char* message;
  };
  const Bad cases[] = {
      {"blank label", 1, 2, 0, "labels[1, 0] = 0 is the blank"},
      {"label >= C", 1, 3, 3, "labels[1, 1] = 3 is not an integer in [0, 2]"},
      {"negative label", 1, 0, -1, "labels[0, 0] = -1"},
      {"fractional label", 1, 4, 1.5f, "labels[2, 0] = 1.5"},
      {"input length > T", 2, 1, 4, "input_lengths[1] = 4 is not an integer in [0, 3]"},
      {"fractional input length", 2, 0, 2.5f, "input_lengths[0] = 2.5"},
      {"label length > L", 3, 2, 3, "label_lengths[2] = 3 is not an integer in [0, 2]"},
      {"negative label length", 3, 0, -1, "label_lengths[0] = -1"},
      {"NaN length", 3, 1, std::numeric_limits<float>::quiet_NaN(), "label_lengths[1] = nan"},
  };
  for (const Bad& bad : cases) {
    for (const char* op : {"CTCLoss", "CTCLossGradient"}) {
      std::vector<HostTensor> in = Inputs(Tiny());
      in[bad.input].SetFloat(bad.index, bad.value);
      auto out = RunOp(op, in, {}, BackendChoice::kReference);
      ASSERT_FALSE(out.ok()) << bad.what << " " << op;
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
      EXPECT_NE(out.status().message().find("node 'op'"), std::string::npos) << out.status();
      EXPECT_NE(out.status().message().find(bad.message), std::string::npos)
          << bad.what << ": " << out.status();
    }
  }
  // Padding past a label's length is never read: any value there is fine.
  std::vector<HostTensor> in = Inputs(Tiny());
  in[1].SetFloat(1, 1e9f);  // sample 0's label has length 1
  EXPECT_TRUE(RunOp("CTCLoss", in, {}, BackendChoice::kReference).ok());
}

}  // namespace
}  // namespace testing
}  // namespace kiln
