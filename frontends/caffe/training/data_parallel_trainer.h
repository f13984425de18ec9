// Data-parallel training: W ranks, each with its own Trainer (plan, stream, arenas, parameters),
// the global batch split as Caffe splits it (every rank runs the net's batch_size on its own
// shard of the data, so one solver step consumes batch x W images), the gradients summed over
// the ranks and divided by W before every update, which every rank applies identically, so the
// parameters stay equal on every rank after every step.
//
// DataParallelWorker is one rank: what a process of a multi-process job runs (one per GPU, with
// an NcclCommunicator from a Rendezvous), or what an embedding framework runs with its own
// Communicator. DataParallelTrainer runs all ranks of one process, one thread each (the CPU
// tests, with FakeCommunicator).
//
// Failure: a rank whose step fails aborts its communicator, so the others fail at once (the fake
// and NCCL's remote errors) or, if the rank died without a word, within the communicator's
// timeout; nobody hangs.
#ifndef KILN_FRONTENDS_CAFFE_TRAINING_DATA_PARALLEL_TRAINER_H_
#define KILN_FRONTENDS_CAFFE_TRAINING_DATA_PARALLEL_TRAINER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/communicator.h"
#include "distributed/data_parallel_sync.h"
#include "frontends/caffe/training/solver_trainer.h"

namespace kiln {

class DataParallelWorker {
 public:
  // The Trainer of rank comm->rank() of comm->world_size(): its TRAIN Data layers read that
  // shard (options.data_shard/data_shards are set here), it has TEST nets only on rank 0 (Caffe
  // tests on the root solver), and it starts from rank 0's parameters. A collective: every rank
  // must create its worker at the same time. `comm` is not owned and must outlive the worker.
  static absl::StatusOr<std::unique_ptr<DataParallelWorker>> Create(
      const SolverConfig& solver, const TrainerOptions& options, Communicator* comm,
      const DataParallelOptions& data_parallel = {});

  // One solver iteration of this rank; a collective. On failure the communicator is aborted.
  absl::Status Step();

  // Rank 0 only (FailedPrecondition elsewhere): Trainer::Snapshot. The parameters are the same
  // on every rank; the BatchNorm statistics written are rank 0's.
  absl::StatusOr<std::pair<std::string, std::string>> Snapshot(const std::string& prefix);

  int rank() const { return comm_->rank(); }
  SolverTrainer& trainer() { return *trainer_; }
  const DataParallelSync& sync() const { return *sync_; }

 private:
  friend class DataParallelTrainer;
  DataParallelWorker() = default;
  // Create without aborting the communicator on failure (the in-process driver records the
  // error first, then aborts every rank, so the root cause is the error it returns).
  static absl::StatusOr<std::unique_ptr<DataParallelWorker>> Build(
      const SolverConfig& solver, const TrainerOptions& options, Communicator* comm,
      const DataParallelOptions& data_parallel);

  Communicator* comm_ = nullptr;
  std::unique_ptr<DataParallelSync>
      sync_;  // declared first: the SolverTrainer uses it until it dies
  std::unique_ptr<SolverTrainer> trainer_;
};

class DataParallelTrainer {
 public:
  // One worker per communicator; comms[r] must be rank r of a group of comms.size(). The
  // workers are created concurrently, one thread each.
  static absl::StatusOr<std::unique_ptr<DataParallelTrainer>> Create(
      const SolverConfig& solver, const TrainerOptions& options,
      const std::vector<Communicator*>& comms, const DataParallelOptions& data_parallel = {});

  // `iterations` steps on every rank, one thread per rank. The first rank to fail aborts every
  // communicator, so the others stop at once; its error is returned, prefixed with its rank.
  absl::Status Step(int iterations = 1);

  int world_size() const { return static_cast<int>(workers_.size()); }
  DataParallelWorker& worker(int rank) { return *workers_[rank]; }

 private:
  DataParallelTrainer() = default;
  std::vector<Communicator*> comms_;
  std::vector<std::unique_ptr<DataParallelWorker>> workers_;
};

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_TRAINING_DATA_PARALLEL_TRAINER_H_
