// DataParallelSync: the GradientSync (engine/training/gradient_sync.h) of data-parallel
// training over a Communicator. It lays the gradients out in the order backward produces them,
// cut into buckets (gradient_buckets.h), and after backward all-reduces (sums) them bucket by
// bucket on the trainer's stream; the Trainer divides by the world size in its update, as Caffe
// divides the summed gradients by the number of solvers. At the start (and after a restore) it
// broadcasts rank 0's parameters and BatchNorm statistics, as Caffe does; the statistics then
// stay per rank, as in Caffe, unless `sync_batch_norm_statistics` averages them after every step.
//
// Every collective is followed by Communicator::Wait, so a dead peer surfaces here as an error
// within the communicator's timeout. The buckets are reduced after the whole backward today:
// starting each as soon as its last gradient is written needs the executor to signal plan steps
// (see docs/DISTRIBUTED.md); the layout and GradientBucketPlan::ReadyAfter are ready for it.
#ifndef KILN_ENGINE_DISTRIBUTED_DATA_PARALLEL_SYNC_H_
#define KILN_ENGINE_DISTRIBUTED_DATA_PARALLEL_SYNC_H_

#include <vector>

#include "engine/distributed/communicator.h"
#include "engine/distributed/gradient_buckets.h"
#include "engine/training/gradient_sync.h"

namespace kiln {

struct DataParallelOptions {
  GradientBucketOptions buckets;
  // Average the BatchNorm running statistics (mean, variance and their weight) over the ranks
  // after every step. Off: each rank keeps the statistics of its own batches, as Caffe's solvers
  // do, and rank 0's are the ones a snapshot writes. (This averages the running statistics, not
  // the batch statistics a training-mode BatchNorm normalizes with.)
  bool sync_batch_norm_statistics = false;
};

class DataParallelSync : public GradientSync {
 public:
  // `comm` is not owned and must outlive this.
  DataParallelSync(Communicator* comm, const DataParallelOptions& options)
      : comm_(comm), options_(options) {}

  absl::StatusOr<GradientLayout> PlanGradients(const std::vector<GradientSlot>& slots) override;
  absl::Status BindGradients(Device& device, void* block) override;
  absl::Status ShareParameters(Device& device, const std::vector<DeviceSpan>& parameters,
                               const std::vector<DeviceSpan>& statistics) override;
  absl::Status ReduceGradients(Device& device) override;
  absl::Status ReduceStatistics(Device& device, const std::vector<DeviceSpan>& statistics) override;
  int gradient_divisor() const override { return comm_->world_size(); }

  // The gradients in production order (names and bytes) and their buckets.
  const std::vector<GradientInfo>& production_order() const { return order_; }
  const GradientBucketPlan& buckets() const { return plan_; }
  // All-reduces issued so far (one per bucket per step).
  int64_t reductions() const { return reductions_; }

 private:
  Communicator* comm_;
  DataParallelOptions options_;
  std::vector<GradientInfo> order_;
  GradientBucketPlan plan_;
  char* block_ = nullptr;
  int64_t reductions_ = 0;
};

}  // namespace kiln

#endif  // KILN_ENGINE_DISTRIBUTED_DATA_PARALLEL_SYNC_H_
