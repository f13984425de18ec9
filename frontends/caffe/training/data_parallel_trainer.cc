#include "frontends/caffe/training/data_parallel_trainer.h"

#include <functional>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

// Runs fn(rank) for every rank, one thread each. The first failure is recorded, then aborts every
// communicator (the other ranks then fail at once instead of waiting for their peers, and their
// errors, consequences, come second); it is returned, prefixed with its rank.
absl::Status OnEveryRank(const std::vector<Communicator*>& comms,
                         const std::function<absl::Status(int)>& fn) {
  std::mutex mu;
  absl::Status first;
  std::vector<std::thread> threads;
  for (int r = 0; r < static_cast<int>(comms.size()); ++r) {
    threads.emplace_back([&, r] {
      absl::Status status = fn(r);
      if (status.ok()) return;
      std::lock_guard<std::mutex> lock(mu);
      if (!first.ok()) return;
      first = Annotate(status, absl::StrCat("rank ", r));
      for (Communicator* c : comms) c->Abort(first.message());
    });
  }
  for (std::thread& t : threads) t.join();
  return first;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataParallelWorker>> DataParallelWorker::Create(
    const SolverConfig& solver, const TrainerOptions& options, Communicator* comm,
    const DataParallelOptions& data_parallel) {
  if (comm == nullptr) return absl::InvalidArgumentError("data-parallel: no communicator");
  absl::StatusOr<std::unique_ptr<DataParallelWorker>> w =
      Build(solver, options, comm, data_parallel);
  // The peers wait for this rank's parameters: let them fail now rather than at the timeout.
  if (!w.ok()) comm->Abort(w.status().message());
  return w;
}

absl::StatusOr<std::unique_ptr<DataParallelWorker>> DataParallelWorker::Build(
    const SolverConfig& solver, const TrainerOptions& options, Communicator* comm,
    const DataParallelOptions& data_parallel) {
  std::unique_ptr<DataParallelWorker> w(new DataParallelWorker());
  w->comm_ = comm;
  w->sync_ = std::make_unique<DataParallelSync>(comm, data_parallel);
  SolverConfig mine = solver;
  if (comm->rank() != 0) mine.tests.clear();
  TrainerOptions with_sync = options;
  with_sync.data_shard = comm->rank();
  with_sync.data_shards = comm->world_size();
  with_sync.gradient_sync = w->sync_.get();
  KILN_ASSIGN_OR_RETURN(w->trainer_, SolverTrainer::Create(mine, with_sync));
  return w;
}

absl::Status DataParallelWorker::Step() {
  absl::Status status = trainer_->Step();
  if (!status.ok()) comm_->Abort(status.message());
  return status;
}

absl::StatusOr<std::pair<std::string, std::string>> DataParallelWorker::Snapshot(
    const std::string& prefix) {
  if (comm_->rank() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data-parallel: only rank 0 writes snapshots (this is rank ", comm_->rank(), ")"));
  }
  return trainer_->Snapshot(prefix);
}

absl::StatusOr<std::unique_ptr<DataParallelTrainer>> DataParallelTrainer::Create(
    const SolverConfig& solver, const TrainerOptions& options,
    const std::vector<Communicator*>& comms, const DataParallelOptions& data_parallel) {
  if (comms.empty()) return absl::InvalidArgumentError("data-parallel: no communicators");
  for (int r = 0; r < static_cast<int>(comms.size()); ++r) {
    if (comms[r] == nullptr || comms[r]->rank() != r ||
        comms[r]->world_size() != static_cast<int>(comms.size())) {
      return absl::InvalidArgumentError(absl::StrCat("data-parallel: communicator ", r,
                                                     " is not rank ", r, " of ", comms.size()));
    }
  }
  std::unique_ptr<DataParallelTrainer> t(new DataParallelTrainer());
  t->comms_ = comms;
  t->workers_.resize(comms.size());
  KILN_RETURN_IF_ERROR(OnEveryRank(comms, [&](int r) -> absl::Status {
    KILN_ASSIGN_OR_RETURN(t->workers_[r],
                          DataParallelWorker::Build(solver, options, comms[r], data_parallel));
    return absl::OkStatus();
  }));
  return t;
}

absl::Status DataParallelTrainer::Step(int iterations) {
  return OnEveryRank(comms_, [&](int r) -> absl::Status {
    // The Trainer's step, not the worker's: OnEveryRank aborts after recording the error.
    for (int i = 0; i < iterations; ++i) KILN_RETURN_IF_ERROR(workers_[r]->trainer().Step());
    return absl::OkStatus();
  });
}

}  // namespace kiln
