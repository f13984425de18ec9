// Embed: the reference backend against the table lookup written out here (rows summed in index
// order for the gradient, repeated indices among them), and its refusal of an index that is not
// an integer in [0, V). Part of //tests/kernels:reference_test.
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

TEST(ReferenceEmbedTest, LookupAndRowSums) {
  HostTensor x(F32({2, 3}));
  const float rows[] = {4, 0, 4, 2, 6, 4};  // row 4 three times, rows 1, 3 and 5 never
  for (int i = 0; i < 6; ++i) x.SetFloat(i, rows[i]);
  HostTensor w = RandomTensor(F32({7, 5}), 201);
  HostTensor b = RandomTensor(F32({5}), 202);
  auto out = RunReference("Embed", {x, w, b}, {});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].type().dims(), (std::vector<int64_t>{2, 3, 5}));
  std::vector<double> expected;
  for (float r : rows) {
    for (int j = 0; j < 5; ++j) expected.push_back(double{w.GetFloat(r * 5 + j)} + b.GetFloat(j));
  }
  ExpectClose(out[0], expected);
  HostTensor dy = RandomTensor(F32({2, 3, 5}), 203);
  auto grad = RunReference("EmbedGradient", {x, dy}, {{"weight_dims", std::vector<int64_t>{7, 5}}});
  ASSERT_EQ(grad.size(), 1u);
  std::vector<double> dw(35, 0.0);
  for (int m = 0; m < 6; ++m) {
    for (int j = 0; j < 5; ++j) dw[static_cast<int>(rows[m]) * 5 + j] += dy.GetFloat(m * 5 + j);
  }
  ExpectClose(grad[0], dw);
}

TEST(ReferenceEmbedTest, RefusesIndicesOutsideTheTable) {
  HostTensor w = RandomTensor(F32({4, 3}), 204);
  for (float bad : {4.0f, -1.0f, 1.5f}) {
    HostTensor x(F32({2}));
    x.SetFloat(0, 1);
    x.SetFloat(1, bad);
    auto out = RunOp("Embed", {x, w}, {}, BackendChoice::kReference);
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("element 1"), std::string::npos) << out.status();
  }
}

}  // namespace
}  // namespace testing
}  // namespace kiln
