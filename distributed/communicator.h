// Communicator: the collective operations data-parallel training needs (all-reduce, broadcast,
// barrier) over a fixed group of ranks, as an interface free of any library's types, so the CPU
// build (FakeCommunicator), NCCL (NcclCommunicator) and a framework embedding Kiln (its own
// process group) can all provide one.
//
// The shape is asynchronous, as NCCL's: an operation is *enqueued* on a stream of the device that
// holds the buffer and the call returns; Wait(stream) blocks until the enqueued work has finished
// and is where a dead or stuck peer turns into an error after the communicator's timeout instead
// of a hang. On the host (stream == nullptr) an implementation may complete the operation inside
// the call. Every failure is an absl::Status; after one, the communicator is unusable (the
// group's ranks disagree about what happened) and every later call fails.
#ifndef KILN_DISTRIBUTED_COMMUNICATOR_H_
#define KILN_DISTRIBUTED_COMMUNICATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/dtype.h"

namespace kiln {

// How an all-reduce combines the ranks' values.
enum class ReduceOp {
  kSum,      // the elementwise sum over the ranks
  kAverage,  // the sum divided by the number of ranks (floating-point dtypes only)
};

// "sum", "average".
absl::string_view ReduceOpName(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;

  // This process's (or thread's) rank in [0, world_size()).
  virtual int rank() const = 0;
  // The number of ranks in the group.
  virtual int world_size() const = 0;
  // "nccl 2.28.9", "fake (in-process)": for logs and errors.
  virtual std::string Describe() const = 0;

  // Enqueues on `stream` an in-place all-reduce of `count` elements of `dtype` at `buffer`:
  // afterwards every rank's buffer holds the same combined values. Every rank must call the
  // group's collectives in the same order with the same count and dtype.
  virtual absl::Status AllReduce(void* buffer, int64_t count, DataType dtype, ReduceOp op,
                                 void* stream) = 0;

  // Enqueues on `stream` a copy of `root`'s `count` elements at `buffer` into every other rank's
  // `buffer`.
  virtual absl::Status Broadcast(void* buffer, int64_t count, DataType dtype, int root,
                                 void* stream) = 0;

  // Returns once every rank has called Barrier (or fails after the timeout). Synchronous: any
  // work enqueued on `stream` before it has finished when it returns.
  virtual absl::Status Barrier(void* stream) = 0;

  // Blocks until the collectives enqueued on `stream` have finished. A peer that died or stopped
  // calling makes this fail with DeadlineExceeded (or the transport's error) within timeout(),
  // and aborts the communicator.
  virtual absl::Status Wait(void* stream) = 0;

  // Makes pending and later operations fail with Aborted carrying `reason`. Safe to call from
  // any thread (a watchdog, or the driver when another rank failed); idempotent.
  virtual void Abort(absl::string_view reason) = 0;

  // How long one operation may wait for the other ranks before it fails.
  virtual absl::Duration timeout() const = 0;
};

// InvalidArgument unless `count` >= 0, `buffer` is non-null when count > 0, and (for
// ReduceOp::kAverage) `dtype` is floating point. `what` names the operation in the message.
absl::Status ValidateCollective(absl::string_view what, const void* buffer, int64_t count,
                                DataType dtype);
absl::Status ValidateReduce(const void* buffer, int64_t count, DataType dtype, ReduceOp op);
// InvalidArgument unless 0 <= root < world_size.
absl::Status ValidateRoot(int root, int world_size);

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_COMMUNICATOR_H_
