// ArgMax: the reference backend against top-k lists worked out by hand, in both of Caffe's
// forms (an axis, or each item flattened) and with out_max_val; Caffe's tie rule (the higher
// index first), NaN ranking first, and f32 indices from 16-bit scores (2049 has no f16 value).
// Part of //tests/kernels:reference_test.
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "ops/all_ops.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

using Ints = std::vector<int64_t>;

HostTensor Tensor(const Ints& dims, const std::vector<float>& values,
                  DataType dtype = DataType::kF32) {
  HostTensor t(*TensorType::Create(dtype, dims));
  for (size_t i = 0; i < values.size(); ++i) t.SetFloat(static_cast<int64_t>(i), values[i]);
  return t;
}

// Two items of six scores; the ties (1 twice, 7 three times) go to the higher index first.
const std::vector<float> kScores = {3, 1, 4, 1, 5, 9, 2, 7, 7, 0, -1, 7};

TEST(ReferenceArgMaxTest, EachItemFlattened) {
  const HostTensor x = Tensor({2, 3, 2}, kScores);
  auto indices = RunReference("ArgMax", {x}, {{"top_k", int64_t{3}}});
  ASSERT_EQ(indices.size(), 1u);
  EXPECT_EQ(indices[0].type().dims(), (Ints{2, 1, 3}));
  ExpectClose(indices[0], {5, 4, 2, 5, 2, 1});
  auto both = RunReference("ArgMax", {x}, {{"top_k", int64_t{3}}, {"out_max_val", true}});
  ASSERT_EQ(both.size(), 1u);
  EXPECT_EQ(both[0].type().dims(), (Ints{2, 2, 3}));  // indices, then values, per item
  ExpectClose(both[0], {5, 4, 2, 9, 5, 4, 5, 2, 1, 7, 7, 7});
  // Caffe pads the top to x's rank: a 4-d x gives [N, 1, top_k, 1].
  auto four = RunReference("ArgMax", {Tensor({2, 3, 1, 2}, kScores)}, {});
  ASSERT_EQ(four.size(), 1u);
  EXPECT_EQ(four[0].type().dims(), (Ints{2, 1, 1, 1}));
  ExpectClose(four[0], {5, 5});
  // top_k = every element: each item's whole order.
  auto all = RunReference("ArgMax", {x}, {{"top_k", int64_t{6}}});
  ASSERT_EQ(all.size(), 1u);
  ExpectClose(all[0], {5, 4, 2, 0, 3, 1, 5, 2, 1, 0, 3, 4});
}

TEST(ReferenceArgMaxTest, AlongAnAxis) {
  const HostTensor x = Tensor({2, 3, 2}, kScores);
  // Axis 1: columns [3 4 5] [1 1 9] of item 0 and [2 7 -1] [7 0 7] of item 1.
  auto indices = RunReference("ArgMax", {x}, {{"top_k", int64_t{2}}, {"axis", Ints{1}}});
  ASSERT_EQ(indices.size(), 1u);
  EXPECT_EQ(indices[0].type().dims(), (Ints{2, 2, 2}));
  ExpectClose(indices[0], {2, 2, 1, 1, 1, 2, 0, 0});
  auto values = RunReference("ArgMax", {x},
                             {{"top_k", int64_t{2}}, {"axis", Ints{1}}, {"out_max_val", true}});
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].type().dims(), (Ints{2, 2, 2}));
  ExpectClose(values[0], {5, 9, 4, 1, 7, 7, 2, 7});
  // The last axis, counted from the end: each pair of x ranked.
  auto last = RunReference("ArgMax", {x}, {{"top_k", int64_t{2}}, {"axis", Ints{-1}}});
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].type().dims(), (Ints{2, 3, 2}));
  ExpectClose(last[0], {0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0});
}

TEST(ReferenceArgMaxTest, NanRanksFirstAndEqualValuesTakeTheHigherIndex) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const HostTensor x = Tensor({2, 4}, {1, nan, 3, nan, 0.0f, -0.0f, -1, 0.0f});
  auto out = RunReference("ArgMax", {x}, {{"top_k", int64_t{3}}});
  ASSERT_EQ(out.size(), 1u);
  // NaNs first (the higher index first among them), then 3; 0 and -0 compare equal.
  ExpectClose(out[0], {3, 1, 2, 3, 1, 0});
}

TEST(ReferenceArgMaxTest, IndicesStayExactFromSixteenBitScores) {
  for (DataType dtype : {DataType::kF16, DataType::kBF16}) {
    std::vector<float> scores(3000, -1.0f);
    scores[2049] = 0.5f;  // 2049 is not an f16 (nor bf16) number; the output is f32
    scores[2999] = 0.25f;
    auto out = RunReference("ArgMax", {Tensor({1, 3000}, scores, dtype)},
                            {{"top_k", int64_t{2}}, {"out_max_val", true}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].type().dtype(), DataType::kF32);
    EXPECT_EQ(out[0].ToF32Vector(), (std::vector<float>{2049, 2999, 0.5f, 0.25f}));
  }
}

TEST(ReferenceArgMaxTest, HasNoGradient) {
  // Caffe's ArgMax has no backward; training walks past it, as past Accuracy.
  for (const OpDef* def : DefaultOpRegistry().All()) {
    if (def->name == "ArgMax") {
      EXPECT_FALSE(def->differentiable);
      EXPECT_FALSE(static_cast<bool>(def->gradient));
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace kiln
