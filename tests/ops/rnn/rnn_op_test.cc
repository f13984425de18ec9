// The RNN op's bidirectional layer against its definition in one-direction nodes, on the
// reference and CPU backends: the forward half of y and of the states is the one-direction node
// with the forward weights; the reverse half is the one-direction node with the reverse weights
// run over the sequence reversed in time, its y reversed back (PyTorch's bidirectional layer).
// Also the refusals of a bidirectional node's malformed inputs.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace testing {
namespace {

constexpr int64_t kT = 5, kN = 3, kI = 4, kH = 3, kGH = 4 * kH;

// x [T, N, F] with its time steps in the reverse order.
HostTensor ReversedInTime(const HostTensor& x) {
  HostTensor out(x.type());
  const int64_t step = x.type().num_elements() / x.type().dim(0);
  for (int64_t t = 0; t < x.type().dim(0); ++t) {
    for (int64_t i = 0; i < step; ++i) {
      out.SetFloat(t * step + i, x.GetFloat((x.type().dim(0) - 1 - t) * step + i));
    }
  }
  return out;
}

AttrMap Lstm(bool bidirectional) {
  return {{"cell", AttrValue(std::string("lstm"))},
          {"hidden_size", AttrValue(kH)},
          {"bias", AttrValue(std::string("double"))},
          {"has_initial_state", AttrValue(true)},
          {"bidirectional", AttrValue(bidirectional)}};
}

TEST(RnnOpTest, BidirectionalIsTheForwardAndTheTimeReversedDirections) {
  std::vector<HostTensor> w;  // forward w_ih, w_hh, b_ih, b_hh, then the reverse's
  uint32_t seed = 20;
  for (int d = 0; d < 2; ++d) {
    for (const std::vector<int64_t>& dims :
         std::vector<std::vector<int64_t>>{{kGH, kI}, {kGH, kH}, {kGH}, {kGH}}) {
      w.push_back(RandomTensor(F32(dims), seed++, -0.6f, 0.6f));
    }
  }
  const HostTensor x = RandomTensor(F32({kT, kN, kI}), 1);
  const HostTensor h0 = RandomTensor(F32({2, kN, kH}), 2), c0 = RandomTensor(F32({2, kN, kH}), 3);
  // One direction's initial state: row d of the [2, N, H] state.
  auto half = [](const HostTensor& s, int d) {
    HostTensor out(F32({kN, kH}));
    for (int64_t i = 0; i < kN * kH; ++i) out.SetFloat(i, s.GetFloat(d * kN * kH + i));
    return out;
  };
  for (BackendChoice backend : {BackendChoice::kReference, BackendChoice::kCpu}) {
    SCOPED_TRACE(backend == BackendChoice::kCpu ? "cpu" : "reference");
    auto both = RunOp("RNN", {x, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], h0, c0},
                      Lstm(true), backend);
    ASSERT_TRUE(both.ok()) << both.status();
    ASSERT_EQ((*both)[0].type().dims(), (std::vector<int64_t>{kT, kN, 2 * kH}));
    ASSERT_EQ((*both)[1].type().dims(), (std::vector<int64_t>{2, kN, kH}));
    auto fwd =
        RunOp("RNN", {x, w[0], w[1], w[2], w[3], half(h0, 0), half(c0, 0)}, Lstm(false), backend);
    auto rev = RunOp("RNN", {ReversedInTime(x), w[4], w[5], w[6], w[7], half(h0, 1), half(c0, 1)},
                     Lstm(false), backend);
    ASSERT_TRUE(fwd.ok() && rev.ok());
    const HostTensor rev_y = ReversedInTime((*rev)[0]);
    float worst = 0;
    for (int64_t t = 0; t < kT; ++t) {
      for (int64_t n = 0; n < kN; ++n) {
        for (int64_t j = 0; j < kH; ++j) {
          const int64_t at = (t * kN + n) * 2 * kH + j, one = (t * kN + n) * kH + j;
          worst = std::max(worst, std::fabs((*both)[0].GetFloat(at) - (*fwd)[0].GetFloat(one)));
          worst = std::max(worst, std::fabs((*both)[0].GetFloat(at + kH) - rev_y.GetFloat(one)));
        }
      }
    }
    for (int out = 1; out <= 2; ++out) {  // h_T, c_T: the forward's row, then the reverse's
      for (int64_t i = 0; i < kN * kH; ++i) {
        worst = std::max(worst, std::fabs((*both)[out].GetFloat(i) - (*fwd)[out].GetFloat(i)));
        worst = std::max(worst,
                         std::fabs((*both)[out].GetFloat(kN * kH + i) - (*rev)[out].GetFloat(i)));
      }
    }
    EXPECT_LT(worst, 1e-6);
  }
}

TEST(RnnOpTest, MalformedBidirectionalNodesAreRefused) {
  const HostTensor x = RandomTensor(F32({kT, kN, kI}), 1);
  const HostTensor w_ih = RandomTensor(F32({kGH, kI}), 2), w_hh = RandomTensor(F32({kGH, kH}), 3);
  const HostTensor b = RandomTensor(F32({kGH}), 4);
  AttrMap attrs = Lstm(true);
  attrs["has_initial_state"] = AttrValue(false);
  // The reverse direction's weights missing.
  EXPECT_FALSE(RunOp("RNN", {x, w_ih, w_hh, b, b}, attrs, BackendChoice::kReference).ok());
  // Its w_hh of the forward's w_ih shape.
  auto wrong =
      RunOp("RNN", {x, w_ih, w_hh, b, b, w_ih, w_ih, b, b}, attrs, BackendChoice::kReference);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("w_hh_r"), std::string::npos) << wrong.status();
  // cont with both directions.
  attrs["has_cont"] = AttrValue(true);
  auto cont = RunOp("RNN", {x, w_ih, w_hh, b, b, w_ih, w_hh, b, b, RandomTensor(F32({kT, kN}), 5)},
                    attrs, BackendChoice::kReference);
  ASSERT_FALSE(cont.ok());
  EXPECT_NE(cont.status().message().find("cont"), std::string::npos) << cont.status();
}

}  // namespace
}  // namespace testing
}  // namespace kiln
