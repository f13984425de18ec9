// The plan flags of `kiln run`/`kiln time`, `kiln time` end to end on the CPU, and the tuning
// file the measured algorithm choices go to.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "kernels/tuning_cache.h"
#include "tests/util/caffe_files.h"
#include "tools/command_line.h"
#include "tools/plan_flags.h"
#include "tools/time_command.h"

namespace kiln {
namespace {

absl::StatusOr<CompileOptions> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"kiln", "run"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  auto line =
      CommandLine::Parse(static_cast<int>(argv.size()), argv.data(), 2, PlanFlagNames(), {});
  if (!line.ok()) return line.status();
  CompileOptions options;
  absl::Status s = ParsePlanFlags(*line, options);
  if (!s.ok()) return s;
  return options;
}

// Sets an environment variable for one scope (unset = nullptr), restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(PlanFlagsTest, DefaultsAreAutoDeviceFp32AutoLayoutMeasuredIntoTheCache) {
  const std::string dir = ScratchFile("cache_dir");
  ScopedEnv cache("KILN_CACHE_DIR", dir.c_str());
  auto o = Parse({});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->backend, BackendChoice::kAuto);
  EXPECT_EQ(o->precision, Precision::kFp32);
  EXPECT_EQ(o->layout, LayoutChoice::kAuto);
  EXPECT_EQ(o->algo, AlgoChoice::kMeasure);
  EXPECT_EQ(o->tuning_file, dir + "/tuning.tsv");
  EXPECT_TRUE(o->tuning_file_is_cache);
  // A file of the user's own is not a cache: its errors are errors.
  auto named = Parse({"--tuning-file", "/tmp/t"});
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->tuning_file, "/tmp/t");
  EXPECT_FALSE(named->tuning_file_is_cache);
  // The heuristic measures nothing and keeps no file.
  auto heuristic = Parse({"--algo", "heuristic"});
  ASSERT_TRUE(heuristic.ok()) << heuristic.status();
  EXPECT_EQ(heuristic->algo, AlgoChoice::kHeuristic);
  EXPECT_EQ(heuristic->tuning_file, "");
}

TEST(PlanFlagsTest, TheCacheFileFollowsTheEnvironment) {
  {
    ScopedEnv cache("KILN_CACHE_DIR", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", "/var/tmp/xdg");
    EXPECT_EQ(DefaultTuningCacheFile(), "/var/tmp/xdg/kiln/tuning.tsv");
  }
  {
    ScopedEnv cache("KILN_CACHE_DIR", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(DefaultTuningCacheFile(), "/home/someone/.cache/kiln/tuning.tsv");
  }
  {
    // Set but empty: no cache; measuring still is the default, remembered nowhere.
    ScopedEnv cache("KILN_CACHE_DIR", "");
    EXPECT_EQ(DefaultTuningCacheFile(), "");
    auto o = Parse({});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->algo, AlgoChoice::kMeasure);
    EXPECT_EQ(o->tuning_file, "");
    EXPECT_FALSE(o->tuning_file_is_cache);
  }
  {
    // Nothing to go by (no HOME, a relative XDG_CACHE_HOME, which the spec says to ignore).
    ScopedEnv cache("KILN_CACHE_DIR", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", "relative");
    ScopedEnv home("HOME", nullptr);
    EXPECT_EQ(DefaultTuningCacheFile(), "");
  }
}

// A plan for an absent GPU cannot be timed: without --algo it takes the heuristic, with an
// explicit --algo measure it is refused.
TEST(PlanFlagsTest, CudaTargetFallsBackToTheHeuristicUnlessMeasureWasAsked) {
  auto parse = [](std::vector<std::string> args) -> absl::StatusOr<CompileOptions> {
    args.insert(args.begin(), {"kiln", "compile"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    std::set<std::string> names = PlanFlagNames();
    names.insert("cuda-target");
    auto line = CommandLine::Parse(static_cast<int>(argv.size()), argv.data(), 2, names, {});
    if (!line.ok()) return line.status();
    CompileOptions options;
    KILN_RETURN_IF_ERROR(ParsePlanFlags(*line, options));
    KILN_RETURN_IF_ERROR(ParseCudaTargetFlag(*line, options));
    return options;
  };
  auto o = parse({"--cuda-target", "sm_90"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->algo, AlgoChoice::kHeuristic);
  EXPECT_EQ(o->tuning_file, "");
  auto measured = parse({"--cuda-target", "sm_90", "--algo", "measure"});
  EXPECT_EQ(measured.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlanFlagsTest, ParsesEveryFlag) {
  auto o =
      Parse({"--device", "cuda", "--precision", "bf16", "--layout", "nhwc", "--algo", "measure",
             "--tuning-file", "/tmp/t", "--workspace-limit", "512M", "--workspace-budget", "1.25"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->backend, BackendChoice::kCuda);
  EXPECT_EQ(o->precision, Precision::kBf16);
  EXPECT_EQ(o->layout, LayoutChoice::kNhwc);
  EXPECT_EQ(o->algo, AlgoChoice::kMeasure);
  EXPECT_EQ(o->tuning_file, "/tmp/t");
  EXPECT_EQ(o->workspace_limit, int64_t{512} << 20);
  EXPECT_DOUBLE_EQ(o->workspace_peak_slack, 0.25);
  EXPECT_LT(o->workspace_budget_max_slowdown, 0);  // asked for: no time bound
  // Without the flag: the default budget, bounded by measured time.
  auto plain = Parse({"--device", "cuda"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_DOUBLE_EQ(plain->workspace_peak_slack, 0.125);
  EXPECT_DOUBLE_EQ(plain->workspace_budget_max_slowdown, 0.02);
}

TEST(PlanFlagsTest, BadValuesNameTheFlag) {
  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--device", "tpu"}, "--device"},
           {{"--precision", "fp8"}, "--precision"},
           {{"--layout", "nwhc"}, "--layout"},
           {{"--algo", "fastest"}, "--algo"},
           {{"--workspace-limit", "lots"}, "--workspace-limit"},
           {{"--workspace-budget", "0.5"}, "--workspace-budget"},
           {{"--workspace-budget", "x"}, "--workspace-budget"},
           {{"--algo", "heuristic", "--tuning-file", "/tmp/t"}, "--tuning-file"}}) {
    auto o = Parse(args);
    ASSERT_FALSE(o.ok()) << flag;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(flag), std::string::npos) << o.status();
  }
}

// The value parsers on their own (moved here from the compiler with the CLI's spellings).
TEST(PlanFlagsTest, ParsesPrecisionLayoutAndAlgoNames) {
  EXPECT_EQ(ParsePrecision("tf32").value(), Precision::kTf32);
  EXPECT_EQ(ParsePrecision("fp8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParsePrecision("fp8").status().message(),
            "precision 'fp8': use fp32, tf32, fp16 or bf16");
  EXPECT_EQ(ParseLayoutChoice("nhwc").value(), LayoutChoice::kNhwc);
  EXPECT_EQ(ParseLayoutChoice("nwhc").status().message(), "layout 'nwhc': use nchw, nhwc or auto");
  EXPECT_EQ(ParseAlgoChoice("measure").value(), AlgoChoice::kMeasure);
  EXPECT_EQ(ParseAlgoChoice("fastest").status().message(),
            "algo 'fastest': use heuristic or measure");
}

TEST(TimeCommandTest, TimesLenetOnTheCpuAsJson) {
  std::vector<std::string> args = {"kiln",     "time", "--model",      CaffeFile("lenet.prototxt"),
                                   "--batch",  "3",    "--iterations", "2",
                                   "--device", "cpu",  "--json"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  ::testing::internal::CaptureStdout();
  const int rc = TimeCommand(static_cast<int>(argv.size()), argv.data());
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  for (const char* key :
       {"\"batch\": 3", "\"backend\": \"cpu\"", "\"forward_ms\"", "\"images_per_s\"",
        "\"weights_bytes\"", "\"name\": \"conv1\"", "\"name\": \"ip2\""}) {
    EXPECT_NE(out.find(key), std::string::npos) << key << " in " << out;
  }
  // Each layer says its workspace; the CPU convolutions' im2col columns take some (conv1, in 4
  // bands of 6 of its 24 rows, each pooled at once: at least one band's 25 taps x 6 x 24
  // floats), the pooling none.
  const size_t conv1 = out.find("\"name\": \"conv1\"");
  const size_t at = out.find("\"workspace_bytes\": ", conv1);
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_GE(std::stoll(out.substr(at + 19)), int64_t{25} * 6 * 24 * 4) << out.substr(conv1, 300);
  const size_t pool1 = out.find("\"name\": \"pool1\"");
  ASSERT_NE(pool1, std::string::npos) << out;
  EXPECT_NE(out.find("\"workspace_bytes\": 0,", pool1), std::string::npos)
      << out.substr(pool1, 200);
}

TEST(TimeCommandTest, ABadBatchIsAnErrorNotACrash) {
  std::vector<std::string> args = {"kiln",    "time", "--model", CaffeFile("lenet.prototxt"),
                                   "--batch", "0"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  EXPECT_EQ(TimeCommand(static_cast<int>(argv.size()), argv.data()), 1);
}

TEST(TuningCacheTest, SavesLoadsAndRejectsMalformedFiles) {
  const std::string path = ScratchFile("tuning.txt");
  std::remove(path.c_str());
  TuningCache cache;
  EXPECT_TRUE(cache.Load(path).ok());  // no file yet: an empty cache
  EXPECT_EQ(cache.size(), 0u);
  cache.Insert("conv fwd k1", "fft 1024 0.5");
  cache.Insert("conv fwd k2", "gemm 0 0.7");
  EXPECT_TRUE(cache.dirty());
  ASSERT_TRUE(cache.Save(path).ok());
  EXPECT_FALSE(cache.dirty());
  TuningCache again;
  ASSERT_TRUE(again.Load(path).ok());
  EXPECT_EQ(again.size(), 2u);
  EXPECT_EQ(again.Lookup("conv fwd k1").value_or(""), "fft 1024 0.5");
  EXPECT_FALSE(again.Lookup("conv fwd k3").has_value());
  again.Insert("conv fwd k1", "fft 1024 0.5");  // unchanged: nothing to save
  EXPECT_FALSE(again.dirty());
  std::ofstream(path, std::ios::app) << "no tab here\n";
  TuningCache broken;
  absl::Status s = broken.Load(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(":4"), std::string::npos) << s;  // the header is line 1
}

// The CLI's per-user cache: a damaged file adds nothing and says why; a save merges what another
// process saved since (the saved value winning on a shared key: entries never change once
// saved) and creates the folder.
TEST(TuningCacheTest, TheSharedCacheSkipsDamageAndMergesOtherProcessesEntries) {
  const std::string dir = ScratchFile("shared_cache");
  const std::string path = dir + "/deeper/tuning.tsv";
  std::filesystem::remove_all(dir);
  TuningCache first;
  EXPECT_EQ(first.LoadIfValid(path), "");  // absent: nothing measured yet, not an error
  first.Insert("conv a", "gemm 0 1.0");
  first.Insert("conv shared", "fft 64 2.0");
  ASSERT_TRUE(first.SaveMerged(path).ok());
  // Another process that loaded before the first saved, and measured other problems.
  TuningCache second;
  second.Insert("conv b", "direct 0 0.5");
  second.Insert("conv shared", "gemm 0 1.5");
  ASSERT_TRUE(second.SaveMerged(path).ok());
  EXPECT_EQ(second.Lookup("conv shared").value_or(""), "gemm 0 1.5");  // what its plan used
  TuningCache both;
  EXPECT_EQ(both.LoadIfValid(path), "");
  EXPECT_EQ(both.size(), 3u);
  EXPECT_EQ(both.Lookup("conv a").value_or(""), "gemm 0 1.0");
  EXPECT_EQ(both.Lookup("conv b").value_or(""), "direct 0 0.5");
  EXPECT_EQ(both.Lookup("conv shared").value_or(""), "fft 64 2.0");
  // No temporary file is left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/deeper")) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "tuning.tsv");
  }
  EXPECT_EQ(files, 1);
  // Damage: the whole file is skipped, with the line that broke it.
  std::ofstream(path, std::ios::app) << "garbage without a tab\n";
  TuningCache damaged;
  const std::string why = damaged.LoadIfValid(path);
  EXPECT_NE(why.find(":5"), std::string::npos) << why;
  EXPECT_EQ(damaged.size(), 0u);
  // And the next save replaces it with what this process knows.
  damaged.Insert("conv c", "gemm 0 3.0");
  ASSERT_TRUE(damaged.SaveMerged(path).ok());
  TuningCache repaired;
  EXPECT_EQ(repaired.LoadIfValid(path), "");
  EXPECT_EQ(repaired.size(), 1u);
  // A cache folder that is a file of the user's: the save fails and the file stays as it was.
  const std::string user_file = dir + "/user_file";
  std::ofstream(user_file) << "user data\n";
  EXPECT_FALSE(repaired.SaveMerged(user_file + "/tuning.tsv").ok());
  std::ifstream kept(user_file);
  std::string line;
  std::getline(kept, line);
  EXPECT_EQ(line, "user data");
}

}  // namespace
}  // namespace kiln
