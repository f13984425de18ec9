// kill -9 at every point of writing a snapshot, then resume. `kiln train` runs as the real binary
// with KILN_TEST_KILL_AT_WRITE_POINT=N (base/fault_injection.h), which SIGKILLs it at the N-th
// write point: every file of every snapshot is killed half-written, written but not renamed,
// and renamed (before its folder is synced). After each kill, every .solverstate left behind is
// resumed in its own copy of the folder: a complete pair (its manifest written) resumes and ends
// byte-identical to the run that was never killed; an incomplete one is refused with an error
// naming the missing manifest; the last complete pair is always there.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/kiln_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const char kTrainNet[] = R"(name: "kill_train"
layer { name: "data" type: "Data" top: "data" top: "label"
        transform_param { scale: 0.00390625 } data_param { source: "db" batch_size: 4 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)";

// Snapshots at 4, 8 and 12 (the last one also the end of training): three pairs, three files
// each (caffemodel, solverstate, manifest), three write points per file.
const char kSolver[] =
    "net: \"train.prototxt\"\nbase_lr: 0.1\nmomentum: 0.9\nlr_policy: \"fixed\"\nmax_iter: 12\n"
    "snapshot: 4\ndisplay: 0\nrandom_seed: 1\nsnapshot_prefix: \"snap\"\n";
constexpr int kPointsPerSnapshot = 9;
constexpr int kSnapshots = 3;

std::vector<std::string> Train(const std::string& extra_snapshot = "") {
  std::vector<std::string> args = {"train", "--solver", "solver.prototxt", "--device", "cpu"};
  if (!extra_snapshot.empty()) {
    args.push_back("--snapshot");
    args.push_back(extra_snapshot);
  }
  return args;
}

// The iterations of the .solverstate files in `dir`, ascending.
std::vector<int> StatesIn(const std::string& dir) {
  std::vector<int> iters;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("snap_iter_", 0) == 0 && e.path().extension() == ".solverstate") {
      iters.push_back(std::stoi(name.substr(10)));
    }
  }
  std::sort(iters.begin(), iters.end());
  return iters;
}

bool HasPartial(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".kiln-partial-") != std::string::npos) return true;
  }
  return false;
}

TEST(KilnKillTest, AKillAtAnyWritePointLeavesTheLastCompletePairAndNeverAMix) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string root = std::string(tmp ? tmp : "/tmp") + "/kiln_kill";
  fs::remove_all(root);
  const std::string base = root + "/template";
  fs::create_directories(base);
  std::string pixels, labels;
  for (int i = 0; i < 16; ++i) {
    for (int p = 0; p < 16; ++p) pixels += static_cast<char>(((p < 8) == (i % 2)) ? 200 : 20);
    labels += static_cast<char>(i % 3);
  }
  Put(base + "/images.idx", Idx(3, {16, 4, 4}, pixels));
  Put(base + "/labels.idx", Idx(1, {16}, labels));
  Put(base + "/train.prototxt", kTrainNet);
  Put(base + "/solver.prototxt", kSolver);
  KilnOutcome made =
      RunKiln(base, {"convert", "--images", "images.idx", "--labels", "labels.idx", "--out", "db"});
  ASSERT_EQ(made.status, 0) << made.output;

  // The run never killed.
  const std::string straight = root + "/straight";
  fs::copy(base, straight, fs::copy_options::recursive);
  KilnOutcome o = RunKiln(straight, Train());
  ASSERT_EQ(o.status, 0) << o.output;
  const std::string reference = Slurp(straight + "/snap_iter_12.caffemodel");
  ASSERT_FALSE(reference.empty());

  // Killed at every point of every snapshot, and a few past the last (the curve, then none).
  const int points = kPointsPerSnapshot * kSnapshots;
  std::vector<KilnJob> kills;
  for (int n = 1; n <= points + 4; ++n) {
    const std::string dir = root + "/kill" + std::to_string(n);
    fs::copy(base, dir, fs::copy_options::recursive);
    kills.push_back(
        {dir, Train(), dir + ".log", {"KILN_TEST_KILL_AT_WRITE_POINT=" + std::to_string(n)}});
  }
  const std::vector<KilnOutcome> killed = RunKilnJobs(kills, 2);
  std::vector<KilnJob> resumes;
  std::vector<std::pair<int, int>> resumed;  // (kill point, iteration resumed from)
  for (int n = 1; n <= points + 4; ++n) {
    const KilnOutcome& k = killed[n - 1];
    const std::string& dir = kills[n - 1].dir;
    SCOPED_TRACE("killed at write point " + std::to_string(n));
    if (n <= points + 3) {  // 27 snapshot points, then the curve's 3
      ASSERT_EQ(k.status, 128 + 9) << k.output;
      EXPECT_NE(k.output.find("killed at"), std::string::npos) << k.output;
    } else {
      ASSERT_EQ(k.status, 0) << "more write points than the test knows of: " << k.output;
    }
    const int complete = 4 * std::min(kSnapshots, n / kPointsPerSnapshot);
    const std::vector<int> states = StatesIn(dir);
    if (complete > 0) {
      EXPECT_NE(std::find(states.begin(), states.end(), complete), states.end())
          << "the last complete pair (iteration " << complete << ") is gone";
    }
    for (int iter : states) {
      const std::string copy = dir + "_from" + std::to_string(iter);
      fs::copy(dir, copy, fs::copy_options::recursive);
      resumes.push_back(
          {copy, Train("snap_iter_" + std::to_string(iter) + ".solverstate"), copy + ".log", {}});
      resumed.push_back({n, iter});
    }
  }
  const std::vector<KilnOutcome> outcomes = RunKilnJobs(resumes, 2);
  int accepted = 0, refused = 0;
  for (size_t j = 0; j < resumes.size(); ++j) {
    const auto [n, iter] = resumed[j];
    SCOPED_TRACE("killed at write point " + std::to_string(n) + ", resumed from iteration " +
                 std::to_string(iter));
    const int complete = 4 * std::min(kSnapshots, n / kPointsPerSnapshot);
    const KilnOutcome& r = outcomes[j];
    if (iter <= complete) {
      ++accepted;
      ASSERT_EQ(r.status, 0) << r.output;
      EXPECT_TRUE(Slurp(resumes[j].dir + "/snap_iter_12.caffemodel") == reference)
          << "the resumed run ends elsewhere than the run never killed";
    } else {
      ++refused;
      EXPECT_NE(r.status, 0) << r.output;
      EXPECT_NE(r.output.find("manifest"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("resume from an earlier snapshot"), std::string::npos) << r.output;
    }
    EXPECT_FALSE(HasPartial(resumes[j].dir)) << "a half-written file stayed behind";
  }
  // Both kinds happened: the kill points do fall between the files of a pair.
  EXPECT_GT(accepted, 20);
  EXPECT_GT(refused, 2);
}

}  // namespace
}  // namespace kiln
