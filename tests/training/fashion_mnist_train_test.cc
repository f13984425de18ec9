// The short CPU training runs CI keeps: the Fashion-MNIST LeNet example (examples/fashion_mnist)
// trained for 500 iterations of 64 images on the CPU through the Trainer API must reach 80% test
// accuracy on the full 10000-image test set, and a run interrupted and resumed must end with the
// same parameters, to the byte, as one that never stopped. It needs the IDX files of Debian's
// dataset-fashion-mnist (tools/setup.sh installs it) and skips without them.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "frontends/caffe/solver.h"
#include "frontends/caffe/training/solver_trainer.h"
#include "gtest/gtest.h"
#include "tests/util/scratch_file.h"
#include "tools/convert_command.h"

namespace kiln {
namespace {

constexpr char kDataset[] = "/usr/share/datasets/fashion-mnist";

// The example solver in the test's runfiles (a data dependency of this test).
std::string ExampleSolver() {
  const char* root = std::getenv("TEST_SRCDIR");
  const std::string base = root ? root : ".";
  for (const std::string& dir : {base + "/kiln/", base + "/_main/", std::string("./")}) {
    const std::string path = dir + "examples/fashion_mnist/lenet_solver.prototxt";
    if (std::filesystem::exists(path)) return path;
  }
  return base + "/kiln/examples/fashion_mnist/lenet_solver.prototxt";
}

// Points every Data layer of `net` whose source is `from` at `to`.
void Redirect(caffe::NetParameter& net, const std::string& from, const std::string& to) {
  for (caffe::LayerParameter& layer : *net.mutable_layer()) {
    if (layer.type() == "Data" && layer.data_param().source() == from) {
      layer.mutable_data_param()->set_source(to);
    }
  }
}

// Both sets converted once per process (`kiln convert`, as the example's instructions do), and
// the example's solver pointed at them.
struct Converted {
  std::string train_db, test_db;
  double seconds = 0;
};
const Converted& ConvertOnce() {
  static const Converted converted = [] {
    Converted c;
    const auto start = std::chrono::steady_clock::now();
    c.train_db = ScratchFile("fashion_mnist_train_lmdb");
    c.test_db = ScratchFile("fashion_mnist_test_lmdb");
    for (const auto& [prefix, out] : {std::pair<std::string, std::string>{"train", c.train_db},
                                      std::pair<std::string, std::string>{"t10k", c.test_db}}) {
      IdxConversion conversion;
      conversion.images = std::string(kDataset) + "/" + prefix + "-images-idx3-ubyte.gz";
      conversion.labels = std::string(kDataset) + "/" + prefix + "-labels-idx1-ubyte.gz";
      conversion.out = out;
      conversion.overwrite = true;
      absl::StatusOr<int64_t> records = ConvertIdx(conversion);
      EXPECT_TRUE(records.ok()) << records.status();
      if (records.ok()) {
        EXPECT_EQ(*records, prefix == "train" ? 60000 : 10000);
      }
    }
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return c;
  }();
  return converted;
}

absl::StatusOr<SolverConfig> ExampleSolverOnConvertedData() {
  const Converted& c = ConvertOnce();
  absl::StatusOr<SolverConfig> solver = LoadSolver(ExampleSolver());
  if (!solver.ok()) return solver.status();
  // The example's sources are relative (the folder `kiln train` runs from); here they are the
  // databases just written.
  Redirect(solver->train.net, "fashion_mnist_train_lmdb", c.train_db);
  Redirect(solver->train.net, "fashion_mnist_test_lmdb", c.test_db);
  for (auto& test : solver->tests) {
    Redirect(test.net, "fashion_mnist_train_lmdb", c.train_db);
    Redirect(test.net, "fashion_mnist_test_lmdb", c.test_db);
  }
  return solver;
}

TEST(FashionMnistTraining, LenetReachesEightyPercentOnTheCpuIn500Iterations) {
  if (!std::filesystem::exists(kDataset)) {
    GTEST_SKIP() << kDataset << " is missing: install dataset-fashion-mnist (tools/setup.sh)";
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  absl::StatusOr<SolverConfig> solver = ExampleSolverOnConvertedData();
  ASSERT_TRUE(solver.ok()) << solver.status();
  ASSERT_EQ(solver->tests.size(), 1u);
  const double convert_seconds = ConvertOnce().seconds;
  solver->param.set_max_iter(500);
  TrainerOptions options;
  options.compile.backend = BackendChoice::kCpu;  // CI has no GPU; say so rather than fall back
  absl::StatusOr<std::unique_ptr<SolverTrainer>> trainer = SolverTrainer::Create(*solver, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  std::printf("fashion-mnist: %s\n", (*trainer)->backend_description().c_str());
  const auto train_start = Clock::now();
  while ((*trainer)->iter() < solver->param.max_iter()) {
    absl::Status step = (*trainer)->Step();
    ASSERT_TRUE(step.ok()) << step;
    ASSERT_TRUE(std::isfinite((*trainer)->last_loss())) << "at iteration " << (*trainer)->iter();
  }
  const double train_seconds = std::chrono::duration<double>(Clock::now() - train_start).count();
  absl::StatusOr<std::vector<NetOutput>> outputs = (*trainer)->Test(0);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  double accuracy = -1, loss = -1;
  for (const NetOutput& o : *outputs) {
    if (o.name == "accuracy") accuracy = o.value;
    if (o.name == "loss") loss = o.value;
  }
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "fashion-mnist: 500 iterations x 64 images, test accuracy %.4f (loss %.4f) on 10000 images;"
      " convert %.1f s, train %.1f s, total %.1f s\n",
      accuracy, loss, convert_seconds, train_seconds, total);
  EXPECT_GE(accuracy, 0.80);
}

// The resume check: LeNet on Fashion-MNIST trained 40 iterations straight, and 17 +
// snapshot + restore into a new trainer + 23, ends with byte-identical parameters.
TEST(FashionMnistTraining, LenetInterruptedAndResumedEndsBitIdentical) {
  if (!std::filesystem::exists(kDataset)) {
    GTEST_SKIP() << kDataset << " is missing: install dataset-fashion-mnist (tools/setup.sh)";
  }
  absl::StatusOr<SolverConfig> solver = ExampleSolverOnConvertedData();
  ASSERT_TRUE(solver.ok()) << solver.status();
  solver->param.set_max_iter(40);
  TrainerOptions options;
  options.compile.backend = BackendChoice::kCpu;
  auto run = [&](int from_iter, const std::string& state,
                 int to_iter) -> absl::StatusOr<std::unique_ptr<SolverTrainer>> {
    absl::StatusOr<std::unique_ptr<SolverTrainer>> trainer =
        SolverTrainer::Create(*solver, options);
    if (!trainer.ok()) return trainer.status();
    if (from_iter > 0) {
      if (absl::Status s = (*trainer)->Restore(state); !s.ok()) return s;
    }
    while ((*trainer)->iter() < to_iter) {
      if (absl::Status s = (*trainer)->Step(); !s.ok()) return s;
    }
    return trainer;
  };
  auto straight = run(0, "", 40);
  ASSERT_TRUE(straight.ok()) << straight.status();
  auto first = run(0, "", 17);
  ASSERT_TRUE(first.ok()) << first.status();
  auto paths = (*first)->Snapshot(ScratchFile("fashion_resume"));
  ASSERT_TRUE(paths.ok()) << paths.status();
  auto resumed = run(17, paths->second, 40);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->restore_note(), "");
  auto want = (*straight)->WeightsAsNet();
  auto have = (*resumed)->WeightsAsNet();
  ASSERT_TRUE(want.ok() && have.ok());
  std::string want_bytes, have_bytes;
  ASSERT_TRUE(want->SerializeToString(&want_bytes));
  ASSERT_TRUE(have->SerializeToString(&have_bytes));
  EXPECT_GT(want->layer_size(), 0);
  EXPECT_TRUE(want_bytes == have_bytes) << "the resumed LeNet's parameters differ";
  std::printf("fashion-mnist resume: 40 iterations straight vs 17 + resume + 23: %s\n",
              want_bytes == have_bytes ? "byte-identical" : "DIFFERENT");
}

}  // namespace
}  // namespace kiln
