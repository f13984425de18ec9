#include "tools/train_command.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/fault_injection.h"
#include "base/file_identity.h"
#include "base/file_io.h"
#include "base/status_macros.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/solver.h"
#include "frontends/caffe/training/data_parallel_trainer.h"
#include "frontends/caffe/training/solver_trainer.h"
#include "tools/caffe_commands.h"
#include "tools/command_line.h"
#include "tools/curve_svg.h"
#include "tools/multi_gpu_launch.h"
#include "tools/plan_flags.h"

namespace kiln {

namespace {

// The trainer of `kiln train` and `kiln time --train`: one rank of a data-parallel job
// (--rank/--world-size/--rendezvous, joined over NCCL) or the whole training in this process.
// `comm` is declared before `worker`, which uses it until it is destroyed.
struct TrainerSetup {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<DataParallelWorker> worker;
  std::unique_ptr<SolverTrainer> single;

  absl::Status Create(const DistributedFlags& dist, absl::string_view device,
                      absl::string_view command, const SolverConfig& solver,
                      const TrainerOptions& options) {
    if (!dist.enabled) {
      KILN_ASSIGN_OR_RETURN(single, SolverTrainer::Create(solver, options));
      return absl::OkStatus();
    }
    KILN_ASSIGN_OR_RETURN(comm, JoinNcclJob(dist, device, command));
    DataParallelOptions data_parallel;
    data_parallel.sync_batch_norm_statistics = dist.sync_batch_norm;
    data_parallel.overlap_with_backward = dist.overlap_with_backward;
    absl::StatusOr<std::unique_ptr<DataParallelWorker>> made =
        DataParallelWorker::Create(solver, options, comm.get(), data_parallel);
    if (!made.ok()) return Ended(made.status());
    worker = *std::move(made);
    return absl::OkStatus();
  }
  SolverTrainer* trainer() { return worker != nullptr ? &worker->trainer() : single.get(); }

  // Passes `status` through. On an error the communicator is aborted first: the orderly NCCL
  // teardown waits (up to --dist-timeout) for peers that will never finish their collectives,
  // so a failed rank would linger and the launcher would not see it fail and stop the job.
  absl::Status Ended(absl::Status status) {
    if (!status.ok() && comm != nullptr) comm->Abort(status.message());
    return status;
  }
};

using Clock = std::chrono::steady_clock;

// Half-written snapshot files a killed run left (base/file_io.h writes beside the target, then
// renames): <prefix>_iter_*.kiln-partial-*. Removed before a run under the same prefix starts.
void RemoveStalePartials(const std::string& prefix) {
  const std::filesystem::path p(prefix);
  const std::filesystem::path folder = p.parent_path().empty() ? "." : p.parent_path();
  const std::string start = p.filename().string() + "_iter_";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, start) && absl::StrContains(name, ".kiln-partial-") &&
        entry.is_regular_file(error)) {
      if (std::filesystem::remove(entry.path(), error)) {
        std::fprintf(stderr, "kiln train: removed %s, a snapshot file a killed run left\n",
                     entry.path().c_str());
      }
    }
  }
}

// The signal that asked training to stop (SIGINT: Ctrl-C; SIGTERM: what job schedulers and
// `kill` send), or 0; and whether SIGUSR1 (a scheduler's warning that time is running out) asked
// for a snapshot while training goes on. The handlers only set these; the loop acts between
// iterations.
volatile std::sig_atomic_t interrupted = 0;
volatile std::sig_atomic_t snapshot_requested = 0;
void OnInterrupt(int signal) { interrupted = signal; }
void OnSnapshotRequest(int) { snapshot_requested = 1; }

// The handlers for one training run, put back as they were when it ends however it ends.
class TrainingSignals {
 public:
  TrainingSignals() {
    interrupted = 0;
    snapshot_requested = 0;
    old_int_ = std::signal(SIGINT, OnInterrupt);
    old_term_ = std::signal(SIGTERM, OnInterrupt);
    old_usr1_ = std::signal(SIGUSR1, OnSnapshotRequest);
  }
  ~TrainingSignals() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
    std::signal(SIGUSR1, old_usr1_);
  }
  TrainingSignals(const TrainingSignals&) = delete;
  TrainingSignals& operator=(const TrainingSignals&) = delete;

 private:
  using Handler = void (*)(int);
  Handler old_int_, old_term_, old_usr1_;
};

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The live line: rewritten in place on a terminal, printed once a second otherwise.
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO) == 1), start_(Clock::now()), last_(start_) {}
  // `world`: the number of ranks (each does t.images_per_iteration() a step).
  void Update(const SolverTrainer& t, int64_t first, int64_t stop, bool force, int64_t world) {
    const auto now = Clock::now();
    if (!force && std::chrono::duration<double>(now - last_).count() < (tty_ ? 0.2 : 10.0)) return;
    last_ = now;
    const double elapsed = Seconds(start_);
    const int64_t done = t.iter() - first;
    const double rate = elapsed > 0 ? done / elapsed : 0;
    const double eta = rate > 0 ? (stop - t.iter()) / rate : 0;
    std::fprintf(stderr, "%strain: iter %lld/%lld  loss %.4f  lr %.3g  %.0f images/s  ETA %.0fs%s",
                 tty_ ? "\r" : "", static_cast<long long>(t.iter()), static_cast<long long>(stop),
                 t.smoothed_loss(), t.last_rate(), rate * t.images_per_iteration() * world, eta,
                 tty_ ? "\033[K" : "\n");
    std::fflush(stderr);
  }
  // Ends the live line before ordinary output.
  void Break() {
    if (tty_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  bool tty_;
  Clock::time_point start_, last_;
};

// --loss-scale S: static loss scaling (a positive number; 1 when absent).
absl::Status ParseLossScale(const CommandLine& line, TrainerOptions& options) {
  if (!line.Has("loss-scale")) return absl::OkStatus();
  if (!absl::SimpleAtod(line.Get("loss-scale"), &options.loss_scale) || !(options.loss_scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--loss-scale ", line.Get("loss-scale"), ": expected a positive number"));
  }
  return absl::OkStatus();
}

absl::Status RunTests(SolverTrainer& trainer, Progress& progress, TrainingCurve& curve,
                      std::string* summary) {
  for (int n = 0; n < trainer.num_test_nets(); ++n) {
    KILN_ASSIGN_OR_RETURN(std::vector<NetOutput> outputs, trainer.Test(n));
    progress.Break();
    std::printf("Iteration %lld, Testing net (#%d)\n", static_cast<long long>(trainer.iter()), n);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const NetOutput& o = outputs[i];
      if (o.loss_weight != 0) {
        std::printf("    Test net output #%zu: %s = %.6g (* %g = %.6g loss)\n", i, o.name.c_str(),
                    o.value, o.loss_weight, o.value * o.loss_weight);
      } else {
        std::printf("    Test net output #%zu: %s = %.6g\n", i, o.name.c_str(), o.value);
      }
      if (n == 0) {
        curve.tests[o.name].is_loss = o.loss_weight != 0;
        curve.tests[o.name].points.push_back({trainer.iter(), o.value});
        if (summary != nullptr) {
          absl::StrAppend(summary, summary->empty() ? "" : ", ", o.name, " = ",
                          absl::StrFormat("%.4f", o.value));
        }
      }
    }
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

// The snapshot files of <prefix> this run may write: <prefix>_iter_<N>.caffemodel and
// .solverstate for N in (first, stop] (at every `snapshot` interval, at the end, and at an
// interrupt, which may come at any iteration) and the curve beside them. None may be a file the
// run reads: a fine-tuning from P_iter_20.caffemodel with prefix P that ends at 20 would
// otherwise replace its own input.
absl::Status CheckSnapshotsSpareInputs(const std::string& prefix, int64_t first, int64_t stop,
                                       const std::vector<FlagPath>& inputs) {
  namespace fs = std::filesystem;
  const fs::path prefix_path(prefix);
  const std::string folder =
      prefix_path.parent_path().empty() ? "." : prefix_path.parent_path().string();
  const std::string base = absl::StrCat(prefix_path.filename().string(), "_iter_");
  std::vector<std::pair<const FlagPath*, FileIdentity>> given;
  for (const FlagPath& input : inputs) {
    absl::StatusOr<FileIdentity> id = IdentifyFile(input.path);
    if (id.ok() && id->exists) given.emplace_back(&input, *id);
  }
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, base.size(), base) != 0) continue;
    std::string rest = name.substr(base.size());
    bool snapshot_file = false;
    for (const std::string suffix : {".caffemodel", ".solverstate", "_curve.svg"}) {
      if (rest.size() > suffix.size() &&
          rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) == 0) {
        rest.resize(rest.size() - suffix.size());
        snapshot_file = true;
        break;
      }
    }
    int64_t n = 0;
    if (!snapshot_file || !absl::SimpleAtoi(rest, &n) || n <= first || n > stop) continue;
    absl::StatusOr<FileIdentity> id = IdentifyFile(it->path().string());
    if (!id.ok()) continue;
    for (const auto& [input, identity] : given) {
      if (identity != *id) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "train: ", input->flag, " ", input->path, " is ", it->path().string(),
          ", a file this run writes when it snapshots at iteration ", n, " (snapshot_prefix '",
          prefix, "', iterations ", first, " to ", stop,
          "): copy it elsewhere or change snapshot_prefix, so that it is not overwritten"));
    }
  }
  return absl::OkStatus();
}

// The snapshot folder has room for one snapshot: the .caffemodel as it would be written now and
// the .solverstate's histories (one per parameter, two for Adam and AdaDelta) of about the
// trained parameters' size each.
absl::Status CheckRoomForSnapshot(const SolverTrainer& trainer, const std::string& type,
                                  const std::string& prefix) {
  const std::filesystem::path folder = std::filesystem::path(prefix).parent_path();
  struct statvfs fs;
  if (statvfs(folder.empty() ? "." : folder.c_str(), &fs) != 0) return absl::OkStatus();
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter weights, trainer.WeightsAsNet());
  const double histories = type == "Adam" || type == "AdaDelta" ? 2 : 1;
  const double needed = static_cast<double>(weights.ByteSizeLong()) * (1 + histories);
  const double free = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
  if (free >= needed) return absl::OkStatus();
  auto size = [](double bytes) {
    return bytes < 1048576.0 ? absl::StrFormat("%.0f bytes", bytes)
                             : absl::StrFormat("%.1f MiB", bytes / 1048576.0);
  };
  return absl::ResourceExhaustedError(absl::StrCat("train: snapshot_prefix '", prefix,
                                                   "': the folder has ", size(free),
                                                   " free, a snapshot needs about ", size(needed)));
}

absl::Status TrainLoop(const CommandLine& line, const DistributedFlags& dist,
                       const SolverConfig& solver, const std::string& prefix,
                       const std::vector<FlagPath>& inputs, TrainerSetup& setup);

// `kiln train`: checks the files and flags, sets up this process's trainer, then TrainLoop.
absl::Status Train(const CommandLine& line) {
  if (!line.Has("solver")) return absl::InvalidArgumentError("train: --solver is required");
  KILN_ASSIGN_OR_RETURN(DistributedFlags dist, ParseDistributedFlags(line, "train"));
  if (line.Has("weights") && line.Has("snapshot")) {
    return absl::InvalidArgumentError("train: give --weights or --snapshot, not both");
  }
  const std::string solver_path = line.Get("solver");
  KILN_ASSIGN_OR_RETURN(SolverConfig solver, LoadSolver(solver_path));
  if (line.Has("iterations")) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(line.Get("iterations"), &n) || n < 1 || n > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat("train: --iterations must be a positive number up to 2147483647, not ",
                       line.Get("iterations")));
    }
    solver.param.set_max_iter(static_cast<int>(n));
  }
  TrainerOptions options;
  KILN_RETURN_IF_ERROR(ParsePlanFlags(line, options.compile));
  if (dist.enabled && dist.world_size > 1 && !line.Has("algo")) {
    // Ranks measuring at once could each pick other algorithms for the same problem, and a
    // resumed run (which reads the one choice the cache kept) could not reproduce the run
    // exactly: a data-parallel run takes the heuristic unless --algo measure is asked for.
    options.compile.algo = AlgoChoice::kHeuristic;
    options.compile.tuning_file.clear();
    options.compile.tuning_file_is_cache = false;
  }
  options.solver_dir = std::filesystem::path(solver_path).parent_path().string();
  if (line.Has("data-seed")) {
    if (!absl::SimpleAtoi(line.Get("data-seed"), &options.data_seed)) {
      return absl::InvalidArgumentError("train: --data-seed must be a number");
    }
  }
  KILN_RETURN_IF_ERROR(ParseLossScale(line, options));
  const caffe::SolverParameter& p = solver.param;
  const std::string prefix = p.snapshot_prefix().empty()
                                 ? std::filesystem::path(solver_path).replace_extension().string()
                                 : p.snapshot_prefix();
  KILN_RETURN_IF_ERROR(CheckCommandFiles(line, {}, {}));  // the --tuning-file
  std::vector<FlagPath> inputs = {{"--solver", solver_path}};
  if (line.Has("weights")) inputs.push_back({"--weights", line.Get("weights")});
  if (line.Has("snapshot")) inputs.push_back({"--snapshot", line.Get("snapshot")});
  for (const SolverNet* net : {&solver.train}) {
    if (!absl::StartsWith(net->origin, "inline"))
      inputs.push_back({"the solver's net", net->origin});
  }
  for (const SolverNet& net : solver.tests) {
    if (!absl::StartsWith(net.origin, "inline"))
      inputs.push_back({"the solver's test net", net.origin});
  }
  if (dist.rank == 0) {
    // Found now, not at the first snapshot (after the whole run with `snapshot: 0`).
    const std::filesystem::path folder = std::filesystem::path(prefix).parent_path();
    KILN_RETURN_IF_ERROR(ProbeWritableFolder(
        folder.string(),
        absl::StrCat("train: snapshot_prefix '", prefix, "' (", solver_path, ")")));
    RemoveStalePartials(prefix);
    // Snapshots and the curve are replaced by a later run (Caffe's way); never an input.
    if (line.Has("curve")) {
      KILN_RETURN_IF_ERROR(
          CheckOutputFiles(inputs, {{"--curve", line.Get("curve")}}, ExistingOutput::kReplace));
    }
  }
  caffe::NetParameter weights;
  if (line.Has("weights")) {
    KILN_ASSIGN_OR_RETURN(weights, ReadNetParameter(line.Get("weights")));
    KILN_RETURN_IF_ERROR(CheckWeightsMatch(line, line.Get("weights"), solver.train.net, weights));
    options.weights = &weights;
  }
  // One rank of a data-parallel job (--rank/--world-size/--rendezvous), or the whole training.
  TrainerSetup setup;
  KILN_RETURN_IF_ERROR(setup.Create(dist, line.Get("device", "auto"), "train", solver, options));
  return setup.Ended(TrainLoop(line, dist, solver, prefix, inputs, setup));
}

absl::Status TrainLoop(const CommandLine& line, const DistributedFlags& dist,
                       const SolverConfig& solver, const std::string& prefix,
                       const std::vector<FlagPath>& inputs, TrainerSetup& setup) {
  const std::string solver_path = line.Get("solver");
  const caffe::SolverParameter& p = solver.param;
  SolverTrainer* trainer = setup.trainer();
  DataParallelWorker* worker = setup.worker.get();
  const bool root = dist.rank == 0;
  const int64_t world = dist.world_size;
  // Every rank restores from the same files, so they start equal again (as after a broadcast).
  if (line.Has("snapshot")) {
    KILN_RETURN_IF_ERROR(trainer->Restore(line.Get("snapshot")));
    if (root && !trainer->restore_note().empty()) {
      std::fprintf(stderr, "kiln train: note: %s\n", trainer->restore_note().c_str());
    }
  }
  if (root) {
    KILN_RETURN_IF_ERROR(CheckSnapshotsSpareInputs(prefix, trainer->iter(), p.max_iter(), inputs));
    KILN_RETURN_IF_ERROR(CheckRoomForSnapshot(*trainer, p.type(), prefix));
  }
  std::printf(
      "kiln train: %s%s, solver %s, %lld iterations of %lld images%s, backend %s\n",
      dist.enabled ? absl::StrCat("rank ", dist.rank, " of ", world, ": ").c_str() : "",
      solver_path.c_str(), p.type().c_str(), static_cast<long long>(p.max_iter()),
      static_cast<long long>(trainer->images_per_iteration() * world),
      dist.enabled ? absl::StrCat(" (", trainer->images_per_iteration(), " per rank)").c_str() : "",
      trainer->backend_description().c_str());
  std::fflush(stdout);
  TrainingSignals signals;
  TrainingCurve curve;
  curve.title =
      absl::StrCat(std::filesystem::path(solver_path).filename().string(), " (", p.type(), ")");
  Progress progress;
  const auto start = Clock::now();
  const int64_t first = trainer->iter();
  const int64_t stop = p.max_iter();
  auto snapshot = [&]() -> absl::Status {
    if (!root) return absl::OkStatus();  // rank 0 writes the snapshots (the weights are equal)
    KILN_ASSIGN_OR_RETURN(auto paths,
                          worker != nullptr ? worker->Snapshot(prefix) : trainer->Snapshot(prefix));
    progress.Break();
    std::printf("Snapshotting to %s and %s\n", paths.first.c_str(), paths.second.c_str());
    return absl::OkStatus();
  };
  while (trainer->iter() < stop) {
    if (p.test_interval() > 0 && trainer->iter() % p.test_interval() == 0 &&
        (trainer->iter() > 0 || p.test_initialization())) {
      KILN_RETURN_IF_ERROR(RunTests(*trainer, progress, curve, nullptr));
    }
    KILN_RETURN_IF_ERROR(InjectedRankFailure(dist.rank, trainer->iter()));
    absl::Status step = worker != nullptr ? worker->Step() : trainer->Step();
    if (!step.ok() && trainer->diverged()) {
      // The step stopped before changing anything: the state is the last good one.
      progress.Break();
      KILN_RETURN_IF_ERROR(snapshot());
      return absl::FailedPreconditionError(absl::StrCat(
          "train: ", step.message(), root ? "; the last good state was snapshotted" : ""));
    }
    KILN_RETURN_IF_ERROR(step);
    curve.loss.push_back({trainer->iter(), trainer->last_loss()});
    if (!std::isfinite(trainer->last_loss())) {
      // With several GPUs a diverged step has been applied already: no snapshot of it.
      progress.Break();
      return absl::FailedPreconditionError(absl::StrCat(
          "train: the loss is ", trainer->last_loss(), " at iteration ", trainer->iter(),
          " (diverged: lower base_lr, or use clip_gradients); not snapshotted, since with "
          "several GPUs the update had been applied"));
    }
    if (root && p.display() > 0 && (trainer->iter() - 1) % p.display() == 0) {
      progress.Break();
      std::printf("Iteration %lld (%.2f s), loss = %.6g, lr = %.6g\n",
                  static_cast<long long>(trainer->iter() - 1), Seconds(start),
                  trainer->smoothed_loss(), trainer->last_rate());
      std::fflush(stdout);
    }
    if (root) progress.Update(*trainer, first, stop, false, world);
    if (p.snapshot() > 0 && trainer->iter() % p.snapshot() == 0) KILN_RETURN_IF_ERROR(snapshot());
    if (snapshot_requested && !interrupted) {
      snapshot_requested = 0;
      if (root) {
        progress.Break();
        std::printf("SIGUSR1 at iteration %lld: snapshotting, training goes on\n",
                    static_cast<long long>(trainer->iter()));
      }
      KILN_RETURN_IF_ERROR(snapshot());
    }
    if (interrupted) {
      const char* name = interrupted == SIGTERM ? "SIGTERM" : "SIGINT";
      if (!root) return absl::CancelledError(absl::StrCat("train: interrupted by ", name));
      progress.Break();
      std::printf("Interrupted by %s at iteration %lld: snapshotting before stopping\n", name,
                  static_cast<long long>(trainer->iter()));
      KILN_RETURN_IF_ERROR(snapshot());
      return absl::CancelledError(
          absl::StrCat("train: interrupted by ", name, " (snapshot written)"));
    }
  }
  const double seconds = Seconds(start);
  if (!root) {
    std::printf("kiln train: rank %d finished %lld iterations in %.1f s\n", dist.rank,
                static_cast<long long>(trainer->iter() - first), seconds);
    return absl::OkStatus();
  }
  progress.Update(*trainer, first, stop, true, world);
  progress.Break();
  // Caffe's rule: not twice at one iteration (the loop has just snapshotted at a multiple).
  if (p.snapshot_after_train() && (p.snapshot() <= 0 || trainer->iter() % p.snapshot() != 0)) {
    KILN_RETURN_IF_ERROR(snapshot());
  }
  std::string summary;
  if (trainer->num_test_nets() > 0) {
    KILN_RETURN_IF_ERROR(RunTests(*trainer, progress, curve, &summary));
  }
  const std::string curve_path =
      line.Get("curve", absl::StrCat(prefix, "_iter_", trainer->iter(), "_curve.svg"));
  KILN_RETURN_IF_ERROR(WriteFileBytes(curve_path, TrainingCurveSvg(curve)));
  const double images = static_cast<double>(trainer->iter() - first) *
                        static_cast<double>(trainer->images_per_iteration() * world);
  std::printf("kiln train: %lld iterations in %.1f s (%.0f images/s), final loss %.4f%s%s\n",
              static_cast<long long>(trainer->iter() - first), seconds,
              seconds > 0 ? images / seconds : 0.0, trainer->smoothed_loss(),
              summary.empty() ? "" : "; final test: ", summary.c_str());
  std::printf("kiln train: curve written to %s\n", curve_path.c_str());
  return absl::OkStatus();
}

absl::Status Test(const CommandLine& line) {
  if (!line.Has("model") || !line.Has("weights")) {
    return absl::InvalidArgumentError("test: --model and --weights are required");
  }
  int iterations = 50;  // Caffe's default
  if (line.Has("iterations") &&
      (!absl::SimpleAtoi(line.Get("iterations"), &iterations) || iterations < 1)) {
    return absl::InvalidArgumentError("test: --iterations must be a positive number");
  }
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter net, ReadNetParameter(line.Get("model")));
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter weights, ReadNetParameter(line.Get("weights")));
  KILN_RETURN_IF_ERROR(CheckWeightsMatch(line, line.Get("weights"), net, weights));
  KILN_RETURN_IF_ERROR(CheckCommandFiles(line, {}, {}));  // the --tuning-file
  TrainerOptions options;
  KILN_RETURN_IF_ERROR(ParsePlanFlags(line, options.compile));
  options.weights = &weights;
  options.solver_dir = std::filesystem::path(line.Get("model")).parent_path().string();
  KILN_ASSIGN_OR_RETURN(std::vector<NetOutput> outputs, TestNet(net, iterations, options));
  for (const NetOutput& o : outputs) {
    std::printf(
        "%s = %.6g%s\n", o.name.c_str(), o.value,
        o.loss_weight != 0
            ? absl::StrFormat(" (* %g = %.6g loss)", o.loss_weight, o.value * o.loss_weight).c_str()
            : "");
  }
  return absl::OkStatus();
}

std::string JsonEscape(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

int Report(const absl::Status& status, const char* command) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "kiln %s: %s\n", command, status.ToString().c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace

absl::Status TimeTrainingStep(const CommandLine& line) {
  if (!line.Has("model")) return absl::InvalidArgumentError("time --train: --model is required");
  KILN_ASSIGN_OR_RETURN(DistributedFlags dist, ParseDistributedFlags(line, "time --train"));
  CaffeImportOptions shapes;
  KILN_RETURN_IF_ERROR(ParseCommonOptions(line, shapes));
  if (shapes.input_shapes.empty()) {
    return absl::InvalidArgumentError(
        "time --train: give the data tops' shapes with --input-shape TOP=N,C,H,W (and the "
        "labels': --input-shape label=N)");
  }
  int iterations = 30;
  if (line.Has("iterations") &&
      (!absl::SimpleAtoi(line.Get("iterations"), &iterations) || iterations < 1)) {
    return absl::InvalidArgumentError("time --train: --iterations must be a positive number");
  }
  SolverConfig solver;
  if (line.Has("solver")) {
    KILN_ASSIGN_OR_RETURN(solver, LoadSolver(line.Get("solver")));
    solver.tests.clear();
  } else {
    solver.param.set_type("SGD");
    solver.param.set_base_lr(0.01f);
    solver.param.set_momentum(0.9f);
    solver.param.set_weight_decay(0.0005f);
    solver.param.set_lr_policy("fixed");
  }
  KILN_ASSIGN_OR_RETURN(solver.train.net, ReadNetParameter(line.Get("model")));
  solver.train.state.set_phase(caffe::TRAIN);
  solver.train.origin = line.Get("model");
  TrainerOptions options;
  KILN_RETURN_IF_ERROR(ParsePlanFlags(line, options.compile));
  KILN_RETURN_IF_ERROR(ParseLossScale(line, options));
  options.synthetic_data = shapes.input_shapes;
  const bool json = line.Has("json");
  const bool root = dist.rank == 0;
  if (!json && root) std::fprintf(stderr, "kiln time --train: compiling...\n");
  // One rank of a data-parallel job times its own steps (each includes the all-reduce); rank 0
  // reports world x batch images per median step.
  TrainerSetup setup;
  KILN_RETURN_IF_ERROR(
      setup.Create(dist, line.Get("device", "auto"), "time --train", solver, options));
  SolverTrainer* trainer = setup.trainer();
  if (!json && root) std::fprintf(stderr, "kiln time --train: timing %d steps...\n", iterations);
  absl::StatusOr<double> timed = trainer->TimeSteps(iterations);
  if (!timed.ok()) return setup.Ended(timed.status());
  const double ms = *timed;
  if (!root) return absl::OkStatus();
  const TrainerMemory m = trainer->Memory();
  const int64_t images_per_step = trainer->images_per_iteration() * dist.world_size;
  const double images = ms > 0 ? images_per_step * 1000.0 / ms : 0;
  if (line.Has("profile")) {
    // Where a step's time goes: the plan's steps by op (forward and backward ops apart), on
    // stderr so --json stays one object.
    KILN_ASSIGN_OR_RETURN(std::vector<SolverTrainer::StepTime> steps, trainer->ProfilePass());
    std::map<std::string, std::pair<double, int>> by_op;
    double total = 0;
    for (const SolverTrainer::StepTime& s : steps) {
      by_op[s.op].first += s.ms;
      by_op[s.op].second += 1;
      total += s.ms;
    }
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [op, t] : by_op) order.push_back({t.first, op});
    std::sort(order.rbegin(), order.rend());
    std::fprintf(stderr,
                 "profile (one instrumented pass, %.3f ms of plan steps; the update is "
                 "apart):\n",
                 total);
    for (const auto& [ms, op] : order) {
      std::fprintf(stderr, "  %-34s %3d steps %9.3f ms %5.1f%%\n", op.c_str(), by_op[op].second, ms,
                   total > 0 ? 100.0 * ms / total : 0.0);
    }
    // Every step in plan order, as tab-separated values, for comparing two runs step by step.
    if (line.Has("profile-steps")) {
      std::string table = "step\tms\top\tnode\tshape\tchoice\n";
      for (size_t i = 0; i < steps.size(); ++i) {
        absl::StrAppend(&table, i, "\t", absl::StrFormat("%.4f", steps[i].ms), "\t", steps[i].op,
                        "\t", steps[i].node, "\t", steps[i].shape, "\t", steps[i].description,
                        "\n");
      }
      absl::Status written = WriteFileBytes(line.Get("profile-steps"), table);
      if (!written.ok()) {
        return absl::Status(written.code(),
                            absl::StrCat("time --train: --profile-steps ", written.message()));
      }
    }
    // The slowest steps one by one, with what their kernels chose: where to look next.
    std::vector<const SolverTrainer::StepTime*> slowest;
    for (const SolverTrainer::StepTime& s : steps) slowest.push_back(&s);
    std::sort(slowest.begin(), slowest.end(),
              [](const SolverTrainer::StepTime* a, const SolverTrainer::StepTime* b) {
                return a->ms > b->ms;
              });
    std::fprintf(stderr, "slowest steps:\n");
    for (size_t i = 0; i < slowest.size() && i < 25; ++i) {
      const SolverTrainer::StepTime& s = *slowest[i];
      std::fprintf(stderr, "  %8.3f ms  %-26s %-30s %s  [%s]\n", s.ms, s.op.c_str(), s.node.c_str(),
                   s.shape.c_str(), s.description.c_str());
    }
  }
  if (json) {
    std::printf(
        "{\"model\": %s, \"images_per_step\": %lld, \"world_size\": %d, \"backend\": %s, "
        "\"iterations\": %d, "
        "\"train_step_ms\": %.4f, \"images_per_second\": %.1f, \"memory\": {\"weights_bytes\": "
        "%lld, \"optimizer_bytes\": %lld, \"activations_bytes\": %lld, \"workspace_bytes\": %lld, "
        "\"io_bytes\": %lld, \"total_bytes\": %lld}}\n",
        JsonEscape(line.Get("model")).c_str(), static_cast<long long>(images_per_step),
        dist.world_size, JsonEscape(trainer->backend_description()).c_str(), iterations, ms, images,
        static_cast<long long>(m.weights), static_cast<long long>(m.optimizer),
        static_cast<long long>(m.activations), static_cast<long long>(m.workspace),
        static_cast<long long>(m.io), static_cast<long long>(m.total()));
    return absl::OkStatus();
  }
  std::printf(
      "%s: training step (forward, backward, %s update) on %s%s\n", line.Get("model").c_str(),
      solver.param.type().c_str(), trainer->backend_description().c_str(),
      dist.enabled ? absl::StrCat(", ", dist.world_size, " ranks (all-reduce included)").c_str()
                   : "");
  std::printf("step (median of %d): %.4f ms, %.1f images/s\n", iterations, ms, images);
  std::printf(
      "device memory: weights %.1f MiB, parameters+gradients+history %.1f MiB, activations "
      "%.1f MiB, workspace %.1f MiB, inputs/outputs %.1f MiB, total %.1f MiB\n",
      m.weights / 1048576.0, m.optimizer / 1048576.0, m.activations / 1048576.0,
      m.workspace / 1048576.0, m.io / 1048576.0, m.total() / 1048576.0);
  return absl::OkStatus();
}

int TrainCommand(int argc, char** argv) {
  std::set<std::string> flags = {"solver", "weights",   "snapshot",  "iterations",
                                 "curve",  "data-seed", "loss-scale"};
  flags.insert(PlanFlagNames().begin(), PlanFlagNames().end());
  flags.insert(DistributedFlagNames().begin(), DistributedFlagNames().end());
  std::set<std::string> switches = DistributedSwitchNames();
  switches.insert("allow-missing-weights");
  absl::StatusOr<CommandLine> line = CommandLine::Parse(argc, argv, 2, flags, switches);
  if (!line.ok()) return Report(line.status(), "train");
  if (line->Has("gpus")) {
    absl::StatusOr<DistributedFlags> dist = ParseDistributedFlags(*line, "train");
    if (!dist.ok()) return Report(dist.status(), "train");
    if (!line->Has("solver"))
      return Report(absl::InvalidArgumentError("train: --solver is required"), "train");
    return Report(LaunchOnGpus(argc, argv, 2, "train"), "train");
  }
  return Report(Train(*line), "train");
}

int TestCommand(int argc, char** argv) {
  std::set<std::string> flags = {"model", "weights", "iterations"};
  flags.insert(PlanFlagNames().begin(), PlanFlagNames().end());
  absl::StatusOr<CommandLine> line =
      CommandLine::Parse(argc, argv, 2, flags, {"allow-missing-weights"});
  if (!line.ok()) return Report(line.status(), "test");
  return Report(Test(*line), "test");
}

}  // namespace kiln
