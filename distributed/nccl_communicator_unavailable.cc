// NcclCommunicator in a build whose CUDA toolkit has no NCCL: every entry point says so.
#include "distributed/nccl_communicator.h"

namespace kiln {

namespace {

absl::Status NoNccl() {
  return absl::UnimplementedError(
      "nccl: this build has no NCCL (the CUDA toolkit it was built with has no nccl.h and "
      "libnccl.so; see third_party/cuda/cuda_configure.bzl)");
}

}  // namespace

bool NcclAvailable() { return false; }

absl::StatusOr<std::string> NewNcclUniqueId() { return NoNccl(); }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(const std::string& unique_id,
                                                                     int rank, int world_size,
                                                                     const NcclOptions& options) {
  return NoNccl();
}

}  // namespace kiln
