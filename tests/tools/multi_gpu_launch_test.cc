// The multi-GPU launcher and the rank flags, on the CPU: --gpus lists against a machine's GPUs,
// the rank flags' checks, the arguments forwarded to the children, and the supervision itself
// with /bin/sh children standing in for `kiln train` ranks (environment and rank flags given,
// a failing or killed rank stopping the others with its error, a child that ignores SIGTERM
// killed after the grace, Ctrl-C going to rank 0 alone).
#include "tools/multi_gpu_launch.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"
#include "tools/command_line.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<CommandLine> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"kiln", "train"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  std::set<std::string> flags = DistributedFlagNames();
  flags.insert("solver");
  return CommandLine::Parse(static_cast<int>(argv.size()), argv.data(), 2, flags,
                            DistributedSwitchNames());
}

absl::StatusOr<DistributedFlags> Flags(std::vector<std::string> args) {
  absl::StatusOr<CommandLine> line = Parse(std::move(args));
  if (!line.ok()) return line.status();
  return ParseDistributedFlags(*line, "train");
}

TEST(GpuListTest, AllAndListsAgainstTheMachine) {
  EXPECT_EQ(*ParseGpuList("all", 2, ""), (std::vector<int>{0, 1}));
  EXPECT_EQ(*ParseGpuList("1,0", 2, ""), (std::vector<int>{1, 0}));
  EXPECT_EQ(*ParseGpuList("3", 4, ""), (std::vector<int>{3}));
}

TEST(GpuListTest, BadListsAndNoGpuSayWhy) {
  absl::StatusOr<std::vector<int>> r = ParseGpuList("0,2", 2, "");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("GPU 2 does not exist"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("has 2 CUDA devices"));
  r = ParseGpuList("0,0", 2, "");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("listed twice"));
  r = ParseGpuList("0,x", 2, "");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'x' is not a GPU number"));
  r = ParseGpuList("", 2, "");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = ParseGpuList("-1", 2, "");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = ParseGpuList("all", 0, "no driver here");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("no usable CUDA device"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("no driver here"));
}

TEST(DistributedFlagsTest, ParsesARank) {
  absl::StatusOr<DistributedFlags> f = Flags({"--rank", "1", "--world-size", "4", "--rendezvous",
                                              "host:29500", "--sync-bn", "--dist-timeout", "7"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->enabled);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->world_size, 4);
  EXPECT_EQ(f->rendezvous, "host:29500");
  EXPECT_TRUE(f->sync_batch_norm);
  EXPECT_TRUE(f->overlap_with_backward);
  EXPECT_EQ(f->timeout, absl::Seconds(7));
  f = Flags({});
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->enabled);
  EXPECT_EQ(f->world_size, 1);
  f = Flags({"--gpus", "all", "--sync-bn"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->sync_batch_norm);
  f = Flags({"--gpus", "all", "--no-overlap"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->overlap_with_backward);
  EXPECT_FALSE(f->sync_batch_norm);
  f = Flags({"--rank", "0", "--world-size", "2", "--rendezvous", "h:1", "--no-overlap"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->overlap_with_backward);
}

TEST(DistributedFlagsTest, BadFlagsSayWhatIsWrong) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--rank", "0", "--world-size", "2"}, "--rendezvous is missing"},
      {{"--rank", "0", "--rendezvous", "h:1"}, "--world-size is missing"},
      {{"--world-size", "2", "--rendezvous", "h:1"}, "--rank is missing"},
      {{"--rank", "2", "--world-size", "2", "--rendezvous", "h:1"}, "expected 0..1"},
      {{"--rank", "-1", "--world-size", "2", "--rendezvous", "h:1"}, "expected 0..1"},
      {{"--rank", "0", "--world-size", "0", "--rendezvous", "h:1"}, "positive number"},
      {{"--rank", "0", "--world-size", "two", "--rendezvous", "h:1"}, "positive number"},
      {{"--rank", "0", "--world-size", "1", "--rendezvous", ""}, "--rendezvous is empty"},
      {{"--gpus", "0,1", "--rank", "0"}, "give either --gpus or --rank"},
      {{"--sync-bn"}, "--sync-bn needs several ranks"},
      {{"--no-overlap"}, "--no-overlap needs several ranks"},
      {{"--gpus", "all", "--dist-timeout", "0"}, "--dist-timeout 0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<DistributedFlags> f = Flags(c.args);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << c.says;
    EXPECT_THAT(std::string(f.status().message()), HasSubstr(c.says));
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("train: "));
  }
}

TEST(ArgsWithoutTest, DropsBothForms) {
  std::vector<std::string> args = {"kiln",   "train",      "--solver",      "s", "--gpus", "0,1",
                                   "--json", "--gpus=all", "--iterations=3"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  EXPECT_EQ(ArgsWithout(static_cast<int>(argv.size()), argv.data(), 2, {"gpus"}),
            (std::vector<std::string>{"--solver", "s", "--json", "--iterations=3"}));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s;
}

// Children are `/bin/sh -c SCRIPT --rank r --world-size n --rendezvous file:...`: in the script
// $1 is the rank, $3 the world size, $5 the rendezvous.
LaunchOptions Shell(const std::string& script, std::vector<int> gpus, const std::string& logs) {
  LaunchOptions o;
  o.program = "/bin/sh";
  o.args = {"-c", script};
  o.gpus = std::move(gpus);
  o.log_dir = logs;
  o.kill_grace = absl::Milliseconds(500);
  return o;
}

std::string Fresh(const std::string& name) {
  const std::string dir = ScratchFile(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(LaunchWorkersTest, EveryChildGetsItsGpuAndRankFlags) {
  const std::string dir = Fresh("launch_ok");
  const std::string script = absl::StrCat("echo \"$CUDA_VISIBLE_DEVICES $1 $3 $4 $5\" > ", dir,
                                          "/out$1; echo hello from $1");
  absl::Status s = LaunchWorkers(Shell(script, {3, 5}, dir + "/logs"));
  ASSERT_TRUE(s.ok()) << s;
  const std::string rdzv = absl::StrCat("file:", dir, "/logs/rdzv");
  EXPECT_EQ(ReadAll(dir + "/out0"), "3 0 2 --rendezvous " + rdzv + "\n");
  EXPECT_EQ(ReadAll(dir + "/out1"), "5 1 2 --rendezvous " + rdzv + "\n");
  // Rank 1's output went to its log, not to this process.
  EXPECT_EQ(ReadAll(dir + "/logs/rank1.log"), "hello from 1\n");
}

TEST(LaunchWorkersTest, OneGpuGetsTheArgumentsUnchanged) {
  const std::string dir = Fresh("launch_one");
  absl::Status s = LaunchWorkers(
      Shell(absl::StrCat("echo \"$CUDA_VISIBLE_DEVICES [$1]\" > ", dir, "/out"), {1}, dir));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ReadAll(dir + "/out"), "1 []\n");
}

TEST(LaunchWorkersTest, GpusIndexTheVisibleDevicesWhenGiven) {
  const std::string dir = Fresh("launch_visible");
  LaunchOptions o =
      Shell(absl::StrCat("echo $CUDA_VISIBLE_DEVICES > ", dir, "/out$1"), {1, 0}, dir + "/logs");
  o.visible_devices = {"6", "7"};
  absl::Status s = LaunchWorkers(o);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ReadAll(dir + "/out0"), "7\n");
  EXPECT_EQ(ReadAll(dir + "/out1"), "6\n");
}

TEST(LaunchWorkersTest, AFailingRankStopsTheOthersWithItsError) {
  const std::string dir = Fresh("launch_fail");
  const std::string script =
      "if [ $1 = 1 ]; then sleep 0.3; echo 'rank one: the disk is on fire' >&2; exit 3; fi; "
      "sleep 30";
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = LaunchWorkers(Shell(script, {0, 1, 2}, dir));
  EXPECT_LT(SecondsSince(start), 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1 (GPU 1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("exit status 3"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("the disk is on fire"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("the other ranks were stopped"));
}

TEST(LaunchWorkersTest, AKilledRankIsNamedWithItsSignal) {
  const std::string dir = Fresh("launch_kill");
  const std::string script = "if [ $1 = 1 ]; then sleep 0.2; kill -9 $$; fi; sleep 30";
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = LaunchWorkers(Shell(script, {0, 1}, dir));
  EXPECT_LT(SecondsSince(start), 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("killed by signal 9"));
}

TEST(LaunchWorkersTest, RankZeroFailingPointsAtItsOwnOutput) {
  const std::string dir = Fresh("launch_fail0");
  absl::Status s = LaunchWorkers(Shell("if [ $1 = 0 ]; then exit 2; fi; sleep 30", {0, 1}, dir));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0 (GPU 0"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("its error is above"));
}

TEST(LaunchWorkersTest, AChildIgnoringTermIsKilledAfterTheGrace) {
  const std::string dir = Fresh("launch_term");
  const std::string script =
      "if [ $1 = 1 ]; then exit 1; fi; trap '' TERM; while :; do sleep 0.05; done";
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = LaunchWorkers(Shell(script, {0, 1}, dir));
  EXPECT_LT(SecondsSince(start), 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1"));
}

TEST(LaunchWorkersTest, AProgramThatCannotRunFails) {
  LaunchOptions o;
  o.program = "/nonexistent/kiln";
  o.gpus = {0, 1};
  o.log_dir = Fresh("launch_missing");
  absl::Status s = LaunchWorkers(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("exit status 127"));
}

TEST(LaunchWorkersTest, InterruptGoesToRankZeroWhichStopsEveryone) {
  const std::string dir = Fresh("launch_int");
  // Rank 0 "snapshots" on SIGINT and exits; rank 1 would run forever and never sees the SIGINT.
  const std::string script =
      absl::StrCat("trap 'echo snapshot$1 > ", dir, "/snap$1; exit 1' INT; touch ", dir,
                   "/ready$1; while :; do sleep 0.05; done");
  std::thread interrupter([&] {
    for (int i = 0; i < 200 && !(std::filesystem::exists(dir + "/ready0") &&
                                 std::filesystem::exists(dir + "/ready1"));
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    kill(getpid(), SIGINT);
  });
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = LaunchWorkers(Shell(script, {0, 1}, dir + "/logs"));
  interrupter.join();
  EXPECT_LT(SecondsSince(start), 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_EQ(ReadAll(dir + "/snap0"), "snapshot0\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/snap1"));
}

}  // namespace
}  // namespace kiln
