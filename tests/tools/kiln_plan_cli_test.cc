// `kiln compile --save-plan`, `kiln run --plan` and `kiln time --plan` as the real binary: a saved
// LeNet plan gives the same output file, byte for byte, as `kiln run --model`; the plan file is
// not replaced unasked; flags the plan already answers are refused.
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/caffe_files.h"
#include "tests/util/kiln_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

TEST(KilnPlanCliTest, ASavedPlanRunsLikeTheModel) {
  const std::string dir = ScratchFile("kiln_plan_cli");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string model = CaffeFile("lenet.prototxt");
  const std::string weights = CaffeFile("lenet_iter_10000.caffemodel");
  std::vector<int> dims = {64, 1, 28, 28};
  Put(dir + "/x.npy", Npy(dims, 0.25f));
  KilnOutcome o = RunKiln(dir, {"compile", "--model", model, "--weights", weights, "--device",
                                "cpu", "--save-plan", "lenet.plan"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("plan written to lenet.plan"), std::string::npos) << o.output;
  const std::string plan = Slurp(dir + "/lenet.plan");
  ASSERT_FALSE(plan.empty());

  o = RunKiln(dir, {"run", "--model", model, "--weights", weights, "--device", "cpu", "--input",
                    "data=x.npy", "--output", "prob=from_model.npy"});
  ASSERT_EQ(o.status, 0) << o.output;
  o = RunKiln(dir, {"run", "--plan", "lenet.plan", "--input", "data=x.npy", "--output",
                    "prob=from_plan.npy"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("loaded in"), std::string::npos) << o.output;
  ASSERT_FALSE(Slurp(dir + "/from_plan.npy").empty());
  EXPECT_EQ(Slurp(dir + "/from_plan.npy"), Slurp(dir + "/from_model.npy"));

  o = RunKiln(dir, {"time", "--plan", "lenet.plan", "--iterations", "2"});
  ASSERT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("none measured"), std::string::npos) << o.output;

  // Not replaced unasked; replaced with --overwrite.
  o = RunKiln(dir, {"compile", "--model", model, "--weights", weights, "--device", "cpu",
                    "--save-plan", "lenet.plan"});
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(o.output.find("--overwrite"), std::string::npos) << o.output;
  EXPECT_EQ(Slurp(dir + "/lenet.plan"), plan);
  o = RunKiln(dir, {"compile", "--model", model, "--weights", weights, "--device", "cpu",
                    "--save-plan", "lenet.plan", "--overwrite"});
  EXPECT_EQ(o.status, 0) << o.output;
  // The plan is an input of run --plan: never an output.
  o = RunKiln(dir, {"run", "--plan", "lenet.plan", "--input", "data=x.npy", "--output",
                    "prob=lenet.plan", "--overwrite"});
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_EQ(Slurp(dir + "/lenet.plan"), plan);

  // Flags the plan already answers, an output it lacks, and a CPU plan on a GPU.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"run", "--plan", "lenet.plan", "--model", model, "--input", "data=x.npy"},
           {"run", "--plan", "lenet.plan", "--precision", "fp16", "--input", "data=x.npy"},
           {"run", "--plan", "lenet.plan", "--input", "data=x.npy", "--output", "ip1=ip1.npy"},
           {"time", "--plan", "lenet.plan", "--weights", weights},
           {"time", "--plan", "lenet.plan", "--device", "cuda:1"},
           {"run", "--plan", "missing.plan", "--input", "data=x.npy"}}) {
    o = RunKiln(dir, args);
    EXPECT_NE(o.status, 0) << args[0] << " " << args[3] << ": " << o.output;
    EXPECT_NE(o.output.find("kiln"), std::string::npos) << o.output;
  }
}

}  // namespace
}  // namespace kiln
