// FakeCommunicator: a Communicator whose ranks are threads of one process and whose buffers are
// host memory, for testing data-parallel code on the CPU. The collectives really compute (an
// all-reduce sums the ranks' buffers in rank order and gives every rank the same bytes), every
// call is checked against the other ranks' (same operation, count, dtype, root), and faults can
// be injected: a rank that dies silently makes its peers fail with DeadlineExceeded after the
// timeout, as a hung NCCL collective does under a watchdog; a rank whose connection drops makes
// them fail at once with Unavailable, as NCCL's remote errors do.
//
// Operations complete inside the call (the stream argument is ignored), so Wait has nothing to
// wait for: it returns the first failure of this rank's calls. The first failure poisons the
// whole group: every later call of any rank returns it.
#ifndef KILN_DISTRIBUTED_FAKE_COMMUNICATOR_H_
#define KILN_DISTRIBUTED_FAKE_COMMUNICATOR_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "distributed/communicator.h"

namespace kiln {

struct FakeCommunicatorOptions {
  // How long a rank waits in a collective for the others before the group fails.
  absl::Duration timeout = absl::Seconds(30);
};

// How an injected death shows to the other ranks.
enum class FakeFault {
  kSilent,          // they notice nothing and time out (a hung process, a pulled cable)
  kConnectionLost,  // their pending and later calls fail at once (a crashed process)
};

// The shared state of the ranks of one fake group. Create it, take one Communicator per rank
// (each to be used by one thread), and keep the group for fault injection.
class FakeCommunicatorGroup : public std::enable_shared_from_this<FakeCommunicatorGroup> {
 public:
  // InvalidArgument unless world_size >= 1 and the timeout is positive.
  static absl::StatusOr<std::shared_ptr<FakeCommunicatorGroup>> Create(
      int world_size, const FakeCommunicatorOptions& options = {});

  // The communicator of `rank`, once per rank: InvalidArgument for a rank outside the group,
  // FailedPrecondition when it was taken already. It keeps the group alive.
  absl::StatusOr<std::unique_ptr<Communicator>> TakeRank(int rank);

  int world_size() const { return world_size_; }

  // Fault injection. Kill: `rank` dies now; its later calls fail with Aborted and it never
  // arrives at another collective. KillAfter: it dies when it starts its collective number
  // `collectives` (counting its own calls from 0), so it completes exactly that many.
  void Kill(int rank, FakeFault fault = FakeFault::kSilent);
  void KillAfter(int rank, int64_t collectives, FakeFault fault = FakeFault::kSilent);

  // Collectives the whole group has completed.
  int64_t completed() const;
  // The group's failure (OK while healthy).
  absl::Status failure() const;

 private:
  friend class FakeCommunicator;
  enum class Kind { kAllReduce, kBroadcast, kBarrier };
  // One collective as a rank calls it.
  struct Call {
    Kind kind = Kind::kBarrier;
    void* buffer = nullptr;
    int64_t count = 0;
    DataType dtype = DataType::kF32;
    ReduceOp op = ReduceOp::kSum;
    int root = 0;
  };

  FakeCommunicatorGroup(int world_size, const FakeCommunicatorOptions& options);
  // Runs `call` for `rank`: waits for every rank's matching call, then the last to arrive
  // computes the result into every rank's buffer.
  absl::Status Collective(int rank, const Call& call);
  void Fail(absl::Status status);  // under mu_
  void Execute();                  // under mu_: the gathered collective
  void KillLocked(int rank, FakeFault fault);
  static std::string Describe(const Call& call);

  const int world_size_;
  const FakeCommunicatorOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  absl::Status failure_;
  int64_t generation_ = 0;  // the collective being gathered (= collectives completed)
  Call first_;              // the first arrival's call of this generation
  int first_rank_ = -1;
  std::vector<void*> buffers_;
  std::vector<bool> arrived_;
  int arrivals_ = 0;
  std::vector<bool> taken_;
  std::vector<bool> dead_;
  std::vector<int64_t> calls_;    // per rank: collectives started
  std::vector<int64_t> kill_at_;  // per rank: the call that kills it (-1: none)
  std::vector<FakeFault> kill_fault_;
};

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_FAKE_COMMUNICATOR_H_
