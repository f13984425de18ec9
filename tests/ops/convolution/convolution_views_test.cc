// CPU checks of the convolution primitives' host side: descriptor validation, the GEMM views
// (each direction computed on the CPU through exactly the gather the CUDA kernels use, compared
// with the reference), and a finite-difference check of the reference backward passes.
// Cases of //tests/kernels:conv_views_test.
#include <cmath>
#include <vector>

#include "dnn/conv_gemm_views.h"
#include "dnn/conv_reference.h"
#include "gtest/gtest.h"
#include "tests/ops/convolution/conv_cases.h"

namespace kiln {
namespace {

using dnn::ConvProblem;
using dnn::GemmView;
using testing::ConvCase;
using testing::ConvTestCases;
using testing::RandomValues;

// out = alpha * (A x B^T through the view) + beta * out, exactly as the kernels define it.
void RunView(const GemmView& v, const float* a, const float* b, float* out, double alpha,
             double beta) {
  for (int64_t g = 0; g < v.groups; ++g)
    for (int64_t m = 0; m < v.m; ++m) {
      const dnn::IndexInfo row_a = dnn::Decode(v.a.outer, m);
      const dnn::IndexInfo row_c = dnn::Decode(v.c.rows, m);
      for (int64_t n = 0; n < v.n; ++n) {
        const dnn::IndexInfo row_b = dnn::Decode(v.b.outer, n);
        double acc = 0;
        for (int64_t k = 0; k < v.k; ++k) {
          int64_t ia, ib;
          if (!dnn::Locate(v.a, row_a, dnn::Decode(v.a.inner, k), &ia)) continue;
          if (!dnn::Locate(v.b, row_b, dnn::Decode(v.b.inner, k), &ib)) continue;
          acc += static_cast<double>(a[ia + g * v.a.group_stride]) * b[ib + g * v.b.group_stride];
        }
        const int64_t o = row_c.offset + dnn::Decode(v.c.cols, n).offset + g * v.c.group_stride;
        out[o] = static_cast<float>(alpha * acc + (beta == 0 ? 0 : beta * out[o]));
      }
    }
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;  // untouched padding of a view
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << what << " at " << i;
  }
}

TEST(ConvViews, EveryDirectionMatchesTheReference) {
  uint32_t seed = 1;
  for (const ConvCase& c : ConvTestCases(DataType::kF32, dnn::MathMode::kFp32)) {
    const ConvProblem& p = c.problem;
    const std::vector<float> x = RandomValues(p.x_span, seed++);
    const std::vector<float> w = RandomValues(p.w_count, seed++);
    const std::vector<float> dy = RandomValues(p.y_span, seed++);
    for (bool inner : {false, true}) {
      const std::string what = c.name + (inner ? " channels innermost" : " channels outermost");
      // Forward, with a random old output for beta.
      std::vector<float> y_old = RandomValues(p.y_span, seed++);
      std::vector<float> want = y_old, got = y_old;
      dnn::ReferenceConvolutionForward(p, x.data(), w.data(), want.data(), c.alpha, c.beta);
      RunView(dnn::ForwardGemmView(p, inner), x.data(), w.data(), got.data(), c.alpha, c.beta);
      ExpectNear(got, want, what + " forward");
      // Backward data.
      std::vector<float> dx_old = RandomValues(p.x_span, seed++);
      want = dx_old;
      got = dx_old;
      dnn::ReferenceConvolutionBackwardData(p, dy.data(), w.data(), want.data(), c.alpha, c.beta);
      RunView(dnn::BackwardDataGemmView(p, inner), dy.data(), w.data(), got.data(), c.alpha,
              c.beta);
      ExpectNear(got, want, what + " backward data");
      // Backward filter.
      std::vector<float> dw_old = RandomValues(p.w_count, seed++);
      want = dw_old;
      got = dw_old;
      dnn::ReferenceConvolutionBackwardFilter(p, x.data(), dy.data(), want.data(), c.alpha, c.beta);
      RunView(dnn::BackwardFilterGemmView(p, inner), dy.data(), x.data(), got.data(), c.alpha,
              c.beta);
      ExpectNear(got, want, what + " backward filter");
    }
  }
}

// L = sum(y * g) with y = conv(x, w) + b; then dL/dx = backward_data(g), dL/dw =
// backward_filter(x, g), dL/db = sum of g. Central differences of the reference forward pass
// must agree with the reference backward passes.
TEST(ConvReference, FiniteDifferenceGradients) {
  uint32_t seed = 100;
  for (const ConvCase& c : ConvTestCases(DataType::kF32, dnn::MathMode::kFp32)) {
    const ConvProblem& p = c.problem;
    std::vector<float> x = RandomValues(p.x_span, seed++);
    std::vector<float> w = RandomValues(p.w_count, seed++);
    const std::vector<float> g = RandomValues(p.y_span, seed++);
    auto loss = [&]() {
      std::vector<float> y(p.y_span, 0.0f);
      dnn::ReferenceConvolutionForward(p, x.data(), w.data(), y.data());
      double l = 0;
      for (int64_t i = 0; i < p.y_span; ++i) l += static_cast<double>(y[i]) * g[i];
      return l;
    };
    std::vector<float> dx(p.x_span, 0.0f), dw(p.w_count, 0.0f), db(p.k, 0.0f);
    dnn::ReferenceConvolutionBackwardData(p, g.data(), w.data(), dx.data());
    dnn::ReferenceConvolutionBackwardFilter(p, x.data(), g.data(), dw.data());
    dnn::ReferenceConvolutionBackwardBias(p, g.data(), db.data());
    const float eps = 1e-2f;
    auto check = [&](std::vector<float>& param, const std::vector<float>& grad, const char* name) {
      for (int64_t i = 0; i < static_cast<int64_t>(param.size()); i += 1 + param.size() / 23) {
        const float saved = param[i];
        param[i] = saved + eps;
        const double up = loss();
        param[i] = saved - eps;
        const double down = loss();
        param[i] = saved;
        const double numeric = (up - down) / (2 * eps);
        EXPECT_NEAR(grad[i], numeric, 2e-3 * (1 + std::fabs(numeric)))
            << c.name << " d" << name << "[" << i << "]";
      }
    };
    check(x, dx, "x");
    check(w, dw, "w");
    // The bias adds db[k] to every y[n, k, ...], so dL/db[k] is the sum of g over those.
    for (int64_t k = 0; k < p.k; ++k) {
      double want = 0;
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t o = 0; o < p.out[0]; ++o)
          for (int64_t h = 0; h < p.out[1]; ++h)
            for (int64_t q = 0; q < p.out[2]; ++q)
              want += g[n * p.y_stride[0] + k * p.y_stride[1] + o * p.y_stride[2] +
                        h * p.y_stride[3] + q * p.y_stride[4]];
      EXPECT_NEAR(db[k], want, 1e-4 * (1 + std::fabs(want))) << c.name << " db[" << k << "]";
    }
  }
}

TEST(ConvDescriptors, RejectBadInputWithTheField) {
  using dnn::ConvolutionDescriptor;
  using dnn::FilterDescriptor;
  using dnn::TensorDescriptor;
  using dnn::TensorFormat;
  // Tensors take rank 1 to 8 (the other primitives use them); a convolution wants rank 4 or 5.
  EXPECT_EQ(TensorDescriptor::CreatePacked(DataType::kF32, TensorFormat::kNCHW,
                                           {1, 2, 3, 1, 1, 1, 1, 1, 1})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      TensorDescriptor::CreatePacked(DataType::kF32, TensorFormat::kNHWC, {1, 2}).status().code(),
      absl::StatusCode::kInvalidArgument);
  {
    const TensorDescriptor x3 =
        *TensorDescriptor::CreatePacked(DataType::kF32, TensorFormat::kNCHW, {1, 2, 3});
    const FilterDescriptor w =
        *FilterDescriptor::Create(DataType::kF32, TensorFormat::kNCHW, {4, 2, 1, 1});
    const ConvolutionDescriptor conv = *ConvolutionDescriptor::Create({0, 0}, {1, 1}, {1, 1});
    EXPECT_EQ(dnn::ConvolutionOutputDims(x3, w, conv).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(TensorDescriptor::Create(DataType::kF32, {1, 2, 3, 4}, {24, 12, -4, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TensorDescriptor::CreatePacked(DataType::kI32, TensorFormat::kNCHW, {1, 2, 3, 4})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConvolutionDescriptor::Create({1, 1}, {0, 1}, {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConvolutionDescriptor::Create({1, 1}, {1, 1}, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto x = *TensorDescriptor::CreatePacked(DataType::kF32, TensorFormat::kNCHW, {2, 6, 10, 10});
  auto w = *FilterDescriptor::Create(DataType::kF32, TensorFormat::kNCHW, {8, 3, 3, 3});
  auto conv = *ConvolutionDescriptor::Create({1, 1}, {2, 2}, {1, 1}, 2);
  auto dims = dnn::ConvolutionOutputDims(x, w, conv);
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(*dims, (std::vector<int64_t>{2, 8, 5, 5}));
  // Channels that do not match the groups, a filter larger than the padded input.
  auto conv1 = *ConvolutionDescriptor::Create({1, 1}, {2, 2}, {1, 1}, 1);
  EXPECT_EQ(dnn::ConvolutionOutputDims(x, w, conv1).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto big = *FilterDescriptor::Create(DataType::kF32, TensorFormat::kNCHW, {8, 3, 13, 3});
  absl::Status s = dnn::ConvolutionOutputDims(x, big, conv).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("spatial dim 0"), std::string::npos) << s;
  // A y that is not the convolution's output.
  auto y = *TensorDescriptor::CreatePacked(DataType::kF32, TensorFormat::kNCHW, {2, 8, 6, 5});
  s = dnn::MakeConvProblem(x, w, conv, y, "ConvolutionForward").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ConvolutionForward"), std::string::npos) << s;
  auto yf16 = *TensorDescriptor::CreatePacked(DataType::kF16, TensorFormat::kNCHW, {2, 8, 5, 5});
  EXPECT_EQ(dnn::MakeConvProblem(x, w, conv, yf16, "f").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConvViews, VectorizationNeedsChannelsLastAndAlignedStrides) {
  for (const ConvCase& c : ConvTestCases(DataType::kF32, dnn::MathMode::kFp32)) {
    if (c.name != "nhwc" && c.name != "basic_3x3" && c.name != "nhwc_odd_c") continue;
    const GemmView v = dnn::ForwardGemmView(c.problem, /*channels_innermost=*/true);
    const bool nhwc16 = c.name == "nhwc";  // C = 16, packed NHWC, KRSC filter
    EXPECT_EQ(dnn::InnerVectorizable(v.a, 4), nhwc16) << c.name;
    EXPECT_EQ(dnn::InnerVectorizable(v.b, 4), nhwc16) << c.name;
    EXPECT_EQ(dnn::InnerIsContiguous(v.a), c.name != "basic_3x3") << c.name;
  }
}

}  // namespace
}  // namespace kiln
