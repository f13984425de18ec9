// GradientBuckets: which gradients are all-reduced together. Backward produces the parameter
// gradients one by one, roughly in reverse layer order; one all-reduce per gradient would pay
// NCCL's per-call latency hundreds of times, one for all of them would start only when backward
// has finished. The planner lays the gradients out, in the order they are produced, in one flat
// buffer and cuts it into buckets of about `bucket_bytes` (PyTorch DDP's idea and default,
// 25 MiB), so that each bucket is one contiguous range (one all-reduce) that can start as soon
// as its last gradient has been written, while backward goes on with the earlier layers. The
// first bucket is smaller (`first_bucket_bytes`) so communication starts early.
//
// Plain data: no device, no communicator. The data-parallel driver allocates the flat buffer,
// binds each gradient at its offset and all-reduces bucket by bucket.
#ifndef KILN_DISTRIBUTED_GRADIENT_BUCKETS_H_
#define KILN_DISTRIBUTED_GRADIENT_BUCKETS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

struct GradientBucketOptions {
  // The size a bucket is filled up to; a gradient larger than this gets a bucket of its own.
  int64_t bucket_bytes = int64_t{25} << 20;
  // The same for the first bucket (the first gradients produced); 0: bucket_bytes.
  int64_t first_bucket_bytes = int64_t{1} << 20;
  // Where each gradient starts in the flat buffer: a multiple of this (a power of two and a
  // multiple of the element size). The padding between gradients is reduced with them, so the
  // buffer must be zeroed once.
  int64_t alignment = 256;
};

// One gradient as backward produces it.
struct GradientInfo {
  std::string name;
  int64_t bytes = 0;
};

struct GradientBucket {
  int64_t offset = 0;    // its range in the flat buffer, padding included
  int64_t bytes = 0;     // (the ranges of all buckets tile the buffer)
  int64_t elements = 0;  // bytes / element size: the count of its one all-reduce
  int first = 0;         // its gradients: positions first..last in production order
  int last = 0;
};

struct GradientBucketPlan {
  std::vector<GradientBucket> buckets;  // in the order they become ready
  std::vector<int64_t> offsets;         // per gradient (production order): its offset
  std::vector<int> bucket_of;           // per gradient: its bucket
  int64_t total_bytes = 0;              // the flat buffer's size
  int64_t element_bytes = 4;

  // The bucket whose last gradient is gradient `position` (it can be reduced once that one is
  // written), or -1 when the bucket still waits for later gradients.
  int ReadyAfter(int position) const;
  // One line per bucket: "bucket 0: [0, 1048576) 3 gradients conv3.w..ip1.b".
  std::string ToString(const std::vector<GradientInfo>& gradients) const;
};

// Plans the buckets of `gradients` (in the order backward produces them; their element type is
// `element_bytes` wide: 1, 2, 4 or 8). InvalidArgument for negative sizes, sizes that are not
// whole elements, and options that are not positive, powers of two or aligned as stated.
absl::StatusOr<GradientBucketPlan> PlanGradientBuckets(const std::vector<GradientInfo>& gradients,
                                                       int64_t element_bytes,
                                                       const GradientBucketOptions& options = {});

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_GRADIENT_BUCKETS_H_
