#include "distributed/gradient_buckets.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace kiln {

namespace {

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

int64_t RoundUp(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }

}  // namespace

int GradientBucketPlan::ReadyAfter(int position) const {
  if (position < 0 || position >= static_cast<int>(bucket_of.size())) return -1;
  const int b = bucket_of[position];
  return buckets[b].last == position ? b : -1;
}

std::string GradientBucketPlan::ToString(const std::vector<GradientInfo>& gradients) const {
  std::string out;
  for (size_t b = 0; b < buckets.size(); ++b) {
    const GradientBucket& k = buckets[b];
    absl::StrAppend(&out, "bucket ", b, ": [", k.offset, ", ", k.offset + k.bytes, ") ",
                    k.last - k.first + 1, " gradient", k.last == k.first ? "" : "s");
    if (k.last < static_cast<int>(gradients.size())) {
      absl::StrAppend(&out, " ", gradients[k.first].name);
      if (k.last != k.first) absl::StrAppend(&out, "..", gradients[k.last].name);
    }
    out += "\n";
  }
  return out;
}

absl::StatusOr<GradientBucketPlan> PlanGradientBuckets(const std::vector<GradientInfo>& gradients,
                                                       int64_t element_bytes,
                                                       const GradientBucketOptions& options) {
  if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4 && element_bytes != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient buckets: element size ", element_bytes, " is not 1, 2, 4 or 8"));
  }
  if (options.bucket_bytes <= 0 || options.first_bucket_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient buckets: bucket size ", options.bucket_bytes, " and first bucket size ",
        options.first_bucket_bytes, " must be positive (the first may be 0: the same)"));
  }
  if (!IsPowerOfTwo(options.alignment) || options.alignment % element_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient buckets: alignment ", options.alignment,
                     " must be a power of two and a multiple of the element size ", element_bytes));
  }
  GradientBucketPlan plan;
  plan.element_bytes = element_bytes;
  const int64_t first_cap =
      options.first_bucket_bytes > 0 ? options.first_bucket_bytes : options.bucket_bytes;
  int64_t offset = 0;         // where the next gradient goes
  int bucket_first = 0;       // the open bucket's first gradient
  int64_t bucket_offset = 0;  // and where it starts
  auto close = [&](int last, int64_t end) {
    GradientBucket b;
    b.offset = bucket_offset;
    b.bytes = end - bucket_offset;
    b.elements = b.bytes / element_bytes;
    b.first = bucket_first;
    b.last = last;
    plan.buckets.push_back(b);
    bucket_first = last + 1;
    bucket_offset = end;
  };
  const int n = static_cast<int>(gradients.size());
  for (int i = 0; i < n; ++i) {
    const GradientInfo& g = gradients[i];
    if (g.bytes < 0 || g.bytes % element_bytes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient buckets: gradient '", g.name, "' has ", g.bytes,
                       " bytes, not a whole number of ", element_bytes, "-byte elements"));
    }
    if (g.bytes > std::numeric_limits<int64_t>::max() / 2 - offset) {
      return absl::InvalidArgumentError("gradient buckets: the gradients' total size overflows");
    }
    const int64_t padded = RoundUp(g.bytes, options.alignment);
    const int64_t cap = plan.buckets.empty() ? first_cap : options.bucket_bytes;
    // Close the open bucket when this gradient would overfill it (a bucket holds at least one).
    if (i > bucket_first && offset + padded - bucket_offset > cap) close(i - 1, offset);
    plan.offsets.push_back(offset);
    plan.bucket_of.push_back(static_cast<int>(plan.buckets.size()));
    offset += padded;
  }
  if (n > 0) close(n - 1, offset);
  plan.total_bytes = offset;
  return plan;
}

}  // namespace kiln
