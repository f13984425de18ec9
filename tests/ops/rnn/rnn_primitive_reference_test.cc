// The RNN primitives' CPU reference (dnn/rnn/rnn_reference.h): hand-computed cells, the
// semantics of lengths, cont markers and the reverse direction checked against separate runs,
// finite differences of every gradient over every cell, direction, layout and bias mode, and
// the refusals of bad calls.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/rnn/rnn_reference.h"
#include "gtest/gtest.h"

namespace kiln {
namespace dnn {
namespace {

double Sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

std::vector<double> Random(std::mt19937& rng, int64_t n, double scale) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (double& e : v) e = u(rng);
  return v;
}

RnnDescriptor Make(RnnCell cell, int64_t in, int64_t hidden, int64_t layers = 1, bool bi = false,
                   RnnBias bias = RnnBias::kDouble, double dropout = 0) {
  auto d = RnnDescriptor::Create(cell, in, hidden, layers, bi, bias, dropout, 11);
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

RnnSequences Seq(RnnLayout layout, int64_t t, int64_t n, int64_t f,
                 std::vector<int32_t> lengths = {}) {
  auto s = RnnSequences::Create(layout, t, n, f, std::move(lengths));
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// One LSTM and one GRU step with one hidden unit, written out from the equations.
TEST(RnnReference, OneUnitCellsMatchTheEquations) {
  const double x0 = 0.7, x1 = -0.4, h0 = 0.3, c0 = -0.2;
  {
    const RnnDescriptor lstm = Make(RnnCell::kLstm, 1, 1);
    // W_ih (i, f, g, o), W_hh, b_ih, b_hh.
    const std::vector<double> w = {0.5,  -0.3, 0.8,  0.2, -0.6, 0.4,  0.1,   0.9,
                                   0.05, -0.1, 0.15, 0.2, 0.01, 0.02, -0.03, 0.04};
    ASSERT_EQ(RnnWeightCount(lstm), 16);
    auto pre = [&](int q, double x, double h) {
      return w[q] * x + w[4 + q] * h + w[8 + q] + w[12 + q];
    };
    double h = h0, c = c0;
    std::vector<double> want;
    for (double x : {x0, x1}) {
      const double i = Sigmoid(pre(0, x, h)), f = Sigmoid(pre(1, x, h));
      const double g = std::tanh(pre(2, x, h)), o = Sigmoid(pre(3, x, h));
      c = f * c + i * g;
      h = o * std::tanh(c);
      want.push_back(h);
    }
    const RnnSequences xs = Seq(RnnLayout::kSequenceMajor, 2, 1, 1), ys = xs;
    std::vector<double> x = {x0, x1}, y(2), hy(1), cy(1), hx = {h0}, cx = {c0};
    ASSERT_TRUE(reference::RnnForward(lstm, false, xs, x.data(), ys, y.data(), hx.data(), cx.data(),
                                      w.data(), nullptr, hy.data(), cy.data())
                    .ok());
    EXPECT_NEAR(y[0], want[0], 1e-15);
    EXPECT_NEAR(y[1], want[1], 1e-15);
    EXPECT_NEAR(hy[0], h, 1e-15);
    EXPECT_NEAR(cy[0], c, 1e-15);
  }
  {
    const RnnDescriptor gru = Make(RnnCell::kGru, 1, 1);
    const std::vector<double> w = {0.5,  -0.3, 0.8,  0.2,  -0.6, 0.4,
                                   0.05, -0.1, 0.15, 0.01, 0.02, -0.03};
    ASSERT_EQ(RnnWeightCount(gru), 12);
    const double r = Sigmoid(w[0] * x0 + w[6] + w[3] * h0 + w[9]);
    const double z = Sigmoid(w[1] * x0 + w[7] + w[4] * h0 + w[10]);
    const double n = std::tanh(w[2] * x0 + w[8] + r * (w[5] * h0 + w[11]));
    const double want = (1 - z) * n + z * h0;
    const RnnSequences xs = Seq(RnnLayout::kSequenceMajor, 1, 1, 1), ys = xs;
    std::vector<double> x = {x0}, y(1), hx = {h0};
    ASSERT_TRUE(reference::RnnForward(gru, false, xs, x.data(), ys, y.data(), hx.data(), nullptr,
                                      w.data(), nullptr, nullptr, nullptr)
                    .ok());
    EXPECT_NEAR(y[0], want, 1e-15);
  }
}

// A short sequence padded into a longer batch gives what it gives alone; its padding is zero.
// A cont marker of 0 restarts the sequence: the steps after it equal a fresh run from there.
TEST(RnnReference, LengthsAndContMarkersMatchSeparateRuns) {
  std::mt19937 rng(3);
  for (RnnCell cell : {RnnCell::kRnnTanh, RnnCell::kLstm, RnnCell::kGru}) {
    const RnnDescriptor rnn = Make(cell, 3, 4);
    const std::vector<double> w = Random(rng, RnnWeightCount(rnn), 0.5);
    const int64_t T = 5, N = 2, F = 3, H = 4;
    const std::vector<double> x = Random(rng, T * N * F, 1);
    // Batch: sequence 0 full, sequence 1 of length 3.
    const RnnSequences xs = Seq(RnnLayout::kSequenceMajor, T, N, F, {5, 3});
    const RnnSequences ys = Seq(RnnLayout::kSequenceMajor, T, N, H, {5, 3});
    std::vector<double> y(T * N * H, 7), hy(N * H);
    ASSERT_TRUE(reference::RnnForward(rnn, false, xs, x.data(), ys, y.data(), nullptr, nullptr,
                                      w.data(), nullptr, hy.data(), nullptr)
                    .ok());
    // Sequence 1 alone, 3 steps.
    std::vector<double> x1(3 * F), y1(3 * H), hy1(H);
    for (int t = 0; t < 3; ++t) {
      for (int k = 0; k < F; ++k) x1[t * F + k] = x[(t * N + 1) * F + k];
    }
    ASSERT_TRUE(reference::RnnForward(rnn, false, Seq(RnnLayout::kSequenceMajor, 3, 1, F),
                                      x1.data(), Seq(RnnLayout::kSequenceMajor, 3, 1, H), y1.data(),
                                      nullptr, nullptr, w.data(), nullptr, hy1.data(), nullptr)
                    .ok());
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < H; ++j) {
        EXPECT_EQ(y[(t * N + 1) * H + j], t < 3 ? y1[t * H + j] : 0.0) << t << " " << j;
      }
    }
    for (int j = 0; j < H; ++j) EXPECT_EQ(hy[H + j], hy1[j]);
    // cont: sequence 0 restarted at t = 2 equals sequence 0's steps 2..4 run alone.
    std::vector<double> cont(T * N, 1);
    cont[2 * N + 0] = 0;
    std::vector<double> yc(T * N * H);
    ASSERT_TRUE(reference::RnnForward(rnn, false, xs, x.data(), ys, yc.data(), nullptr, nullptr,
                                      w.data(), cont.data(), nullptr, nullptr)
                    .ok());
    std::vector<double> x0(3 * F), y0(3 * H);
    for (int t = 0; t < 3; ++t) {
      for (int k = 0; k < F; ++k) x0[t * F + k] = x[((t + 2) * N) * F + k];
    }
    ASSERT_TRUE(reference::RnnForward(rnn, false, Seq(RnnLayout::kSequenceMajor, 3, 1, F),
                                      x0.data(), Seq(RnnLayout::kSequenceMajor, 3, 1, H), y0.data(),
                                      nullptr, nullptr, w.data(), nullptr, nullptr, nullptr)
                    .ok());
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < H; ++j) {
        // Before the restart nothing changed; after it, the fresh run.
        const double want = t < 2 ? y[t * N * H + j] : y0[(t - 2) * H + j];
        EXPECT_NEAR(yc[t * N * H + j], want, 1e-15) << t << " " << j;
      }
    }
  }
}

// The reverse direction of a bidirectional layer is a forward run over the reversed sequence
// with the reverse direction's weights, and batch-major data gives the same numbers.
TEST(RnnReference, ReverseDirectionAndBatchMajorMatch) {
  std::mt19937 rng(5);
  const RnnDescriptor bi = Make(RnnCell::kLstm, 2, 3, 1, true);
  const RnnDescriptor uni = Make(RnnCell::kLstm, 2, 3);
  const std::vector<double> w = Random(rng, RnnWeightCount(bi), 0.6);
  const int64_t T = 4, N = 2, F = 2, H = 3;
  const std::vector<double> x = Random(rng, T * N * F, 1);
  const std::vector<int32_t> len = {4, 2};
  std::vector<double> y(T * N * 2 * H);
  ASSERT_TRUE(reference::RnnForward(bi, false, Seq(RnnLayout::kSequenceMajor, T, N, F, len),
                                    x.data(), Seq(RnnLayout::kSequenceMajor, T, N, 2 * H, len),
                                    y.data(), nullptr, nullptr, w.data(), nullptr, nullptr, nullptr)
                  .ok());
  const std::vector<double> w_rev(w.begin() + RnnLayerWeights(bi, 0, 1).w_ih, w.end());
  for (int n = 0; n < N; ++n) {
    const int L = len[n];
    std::vector<double> xr(L * F), yr(L * H);
    for (int t = 0; t < L; ++t) {
      for (int k = 0; k < F; ++k) xr[t * F + k] = x[((L - 1 - t) * N + n) * F + k];
    }
    ASSERT_TRUE(reference::RnnForward(uni, false, Seq(RnnLayout::kSequenceMajor, L, 1, F),
                                      xr.data(), Seq(RnnLayout::kSequenceMajor, L, 1, H), yr.data(),
                                      nullptr, nullptr, w_rev.data(), nullptr, nullptr, nullptr)
                    .ok());
    for (int t = 0; t < L; ++t) {
      for (int j = 0; j < H; ++j) {
        EXPECT_NEAR(y[(t * N + n) * 2 * H + H + j], yr[(L - 1 - t) * H + j], 1e-15);
      }
    }
  }
  // Batch-major: the same data transposed.
  std::vector<double> xb(x.size()), yb(y.size());
  for (int t = 0; t < T; ++t) {
    for (int n = 0; n < N; ++n) {
      for (int k = 0; k < F; ++k) xb[(n * T + t) * F + k] = x[(t * N + n) * F + k];
    }
  }
  ASSERT_TRUE(reference::RnnForward(bi, false, Seq(RnnLayout::kBatchMajor, T, N, F, len), xb.data(),
                                    Seq(RnnLayout::kBatchMajor, T, N, 2 * H, len), yb.data(),
                                    nullptr, nullptr, w.data(), nullptr, nullptr, nullptr)
                  .ok());
  for (int t = 0; t < T; ++t) {
    for (int n = 0; n < N; ++n) {
      for (int k = 0; k < 2 * H; ++k) {
        EXPECT_EQ(yb[(n * T + t) * 2 * H + k], y[(t * N + n) * 2 * H + k]);
      }
    }
  }
}

struct GradCase {
  RnnCell cell;
  int64_t layers;
  bool bidirectional;
  RnnLayout layout;
  RnnBias bias;
  double dropout;
  bool ragged, cont;
};

// loss = Σ y ⊙ gy + Σ hy ⊙ ghy + Σ cy ⊙ gcy, with its analytic gradients from RnnBackward
// checked against central differences for x, hx, cx and every weight.
TEST(RnnReference, GradientsMatchFiniteDifferences) {
  using C = RnnCell;
  using B = RnnBias;
  const RnnLayout S = RnnLayout::kSequenceMajor, N_ = RnnLayout::kBatchMajor;
  const std::vector<GradCase> cases = {
      {C::kRnnTanh, 1, false, S, B::kDouble, 0, false, false},
      {C::kRnnRelu, 2, true, N_, B::kDouble, 0, true, false},
      {C::kLstm, 1, false, S, B::kDouble, 0, false, true},
      {C::kLstm, 2, true, S, B::kInputOnly, 0, true, false},
      {C::kLstm, 3, false, N_, B::kNone, 0.3, true, false},
      {C::kGru, 1, false, S, B::kDouble, 0, true, true},
      {C::kGru, 2, true, N_, B::kInputOnly, 0.25, true, false},
      {C::kGru, 2, false, S, B::kNone, 0, false, false},
  };
  std::mt19937 rng(17);
  for (const GradCase& c : cases) {
    const int64_t T = 4, N = 3, F = 3, H = 3;
    const RnnDescriptor rnn = Make(c.cell, F, H, c.layers, c.bidirectional, c.bias, c.dropout);
    const std::vector<int32_t> len =
        c.ragged ? std::vector<int32_t>{4, 1, 0} : std::vector<int32_t>{};
    const RnnSequences xs = Seq(c.layout, T, N, F, len);
    const RnnSequences ys = Seq(c.layout, T, N, rnn.directions() * H, len);
    const bool lstm = c.cell == C::kLstm;
    std::vector<double> x = Random(rng, xs.elements(), 1),
                        w = Random(rng, RnnWeightCount(rnn), 0.6);
    std::vector<double> hx = Random(rng, RnnStateCount(rnn, N), 0.5);
    std::vector<double> cx = Random(rng, RnnStateCount(rnn, N), 0.5);
    const std::vector<double> gy = Random(rng, ys.elements(), 1);
    const std::vector<double> ghy = Random(rng, RnnStateCount(rnn, N), 1);
    const std::vector<double> gcy = Random(rng, RnnStateCount(rnn, N), 1);
    std::vector<double> cont;
    if (c.cont) {
      cont.assign(T * N, 1);
      cont[2 * N + 0] = 0;
      cont[1 * N + 2] = 0;
    }
    const double* cont_p = c.cont ? cont.data() : nullptr;
    auto loss = [&] {
      std::vector<double> y(ys.elements()), hy(hx.size()), cy(cx.size());
      EXPECT_TRUE(reference::RnnForward(rnn, true, xs, x.data(), ys, y.data(), hx.data(),
                                        lstm ? cx.data() : nullptr, w.data(), cont_p, hy.data(),
                                        lstm ? cy.data() : nullptr)
                      .ok());
      double sum = 0;
      for (size_t i = 0; i < y.size(); ++i) sum += y[i] * gy[i];
      for (size_t i = 0; i < hy.size(); ++i) sum += hy[i] * ghy[i] + (lstm ? cy[i] * gcy[i] : 0);
      return sum;
    };
    std::vector<double> dx(x.size(), 9), dhx(hx.size(), 9), dcx(cx.size(), 9), dw(w.size(), 0);
    ASSERT_TRUE(reference::RnnBackward(rnn, xs, x.data(), ys, gy.data(), hx.data(),
                                       lstm ? cx.data() : nullptr, w.data(), cont_p, ghy.data(),
                                       lstm ? gcy.data() : nullptr, dx.data(), dhx.data(),
                                       lstm ? dcx.data() : nullptr, dw.data())
                    .ok());
    const std::string what = absl::StrCat(rnn.ToString(), c.layout == S ? " seq" : " batch",
                                          c.ragged ? " ragged" : "", c.cont ? " cont" : "");
    int checked = 0;
    auto check = [&](std::vector<double>& v, const std::vector<double>& grad, const char* name) {
      for (size_t i = 0; i < v.size(); ++i) {
        const double keep = v[i], eps = 1e-6;
        v[i] = keep + eps;
        const double up = loss();
        v[i] = keep - eps;
        const double down = loss();
        v[i] = keep;
        const double numeric = (up - down) / (2 * eps);
        EXPECT_NEAR(grad[i], numeric, 1e-6 + 1e-5 * std::abs(numeric))
            << what << " d" << name << "[" << i << "]";
        ++checked;
      }
    };
    check(x, dx, "x");
    check(hx, dhx, "hx");
    if (lstm) check(cx, dcx, "cx");
    check(w, dw, "w");
    EXPECT_GT(checked, 60) << what;
    // Padding never receives a gradient.
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t t = xs.length(n); t < T; ++t) {
        for (int64_t k = 0; k < F; ++k) EXPECT_EQ(dx[xs.Offset(t, n) + k], 0) << what;
      }
    }
  }
}

TEST(RnnReference, BadCallsAreRefused) {
  EXPECT_FALSE(RnnDescriptor::Create(RnnCell::kLstm, 0, 4).ok());
  EXPECT_FALSE(RnnDescriptor::Create(RnnCell::kLstm, 4, 0).ok());
  EXPECT_FALSE(RnnDescriptor::Create(RnnCell::kLstm, 4, 4, 0).ok());
  EXPECT_FALSE(RnnDescriptor::Create(RnnCell::kLstm, 4, 4, 1, false, RnnBias::kDouble, 1.0).ok());
  EXPECT_FALSE(RnnDescriptor::Create(static_cast<RnnCell>(9), 4, 4).ok());
  EXPECT_FALSE(RnnDescriptor::Create(RnnCell::kLstm, int64_t{1} << 40, 4).ok());
  EXPECT_FALSE(RnnSequences::Create(RnnLayout::kSequenceMajor, 0, 1, 1).ok());
  EXPECT_FALSE(RnnSequences::Create(RnnLayout::kSequenceMajor, 3, 2, 1, {3}).ok());
  auto bad_len = RnnSequences::Create(RnnLayout::kSequenceMajor, 3, 2, 1, {3, 4});
  ASSERT_FALSE(bad_len.ok());
  EXPECT_NE(bad_len.status().message().find("sequence 1"), std::string::npos) << bad_len.status();
  const RnnDescriptor rnn = Make(RnnCell::kGru, 2, 3);
  const RnnDescriptor bi = Make(RnnCell::kGru, 2, 3, 1, true);
  std::vector<double> x(12), y(18), w(RnnWeightCount(bi)), cont(6, 1);
  // x with the wrong feature count, y with the wrong one, mismatched lengths, cont on two
  // directions.
  auto forward = [&](const RnnDescriptor& r, const RnnSequences& xs, const RnnSequences& ys,
                     const double* c) {
    return reference::RnnForward(r, false, xs, x.data(), ys, y.data(), nullptr, nullptr, w.data(),
                                 c, nullptr, nullptr);
  };
  const auto S = RnnLayout::kSequenceMajor;
  absl::Status s = forward(rnn, Seq(S, 3, 2, 3), Seq(S, 3, 2, 3), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input_size"), std::string::npos) << s;
  EXPECT_FALSE(forward(rnn, Seq(S, 3, 2, 2), Seq(S, 3, 2, 6), nullptr).ok());
  EXPECT_FALSE(forward(rnn, Seq(S, 3, 2, 2, {3, 2}), Seq(S, 3, 2, 3, {3, 1}), nullptr).ok());
  EXPECT_FALSE(forward(rnn, Seq(S, 3, 2, 2), Seq(RnnLayout::kBatchMajor, 3, 2, 3), nullptr).ok());
  s = forward(bi, Seq(S, 3, 2, 2), Seq(S, 3, 2, 6), cont.data());
  EXPECT_NE(s.message().find("cont"), std::string::npos) << s;
  EXPECT_TRUE(forward(rnn, Seq(S, 3, 2, 2), Seq(S, 3, 2, 3), cont.data()).ok());
}

// Caffe's gate order is PyTorch's with the g and o blocks of every weight and bias swapped.
TEST(RnnReference, CaffeGateOrderIsAPermutationOfTheBlocks) {
  std::mt19937 rng(23);
  const int64_t T = 3, N = 2, F = 3, H = 4;
  RnnDescriptor caffe = Make(RnnCell::kLstm, F, H, 1, false, RnnBias::kInputOnly);
  caffe.gate_order = RnnGateOrder::kIfog;
  const RnnDescriptor torch = Make(RnnCell::kLstm, F, H, 1, false, RnnBias::kInputOnly);
  const std::vector<double> w = Random(rng, RnnWeightCount(caffe), 0.6);
  std::vector<double> w_torch(w.size());
  const RnnWeightOffsets o = RnnLayerWeights(caffe, 0, 0);
  // Rows of W_ih ([4H, F]) and W_hh ([4H, H]) and elements of b_ih move block by block.
  auto permute = [&](int64_t at, int64_t width) {
    for (int64_t q = 0; q < 4; ++q) {
      const int64_t from = (q < 2 ? q : 5 - q) * H * width;  // torch block q <- caffe block
      for (int64_t k = 0; k < H * width; ++k) w_torch[at + q * H * width + k] = w[at + from + k];
    }
  };
  permute(o.w_ih, F);
  permute(o.w_hh, H);
  permute(o.b_ih, 1);
  const std::vector<double> x = Random(rng, T * N * F, 1);
  const RnnSequences xs = Seq(RnnLayout::kSequenceMajor, T, N, F);
  const RnnSequences ys = Seq(RnnLayout::kSequenceMajor, T, N, H);
  std::vector<double> y1(T * N * H), y2(T * N * H);
  ASSERT_TRUE(reference::RnnForward(caffe, false, xs, x.data(), ys, y1.data(), nullptr, nullptr,
                                    w.data(), nullptr, nullptr, nullptr)
                  .ok());
  ASSERT_TRUE(reference::RnnForward(torch, false, xs, x.data(), ys, y2.data(), nullptr, nullptr,
                                    w_torch.data(), nullptr, nullptr, nullptr)
                  .ok());
  for (size_t i = 0; i < y1.size(); ++i) EXPECT_EQ(y1[i], y2[i]) << i;
  // The order is refused for cells other than the LSTM.
  RnnDescriptor gru = Make(RnnCell::kGru, F, H);
  gru.gate_order = RnnGateOrder::kIfog;
  EXPECT_FALSE(reference::RnnForward(gru, false, xs, x.data(), ys, y1.data(), nullptr, nullptr,
                                     w.data(), nullptr, nullptr, nullptr)
                   .ok());
}

TEST(RnnReference, WeightLayoutFollowsPyTorchsParameterOrder) {
  // torch.nn.LSTM(5, 7, num_layers=2, bidirectional=True): per layer and direction
  // weight_ih [28, in], weight_hh [28, 7], bias_ih [28], bias_hh [28].
  const RnnDescriptor rnn = Make(RnnCell::kLstm, 5, 7, 2, true);
  const int64_t l0 = 28 * 5 + 28 * 7 + 56, l1 = 28 * 14 + 28 * 7 + 56;
  EXPECT_EQ(RnnLayerWeights(rnn, 0, 1).w_ih, l0);
  EXPECT_EQ(RnnLayerWeights(rnn, 1, 0).w_ih, 2 * l0);
  EXPECT_EQ(RnnLayerWeights(rnn, 1, 1).w_hh, 2 * l0 + l1 + 28 * 14);
  EXPECT_EQ(RnnLayerWeights(rnn, 1, 1).b_hh, 2 * l0 + l1 + 28 * 14 + 28 * 7 + 28);
  EXPECT_EQ(RnnWeightCount(rnn), 2 * l0 + 2 * l1);
  const RnnDescriptor caffe = Make(RnnCell::kLstm, 5, 7, 1, false, RnnBias::kInputOnly);
  EXPECT_EQ(RnnLayerWeights(caffe, 0, 0).b_hh, -1);
  EXPECT_EQ(RnnWeightCount(caffe), 28 * 5 + 28 * 7 + 28);
}

}  // namespace
}  // namespace dnn
}  // namespace kiln
