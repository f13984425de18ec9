// The Communicator over NCCL, for GPUs of one machine or of several. Its header has no NCCL or
// CUDA types: the unique id is the 128 bytes a Rendezvous carries, streams are cudaStream_t
// passed as void*. Built from nccl_communicator.cc where the CUDA toolkit has NCCL (see
// third_party/cuda/cuda_configure.bzl); elsewhere every function returns Unimplemented.
//
// The communicator is nonblocking (ncclConfig_t::blocking = 0): initialization and every
// enqueue are polled with ncclCommGetAsyncError, Wait polls the stream and the communicator's
// asynchronous error, and whatever does not finish within the timeout ends in ncclCommAbort and
// DeadlineExceeded, so a dead peer stops this rank with an error instead of a hang.
#ifndef KILN_DISTRIBUTED_NCCL_COMMUNICATOR_H_
#define KILN_DISTRIBUTED_NCCL_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "distributed/communicator.h"

namespace kiln {

struct NcclOptions {
  // The CUDA device (ordinal) of this rank; made current before every NCCL call.
  int cuda_device = 0;
  // The limit for initialization (all ranks must join within it) and for each Wait.
  absl::Duration timeout = absl::Minutes(5);
};

// Whether this build has NCCL.
bool NcclAvailable();

// The bytes of the unique id NCCL needs (128).
constexpr int kNcclUniqueIdBytes = 128;

// A new NCCL unique id (rank 0 makes it and a Rendezvous gives it to the others).
absl::StatusOr<std::string> NewNcclUniqueId();

// Joins the communicator identified by `unique_id` as `rank` of `world_size`. Every rank must
// call this (each in its own process or thread) within options.timeout; it returns once all
// have joined. InvalidArgument for a rank outside [0, world_size) or an id of the wrong size.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(const std::string& unique_id,
                                                                     int rank, int world_size,
                                                                     const NcclOptions& options);

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_NCCL_COMMUNICATOR_H_
