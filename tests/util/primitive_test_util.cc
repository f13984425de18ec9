#include "tests/util/primitive_test_util.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kiln {
namespace testing {

const char* LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kPacked:
      return "packed";
    case Layout::kChannelsLast:
      return "channels_last";
    case Layout::kStrided:
      return "strided";
  }
  return "?";
}

LaidOut MakeLayout(DataType dtype, const std::vector<int64_t>& dims, Layout layout) {
  const int rank = static_cast<int>(dims.size());
  std::vector<int> order(rank);  // dims from outermost to innermost in memory
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> extent = dims;
  LaidOut out;
  if (layout == Layout::kChannelsLast && rank >= 3) {
    order.erase(order.begin() + 1);
    order.push_back(1);
  } else if (layout == Layout::kStrided && rank >= 2) {
    std::swap(order[0], order[1]);
    for (int64_t& e : extent) ++e;
    out.offset = 1;
  }
  std::vector<int64_t> strides(rank);
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[order[i]] = s;
    s *= extent[order[i]];
  }
  absl::StatusOr<dnn::TensorDescriptor> d = dnn::TensorDescriptor::Create(dtype, dims, strides);
  EXPECT_TRUE(d.ok()) << d.status();
  out.desc = *d;
  return out;
}

std::vector<dnn::ActivationDescriptor> TestActivations() {
  using M = dnn::ActivationMode;
  return {*dnn::ActivationDescriptor::Create(M::kRelu),
          *dnn::ActivationDescriptor::Create(M::kRelu, 0.1),
          *dnn::ActivationDescriptor::Create(M::kClippedRelu, 0.4),
          *dnn::ActivationDescriptor::Create(M::kSigmoid),
          *dnn::ActivationDescriptor::Create(M::kTanh),
          *dnn::ActivationDescriptor::Create(M::kElu, 0.7),
          *dnn::ActivationDescriptor::Create(M::kAbs),
          *dnn::ActivationDescriptor::Create(M::kIdentity),
          *dnn::ActivationDescriptor::CreatePower(2.5, 0.5, 2.0)};
}

std::vector<double> Uniform(int64_t count, double lo, double hi, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(count);
  for (double& e : v) e = dist(rng);
  return v;
}

std::vector<double> Distinct(int64_t count, double gap, std::mt19937& rng) {
  std::vector<double> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = (static_cast<double>(i) - count / 2) * gap + gap / 2;
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

int64_t ExpectGradient(const std::string& what, const GradientCheck& check, std::vector<double> x,
                       const std::function<std::vector<double>(const std::vector<double>&)>& f,
                       const std::vector<double>& dy, const std::vector<double>& analytic) {
  auto loss = [&](const std::vector<double>& at) {
    const std::vector<double> y = f(at);
    EXPECT_EQ(y.size(), dy.size()) << what;
    double l = 0;
    for (size_t j = 0; j < y.size() && j < dy.size(); ++j) {
      if (dy[j] != 0) l += dy[j] * y[j];
    }
    return l;
  };
  EXPECT_EQ(analytic.size(), x.size()) << what;
  int64_t checked = 0, failures = 0;
  for (size_t i = 0; i < x.size() && i < analytic.size(); ++i) {
    if (check.skip && check.skip(static_cast<int64_t>(i))) continue;
    const double saved = x[i];
    x[i] = saved + check.step;
    const double plus = loss(x);
    x[i] = saved - check.step;
    const double minus = loss(x);
    x[i] = saved;
    const double numeric = (plus - minus) / (2 * check.step);
    const double scale = std::max(std::fabs(numeric), std::fabs(analytic[i]));
    ++checked;
    if (!(std::fabs(numeric - analytic[i]) <= check.atol + check.rtol * scale)) {
      if (++failures <= 5) {
        ADD_FAILURE() << what << ": d/dx[" << i << "] analytic " << analytic[i] << " numeric "
                      << numeric;
      }
    }
  }
  EXPECT_GT(checked, 0) << what << ": nothing checked";
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << checked << " components wrong";
  return checked;
}

}  // namespace testing
}  // namespace kiln
