// The gradient bucket planner: buckets follow the production order, fill up to their cap (the
// first to its smaller cap), give an oversized gradient a bucket of its own, tile one flat
// buffer with aligned gradients, say which gradient completes which bucket, and refuse bad input.
#include "distributed/gradient_buckets.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

constexpr int64_t kKiB = 1024;

std::vector<GradientInfo> Sizes(const std::vector<int64_t>& bytes) {
  std::vector<GradientInfo> out;
  for (size_t i = 0; i < bytes.size(); ++i) out.push_back({absl::StrCat("g", i), bytes[i]});
  return out;
}

// Invariants every plan keeps, whatever the sizes.
void ExpectWellFormed(const GradientBucketPlan& plan, const std::vector<GradientInfo>& grads,
                      const GradientBucketOptions& options, int64_t element_bytes) {
  ASSERT_EQ(plan.offsets.size(), grads.size());
  ASSERT_EQ(plan.bucket_of.size(), grads.size());
  int64_t expected_offset = 0;
  int next_gradient = 0;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const GradientBucket& k = plan.buckets[b];
    EXPECT_EQ(k.offset, expected_offset) << "bucket " << b << " does not follow the last";
    EXPECT_EQ(k.first, next_gradient) << "bucket " << b;
    EXPECT_GE(k.last, k.first) << "bucket " << b << " is empty";
    EXPECT_EQ(k.elements * element_bytes, k.bytes);
    for (int g = k.first; g <= k.last; ++g) {
      EXPECT_EQ(plan.bucket_of[g], static_cast<int>(b));
      EXPECT_EQ(plan.offsets[g] % options.alignment, 0);
      EXPECT_GE(plan.offsets[g], k.offset);
      EXPECT_LE(plan.offsets[g] + grads[g].bytes, k.offset + k.bytes);
      if (g > k.first) {
        EXPECT_GE(plan.offsets[g], plan.offsets[g - 1] + grads[g - 1].bytes);
      }
      EXPECT_EQ(plan.ReadyAfter(g), g == k.last ? static_cast<int>(b) : -1);
    }
    // Over its cap only when it holds one gradient.
    const int64_t cap = b == 0 && options.first_bucket_bytes > 0 ? options.first_bucket_bytes
                                                                 : options.bucket_bytes;
    if (k.last > k.first) {
      EXPECT_LE(k.bytes, cap) << "bucket " << b;
    }
    expected_offset = k.offset + k.bytes;
    next_gradient = k.last + 1;
  }
  EXPECT_EQ(next_gradient, static_cast<int>(grads.size()));
  EXPECT_EQ(plan.total_bytes, expected_offset);
}

TEST(GradientBucketsTest, FillsBucketsInProductionOrderWithASmallerFirst) {
  GradientBucketOptions options;
  options.first_bucket_bytes = 16 * kKiB;
  options.bucket_bytes = 64 * kKiB;
  // As backward produces them: the last layers' small gradients first.
  const std::vector<GradientInfo> grads =
      Sizes({4 * kKiB, 8 * kKiB, 8 * kKiB, 40 * kKiB, 20 * kKiB, 100 * kKiB, 1 * kKiB});
  absl::StatusOr<GradientBucketPlan> plan = PlanGradientBuckets(grads, 4, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // First bucket (cap 16 KiB): g0 + g1 = 12 KiB; g2 would make 20. Then 64 KiB buckets:
  // g2 + g3 = 48 (g4 would make 68), g4 = 20 (g5 would make 120), g5 alone (100 > cap), g6.
  ASSERT_EQ(plan->buckets.size(), 5u) << plan->ToString(grads);
  const std::vector<std::pair<int, int>> members = {{0, 1}, {2, 3}, {4, 4}, {5, 5}, {6, 6}};
  for (size_t b = 0; b < members.size(); ++b) {
    EXPECT_EQ(plan->buckets[b].first, members[b].first) << plan->ToString(grads);
    EXPECT_EQ(plan->buckets[b].last, members[b].second) << plan->ToString(grads);
  }
  EXPECT_EQ(plan->buckets[0].bytes, 12 * kKiB);
  EXPECT_EQ(plan->buckets[0].elements, 3 * kKiB);
  EXPECT_EQ(plan->buckets[3].bytes, 100 * kKiB);
  EXPECT_EQ(plan->total_bytes, 181 * kKiB);
  EXPECT_EQ(plan->ReadyAfter(1), 0);
  EXPECT_EQ(plan->ReadyAfter(2), -1);  // bucket 1 still waits for g3
  EXPECT_EQ(plan->ReadyAfter(3), 1);
  EXPECT_EQ(plan->ReadyAfter(7), -1);  // no such gradient
  ExpectWellFormed(*plan, grads, options, 4);
  EXPECT_NE(plan->ToString(grads).find("bucket 1: [12288, 61440) 2 gradients g2..g3"),
            std::string::npos)
      << plan->ToString(grads);
}

TEST(GradientBucketsTest, PadsEachGradientToTheAlignment) {
  GradientBucketOptions options;
  options.alignment = 256;
  // 10 floats (40 bytes) and 70 floats (280 bytes): padded to 256 and 512.
  const std::vector<GradientInfo> grads = Sizes({40, 280, 4});
  absl::StatusOr<GradientBucketPlan> plan = PlanGradientBuckets(grads, 4, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->offsets, (std::vector<int64_t>{0, 256, 768}));
  EXPECT_EQ(plan->total_bytes, 1024);
  ASSERT_EQ(plan->buckets.size(), 1u);
  EXPECT_EQ(plan->buckets[0].elements, 256);  // the padding is reduced too
  ExpectWellFormed(*plan, grads, options, 4);
}

TEST(GradientBucketsTest, FirstBucketZeroMeansTheSameCapAndEmptyIsEmpty) {
  GradientBucketOptions options;
  options.first_bucket_bytes = 0;
  options.bucket_bytes = 1 * kKiB;
  const std::vector<GradientInfo> grads = Sizes({512, 512, 512, 512, 0});
  absl::StatusOr<GradientBucketPlan> plan = PlanGradientBuckets(grads, 2, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets.size(), 2u);
  EXPECT_EQ(plan->buckets[0].last, 1);
  EXPECT_EQ(plan->buckets[1].last, 4);  // the empty gradient joins the open bucket
  EXPECT_EQ(plan->buckets[1].elements, 512);
  ExpectWellFormed(*plan, grads, options, 2);

  absl::StatusOr<GradientBucketPlan> none = PlanGradientBuckets({}, 4);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->buckets.empty());
  EXPECT_EQ(none->total_bytes, 0);
}

TEST(GradientBucketsTest, DefaultsAreDdpLike) {
  // 30 gradients of 3 MiB: a 1 MiB first cap gives the first gradient a bucket alone, then
  // 25 MiB buckets of 8 gradients (24 MiB).
  std::vector<int64_t> sizes(30, 3 << 20);
  const std::vector<GradientInfo> grads = Sizes(sizes);
  absl::StatusOr<GradientBucketPlan> plan = PlanGradientBuckets(grads, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->buckets.size(), 5u) << plan->ToString(grads);
  EXPECT_EQ(plan->buckets[0].last, 0);
  EXPECT_EQ(plan->buckets[1].last - plan->buckets[1].first + 1, 8);
  EXPECT_EQ(plan->buckets[4].last - plan->buckets[4].first + 1, 5);
  ExpectWellFormed(*plan, grads, GradientBucketOptions(), 4);
}

TEST(GradientBucketsTest, RandomSizesKeepTheInvariants) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    GradientBucketOptions options;
    options.alignment = int64_t{1} << (2 + rng() % 8);
    options.bucket_bytes = 1 + rng() % (64 * kKiB);
    options.first_bucket_bytes = rng() % (16 * kKiB);
    std::vector<int64_t> sizes(rng() % 40);
    for (int64_t& s : sizes) s = 4 * static_cast<int64_t>(rng() % (8 * kKiB));
    const std::vector<GradientInfo> grads = Sizes(sizes);
    absl::StatusOr<GradientBucketPlan> plan = PlanGradientBuckets(grads, 4, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    ExpectWellFormed(*plan, grads, options, 4);
  }
}

TEST(GradientBucketsTest, BadInputIsInvalidArgument) {
  EXPECT_EQ(PlanGradientBuckets(Sizes({-4}), 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status partial = PlanGradientBuckets(Sizes({4, 6}), 4).status();
  EXPECT_EQ(partial.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(partial.message().find("'g1'"), std::string::npos) << partial;
  EXPECT_EQ(PlanGradientBuckets(Sizes({4}), 3).status().code(), absl::StatusCode::kInvalidArgument);
  GradientBucketOptions bad;
  bad.alignment = 96;
  EXPECT_EQ(PlanGradientBuckets(Sizes({4}), 4, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = GradientBucketOptions();
  bad.alignment = 2;  // smaller than a float
  EXPECT_EQ(PlanGradientBuckets(Sizes({4}), 4, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = GradientBucketOptions();
  bad.bucket_bytes = 0;
  EXPECT_EQ(PlanGradientBuckets(Sizes({4}), 4, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
