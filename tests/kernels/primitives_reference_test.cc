// The CPU reference of the primitives beyond convolution: every backward pass against finite
// differences of its forward pass (in double precision, on packed, channels-last and strided
// layouts; max-type ops get well-separated inputs, ReLU-type ops a kink band), the Caffe/cuDNN
// semantics that gradients cannot show (running statistics, ceil rounding, dropout masks), and
// the refusal of bad calls.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/dropout_mask.h"
#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace {

namespace ref = dnn::reference;
using dnn::TensorDescriptor;
using testing::LaidOut;
using testing::Layout;
using Vec = std::vector<double>;

constexpr Layout kLayouts[] = {Layout::kPacked, Layout::kChannelsLast, Layout::kStrided};

// A one-input, one-output op on host buffers: forward(x) -> y, backward(x, y, dy) -> dx.
struct UnaryOp {
  std::string name;
  LaidOut in, out;
  std::function<void(const Vec& x, Vec& y)> forward;
  std::function<void(const Vec& x, const Vec& y, const Vec& dy, Vec& dx)> backward;
};

// Checks `op`'s backward against finite differences of its forward on input `x`.
void CheckUnary(const UnaryOp& op, const Vec& x, testing::GradientCheck check = {}) {
  std::mt19937 rng(7);
  auto f = [&](const Vec& at) {
    Vec y(op.out.BufferElements(), 0.0);
    op.forward(at, y);
    return y;
  };
  const Vec y = f(x);
  const Vec dy = testing::Uniform(op.out.BufferElements(), -1, 1, rng);
  Vec dx(op.in.BufferElements(), 0.0);
  op.backward(x, y, dy, dx);
  testing::ExpectGradient(op.name, check, x, f, dy, dx);
}

#define ASSERT_OK(expr)                          \
  do {                                           \
    const absl::Status _s = (expr);              \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s; \
  } while (0)
#define EXPECT_OK(expr)                          \
  do {                                           \
    const absl::Status _s = (expr);              \
    EXPECT_TRUE(_s.ok()) << #expr << ": " << _s; \
  } while (0)

TEST(PrimitivesReferenceTest, ActivationGradients) {
  const std::vector<dnn::ActivationDescriptor> acts = testing::TestActivations();
  std::mt19937 rng(1);
  for (const auto& act : acts) {
    for (Layout layout : kLayouts) {
      const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, layout);
      const int64_t o = t.offset;
      UnaryOp op{absl::StrCat(act.ToString(), " ", testing::LayoutName(layout)), t, t};
      op.forward = [&](const Vec& x, Vec& y) {
        ASSERT_OK(ref::ActivationForward(act, 1, t.desc, x.data() + o, 0, t.desc, y.data() + o));
      };
      op.backward = [&](const Vec& x, const Vec& y, const Vec& dy, Vec& dx) {
        ASSERT_OK(ref::ActivationBackward(act, 1, t.desc, y.data() + o, t.desc, dy.data() + o,
                                          t.desc, x.data() + o, 0, t.desc, dx.data() + o));
      };
      // Inputs at least 0.01 apart and 0.005 away from 0 and from the clipping ceiling 0.4.
      CheckUnary(op, testing::Distinct(t.BufferElements(), 0.01, rng));
    }
  }
}

TEST(PrimitivesReferenceTest, BlendingUsesAlphaBetaAndIgnoresPoisonWhenBetaIsZero) {
  const LaidOut t = testing::MakeLayout(DataType::kF32, {1, 2, 2, 2}, Layout::kPacked);
  const auto relu = *dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu);
  Vec x = {1, -1, 2, -2, 3, -3, 4, -4}, y(8, NAN);
  ASSERT_OK(ref::ActivationForward(relu, 2, t.desc, x.data(), 0, t.desc, y.data()));
  EXPECT_EQ(y, (Vec{2, 0, 4, 0, 6, 0, 8, 0}));
  ASSERT_OK(ref::ActivationForward(relu, 1, t.desc, x.data(), 0.5, t.desc, y.data()));
  EXPECT_EQ(y, (Vec{2, 0, 4, 0, 6, 0, 8, 0}));  // 1 relu + 0.5 (2 relu) = 2 relu
}

TEST(PrimitivesReferenceTest, PReluGradients) {
  std::mt19937 rng(2);
  for (bool shared : {false, true}) {
    const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 3, 3, 4}, Layout::kStrided);
    const TensorDescriptor sd =
        *TensorDescriptor::Create(DataType::kF32, {1, shared ? 1 : 3, 1, 1}, {3, 1, 1, 1});
    Vec x = testing::Distinct(t.BufferElements(), 0.01, rng);
    Vec slope = testing::Uniform(sd.ElementCount(), 0.1, 0.5, rng);
    const Vec dy = testing::Uniform(t.BufferElements(), -1, 1, rng);
    Vec dx(x.size(), 0.0), dslope(slope.size(), 0.0);
    ASSERT_OK(ref::PReluBackward(t.desc, x.data() + 1, t.desc, dy.data() + 1, sd, slope.data(), 1,
                                 0, t.desc, dx.data() + 1, 1, 0, dslope.data()));
    auto through_x = [&](const Vec& at) {
      Vec y(at.size(), 0.0);
      EXPECT_OK(
          ref::PReluForward(t.desc, at.data() + 1, sd, slope.data(), 1, 0, t.desc, y.data() + 1));
      return y;
    };
    auto through_slope = [&](const Vec& s) {
      Vec y(x.size(), 0.0);
      EXPECT_OK(ref::PReluForward(t.desc, x.data() + 1, sd, s.data(), 1, 0, t.desc, y.data() + 1));
      return y;
    };
    testing::ExpectGradient("prelu dx", {}, x, through_x, dy, dx);
    testing::ExpectGradient("prelu dslope", {}, slope, through_slope, dy, dslope);
  }
}

TEST(PrimitivesReferenceTest, PoolingGradients) {
  using P = dnn::PoolingMode;
  struct Case {
    std::vector<int64_t> dims, window, pads, strides;
    dnn::PoolingRounding rounding;
    bool global;
  };
  const Case cases[] = {
      {{2, 3, 7, 6}, {3, 3}, {0, 0}, {2, 2}, dnn::PoolingRounding::kFloor, false},
      {{1, 2, 7, 8}, {3, 2}, {1, 1}, {2, 3}, dnn::PoolingRounding::kCeil, false},
      {{2, 2, 5, 5}, {2, 2}, {1, 0}, {1, 1}, dnn::PoolingRounding::kCeil, false},
      {{1, 2, 4, 5, 6}, {2, 3, 2}, {1, 1, 0}, {2, 2, 2}, dnn::PoolingRounding::kFloor, false},
      {{2, 3, 4, 5}, {1, 1}, {0, 0}, {1, 1}, dnn::PoolingRounding::kFloor, true},
  };
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    for (P mode : {P::kMax, P::kAverageIncludePadding, P::kAverageExcludePadding}) {
      for (Layout layout : kLayouts) {
        dnn::PoolingDescriptor pool =
            c.global
                ? dnn::PoolingDescriptor::Global(mode, static_cast<int>(c.window.size()))
                : *dnn::PoolingDescriptor::Create(mode, c.window, c.pads, c.strides, c.rounding);
        const LaidOut in = testing::MakeLayout(DataType::kF32, c.dims, layout);
        const LaidOut out =
            testing::MakeLayout(DataType::kF32, *dnn::PoolingOutputDims(pool, in.desc), layout);
        UnaryOp op{absl::StrCat("pool ", pool.ToString(), " ", testing::LayoutName(layout)), in,
                   out};
        op.forward = [&](const Vec& x, Vec& y) {
          ASSERT_OK(ref::PoolingForward(pool, 1, in.desc, x.data() + in.offset, 0, out.desc,
                                        y.data() + out.offset));
        };
        op.backward = [&](const Vec& x, const Vec& y, const Vec& dy, Vec& dx) {
          ASSERT_OK(ref::PoolingBackward(pool, 1, out.desc, y.data() + out.offset, out.desc,
                                         dy.data() + out.offset, in.desc, x.data() + in.offset, 0,
                                         in.desc, dx.data() + in.offset));
        };
        CheckUnary(op, testing::Distinct(in.BufferElements(), 0.01, rng));
      }
    }
  }
}

TEST(PrimitivesReferenceTest, PoolingFollowsCaffeRounding) {
  const TensorDescriptor x =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 6, 6});
  auto dims = [&](dnn::PoolingRounding r, int64_t pad) {
    return *dnn::PoolingOutputDims(
        *dnn::PoolingDescriptor::Create(dnn::PoolingMode::kMax, {3, 3}, {pad, pad}, {2, 2}, r), x);
  };
  // (6 - 3) / 2: floor 1 + 1 = 2, ceil 2 + 1 = 3.
  EXPECT_EQ(dims(dnn::PoolingRounding::kFloor, 0), (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(dims(dnn::PoolingRounding::kCeil, 0), (std::vector<int64_t>{1, 1, 3, 3}));
  // With pad 1: ceil((6 + 2 - 3) / 2) + 1 = 4, and the 4th window starts at 6 - 1 + ... = 5 < 7.
  EXPECT_EQ(dims(dnn::PoolingRounding::kCeil, 1), (std::vector<int64_t>{1, 1, 4, 4}));
  // Caffe's clip: in 5, pad 1, window 2, stride 2 -> ceil(5/2)+1 = 4, but window 4 would start at
  // 6 - 1 = 5 >= in 5 + ... no: (4-1)*2 = 6 >= 5 + 1, so 3.
  const TensorDescriptor x5 =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 5, 5});
  EXPECT_EQ(*dnn::PoolingOutputDims(
                *dnn::PoolingDescriptor::Create(dnn::PoolingMode::kMax, {2, 2}, {1, 1}, {2, 2},
                                                dnn::PoolingRounding::kCeil),
                x5),
            (std::vector<int64_t>{1, 1, 3, 3}));
  // Average including padding divides by the window clipped to the padded input: a 3x3 window at
  // the corner with pad 1 covers 4 inputs and 9 padded positions.
  Vec ones(36, 1.0), y(16, 0.0);
  const auto avg = *dnn::PoolingDescriptor::Create(dnn::PoolingMode::kAverageIncludePadding, {3, 3},
                                                   {1, 1}, {2, 2}, dnn::PoolingRounding::kCeil);
  const TensorDescriptor yd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 4, 4});
  ASSERT_OK(ref::PoolingForward(avg, 1, x, ones.data(), 0, yd, y.data()));
  EXPECT_DOUBLE_EQ(y[0], 4.0 / 9.0);
  // The last window starts at 5 and is clipped to [5, 7): 1 input of 2 padded rows/cols.
  EXPECT_DOUBLE_EQ(y[15], 1.0 / 4.0);
}

TEST(PrimitivesReferenceTest, LrnGradients) {
  std::mt19937 rng(4);
  const dnn::LrnDescriptor lrns[] = {
      *dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 5, 0.3, 0.75, 2.0),
      *dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 3, 1.5, 0.6, 1.0),
      *dnn::LrnDescriptor::Create(dnn::LrnMode::kWithinChannel, 3, 0.8, 0.75, 1.0),
  };
  for (const auto& lrn : lrns) {
    for (Layout layout : kLayouts) {
      const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 7, 3, 4}, layout);
      const int64_t o = t.offset;
      UnaryOp op{absl::StrCat("lrn ", lrn.ToString(), " ", testing::LayoutName(layout)), t, t};
      op.forward = [&](const Vec& x, Vec& y) {
        ASSERT_OK(ref::LrnForward(lrn, 1, t.desc, x.data() + o, 0, t.desc, y.data() + o));
      };
      op.backward = [&](const Vec& x, const Vec& y, const Vec& dy, Vec& dx) {
        ASSERT_OK(ref::LrnBackward(lrn, 1, t.desc, y.data() + o, t.desc, dy.data() + o, t.desc,
                                   x.data() + o, 0, t.desc, dx.data() + o));
      };
      CheckUnary(op, testing::Uniform(t.BufferElements(), -2, 2, rng));
    }
  }
}

TEST(PrimitivesReferenceTest, BatchNormGradients) {
  std::mt19937 rng(5);
  for (auto mode : {dnn::BatchNormMode::kSpatial, dnn::BatchNormMode::kPerActivation}) {
    for (Layout layout : kLayouts) {
      const LaidOut t = testing::MakeLayout(DataType::kF32, {3, 4, 2, 3}, layout);
      std::vector<int64_t> pdims = {1, 4, 1, 1};
      if (mode == dnn::BatchNormMode::kPerActivation) pdims = {1, 4, 2, 3};
      const TensorDescriptor pd =
          *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, pdims);
      const int64_t o = t.offset, features = pd.ElementCount();
      Vec x = testing::Uniform(t.BufferElements(), -2, 2, rng);
      Vec scale = testing::Uniform(features, 0.5, 1.5, rng);
      Vec bias = testing::Uniform(features, -1, 1, rng);
      const Vec dy = testing::Uniform(t.BufferElements(), -1, 1, rng);
      for (bool relu : {false, true}) {
        dnn::BatchNormTraining bn;
        bn.mode = mode;
        bn.epsilon = 1e-3;
        if (relu) {
          // The fused ReLU: forward max(0, .), backward through its derivative read from y.
          bn.ops = dnn::BatchNormOps::kBatchNormActivation;
          bn.activation = *dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu);
        }
        auto forward = [&](const Vec& at, const Vec& s, const Vec& b) {
          Vec y(at.size(), 0.0);
          EXPECT_OK(ref::BatchNormForwardTraining(bn, 1, 0, t.desc, at.data() + o, t.desc,
                                                  y.data() + o, pd, s.data(), b.data(), nullptr,
                                                  nullptr, nullptr, nullptr, nullptr));
          return y;
        };
        Vec save_mean(features), save_inv_std(features);
        Vec y(x.size(), 0.0);
        ASSERT_OK(ref::BatchNormForwardTraining(
            bn, 1, 0, t.desc, x.data() + o, t.desc, y.data() + o, pd, scale.data(), bias.data(),
            nullptr, nullptr, nullptr, save_mean.data(), save_inv_std.data()));
        for (bool saved : {true, false}) {
          Vec dx(x.size(), 0.0), dscale(features, 0.0), dbias(features, 0.0);
          ASSERT_OK(ref::BatchNormBackward(
              bn, 1, 0, 1, 0, t.desc, x.data() + o, t.desc, y.data() + o, t.desc, dy.data() + o,
              t.desc, dx.data() + o, pd, scale.data(), dscale.data(), dbias.data(),
              saved ? save_mean.data() : nullptr, saved ? save_inv_std.data() : nullptr));
          const std::string what =
              absl::StrCat("batch norm ", static_cast<int>(mode), " ", testing::LayoutName(layout),
                           saved ? " saved" : "", relu ? " relu" : "");
          testing::ExpectGradient(
              what + " dx", {}, x, [&](const Vec& at) { return forward(at, scale, bias); }, dy, dx);
          testing::ExpectGradient(
              what + " dscale", {}, scale, [&](const Vec& s) { return forward(x, s, bias); }, dy,
              dscale);
          testing::ExpectGradient(
              what + " dbias", {}, bias, [&](const Vec& b) { return forward(x, scale, b); }, dy,
              dbias);
        }
      }
    }
  }
}

TEST(PrimitivesReferenceTest, BatchNormRunningStatisticsFollowCudnnAndCaffe) {
  const TensorDescriptor xd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {2, 1, 1, 2});
  const TensorDescriptor pd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 1, 1});
  const Vec x = {1, 2, 3, 6};  // mean 3, biased var 3.5, unbiased 14/3
  Vec y(4), scale = {1}, bias = {0};
  dnn::BatchNormTraining bn;
  bn.factor = 0.25;
  Vec rm = {1}, rv = {2}, caffe_factor = {0};
  ASSERT_OK(ref::BatchNormForwardTraining(bn, 1, 0, xd, x.data(), xd, y.data(), pd, scale.data(),
                                          bias.data(), rm.data(), rv.data(), nullptr, nullptr,
                                          nullptr));
  EXPECT_DOUBLE_EQ(rm[0], 0.75 * 1 + 0.25 * 3);
  EXPECT_DOUBLE_EQ(rv[0], 0.75 * 2 + 0.25 * 14.0 / 3.0);
  EXPECT_NEAR(y[0], (1 - 3) / std::sqrt(3.5 + bn.epsilon), 1e-12);

  bn.rule = dnn::RunningStatsRule::kCaffeSum;
  bn.factor = 0.999;  // moving_average_fraction
  rm = {0};
  rv = {0};
  for (int step = 0; step < 2; ++step) {
    ASSERT_OK(ref::BatchNormForwardTraining(bn, 1, 0, xd, x.data(), xd, y.data(), pd, scale.data(),
                                            bias.data(), rm.data(), rv.data(), caffe_factor.data(),
                                            nullptr, nullptr));
  }
  EXPECT_DOUBLE_EQ(caffe_factor[0], 0.999 + 1);
  EXPECT_DOUBLE_EQ(rm[0], 0.999 * 3 + 3);
  EXPECT_DOUBLE_EQ(rv[0], 0.999 * 14.0 / 3.0 + 14.0 / 3.0);
  // Inference divides Caffe's sums by the factor: mean 3, var 14/3.
  ASSERT_OK(ref::BatchNormForwardInference(dnn::BatchNormMode::kSpatial, 1, 0, xd, x.data(), xd,
                                           y.data(), pd, scale.data(), bias.data(), rm.data(),
                                           rv.data(), 1e-5, caffe_factor.data()));
  EXPECT_NEAR(y[3], (6 - 3) / std::sqrt(14.0 / 3.0 + 1e-5), 1e-12);
  // Caffe refuses the sum rule without its scale-factor blob.
  EXPECT_FALSE(ref::BatchNormForwardTraining(bn, 1, 0, xd, x.data(), xd, y.data(), pd, scale.data(),
                                             bias.data(), rm.data(), rv.data(), nullptr, nullptr,
                                             nullptr)
                   .ok());
}

TEST(PrimitivesReferenceTest, SoftmaxGradients) {
  std::mt19937 rng(6);
  for (auto algo : {dnn::SoftmaxAlgorithm::kAccurate, dnn::SoftmaxAlgorithm::kLog}) {
    for (auto softmax :
         {dnn::SoftmaxDescriptor::Channel(algo), dnn::SoftmaxDescriptor::Instance(algo, 4),
          dnn::SoftmaxDescriptor::Axis(algo, 3)}) {
      for (Layout layout : kLayouts) {
        const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 5, 3, 4}, layout);
        const int64_t o = t.offset;
        UnaryOp op{absl::StrCat("softmax ", static_cast<int>(algo), " axes ", softmax.first_axis,
                                "-", softmax.last_axis, " ", testing::LayoutName(layout)),
                   t, t};
        op.forward = [&](const Vec& x, Vec& y) {
          ASSERT_OK(ref::SoftmaxForward(softmax, 1, t.desc, x.data() + o, 0, t.desc, y.data() + o));
        };
        op.backward = [&](const Vec&, const Vec& y, const Vec& dy, Vec& dx) {
          ASSERT_OK(ref::SoftmaxBackward(softmax, 1, t.desc, y.data() + o, t.desc, dy.data() + o, 0,
                                         t.desc, dx.data() + o));
        };
        CheckUnary(op, testing::Uniform(t.BufferElements(), -3, 3, rng));
      }
    }
  }
}

TEST(PrimitivesReferenceTest, SoftmaxLossGradientAndNormalization) {
  std::mt19937 rng(8);
  using N = dnn::LossNormalization;
  for (N norm : {N::kFull, N::kValid, N::kBatchSize, N::kNone}) {
    for (Layout layout : kLayouts) {
      const LaidOut t = testing::MakeLayout(DataType::kF32, {3, 4, 2, 2}, layout);
      const TensorDescriptor ld =
          *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {3, 1, 2, 2});
      dnn::SoftmaxLossDescriptor loss;
      loss.normalization = norm;
      loss.has_ignore_label = true;
      loss.ignore_label = 2;
      loss.loss_weight = 1.5;
      Vec labels(12);
      for (int i = 0; i < 12; ++i) labels[i] = (i * 5) % 4;  // includes 2 (ignored)
      const int64_t o = t.offset;
      const Vec x = testing::Uniform(t.BufferElements(), -2, 2, rng);
      auto f = [&](const Vec& at) {
        Vec prob(at.size(), 0.0), l(1);
        EXPECT_OK(ref::SoftmaxLossForward(loss, t.desc, at.data() + o, ld, labels.data(), t.desc,
                                          prob.data() + o, l.data()));
        return l;
      };
      Vec prob(x.size(), 0.0), l(1), dx(x.size(), 0.0);
      ASSERT_OK(ref::SoftmaxLossForward(loss, t.desc, x.data() + o, ld, labels.data(), t.desc,
                                        prob.data() + o, l.data()));
      ASSERT_OK(ref::SoftmaxLossBackward(loss, t.desc, prob.data() + o, ld, labels.data(), 1, 0,
                                         t.desc, dx.data() + o));
      testing::ExpectGradient(absl::StrCat("softmax loss norm ", static_cast<int>(norm), " ",
                                           testing::LayoutName(layout)),
                              {}, x, f, {loss.loss_weight}, dx);
    }
  }
  // A label outside [0, C) that is not ignored is refused, naming the label.
  const TensorDescriptor xd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 3, 1, 1});
  const TensorDescriptor ld =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 1, 1});
  Vec x = {1, 2, 3}, prob(3), l(1), bad = {3};
  const absl::Status s =
      ref::SoftmaxLossForward({}, xd, x.data(), ld, bad.data(), xd, prob.data(), l.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("label 3"), std::string::npos) << s;
}

TEST(PrimitivesReferenceTest, DropoutMaskIsLayoutIndependentAndScales) {
  const auto dropout = *dnn::DropoutDescriptor::Create(0.3, 1234);
  std::mt19937 rng(9);
  const std::vector<int64_t> dims = {4, 8, 9, 10};
  const LaidOut a = testing::MakeLayout(DataType::kF32, dims, Layout::kPacked);
  const LaidOut b = testing::MakeLayout(DataType::kF32, dims, Layout::kChannelsLast);
  Vec ones(a.BufferElements(), 1.0), ya(a.BufferElements()), yb(b.BufferElements());
  ASSERT_OK(ref::DropoutForward(dropout, 1, a.desc, ones.data(), 0, a.desc, ya.data()));
  ASSERT_OK(ref::DropoutForward(dropout, 1, b.desc, ones.data(), 0, b.desc, yb.data()));
  Vec back(a.BufferElements());  // channels-last result read back in packed order
  ASSERT_OK(ref::TransformTensor(1, b.desc, yb.data(), 0, a.desc, back.data()));
  EXPECT_EQ(ya, back);
  int64_t kept = 0;
  for (double v : ya) {
    EXPECT_TRUE(v == 0 || std::fabs(v - 1 / 0.7) < 1e-6) << v;
    kept += v != 0;
  }
  const double fraction = static_cast<double>(kept) / ya.size();
  EXPECT_NEAR(fraction, 0.7, 0.03);
  // Dropout is linear in x, so backward is forward applied to dy: check it by differences.
  const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, Layout::kStrided);
  UnaryOp op{"dropout", t, t};
  op.forward = [&](const Vec& x, Vec& y) {
    ASSERT_OK(ref::DropoutForward(dropout, 1, t.desc, x.data() + 1, 0, t.desc, y.data() + 1));
  };
  op.backward = [&](const Vec&, const Vec&, const Vec& dy, Vec& dx) {
    ASSERT_OK(ref::DropoutForward(dropout, 1, t.desc, dy.data() + 1, 0, t.desc, dx.data() + 1));
  };
  CheckUnary(op, testing::Uniform(t.BufferElements(), -1, 1, rng));
}

TEST(PrimitivesReferenceTest, TensorOpsAndTheirAdjoints) {
  std::mt19937 rng(10);
  const LaidOut y = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, Layout::kStrided);
  for (std::vector<int64_t> bdims :
       std::vector<std::vector<int64_t>>{{1, 3, 1, 1}, {2, 1, 4, 1}, {1, 1, 1, 1}, {2, 3, 4, 5}}) {
    const LaidOut b = testing::MakeLayout(DataType::kF32, bdims, Layout::kChannelsLast);
    Vec bv = testing::Uniform(b.BufferElements(), -1, 1, rng);
    const Vec dy = testing::Uniform(y.BufferElements(), -1, 1, rng);
    Vec db(b.BufferElements(), 0.0);
    ASSERT_OK(ref::ReduceTensorSum(1, y.desc, dy.data() + 1, 0, b.desc, db.data() + b.offset));
    testing::ExpectGradient(
        absl::StrCat("add tensor b ", b.desc.ToString()), {}, bv,
        [&](const Vec& at) {
          Vec out(y.BufferElements(), 0.0);
          EXPECT_OK(ref::AddTensor(1, b.desc, at.data() + b.offset, 0, y.desc, out.data() + 1));
          return out;
        },
        dy, db);
  }
  // Transform between layouts keeps every logical element; scale multiplies.
  const LaidOut nhwc = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, Layout::kChannelsLast);
  const Vec x = testing::Uniform(y.BufferElements(), -1, 1, rng);
  Vec t1(nhwc.BufferElements()), t2(y.BufferElements(), 0.0);
  ASSERT_OK(ref::TransformTensor(1, y.desc, x.data() + 1, 0, nhwc.desc, t1.data()));
  ASSERT_OK(ref::ScaleTensor(nhwc.desc, t1.data(), 2));
  ASSERT_OK(ref::TransformTensor(0.5, nhwc.desc, t1.data(), 0, y.desc, t2.data() + 1));
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t c = 0; c < 3; ++c) {
      const int64_t off = 1 + n * y.desc.strides[0] + c * y.desc.strides[1] +
                          3 * y.desc.strides[2] + 4 * y.desc.strides[3];
      EXPECT_DOUBLE_EQ(t2[off], x[off]);
    }
  }
  // SliceAlong addresses the part of a tensor a concat writes.
  const dnn::SubTensor part = dnn::SliceAlong(y.desc, 1, 1, 2);
  EXPECT_EQ(part.desc.dims, (std::vector<int64_t>{2, 2, 4, 5}));
  EXPECT_EQ(part.offset, y.desc.strides[1]);
}

TEST(PrimitivesReferenceTest, EltwiseGradients) {
  std::mt19937 rng(11);
  for (auto op : {dnn::EltwiseOp::kSum, dnn::EltwiseOp::kProd, dnn::EltwiseOp::kMax}) {
    const LaidOut a = testing::MakeLayout(DataType::kF32, {2, 3, 2, 3}, Layout::kPacked);
    const LaidOut b = testing::MakeLayout(DataType::kF32, {2, 3, 2, 3}, Layout::kStrided);
    const LaidOut c = testing::MakeLayout(DataType::kF32, {2, 3, 2, 3}, Layout::kChannelsLast);
    const std::vector<TensorDescriptor> xds = {a.desc, b.desc, c.desc};
    const std::vector<double> coefficients =
        op == dnn::EltwiseOp::kSum ? std::vector<double>{0.5, -2, 1.5} : std::vector<double>{};
    // One pool of distinct values shared by the inputs, so max has a unique winner.
    const Vec pool =
        testing::Distinct(a.BufferElements() + b.BufferElements() + c.BufferElements(), 0.01, rng);
    std::vector<Vec> xs = {Vec(pool.begin(), pool.begin() + a.BufferElements()),
                           Vec(pool.begin() + a.BufferElements(),
                               pool.begin() + a.BufferElements() + b.BufferElements()),
                           Vec(pool.end() - c.BufferElements(), pool.end())};
    for (Vec& v : xs) {
      for (double& e : v) e *= 40;  // values up to ~2 so products have useful gradients
    }
    const LaidOut& yl = a;
    const Vec dy = testing::Uniform(yl.BufferElements(), -1, 1, rng);
    const int64_t offsets[] = {a.offset, b.offset, c.offset};
    auto pointers = [&](const std::vector<Vec>& v) {
      std::vector<const double*> p;
      for (int i = 0; i < 3; ++i) p.push_back(v[i].data() + offsets[i]);
      return p;
    };
    for (int which = 0; which < 3; ++which) {
      Vec dx(xs[which].size(), 0.0);
      ASSERT_OK(ref::EltwiseBackward(op, coefficients, which, 1, xds, pointers(xs), yl.desc,
                                     dy.data(), 0, xds[which], dx.data() + offsets[which]));
      testing::ExpectGradient(
          absl::StrCat("eltwise ", static_cast<int>(op), " input ", which), {}, xs[which],
          [&](const Vec& at) {
            std::vector<Vec> v = xs;
            v[which] = at;
            Vec y(yl.BufferElements(), 0.0);
            EXPECT_OK(
                ref::EltwiseForward(op, coefficients, 1, xds, pointers(v), 0, yl.desc, y.data()));
            return y;
          },
          dy, dx);
    }
  }
}

TEST(PrimitivesReferenceTest, InnerProductGradients) {
  std::mt19937 rng(12);
  for (bool transposed : {false, true}) {
    const LaidOut x = testing::MakeLayout(DataType::kF32, {3, 2, 2, 2}, Layout::kPacked);
    const int64_t k = 8, n = 5;
    const TensorDescriptor wd = *TensorDescriptor::CreatePacked(
        DataType::kF32, dnn::TensorFormat::kNCHW,
        transposed ? std::vector<int64_t>{k, n} : std::vector<int64_t>{n, k});
    const TensorDescriptor yd =
        *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {3, n});
    Vec xv = testing::Uniform(x.BufferElements(), -1, 1, rng);
    Vec w = testing::Uniform(n * k, -1, 1, rng), bias = testing::Uniform(n, -1, 1, rng);
    const Vec dy = testing::Uniform(3 * n, -1, 1, rng);
    auto f = [&](const Vec& xa, const Vec& wa, const Vec& ba) {
      Vec y(3 * n, 0.0);
      EXPECT_OK(ref::InnerProductForward(1, transposed, 1, x.desc, xa.data(), wd, wa.data(),
                                         ba.data(), 0, yd, y.data()));
      return y;
    };
    Vec dx(xv.size(), 0.0), dw(w.size(), 0.0), db(n, 0.0);
    ASSERT_OK(ref::InnerProductBackwardData(1, transposed, 1, yd, dy.data(), wd, w.data(), 0,
                                            x.desc, dx.data()));
    ASSERT_OK(ref::InnerProductBackwardFilter(1, transposed, 1, x.desc, xv.data(), yd, dy.data(), 0,
                                              wd, dw.data()));
    const TensorDescriptor bd =
        *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, n});
    ASSERT_OK(ref::ReduceTensorSum(1, yd, dy.data(), 0, bd, db.data()));
    testing::ExpectGradient(
        "ip dx", {}, xv, [&](const Vec& a) { return f(a, w, bias); }, dy, dx);
    testing::ExpectGradient(
        "ip dw", {}, w, [&](const Vec& a) { return f(xv, a, bias); }, dy, dw);
    testing::ExpectGradient(
        "ip db", {}, bias, [&](const Vec& a) { return f(xv, w, a); }, dy, db);
  }
}

TEST(PrimitivesReferenceTest, BadCallsAreRefusedWithTheirReason) {
  auto expect_invalid = [](const absl::Status& s, const std::string& text) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(text), std::string::npos) << s;
  };
  expect_invalid(
      dnn::PoolingDescriptor::Create(dnn::PoolingMode::kMax, {2, 2}, {2, 0}, {1, 1}).status(),
      "pad 0 is 2");
  expect_invalid(dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 4, 1, 1, 1).status(),
                 "size is 4");
  expect_invalid(dnn::DropoutDescriptor::Create(1.0, 0).status(), "ratio is 1");
  expect_invalid(dnn::ActivationDescriptor::Create(dnn::ActivationMode::kClippedRelu, 0).status(),
                 "ceiling");
  const TensorDescriptor a =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 2, 3, 4});
  const TensorDescriptor b =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 2, 3, 5});
  Vec buf(64);
  const auto relu = *dnn::ActivationDescriptor::Create(dnn::ActivationMode::kRelu);
  expect_invalid(ref::ActivationForward(relu, 1, a, buf.data(), 0, b, buf.data()),
                 "ActivationForward: y");
  expect_invalid(ref::SoftmaxForward(dnn::SoftmaxDescriptor::Axis(dnn::SoftmaxAlgorithm::kLog, 4),
                                     1, a, buf.data(), 0, a, buf.data()),
                 "axes [4, 4]");
  const auto pool = *dnn::PoolingDescriptor::Create(dnn::PoolingMode::kMax, {2, 2}, {0, 0}, {2, 2});
  expect_invalid(ref::PoolingForward(pool, 1, a, buf.data(), 0, a, buf.data()), "should have dims");
  expect_invalid(dnn::CheckConcat(1, {a, a}, a, "ConcatForward"), "add up to 4");
  expect_invalid(dnn::CheckEltwise(dnn::EltwiseOp::kMax, {a, a}, {1, 2}, a, "EltwiseForward"),
                 "coefficients");
  expect_invalid(dnn::CheckBatchNormParam(dnn::BatchNormMode::kSpatial, a, a, "BatchNorm"),
                 "should be f32 with dims [1,2,1,1]");
  expect_invalid(TensorDescriptor::Create(DataType::kF32, {1, 2, 3, 4, 5, 6, 7, 8, 9},
                                          std::vector<int64_t>(9, 1))
                     .status(),
                 "rank 9");
}

}  // namespace
}  // namespace kiln
