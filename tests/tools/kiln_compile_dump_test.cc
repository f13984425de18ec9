// `kiln compile` and `kiln dump` end to end on the CPU: the fused layers and memory they report,
// the graphviz and arena pictures, the declined rewrites, and bad usage.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/caffe_io.h"
#include "tests/util/caffe_files.h"
#include "tools/compile_command.h"
#include "tools/dump_command.h"

namespace kiln {
namespace {

int Call(std::vector<std::string> args) {
  args.insert(args.begin(), "kiln");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  return args[1] == "compile" ? CompileCommand(static_cast<int>(argv.size()), argv.data())
                              : DumpCommand(static_cast<int>(argv.size()), argv.data());
}

// Runs `args` with stdout going to a file and returns what it printed.
std::string Output(std::vector<std::string> args, int* rc) {
  const std::string path = ScratchFile("stdout.txt");
  std::fflush(stdout);
  const int saved = dup(1);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EXPECT_GE(fd, 0);
  dup2(fd, 1);
  close(fd);
  *rc = Call(std::move(args));
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  return ReadFileBytes(path).value_or("");
}

TEST(KilnCompileTest, ResNet18JsonShowsFoldedBatchNormAndResidualInsideConvolutions) {
  int rc = 0;
  const std::string json = Output({"compile", "--model", CaffeFile("resnet18_deploy.prototxt"),
                                   "--batch", "1", "--device", "cpu", "--json"},
                                  &rc);
  ASSERT_EQ(rc, 0) << json;
  // conv1 with its BatchNorm, Scale and ReLU as one kernel; a residual sum and its ReLU inside
  // the second convolution of a block.
  EXPECT_NE(json.find("\"layers\": [\"conv1\", \"bn_conv1\", \"scale_conv1\", \"conv1_relu\"]"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"res2a_branch2b\", \"bn2a_branch2b\", \"scale2a_branch2b\", \"res2a\", "
                      "\"res2a_relu\""),
            std::string::npos);
  EXPECT_EQ(json.find("\"batchnorm"), std::string::npos);
  EXPECT_NE(json.find("\"naive_activation_bytes\""), std::string::npos);
  EXPECT_NE(json.find("\"planned_activation_bytes\""), std::string::npos);
}

TEST(KilnDumpTest, WritesTheFusedGraphAndTheArenaOverTime) {
  const std::string dot = ScratchFile("plan.dot"), memory = ScratchFile("memory.svg");
  int rc = 0;
  const std::string printed =
      Output({"dump", "--model", CaffeFile("resnet18_deploy.prototxt"), "--batch", "1", "--device",
              "cpu", "--dot", dot, "--memory", memory, "--why-not-fused"},
             &rc);
  ASSERT_EQ(rc, 0) << printed;
  const std::string graph = ReadFileBytes(dot).value_or("");
  EXPECT_NE(graph.find("subgraph cluster_"), std::string::npos);
  EXPECT_NE(graph.find("label=\"conv1 + bn_conv1 + scale_conv1 + conv1_relu\""), std::string::npos)
      << graph.substr(0, 800);
  const std::string svg = ReadFileBytes(memory).value_or("");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("<title>conv1:"), std::string::npos);
  // The projection shortcut feeds the main branch's epilogue: declined, with the reason.
  EXPECT_NE(printed.find("res2a_branch1 -> res2a_branch2b: the output is the residual"),
            std::string::npos)
      << printed;
}

TEST(KilnDumpTest, BadUsageIsAnErrorNotACrash) {
  int rc = 0;
  Output({"dump", "--model", CaffeFile("lenet.prototxt")}, &rc);  // nothing asked
  EXPECT_NE(rc, 0);
  Output({"compile", "--model", CaffeFile("lenet.prototxt"), "--disable-pass", "no_such_pass"},
         &rc);
  EXPECT_NE(rc, 0);
  Output({"compile", "--model", CaffeFile("lenet.prototxt"), "--optimize", "maybe"}, &rc);
  EXPECT_NE(rc, 0);
}

}  // namespace
}  // namespace kiln
