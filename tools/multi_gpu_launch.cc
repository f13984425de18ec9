#include "tools/multi_gpu_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "distributed/nccl_communicator.h"
#include "distributed/open_rendezvous.h"
#include "runtime/device.h"
#include "tools/command_line.h"

extern char** environ;

namespace kiln {

namespace {

volatile sig_atomic_t launcher_interrupted = 0;
void OnLauncherInterrupt(int) { launcher_interrupted = 1; }

absl::Status Bad(absl::string_view command, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(command, ": ", message));
}

// The last `lines` lines of a file (empty when unreadable).
std::string Tail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  const size_t from = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i) absl::StrAppend(&out, "\n    ", all[i]);
  return out;
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)),
                        ")");
  }
  return absl::StrCat("wait status ", status);
}

struct Child {
  int rank = 0;
  int gpu = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  std::string log;  // empty for rank 0 (this process's own output)
};

}  // namespace

const std::set<std::string>& DistributedFlagNames() {
  static const auto* names =
      new std::set<std::string>{"rank", "world-size", "rendezvous", "gpus", "dist-timeout"};
  return *names;
}

const std::set<std::string>& DistributedSwitchNames() {
  static const auto* names = new std::set<std::string>{"sync-bn", "no-overlap"};
  return *names;
}

absl::StatusOr<DistributedFlags> ParseDistributedFlags(const CommandLine& line,
                                                       absl::string_view command) {
  DistributedFlags flags;
  const bool any = line.Has("rank") || line.Has("world-size") || line.Has("rendezvous");
  if (line.Has("gpus") && any) {
    return Bad(command,
               "--gpus starts one process per GPU itself; give either --gpus or --rank, "
               "--world-size and --rendezvous (one process of a job of several machines)");
  }
  if (line.Has("dist-timeout")) {
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(line.Get("dist-timeout"), &seconds) || seconds < 1) {
      return Bad(command, absl::StrCat("--dist-timeout ", line.Get("dist-timeout"),
                                       ": expected a positive number of seconds"));
    }
    flags.timeout = absl::Seconds(seconds);
  }
  flags.sync_batch_norm = line.Has("sync-bn");
  flags.overlap_with_backward = !line.Has("no-overlap");
  if (!any) {
    for (const char* name : {"sync-bn", "no-overlap"}) {
      if (line.Has(name) && !line.Has("gpus")) {
        return Bad(command, absl::StrCat("--", name,
                                         " needs several ranks (--gpus, or --rank/--world-size)"));
      }
    }
    return flags;
  }
  for (const char* name : {"rank", "world-size", "rendezvous"}) {
    if (!line.Has(name)) {
      return Bad(command, absl::StrCat("--", name,
                                       " is missing: a rank of a multi-process job needs --rank, "
                                       "--world-size and --rendezvous together"));
    }
  }
  flags.enabled = true;
  if (!absl::SimpleAtoi(line.Get("world-size"), &flags.world_size) || flags.world_size < 1) {
    return Bad(command, absl::StrCat("--world-size ", line.Get("world-size"),
                                     ": expected a positive number of processes"));
  }
  if (!absl::SimpleAtoi(line.Get("rank"), &flags.rank) || flags.rank < 0 ||
      flags.rank >= flags.world_size) {
    return Bad(command,
               absl::StrCat("--rank ", line.Get("rank"), ": expected 0..", flags.world_size - 1,
                            " (--world-size ", flags.world_size, ")"));
  }
  flags.rendezvous = line.Get("rendezvous");
  if (flags.rendezvous.empty()) {
    return Bad(command, "--rendezvous is empty: give HOST:PORT, tcp://HOST:PORT or file:PATH");
  }
  // Rank 0 replaces the file:PATH with its answer, then removes it: it must not be a user's file.
  if (absl::StartsWith(flags.rendezvous, "file:")) {
    const std::string path = flags.rendezvous.substr(5);
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return Bad(command, absl::StrCat("--rendezvous ", flags.rendezvous,
                                       ": is a folder; give a file name for the rendezvous"));
    }
    if (std::filesystem::exists(path, ec)) {
      std::ifstream in(path, std::ios::binary);
      std::string head(15, '\0');
      in.read(&head[0], static_cast<std::streamsize>(head.size()));
      if (head != "kiln-rendezvous") {
        return Bad(command, absl::StrCat("--rendezvous ", flags.rendezvous, ": ", path,
                                         " exists and is not a rendezvous file; rank 0 would "
                                         "replace and remove it (give a fresh path)"));
      }
    }
  }
  return flags;
}

absl::StatusOr<std::vector<int>> ParseGpuList(absl::string_view spec, int available,
                                              absl::string_view why_none) {
  if (available <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--gpus ", spec, ": no usable CUDA device on this machine",
                     why_none.empty() ? "" : absl::StrCat(" (", why_none, ")"),
                     "; train on one device without --gpus (--device cpu runs on the CPU)"));
  }
  std::vector<int> gpus;
  if (spec == "all") {
    for (int i = 0; i < available; ++i) gpus.push_back(i);
    return gpus;
  }
  if (spec.empty()) return absl::InvalidArgumentError("--gpus: expected all or a list like 0,1");
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    int gpu = -1;
    if (!absl::SimpleAtoi(part, &gpu) || gpu < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--gpus ", spec, ": '", part, "' is not a GPU number (expected all or a list like 0,1)"));
    }
    if (gpu >= available) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus ", spec, ": GPU ", gpu, " does not exist (this machine has ",
                       available, " CUDA device", available == 1 ? "" : "s", ")"));
    }
    for (int g : gpus) {
      if (g == gpu) {
        return absl::InvalidArgumentError(
            absl::StrCat("--gpus ", spec, ": GPU ", gpu, " is listed twice"));
      }
    }
    gpus.push_back(gpu);
  }
  return gpus;
}

std::vector<std::string> ArgsWithout(int argc, char** argv, int first,
                                     const std::set<std::string>& drop) {
  std::vector<std::string> out;
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (drop.count(name) > 0) {
        if (eq == std::string::npos && i + 1 < argc) ++i;  // its value
        continue;
      }
    }
    out.push_back(arg);
  }
  return out;
}

absl::Status LaunchWorkers(const LaunchOptions& options) {
  if (options.gpus.empty()) return absl::InvalidArgumentError("launch: no GPUs given");
  const int n = static_cast<int>(options.gpus.size());
  // A private folder for the rendezvous files and the other ranks' logs.
  std::string dir = options.log_dir;
  bool own_dir = false;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/kiln-gpus-XXXXXX");
    if (mkdtemp(&pattern[0]) == nullptr) {
      return absl::InternalError(absl::StrCat("launch: cannot create a temporary folder ", pattern,
                                              ": ", strerror(errno)));
    }
    dir = pattern;
    own_dir = true;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
  }
  // Everything the children need is prepared before fork: the child only calls
  // async-signal-safe functions before exec.
  std::vector<std::vector<std::string>> argvs(n);
  std::vector<std::vector<std::string>> envs(n);
  std::vector<Child> children(n);
  for (int r = 0; r < n; ++r) {
    argvs[r].push_back(options.program);
    for (const std::string& a : options.args) argvs[r].push_back(a);
    if (options.add_rank_flags && n > 1) {
      for (const std::string& a :
           {std::string("--rank"), absl::StrCat(r), std::string("--world-size"), absl::StrCat(n),
            std::string("--rendezvous"), absl::StrCat("file:", dir, "/rdzv")}) {
        argvs[r].push_back(a);
      }
    }
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) envs[r].push_back(*e);
    }
    const int gpu = options.gpus[r];
    envs[r].push_back(
        absl::StrCat("CUDA_VISIBLE_DEVICES=", gpu < static_cast<int>(options.visible_devices.size())
                                                  ? options.visible_devices[gpu]
                                                  : absl::StrCat(gpu)));
    children[r].rank = r;
    children[r].gpu = options.gpus[r];
    if (r > 0) children[r].log = absl::StrCat(dir, "/rank", r, ".log");
  }
  struct sigaction old_int {
  }, on_int{};
  on_int.sa_handler = OnLauncherInterrupt;
  sigemptyset(&on_int.sa_mask);
  launcher_interrupted = 0;
  sigaction(SIGINT, &on_int, &old_int);
  const pid_t parent = getpid();
  absl::Status start_error;
  for (int r = 0; r < n && start_error.ok(); ++r) {
    int log_fd = -1;
    if (!children[r].log.empty()) {
      log_fd = open(children[r].log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (log_fd < 0) {
        start_error = absl::InternalError(
            absl::StrCat("launch: cannot write ", children[r].log, ": ", strerror(errno)));
        break;
      }
    }
    std::vector<char*> argv, envp;
    for (std::string& a : argvs[r]) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    for (std::string& e : envs[r]) envp.push_back(&e[0]);
    envp.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      // Its own process group, so a Ctrl-C at the terminal reaches the launcher alone (which
      // gives it to rank 0); and it ends if the launcher dies.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(126);
      signal(SIGINT, SIG_DFL);
      if (log_fd >= 0) {
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
      }
      execve(argv[0], argv.data(), envp.data());
      const char* why = strerror(errno);
      const char* what = "launch: cannot run ";
      (void)!write(STDERR_FILENO, what, strlen(what));
      (void)!write(STDERR_FILENO, argv[0], strlen(argv[0]));
      (void)!write(STDERR_FILENO, ": ", 2);
      (void)!write(STDERR_FILENO, why, strlen(why));
      (void)!write(STDERR_FILENO, "\n", 1);
      _exit(127);
    }
    if (log_fd >= 0) close(log_fd);
    if (pid < 0) {
      start_error =
          absl::InternalError(absl::StrCat("launch: fork for rank ", r, ": ", strerror(errno)));
      break;
    }
    children[r].pid = pid;
    children[r].running = true;
  }
  // Supervise: the first failure stops the others; an interrupt goes to rank 0 alone, and once
  // rank 0 has stopped (after its snapshot) the others are stopped too.
  int failed = -1;
  bool stopping = !start_error.ok();
  bool forwarded = false;
  auto deadline = std::chrono::steady_clock::now();
  auto stop_all = [&] {
    for (Child& c : children) {
      if (c.running) kill(c.pid, SIGTERM);
    }
    deadline = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(absl::ToInt64Milliseconds(options.kill_grace));
  };
  if (stopping) stop_all();
  for (;;) {
    int running = 0;
    for (Child& c : children) {
      if (!c.running) continue;
      int status = 0;
      const pid_t got = waitpid(c.pid, &status, WNOHANG);
      if (got == c.pid) {
        c.running = false;
        c.status = status;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (forwarded && c.rank == 0) {
          // Rank 0 stopped after the interrupt (its snapshot written): stop the rest.
          if (!stopping) stop_all();
          stopping = true;
        } else if (!ok && !stopping) {
          failed = c.rank;
          stopping = true;
          stop_all();
        }
      } else if (got < 0 && errno == ECHILD) {
        c.running = false;
      } else {
        ++running;
      }
    }
    if (running == 0) break;
    if (launcher_interrupted && !forwarded && children[0].running) {
      forwarded = true;
      std::fprintf(stderr, "kiln: interrupted: rank 0 snapshots, then every rank stops\n");
      kill(children[0].pid, SIGINT);
    }
    if (stopping && std::chrono::steady_clock::now() > deadline) {
      for (Child& c : children) {
        if (c.running) kill(c.pid, SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sigaction(SIGINT, &old_int, nullptr);
  absl::Status result = start_error;
  if (result.ok() && failed >= 0) {
    const Child& c = children[failed];
    std::string message = absl::StrCat("rank ", c.rank, " (GPU ", c.gpu, ", pid ", c.pid,
                                       ") failed: ", DescribeExit(c.status));
    if (c.log.empty()) {
      absl::StrAppend(&message, " (its error is above)");
    } else {
      absl::StrAppend(&message, "; the end of its log ", c.log, ":", Tail(c.log, 8));
    }
    absl::StrAppend(&message, "; the other ranks were stopped");
    result = forwarded ? absl::CancelledError(message) : absl::AbortedError(message);
  } else if (result.ok() && forwarded) {
    result = absl::CancelledError("interrupted (rank 0 wrote a snapshot)");
  }
  if (own_dir && result.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return result;
}

absl::Status LaunchOnGpus(int argc, char** argv, int first, absl::string_view command) {
  std::string spec;
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--gpus" && i + 1 < argc) spec = argv[i + 1];
    if (arg.rfind("--gpus=", 0) == 0) spec = arg.substr(7);
  }
  const CudaProbe probe = ProbeCuda();
  const int available = probe.usable ? static_cast<int>(probe.devices.size()) : 0;
  absl::StatusOr<std::vector<int>> gpus = ParseGpuList(spec, available, probe.reason);
  if (!gpus.ok()) {
    return absl::Status(gpus.status().code(), absl::StrCat(command, ": ", gpus.status().message()));
  }
  if (gpus->size() > 1 && !NcclAvailable()) {
    return absl::FailedPreconditionError(absl::StrCat(
        command, ": --gpus ", spec,
        ": this kiln was built without NCCL (no nccl.h/libnccl.so in the CUDA toolkit it was "
        "built with), so it cannot all-reduce across GPUs; use one GPU or rebuild with NCCL"));
  }
  LaunchOptions options;
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) {
    return absl::InternalError(
        absl::StrCat(command, ": cannot find this program (/proc/self/exe): ", strerror(errno)));
  }
  options.program.assign(self, len);
  for (int i = 1; i < first; ++i) options.args.push_back(argv[i]);
  for (const std::string& a : ArgsWithout(argc, argv, first, {"gpus"})) options.args.push_back(a);
  options.gpus = *gpus;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr && *visible) {
    options.visible_devices = absl::StrSplit(visible, ',');
  }
  std::fprintf(stderr, "kiln %s: %zu process%s on GPU%s %s%s\n", std::string(command).c_str(),
               gpus->size(), gpus->size() == 1 ? "" : "es", gpus->size() == 1 ? "" : "s",
               absl::StrJoin(*gpus, ",").c_str(),
               gpus->size() > 1 ? " (rank 0 reports; the others log to a temporary folder)" : "");
  absl::Status status = LaunchWorkers(options);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(command, ": ", status.message()));
  }
  return status;
}

absl::StatusOr<std::unique_ptr<Communicator>> JoinNcclJob(const DistributedFlags& flags,
                                                          absl::string_view device,
                                                          absl::string_view command) {
  if (device == "cpu" || device == "reference") {
    return absl::FailedPreconditionError(absl::StrCat(
        command, ": --rank/--world-size need GPUs (the ranks all-reduce with NCCL); --device ",
        device, " has no multi-process communicator"));
  }
  if (!NcclAvailable()) {
    return absl::FailedPreconditionError(absl::StrCat(
        command, ": this kiln was built without NCCL, so it cannot be a rank of a multi-GPU job"));
  }
  const CudaProbe probe = ProbeCuda();
  if (!probe.usable) {
    return absl::FailedPreconditionError(absl::StrCat(command, ": rank ", flags.rank,
                                                      " has no usable CUDA device (", probe.reason,
                                                      "); every rank needs a GPU"));
  }
  RendezvousOptions rendezvous_options;
  rendezvous_options.rank = flags.rank;
  rendezvous_options.world_size = flags.world_size;
  rendezvous_options.timeout = flags.timeout;
  auto prefix = [&](const absl::Status& s, absl::string_view what) {
    return absl::Status(s.code(), absl::StrCat(command, ": rank ", flags.rank, " of ",
                                               flags.world_size, ": ", what, ": ", s.message()));
  };
  absl::StatusOr<std::unique_ptr<Rendezvous>> rendezvous =
      OpenRendezvous(flags.rendezvous, rendezvous_options);
  if (!rendezvous.ok()) return prefix(rendezvous.status(), "rendezvous " + flags.rendezvous);
  std::string id;
  if (flags.rank == 0) {
    absl::StatusOr<std::string> made = NewNcclUniqueId();
    if (!made.ok()) return prefix(made.status(), "NCCL unique id");
    id = *made;
  }
  absl::StatusOr<std::string> shared = (*rendezvous)->ShareFromRankZero(id);
  if (!shared.ok()) return prefix(shared.status(), "rendezvous " + flags.rendezvous);
  NcclOptions nccl;
  nccl.cuda_device = 0;
  nccl.timeout = flags.timeout;
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      CreateNcclCommunicator(*shared, flags.rank, flags.world_size, nccl);
  if (!comm.ok()) return prefix(comm.status(), "NCCL communicator");
  return comm;
}

}  // namespace kiln
