#include "distributed/data_parallel_sync.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

absl::StatusOr<GradientLayout> DataParallelSync::PlanGradients(
    const std::vector<GradientSlot>& slots) {
  // Production order: by the step that writes each gradient; gradients no step writes
  // (accumulators, complete only after the pass; a parameter no loss reaches) last, since they
  // are reduced after backward; ties in reverse parameter order, the order backward reaches the
  // layers. Buckets then become ready in bucket order.
  auto rank_of = [&](int i) {
    return slots[i].produced_at < 0 ? std::numeric_limits<int>::max() : slots[i].produced_at;
  };
  std::vector<int> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (rank_of(a) != rank_of(b)) return rank_of(a) < rank_of(b);
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
  // A bucket can start once its last gradient (in production order, the latest written) is
  // written; never early when that one is written by no step.
  start_step_.assign(plan_.buckets.size(), -1);
  if (options_.overlap_with_backward) {
    for (size_t b = 0; b < plan_.buckets.size(); ++b) {
      const GradientBucket& bucket = plan_.buckets[b];
      if (bucket.last < bucket.first) continue;  // no gradient (cannot happen; be safe)
      start_step_[b] = std::max(-1, slots[order[bucket.last]].produced_at);
    }
  }
  next_bucket_ = 0;
  return layout;
}

bool DataParallelSync::ActsDuringBackward() const {
  return std::any_of(start_step_.begin(), start_step_.end(), [](int s) { return s >= 0; });
}

absl::Status DataParallelSync::BindGradients(Device& device, void* block) {
  if (block == nullptr && plan_.total_bytes > 0) {
    return absl::InvalidArgumentError("data-parallel: no gradient block");
  }
  block_ = static_cast<char*>(block);
  comm_stream_.reset();
  trainer_done_.reset();
  comm_done_.reset();
  if (ActsDuringBackward()) {
    KILN_ASSIGN_OR_RETURN(comm_stream_, device.CreateStream());
    KILN_ASSIGN_OR_RETURN(trainer_done_, device.CreateEvent());
    KILN_ASSIGN_OR_RETURN(comm_done_, device.CreateEvent());
  }
  return absl::OkStatus();
}

void* DataParallelSync::CollectiveStream(Device& device) const {
  return comm_stream_ != nullptr ? comm_stream_->handle() : device.stream();
}

absl::Status DataParallelSync::OrderAfterTrainerStream(Device& device) {
  if (comm_stream_ == nullptr) return absl::OkStatus();
  KILN_RETURN_IF_ERROR(Annotate(trainer_done_->Record(device.stream()),
                                "data-parallel: marking the trainer's stream"));
  return Annotate(trainer_done_->MakeStreamWait(comm_stream_->handle()),
                  "data-parallel: ordering the communication stream after the trainer's");
}

absl::Status DataParallelSync::JoinTrainerStream(Device& device) {
  if (comm_stream_ == nullptr) return absl::OkStatus();
  KILN_RETURN_IF_ERROR(Annotate(comm_done_->Record(comm_stream_->handle()),
                                "data-parallel: marking the communication stream"));
  return Annotate(comm_done_->MakeStreamWait(device.stream()),
                  "data-parallel: ordering the trainer's stream after the communication stream");
}

absl::Status DataParallelSync::StartBuckets(Device& device, int end) {
  if (next_bucket_ >= end) return absl::OkStatus();
  // One event for all the buckets ready now: they all wait for the same enqueued steps.
  KILN_RETURN_IF_ERROR(OrderAfterTrainerStream(device));
  void* stream = CollectiveStream(device);
  for (; next_bucket_ < end; ++next_bucket_) {
    const GradientBucket& bucket = plan_.buckets[next_bucket_];
    unwaited_ = true;
    KILN_RETURN_IF_ERROR(comm_->AllReduce(block_ + bucket.offset, bucket.elements, DataType::kF32,
                                          ReduceOp::kSum, stream));
    ++reductions_;
  }
  return absl::OkStatus();
}

std::vector<int> DataParallelSync::ObservedSteps() const {
  std::vector<int> steps;
  for (int s : start_step_) {
    if (s >= 0 && (steps.empty() || s > steps.back())) steps.push_back(s);
  }
  return steps;  // ascending: buckets start in order, so their steps never decrease
}

absl::Status DataParallelSync::OnStepEnqueued(Device& device, int step) {
  if (block_ == nullptr && plan_.total_bytes > 0) {
    return absl::FailedPreconditionError("data-parallel: gradients reduced before being bound");
  }
  // A step index that does not grow means a new pass: one that failed before ReduceGradients
  // left buckets marked started (its error has aborted the communicator; stay consistent).
  if (step <= last_step_) next_bucket_ = 0;
  last_step_ = step;
  const int buckets = static_cast<int>(plan_.buckets.size());
  int end = next_bucket_;
  while (end < buckets && start_step_[end] >= 0 && start_step_[end] <= step) ++end;
  const int started = end - next_bucket_;
  KILN_RETURN_IF_ERROR(StartBuckets(device, end));
  reductions_during_backward_ += started;
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
  // The buckets backward did not start (all of them without overlap), then the join, which
  // orders the Trainer's later work (clipping, the update) after the communication stream on the
  // device. No host wait here: FinishStep waits once the update is enqueued.
  const int buckets = static_cast<int>(plan_.buckets.size());
  absl::Status started = StartBuckets(device, buckets);
  next_bucket_ = 0;
  last_step_ = -1;
  KILN_RETURN_IF_ERROR(started);
  return JoinTrainerStream(device);
}

absl::Status DataParallelSync::FinishStep(Device& device) {
  if (!unwaited_) return absl::OkStatus();
  unwaited_ = false;
  return comm_->Wait(CollectiveStream(device));
}

absl::Status DataParallelSync::ReduceStatistics(Device& device,
                                                const std::vector<DeviceSpan>& statistics) {
  if (!options_.sync_batch_norm_statistics || statistics.empty()) return absl::OkStatus();
  // With overlap, on the communication stream behind the buckets backward started (see the
  // header: one order of collectives on every rank).
  KILN_RETURN_IF_ERROR(OrderAfterTrainerStream(device));
  void* stream = CollectiveStream(device);
  for (const DeviceSpan& span : statistics) {
    unwaited_ = true;
    KILN_RETURN_IF_ERROR(
        comm_->AllReduce(span.data, span.count, DataType::kF32, ReduceOp::kAverage, stream));
  }
  return JoinTrainerStream(device);
}

}  // namespace kiln
