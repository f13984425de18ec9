// Several GPUs from the command line (issue 18): the flags that make a `kiln train` or
// `kiln time --train` process one rank of a data-parallel job (--rank, --world-size,
// --rendezvous, --sync-bn, --no-overlap, --dist-timeout), and the launcher behind `--gpus`, which
// starts one such process per GPU on this machine and supervises them. One process per GPU because
// the executor always uses CUDA device 0: each child sees only its GPU (CUDA_VISIBLE_DEVICES). See
// docs/DISTRIBUTED.md.
#ifndef KILN_TOOLS_MULTI_GPU_LAUNCH_H_
#define KILN_TOOLS_MULTI_GPU_LAUNCH_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "distributed/communicator.h"

namespace kiln {

class CommandLine;

// The flags below, for CommandLine::Parse: values, then switches.
const std::set<std::string>& DistributedFlagNames();
const std::set<std::string>& DistributedSwitchNames();

// What --rank/--world-size/--rendezvous/--sync-bn/--no-overlap/--dist-timeout ask for.
struct DistributedFlags {
  bool enabled = false;  // --rank, --world-size or --rendezvous was given
  int rank = 0;
  int world_size = 1;
  std::string rendezvous;  // as OpenRendezvous accepts: HOST:PORT, tcp://..., file:PATH
  bool sync_batch_norm = false;
  // DataParallelOptions::overlap_with_backward; --no-overlap turns it off (all gradient
  // all-reduces after backward; the TRAIN plan may then replay a CUDA graph).
  bool overlap_with_backward = true;
  // The rendezvous and communicator timeout: how long a rank waits for a dead or late peer.
  absl::Duration timeout = absl::Minutes(5);
};

// Parses and checks the flags of one rank. All three of --rank, --world-size and --rendezvous
// are needed together; InvalidArgument (prefixed with `command`) names what is wrong. --gpus is
// not accepted together with them.
absl::StatusOr<DistributedFlags> ParseDistributedFlags(const CommandLine& line,
                                                       absl::string_view command);

// --gpus all|0,1,...: the CUDA ordinals to use, given how many this machine has (`available`,
// and `why_none` when it has none). InvalidArgument for a malformed list, a repeated or missing
// GPU; FailedPrecondition naming `why_none` when there is no GPU at all.
absl::StatusOr<std::vector<int>> ParseGpuList(absl::string_view spec, int available,
                                              absl::string_view why_none);

// argv[first..argc) without the flags named in `drop` (both --name value and --name=value).
std::vector<std::string> ArgsWithout(int argc, char** argv, int first,
                                     const std::set<std::string>& drop);

struct LaunchOptions {
  // The program (an absolute path) and its arguments, before the rank flags are appended.
  std::string program;
  std::vector<std::string> args;
  std::vector<int> gpus;  // one child per entry; child i gets CUDA_VISIBLE_DEVICES=gpus[i]
  // This process's CUDA_VISIBLE_DEVICES entries, when it had one: GPU g is then its entry g (so
  // `--gpus 0,1` under CUDA_VISIBLE_DEVICES=2,3 runs on the devices 2 and 3).
  std::vector<std::string> visible_devices;
  // With more than one GPU each child also gets --rank i --world-size n --rendezvous file:...
  // (a private temporary folder); with one, the arguments unchanged.
  bool add_rank_flags = true;
  // After the first failure the others get SIGTERM, then SIGKILL after this grace.
  absl::Duration kill_grace = absl::Seconds(10);
  // Where children other than rank 0 write their output (a private temporary folder if empty).
  std::string log_dir;
};

// Starts one child per GPU and waits for them. Rank 0 keeps this process's stdout and stderr;
// the others write to <log_dir>/rank<r>.log. When a child fails (a non-zero exit or a signal)
// the others are stopped and the error names the rank, its exit status and the end of its log.
// SIGINT (Ctrl-C) is given to rank 0 alone, which snapshots and stops; the others are then
// stopped and the result is Cancelled.
absl::Status LaunchWorkers(const LaunchOptions& options);

// `kiln <command> ... --gpus LIST`: checks the list against the GPUs this machine has and that
// the build has NCCL (for more than one), then runs this program once per GPU with the same
// arguments (argv[first..) without --gpus) through LaunchWorkers. `argv[1..first)` is the
// subcommand ("train", or "time").
absl::Status LaunchOnGpus(int argc, char** argv, int first, absl::string_view command);

// One rank joins its job: rank 0 makes an NCCL unique id, the rendezvous at flags.rendezvous
// gives it to every rank, and each creates its NcclCommunicator on CUDA device 0 (the one GPU
// the launcher left visible). FailedPrecondition when the build has no NCCL or `device` (the
// --device flag) is not a GPU one.
absl::StatusOr<std::unique_ptr<Communicator>> JoinNcclJob(const DistributedFlags& flags,
                                                          absl::string_view device,
                                                          absl::string_view command);

}  // namespace kiln

#endif  // KILN_TOOLS_MULTI_GPU_LAUNCH_H_
