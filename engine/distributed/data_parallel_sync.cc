#include "engine/distributed/data_parallel_sync.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "engine/status_macros.h"

namespace kiln {

absl::StatusOr<GradientLayout> DataParallelSync::PlanGradients(
    const std::vector<GradientSlot>& slots) {
  // Production order: by the step that writes each gradient; gradients no step writes (ready
  // from the start) first; ties (accumulators, all written after the pass) in reverse parameter
  // order, the order backward reaches the layers.
  std::vector<int> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (slots[a].produced_at != slots[b].produced_at) {
      return slots[a].produced_at < slots[b].produced_at;
    }
    return a > b;
  });
  order_.clear();
  for (int i : order) {
    if (slots[i].count < 0) {
      return absl::InvalidArgumentError(absl::StrCat("data-parallel: gradient '", slots[i].node,
                                                     "' has ", slots[i].count, " elements"));
    }
    order_.push_back({slots[i].node, slots[i].count * static_cast<int64_t>(sizeof(float))});
  }
  GradientBucketOptions buckets = options_.buckets;
  buckets.alignment = std::max<int64_t>(buckets.alignment, 256);  // the Trainer's promise
  KILN_ASSIGN_OR_RETURN(plan_, PlanGradientBuckets(order_, sizeof(float), buckets));
  GradientLayout layout;
  layout.total_bytes = plan_.total_bytes;
  layout.offsets.resize(slots.size());
  for (size_t position = 0; position < order.size(); ++position) {
    layout.offsets[order[position]] = plan_.offsets[position];
  }
  return layout;
}

absl::Status DataParallelSync::BindGradients(Device& device, void* block) {
  if (block == nullptr && plan_.total_bytes > 0) {
    return absl::InvalidArgumentError("data-parallel: no gradient block");
  }
  block_ = static_cast<char*>(block);
  return absl::OkStatus();
}

absl::Status DataParallelSync::ShareParameters(Device& device,
                                               const std::vector<DeviceSpan>& parameters,
                                               const std::vector<DeviceSpan>& statistics) {
  for (const std::vector<DeviceSpan>* group : {&parameters, &statistics}) {
    for (const DeviceSpan& span : *group) {
      KILN_RETURN_IF_ERROR(
          comm_->Broadcast(span.data, span.count, DataType::kF32, /*root=*/0, device.stream()));
    }
  }
  return comm_->Wait(device.stream());
}

absl::Status DataParallelSync::ReduceGradients(Device& device) {
  if (block_ == nullptr && plan_.total_bytes > 0) {
    return absl::FailedPreconditionError("data-parallel: gradients reduced before being bound");
  }
  for (const GradientBucket& bucket : plan_.buckets) {
    KILN_RETURN_IF_ERROR(comm_->AllReduce(block_ + bucket.offset, bucket.elements, DataType::kF32,
                                          ReduceOp::kSum, device.stream()));
    ++reductions_;
  }
  return comm_->Wait(device.stream());
}

absl::Status DataParallelSync::ReduceStatistics(Device& device,
                                                const std::vector<DeviceSpan>& statistics) {
  if (!options_.sync_batch_norm_statistics || statistics.empty()) return absl::OkStatus();
  for (const DeviceSpan& span : statistics) {
    KILN_RETURN_IF_ERROR(comm_->AllReduce(span.data, span.count, DataType::kF32, ReduceOp::kAverage,
                                          device.stream()));
  }
  return comm_->Wait(device.stream());
}

}  // namespace kiln
