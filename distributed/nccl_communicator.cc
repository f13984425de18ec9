#include "distributed/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dnn/cuda/cuda_status.h"

namespace kiln {

static_assert(kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES, "NCCL's unique id size changed");

namespace {

// An NCCL failure as a Status: Unavailable for the errors a peer or the network causes (the
// ones a dead machine produces), Internal for the rest, naming the call, file:line, NCCL's
// message and, with a communicator, its last error text.
absl::Status NcclStatus(ncclResult_t result, const char* call, const char* file, int line,
                        ncclComm_t comm = nullptr) {
  std::string message = absl::StrCat("nccl: ", call, " failed at ", file, ":", line, ": ",
                                     ncclGetErrorString(result));
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && last[0] != '\0') absl::StrAppend(&message, " (", last, ")");
  }
  if (result == ncclRemoteError || result == ncclSystemError) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

#define KILN_NCCL_STATUS(result, call, comm) NcclStatus(result, call, __FILE__, __LINE__, comm)

ncclDataType_t NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return ncclFloat32;
    case DataType::kF16:
      return ncclFloat16;
    case DataType::kBF16:
      return ncclBfloat16;
    case DataType::kI32:
      return ncclInt32;
    case DataType::kU8:
      return ncclUint8;
  }
  return ncclFloat32;
}

using Clock = std::chrono::steady_clock;

Clock::time_point DeadlineAfter(absl::Duration d) {
  return Clock::now() + std::chrono::nanoseconds(absl::ToInt64Nanoseconds(d));
}

// Pauses between two polls of something the GPU or a peer will finish. For the first
// kSpinFor of a wait it only yields the core: a training step's collectives finish a few
// milliseconds after the host starts waiting, and every microsecond the host sleeps past that is
// a microsecond the GPU idles before the update and the next forward are enqueued (sleeping 50 us
// doubling to 2 ms, as this did first, left up to 2 ms of idle GPU per step and cost several
// points of two-GPU scaling). After that it sleeps a little longer each time (50 us doubling up
// to 2 ms), so a long wait (a slow peer, start-up) does not keep a core busy.
class Backoff {
 public:
  void Sleep() {
    if (Clock::now() - start_ < kSpinFor) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(us_));
    us_ = std::min(us_ * 2, 2000);
  }

 private:
  static constexpr std::chrono::milliseconds kSpinFor{100};
  const Clock::time_point start_ = Clock::now();
  int us_ = 50;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int world_size, const NcclOptions& options,
                   void* scratch)
      : comm_(comm), rank_(rank), world_size_(world_size), options_(options), scratch_(scratch) {}

  // A destructor cannot report: the results of the teardown calls (finalize, destroy, abort,
  // cudaFree) decide only between an orderly end and an abort.
  ~NcclCommunicator() override {
    std::unique_lock<std::mutex> lock(mu_);
    if (comm_ != nullptr && failure_.ok()) {
      // An orderly end: flush, wait (bounded) for the peers, destroy; abort if that fails.
      ncclResult_t r = ncclCommFinalize(comm_);
      const Clock::time_point deadline = DeadlineAfter(options_.timeout);
      Backoff backoff;
      while (r == ncclSuccess || r == ncclInProgress) {
        ncclResult_t state = ncclSuccess;
        r = ncclCommGetAsyncError(comm_, &state);
        if (r != ncclSuccess) break;
        if (state != ncclInProgress) {
          r = state;
          break;
        }
        if (Clock::now() > deadline) {
          r = ncclInProgress;
          break;
        }
        backoff.Sleep();
      }
      if (r == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
      comm_ = nullptr;
    }
    AbortLocked(absl::AbortedError("nccl: communicator destroyed")).IgnoreError();
    if (scratch_ != nullptr && cudaSetDevice(options_.cuda_device) == cudaSuccess) {
      cudaFree(scratch_);
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string Describe() const override {
    int version = 0;
    const std::string number =
        ncclGetVersion(&version) == ncclSuccess
            ? absl::StrCat(version / 10000, ".", (version / 100) % 100, ".", version % 100)
            : std::string("(version unknown)");
    return absl::StrCat("nccl ", number, " (rank ", rank_, " of ", world_size_,
                        ", cuda:", options_.cuda_device, ")");
  }
  absl::Duration timeout() const override { return options_.timeout; }

  absl::Status AllReduce(void* buffer, int64_t count, DataType dtype, ReduceOp op,
                         void* stream) override {
    if (absl::Status s = ValidateReduce(buffer, count, dtype, op); !s.ok()) return s;
    const ncclRedOp_t nccl_op = op == ReduceOp::kAverage ? ncclAvg : ncclSum;
    return Enqueue("ncclAllReduce", [&](ncclComm_t comm) {
      return ncclAllReduce(buffer, buffer, static_cast<size_t>(count), NcclType(dtype), nccl_op,
                           comm, static_cast<cudaStream_t>(stream));
    });
  }

  absl::Status Broadcast(void* buffer, int64_t count, DataType dtype, int root,
                         void* stream) override {
    if (absl::Status s = ValidateCollective("broadcast", buffer, count, dtype); !s.ok()) return s;
    if (absl::Status s = ValidateRoot(root, world_size_); !s.ok()) return s;
    return Enqueue("ncclBroadcast", [&](ncclComm_t comm) {
      return ncclBroadcast(buffer, buffer, static_cast<size_t>(count), NcclType(dtype), root, comm,
                           static_cast<cudaStream_t>(stream));
    });
  }

  absl::Status Barrier(void* stream) override {
    // NCCL has no barrier: a one-element all-reduce that every rank must join, then a wait.
    if (absl::Status s = AllReduce(scratch_, 1, DataType::kF32, ReduceOp::kSum, stream); !s.ok()) {
      return s;
    }
    return Wait(stream);
  }

  absl::Status Wait(void* stream) override {
    const Clock::time_point deadline = DeadlineAfter(options_.timeout);
    Backoff backoff;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!failure_.ok()) return failure_;
        if (absl::Status s = CheckAsyncError(); !s.ok()) return s;
        const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream));
        if (e == cudaSuccess) return absl::OkStatus();
        if (e != cudaErrorNotReady) {
          return AbortLocked(CudaStatus(e, "cudaStreamQuery", __FILE__, __LINE__));
        }
        if (Clock::now() > deadline) {
          return AbortLocked(absl::DeadlineExceededError(absl::StrCat(
              "nccl: rank ", rank_, " of ", world_size_, ": collectives did not finish within ",
              absl::FormatDuration(options_.timeout),
              " (a peer died, stopped calling, or called a different collective); the "
              "communicator was aborted")));
        }
      }
      backoff.Sleep();
    }
  }

  void Abort(absl::string_view reason) override {
    std::lock_guard<std::mutex> lock(mu_);
    AbortLocked(absl::AbortedError(absl::StrCat("nccl: rank ", rank_, " aborted: ", reason)))
        .IgnoreError();
  }

 private:
  // Makes this rank's device current and runs `call` (an NCCL enqueue); on a nonblocking
  // communicator the enqueue may still be in progress when it returns, so poll it to the end.
  template <typename Call>
  absl::Status Enqueue(const char* what, Call call) {
    const Clock::time_point deadline = DeadlineAfter(options_.timeout);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failure_.ok()) return failure_;
      const cudaError_t e = cudaSetDevice(options_.cuda_device);
      if (e != cudaSuccess) return AbortLocked(CudaStatus(e, "cudaSetDevice", __FILE__, __LINE__));
      const ncclResult_t r = call(comm_);
      if (r == ncclSuccess) return absl::OkStatus();
      if (r != ncclInProgress) return AbortLocked(KILN_NCCL_STATUS(r, what, comm_));
    }
    Backoff backoff;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!failure_.ok()) return failure_;
        ncclResult_t state = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
        if (r != ncclSuccess) {
          return AbortLocked(KILN_NCCL_STATUS(r, "ncclCommGetAsyncError", comm_));
        }
        if (state == ncclSuccess) return absl::OkStatus();
        if (state != ncclInProgress) return AbortLocked(KILN_NCCL_STATUS(state, what, comm_));
        if (Clock::now() > deadline) {
          return AbortLocked(absl::DeadlineExceededError(absl::StrCat(
              "nccl: rank ", rank_, ": ", what, " could not be enqueued within ",
              absl::FormatDuration(options_.timeout), "; the communicator was aborted")));
        }
      }
      backoff.Sleep();
    }
  }

  // Under mu_: the communicator's asynchronous error (a peer's failure NCCL noticed).
  absl::Status CheckAsyncError() {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) return AbortLocked(KILN_NCCL_STATUS(r, "ncclCommGetAsyncError", comm_));
    if (state != ncclSuccess && state != ncclInProgress) {
      return AbortLocked(KILN_NCCL_STATUS(state, "a collective (asynchronous error)", comm_));
    }
    return absl::OkStatus();
  }

  // Under mu_: records the first failure, aborts the NCCL communicator (which also ends its
  // kernels still waiting for a peer) and returns the failure.
  absl::Status AbortLocked(absl::Status status) {
    if (failure_.ok()) failure_ = std::move(status);
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);  // its own result cannot be acted on: the communicator is gone
      comm_ = nullptr;
    }
    return failure_;
  }

  std::mutex mu_;
  ncclComm_t comm_;
  const int rank_;
  const int world_size_;
  const NcclOptions options_;
  void* scratch_;  // one f32 on the device, for Barrier
  absl::Status failure_;
};

}  // namespace

bool NcclAvailable() { return true; }

absl::StatusOr<std::string> NewNcclUniqueId() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return KILN_NCCL_STATUS(r, "ncclGetUniqueId", nullptr);
  return std::string(id.internal, NCCL_UNIQUE_ID_BYTES);
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(const std::string& unique_id,
                                                                     int rank, int world_size,
                                                                     const NcclOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: rank ", rank, " is not a rank of a world of size ", world_size));
  }
  if (unique_id.size() != NCCL_UNIQUE_ID_BYTES) {
    return absl::InvalidArgumentError(absl::StrCat("nccl: the unique id has ", unique_id.size(),
                                                   " bytes, not ", NCCL_UNIQUE_ID_BYTES));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: timeout ", absl::FormatDuration(options.timeout), " must be positive"));
  }
  if (options.cuda_device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: CUDA device ", options.cuda_device, " does not exist"));
  }
  KILN_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.cuda_device));
  void* scratch = nullptr;
  KILN_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch, sizeof(float)));
  auto fail = [&](absl::Status status) {
    cudaFree(scratch);
    return status;
  };
  if (cudaError_t e = cudaMemset(scratch, 0, sizeof(float)); e != cudaSuccess) {
    return fail(CudaStatus(e, "cudaMemset", __FILE__, __LINE__));
  }
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), NCCL_UNIQUE_ID_BYTES);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, world_size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    absl::Status status = KILN_NCCL_STATUS(r, "ncclCommInitRankConfig", comm);
    if (comm != nullptr) ncclCommAbort(comm);
    return fail(status);
  }
  // Nonblocking initialization: poll until every rank has joined, or give up at the deadline.
  const Clock::time_point deadline = DeadlineAfter(options.timeout);
  Backoff backoff;
  while (true) {
    ncclResult_t state = ncclSuccess;
    r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
      absl::Status status = r != ncclSuccess
                                ? KILN_NCCL_STATUS(r, "ncclCommGetAsyncError", comm)
                                : KILN_NCCL_STATUS(state, "ncclCommInitRankConfig", comm);
      ncclCommAbort(comm);
      return fail(status);
    }
    if (state == ncclSuccess) break;
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      return fail(absl::DeadlineExceededError(absl::StrCat(
          "nccl: rank ", rank, " of ", world_size, ": the communicator was not ready within ",
          absl::FormatDuration(options.timeout),
          " (a rank never joined, or the ranks cannot reach each other)")));
    }
    backoff.Sleep();
  }
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(comm, rank, world_size, options, scratch));
}

}  // namespace kiln
