// Whole networks' training graphs on the CUDA backend against the reference backend: each net of
// whole_nets.h (LeNet, the residual block with and without the BatchNorm fusion, the Caffe
// sequence net with Embed, Tile, LSTM with a static input, RNN, InnerProduct over axis 2 and
// SoftmaxWithLoss with axis and ignore_label, and the CTC head) compiled once for each backend
// from the same import, run on the same inputs and parameters, and the loss and every
// parameter's and input's gradient compared. The reference plan itself is checked against
// finite differences in whole_net_gradient_test.cc, so together the two hold the CUDA backward of
// whole nets to the numerical derivative. Skips without a usable GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/training/whole_nets.h"

namespace kiln {
namespace {

using testing::CheckedNet;
using testing::Prepare;

struct NetCase {
  const char* name;
  const char* text;
  uint64_t seed;
  bool fuse;
};

// The largest |cuda - reference| over the tensor, relative to its largest |reference| (at least
// 1e-3: a gradient near zero everywhere is compared absolutely).
double RelativeGap(const HostTensor& cuda, const HostTensor& ref) {
  double gap = 0, scale = 1e-3;
  for (int64_t i = 0; i < ref.type().num_elements(); ++i) {
    const double r = ref.GetFloat(i), c = cuda.GetFloat(i);
    gap = std::isfinite(c) ? std::max(gap, std::fabs(c - r)) : INFINITY;
    scale = std::max(scale, std::fabs(r));
  }
  return gap / scale;
}

TEST(WholeNetCuda, EveryNetsLossAndGradientsAgreeWithTheReference) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  const NetCase cases[] = {{"lenet", testing::kLenet, 7, false},
                           {"residual", testing::kResidual, 11, false},
                           {"residual fused", testing::kResidual, 11, true},
                           {"recurrent", testing::kRecurrent, 13, false},
                           {"ctc", testing::kCtc, 17, false}};
  for (const NetCase& c : cases) {
    SCOPED_TRACE(c.name);
    CheckedNet ref, cuda;
    ASSERT_TRUE(Prepare(c.text, c.seed, ref, c.fuse, BackendChoice::kReference).ok());
    const absl::Status prepared = Prepare(c.text, c.seed, cuda, c.fuse, BackendChoice::kCuda);
    ASSERT_TRUE(prepared.ok()) << prepared;
    ASSERT_EQ(ref.bindings.size(), cuda.bindings.size());
    auto want = ref.ctx->Run(ref.bindings);
    ASSERT_TRUE(want.ok()) << want.status();
    // The CUDA run reads the reference's bindings: both see the same numbers by construction.
    auto got = cuda.ctx->Run(ref.bindings);
    ASSERT_TRUE(got.ok()) << got.status();
    double worst = 0;
    int compared = 0;
    for (const auto& [name, tensor] : *want) {
      ASSERT_TRUE(got->count(name)) << "the CUDA plan has no output " << name;
      const HostTensor& other = got->at(name);
      ASSERT_EQ(other.type().dims(), tensor.type().dims()) << name;
      const double gap = RelativeGap(other, tensor);
      // f32 on both sides; the sums run in other orders (GEMMs, reductions over the batch).
      EXPECT_LE(gap, 1e-4) << name;
      worst = std::max(worst, gap);
      ++compared;
    }
    // The loss and the gradient of every checked input are among the outputs compared (beside
    // the net's own loss top and the kink watches), and the gradients are not all zero (a
    // comparison of zeros would prove nothing).
    ASSERT_TRUE(want->count("objective"));
    double largest_gradient = 0;
    for (const std::string& input : ref.checked) {
      ASSERT_TRUE(want->count("grad/" + input)) << input;
      const HostTensor& g = want->at("grad/" + input);
      for (int64_t i = 0; i < g.type().num_elements(); ++i) {
        largest_gradient = std::max(largest_gradient, double{std::fabs(g.GetFloat(i))});
      }
    }
    EXPECT_GT(largest_gradient, 1e-4);
    std::printf("%-15s %2d outputs (loss %.6f), worst relative gap %.2e\n", c.name, compared,
                want->at("objective").GetFloat(0), worst);
  }
}

}  // namespace
}  // namespace kiln
