// DataParallelSync: the GradientSync (engine/training/gradient_sync.h) of data-parallel
// training over a Communicator. It lays the gradients out in the order backward produces them,
// cut into buckets (gradient_buckets.h), and all-reduces (sums) them bucket by bucket; the
// Trainer divides by the world size in its update, as Caffe divides the summed gradients by the
// number of solvers. At the start (and after a restore) it broadcasts rank 0's parameters and
// BatchNorm statistics, as Caffe does; the statistics then stay per rank, as in Caffe, unless
// `sync_batch_norm_statistics` averages them after every step.
//
// Overlap (`overlap_with_backward`, the default): during the last pass of a step the Trainer
// reports each plan step once it is enqueued (OnStepEnqueued), and as soon as the step that
// writes a bucket's last gradient is enqueued, the bucket's all-reduce is enqueued on a second
// stream of the device (the communication stream), ordered after that step by an event, so it
// runs while backward goes on with the earlier layers. Buckets start strictly in bucket order.
// ReduceGradients enqueues the buckets not started yet (those holding a gradient no plan step
// writes, e.g. every accumulator when iter_size > 1: overlap is then off) and orders the
// Trainer's stream after the communication stream, so clipping and the update see the fully
// reduced gradients; the host does not wait there, so the update is enqueued while the last
// buckets run. FinishStep then waits for the step's collectives. With overlap on, every collective
// of a step (the statistics too) goes on the communication stream, in one order on every rank: NCCL
// needs the ranks to issue a communicator's collectives in the same order, and two streams could
// run them in different orders. Off: every collective runs on the Trainer's stream after backward
// (and the Trainer's plan may replay a CUDA graph, which an observed pass cannot).
//
// Every step's collectives are followed by Communicator::Wait (in FinishStep; ShareParameters
// waits itself), so a dead peer surfaces here as an error within the communicator's timeout.
#ifndef KILN_DISTRIBUTED_DATA_PARALLEL_SYNC_H_
#define KILN_DISTRIBUTED_DATA_PARALLEL_SYNC_H_

#include <memory>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/gradient_buckets.h"
#include "training/gradient_sync.h"

namespace kiln {

struct DataParallelOptions {
  GradientBucketOptions buckets;
  // Average the BatchNorm running statistics (mean, variance and their weight) over the ranks
  // after every step. Off: each rank keeps the statistics of its own batches, as Caffe's solvers
  // do, and rank 0's are the ones a snapshot writes. (This averages the running statistics, not
  // the batch statistics a training-mode BatchNorm normalizes with.)
  bool sync_batch_norm_statistics = false;
  // Start each bucket's all-reduce during backward, on a second stream, as soon as its gradients
  // are written (see above). Off: all buckets after backward, on the Trainer's stream. The sums
  // are the same either way.
  bool overlap_with_backward = true;
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
  bool ActsDuringBackward() const override;
  absl::Status OnStepEnqueued(Device& device, int step) override;
  // The steps after which a bucket starts: the plan runs the stretches between them from CUDA
  // graphs.
  std::vector<int> ObservedSteps() const override;
  absl::Status ReduceGradients(Device& device) override;
  absl::Status ReduceStatistics(Device& device, const std::vector<DeviceSpan>& statistics) override;
  absl::Status FinishStep(Device& device) override;
  int gradient_divisor() const override { return comm_->world_size(); }

  // The gradients in production order (names and bytes) and their buckets.
  const std::vector<GradientInfo>& production_order() const { return order_; }
  const GradientBucketPlan& buckets() const { return plan_; }
  // Per bucket: the TRAIN plan step after whose enqueueing its all-reduce starts (the step
  // writing its last gradient), or -1 when it waits for ReduceGradients (overlap off, or a
  // gradient no step writes).
  const std::vector<int>& bucket_start_steps() const { return start_step_; }
  // Gradient all-reduces issued so far (one per bucket per step), and how many of them were
  // issued during backward (from OnStepEnqueued).
  int64_t reductions() const { return reductions_; }
  int64_t reductions_during_backward() const { return reductions_during_backward_; }

 private:
  // Enqueues the all-reduces of buckets next_bucket_..end-1 (in order) on the collectives'
  // stream, after the work enqueued on the Trainer's stream so far.
  absl::Status StartBuckets(Device& device, int end);
  // The stream this sync's collectives of a step go on: the communication stream when
  // overlapping, else the Trainer's.
  void* CollectiveStream(Device& device) const;
  // With a communication stream: makes it wait for the work enqueued on the Trainer's stream
  // (ordering), or the Trainer's stream wait for it (joining). No-ops without one.
  absl::Status OrderAfterTrainerStream(Device& device);
  absl::Status JoinTrainerStream(Device& device);

  Communicator* comm_;
  DataParallelOptions options_;
  std::vector<GradientInfo> order_;
  GradientBucketPlan plan_;
  std::vector<int> start_step_;
  char* block_ = nullptr;
  // Overlap: the communication stream and the events ordering it against the Trainer's stream
  // (null when the sync does not act during backward).
  std::unique_ptr<DeviceStream> comm_stream_;
  std::unique_ptr<DeviceEvent> trainer_done_;  // recorded on the Trainer's stream
  std::unique_ptr<DeviceEvent> comm_done_;     // recorded on the communication stream
  int next_bucket_ = 0;                        // the first bucket of this step not started yet
  int last_step_ = -1;                         // the last step OnStepEnqueued heard of
  bool unwaited_ = false;  // collectives enqueued since the last Wait (FinishStep waits for them)
  int64_t reductions_ = 0;
  int64_t reductions_during_backward_ = 0;
};

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_DATA_PARALLEL_SYNC_H_
