// examples/02_train_builder_graph trains a builder-made CNN on Fashion-MNIST with no Caffe file
// and must reach 88% test accuracy on the CPU. Runs the example binary (a data dependency) and
// reads the accuracy it prints; skips when Debian's dataset-fashion-mnist is not installed.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace {

constexpr char kDataset[] = "/usr/share/datasets/fashion-mnist";

std::string ExampleBinary() {
  const char* root = std::getenv("TEST_SRCDIR");
  const std::string base = root ? root : ".";
  for (const std::string& dir : {base + "/kiln/", base + "/_main/", std::string("./")}) {
    const std::string path = dir + "examples/02_train_builder_graph";
    if (std::filesystem::exists(path)) return path;
  }
  return base + "/kiln/examples/02_train_builder_graph";
}

TEST(TrainBuilderGraphExample, ReachesEightyEightPercentOnFashionMnist) {
  if (!std::filesystem::exists(kDataset)) {
    GTEST_SKIP() << kDataset << " is missing: install dataset-fashion-mnist (tools/setup.sh)";
  }
  const std::string command =
      ExampleBinary() + " --backend=cpu --iterations=2000 --min-accuracy=0.88 2>/dev/null";
  FILE* out = popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr) << command;
  std::string text;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), out) != nullptr) text += buffer;
  const int status = pclose(out);
  std::printf("%s", text.c_str());
  const size_t at = text.find("test accuracy: ");
  ASSERT_NE(at, std::string::npos) << "the example printed no accuracy:\n" << text;
  const double accuracy = std::atof(text.c_str() + at + std::string("test accuracy: ").size());
  EXPECT_GE(accuracy, 0.88);
  EXPECT_EQ(status, 0) << text;
}

}  // namespace
