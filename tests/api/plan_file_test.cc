// Saved plans through the public API (kiln::Engine::Save / Load; runtime/plan_file.h): a loaded
// plan gives the same bits as the engine it was saved from; an existing file is kept unless
// asked; a damaged file, a plan of another Kiln version and a plan for another device are
// refused with the reason. On the CPU (CI); the GPU case with measured choices is in
// engine_gpu_test.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/fnv_hash.h"
#include "gtest/gtest.h"
#include "kiln/kiln.hpp"
#include "tests/util/caffe_files.h"
#include "tests/util/kiln_process.h"

namespace {

using kiln::Put;
using kiln::Slurp;

// The plan file's checksum (FNV-1a 64 over all but its last 8 bytes), set again after an edit:
// what a file written by another Kiln would have.
std::string Resealed(std::string bytes) {
  bytes.resize(bytes.size() - 8);
  const uint64_t h = kiln::Fnv1a64(bytes);
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((h >> (8 * i)) & 0xff);
  return bytes;
}

std::string Replaced(std::string bytes, const std::string& from, const std::string& to) {
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) bytes.replace(at, from.size(), to);
  return Resealed(bytes);
}

std::vector<float> Images() {
  std::vector<float> v(2 * 28 * 28);
  unsigned seed = 3;
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 16777216.0f;
  }
  return v;
}

std::vector<float> Prob(const kiln::Engine& engine) {
  auto context = engine.CreateContext();
  EXPECT_TRUE(context.ok()) << context.status().ToString();
  if (!context.ok()) return {};
  EXPECT_TRUE(context->SetInput("data", Images()).ok());
  kiln::Status run = context->Run();
  EXPECT_TRUE(run.ok()) << run.ToString();
  auto out = context->Output<float>("prob", 20);
  return out.ok() ? out.value() : std::vector<float>{};
}

class PlanFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp ? tmp : "/tmp") + "/plan_file_test";
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    kiln::CompileOptions options;
    options.device = "cpu";
    options.batch = 2;
    auto engine = kiln::Engine::FromCaffe(kiln::CaffeFile("lenet.prototxt"),
                                          kiln::CaffeFile("lenet_iter_10000.caffemodel"), options);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = engine.value();
    path_ = dir_ + "/lenet.plan";
    kiln::Status saved = engine_.Save(path_);
    ASSERT_TRUE(saved.ok()) << saved.ToString();
  }
  std::string dir_, path_;
  kiln::Engine engine_;
};

TEST_F(PlanFileTest, ALoadedPlanGivesTheSameBits) {
  auto loaded = kiln::Engine::Load(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const std::vector<float> expected = Prob(engine_);
  ASSERT_EQ(expected.size(), 20u);
  EXPECT_EQ(Prob(*loaded), expected);
  EXPECT_EQ(loaded->Inputs().size(), 1u);
  EXPECT_EQ(loaded->WeightsBytes(), engine_.WeightsBytes());
  // The loaded engine saves the same file again.
  ASSERT_TRUE(loaded->Save(dir_ + "/again.plan").ok());
  EXPECT_EQ(Slurp(dir_ + "/again.plan"), Slurp(path_));
}

TEST_F(PlanFileTest, AnExistingFileIsReplacedOnlyWhenAsked) {
  Put(dir_ + "/mine.txt", "a file of the user's");
  kiln::Status refused = engine_.Save(dir_ + "/mine.txt");
  EXPECT_EQ(refused.code(), KILN_ALREADY_EXISTS) << refused.ToString();
  EXPECT_NE(refused.message().find("overwrite"), std::string::npos) << refused.message();
  EXPECT_EQ(Slurp(dir_ + "/mine.txt"), "a file of the user's");
  EXPECT_TRUE(engine_.Save(dir_ + "/mine.txt", /*overwrite=*/true).ok());
  EXPECT_EQ(Slurp(dir_ + "/mine.txt"), Slurp(path_));
}

TEST_F(PlanFileTest, BadPlansAreRefusedWithTheReason) {
  const std::string good = Slurp(path_);
  struct Case {
    std::string name, bytes;
    kiln_status code;
    std::string message;
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x40;
  const std::vector<Case> cases = {
      {"flipped", flipped, KILN_DATA_LOSS, "checksum"},
      {"truncated", good.substr(0, good.size() / 3), KILN_DATA_LOSS, "damaged"},
      {"not_a_plan", "name: \"LeNet\"\nlayer {}\n", KILN_INVALID_ARGUMENT, "not a Kiln plan"},
      {"format_9", Replaced(good, "KILN-PLAN 1", "KILN-PLAN 9"), KILN_FAILED_PRECONDITION,
       "format '9'"},
      {"old_kiln", Replaced(good, "kiln=0.1.0", "kiln=0.0.9"), KILN_FAILED_PRECONDITION,
       "written by Kiln 0.0.9"},
      {"other_gpu",
       Replaced(Replaced(good, "backend=cpu", "backend=cuda"), "device=host",
                "device=Imaginary GPU sm_99"),
       KILN_FAILED_PRECONDITION, "Imaginary GPU sm_99"},
      {"bad_option", Replaced(good, "algo=0", "algo=7"), KILN_DATA_LOSS, "out of range"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir_ + "/" + c.name + ".plan";
    Put(path, c.bytes);
    auto loaded = kiln::Engine::Load(path);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), c.code) << loaded.status().ToString();
    EXPECT_NE(loaded.status().message().find(c.message), std::string::npos)
        << loaded.status().message();
    EXPECT_NE(loaded.status().message().find(path), std::string::npos)
        << "the message names the file: " << loaded.status().message();
  }
  auto on_gpu = kiln::Engine::Load(path_, "cuda:1");
  EXPECT_EQ(on_gpu.status().code(), KILN_FAILED_PRECONDITION) << on_gpu.status().ToString();
  auto missing = kiln::Engine::Load(dir_ + "/missing.plan");
  EXPECT_EQ(missing.status().code(), KILN_NOT_FOUND) << missing.status().ToString();
}

}  // namespace
