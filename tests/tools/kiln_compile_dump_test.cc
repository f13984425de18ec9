// `kiln compile` and `kiln dump` end to end on the CPU: the fused layers and memory they report,
// the graphviz and arena pictures, the declined rewrites, and bad usage.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "frontends/caffe/caffe_io.h"
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

// The number after `"key": ` in a `kiln compile --json` line, or -1.
int64_t JsonNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::stoll(json.substr(at + key.size() + 4));
}

// Issue 16's memory line on CPU plans at the files' own batch: the default plan and `--optimize
// memory` plan at most a third of Caffe's activation bytes for every shared deploy net of 20 or
// more layers (AlexNet, CaffeNet and ResNet-10 by computing their first layer in bands of rows),
// and below Caffe's for every one.
TEST(KilnCompileTest, MemoryPlansTakeAThirdOfCaffesActivationBytes) {
  for (const char* file :
       {"alexnet_deploy.prototxt", "caffenet_deploy.prototxt", "densenet121_deploy.prototxt",
        "fcn8s_voc_deploy.prototxt", "resnet10_preact_cvgj_deploy.prototxt",
        "resnet18_deploy.prototxt", "lenet.prototxt", "cifar10_quick.prototxt"}) {
    for (const char* optimize : {"on", "memory"}) {
      int rc = 0;
      const std::string json = Output({"compile", "--model", CaffeFile(file), "--device", "cpu",
                                       "--optimize", optimize, "--json"},
                                      &rc);
      ASSERT_EQ(rc, 0) << file << ": " << json;
      const int64_t naive = JsonNumber(json, "naive_activation_bytes");
      const int64_t planned = JsonNumber(json, "planned_activation_bytes");
      ASSERT_GT(naive, 0) << json;
      ASSERT_GT(planned, 0) << json;
      EXPECT_LT(planned, naive) << file << " --optimize " << optimize;
      const bool small =
          std::string(file) == "lenet.prototxt" || std::string(file) == "cifar10_quick.prototxt";
      if (!small) {
        EXPECT_LE(planned * 3, naive)
            << file << " --optimize " << optimize << ": " << planned << " of " << naive;
      }
    }
  }
}

// The same line for CUDA plans, planned here for an absent H100 (--cuda-target): fp32 (NCHW)
// and fp16 (NHWC, placed Concat inputs), default and `--optimize memory`. DenseNet-121's CUDA
// plan runs no Concat step.
TEST(KilnCompileTest, CudaPlansForAnAbsentGpuMeetTheMemoryLine) {
  for (const char* precision : {"fp32", "fp16"}) {
    for (const char* optimize : {"on", "memory"}) {
      for (const char* file :
           {"alexnet_deploy.prototxt", "caffenet_deploy.prototxt", "densenet121_deploy.prototxt",
            "fcn8s_voc_deploy.prototxt", "resnet10_preact_cvgj_deploy.prototxt",
            "resnet18_deploy.prototxt"}) {
        int rc = 0;
        const std::string json =
            Output({"compile", "--model", CaffeFile(file), "--cuda-target", "sm_90", "--precision",
                    precision, "--optimize", optimize, "--json"},
                   &rc);
        ASSERT_EQ(rc, 0) << file << ": " << json;
        EXPECT_NE(json.find("\"backend\": \"cuda\""), std::string::npos) << json.substr(0, 300);
        const int64_t naive = JsonNumber(json, "naive_activation_bytes");
        const int64_t planned = JsonNumber(json, "planned_activation_bytes");
        ASSERT_GT(planned, 0) << json;
        EXPECT_LE(planned * 3, naive) << file << " " << precision << " --optimize " << optimize;
        if (std::string(file) == "densenet121_deploy.prototxt") {
          EXPECT_EQ(json.find("\"kernel\": \"cuda.concat"), std::string::npos) << "a Concat runs";
        }
      }
    }
  }
  // Bad use: another backend, or measuring on a GPU that is not here.
  int rc = 0;
  Output({"compile", "--model", CaffeFile("lenet.prototxt"), "--cuda-target", "sm_90", "--device",
          "cpu"},
         &rc);
  EXPECT_NE(rc, 0);
  Output({"compile", "--model", CaffeFile("lenet.prototxt"), "--cuda-target", "sm_90", "--algo",
          "measure"},
         &rc);
  EXPECT_NE(rc, 0);
  Output({"compile", "--model", CaffeFile("lenet.prototxt"), "--cuda-target", "sm_75"}, &rc);
  EXPECT_NE(rc, 0);
}

// Default CUDA plans (no --optimize memory) take FCN-8s's conv1_2 + pool1 in bands of rows
// (passes/split_rows_for_memory.cc): the 698x698 convolution output never exists whole, and the
// plan is under a third of Caffe's activation bytes, as ResNet-18's and DenseNet-121's are.
TEST(KilnCompileTest, DefaultCudaPlansOfFcnComputeItsStemInBands) {
  for (const char* precision : {"fp32", "fp16"}) {
    for (const char* file :
         {"fcn8s_voc_deploy.prototxt", "resnet18_deploy.prototxt", "densenet121_deploy.prototxt"}) {
      int rc = 0;
      const std::string json = Output({"compile", "--model", CaffeFile(file), "--cuda-target",
                                       "sm_90", "--precision", precision, "--json"},
                                      &rc);
      ASSERT_EQ(rc, 0) << file << ": " << json;
      const int64_t naive = JsonNumber(json, "naive_activation_bytes");
      const int64_t planned = JsonNumber(json, "planned_activation_bytes");
      ASSERT_GT(planned, 0) << json;
      EXPECT_LE(planned * 3, naive) << file << " " << precision;
      if (std::string(file) != "fcn8s_voc_deploy.prototxt") continue;
      // Four bands of conv1_2 (with its ReLU), each a kernel of its own.
      int bands = 0;
      for (size_t at = json.find("\"layers\": [\"conv1_2\", \"relu1_2\"]"); at != std::string::npos;
           at = json.find("\"layers\": [\"conv1_2\", \"relu1_2\"]", at + 1)) {
        ++bands;
      }
      EXPECT_EQ(bands, 4) << json.substr(0, 2000);
    }
  }
}

// Unfused (--optimize off), FCN-8s's conv1_2 holds conv1_1's output and its own, 476 MiB each
// at batch 4, and its workspace would come on top; conv1_1's output dies there, so the
// convolution runs in two parts of the batch with its scratch in dead bytes
// (kernels/cuda/graph/convolution_in_dead_bytes.h) and the arena is the activations' own peak.
TEST(KilnCompileTest, UnfusedFcnKeepsItsPeakWorkspaceInDeadBytes) {
  int rc = 0;
  const std::string json =
      Output({"compile", "--model", CaffeFile("fcn8s_voc_deploy.prototxt"), "--cuda-target",
              "sm_90", "--batch", "4", "--optimize", "off", "--json"},
             &rc);
  ASSERT_EQ(rc, 0) << json.substr(0, 500);
  const int64_t planned = JsonNumber(json, "planned_activation_bytes");
  const int64_t arena = JsonNumber(json, "arena_bytes");
  ASSERT_GT(planned, int64_t{900} << 20) << json.substr(0, 500);
  EXPECT_EQ(arena, planned) << json.substr(0, 500);
}

// Issue 16's structure lines on CUDA plans, in every precision, planned for an absent H100:
// AlexNet's convolutions carry their ReLUs and no Dropout step runs; ResNet-18's BatchNorm and
// Scale are folded and a residual sum with its ReLU sits inside the second convolution.
TEST(KilnCompileTest, CudaPlansFuseInEveryPrecision) {
  for (const char* precision : {"fp32", "tf32", "fp16", "bf16"}) {
    int rc = 0;
    const std::string alexnet =
        Output({"compile", "--model", CaffeFile("alexnet_deploy.prototxt"), "--cuda-target",
                "sm_90", "--precision", precision, "--json"},
               &rc);
    ASSERT_EQ(rc, 0) << alexnet;
    EXPECT_NE(alexnet.find("\"precision\": \"" + std::string(precision) + "\""), std::string::npos);
    for (int i = 1; i <= 5; ++i) {
      const std::string n = std::to_string(i);
      EXPECT_NE(alexnet.find("\"layers\": [\"conv" + n + "\", \"relu" + n + "\"]"),
                std::string::npos)
          << precision << " conv" << n;
    }
    EXPECT_EQ(alexnet.find("\"drop"), std::string::npos) << precision;
    const std::string resnet =
        Output({"compile", "--model", CaffeFile("resnet18_deploy.prototxt"), "--cuda-target",
                "sm_90", "--precision", precision, "--json"},
               &rc);
    ASSERT_EQ(rc, 0) << resnet;
    EXPECT_NE(resnet.find("\"res2a_branch2b\", \"bn2a_branch2b\", \"scale2a_branch2b\", "
                          "\"res2a\", \"res2a_relu\""),
              std::string::npos)
        << precision;
    EXPECT_EQ(resnet.find("\"kernel\": \"cuda.batchnorm"), std::string::npos) << precision;
  }
  // FCN-8s's output crop writes the graph output's f32 NCHW itself in a 16-bit channels-last
  // plan (passes/fold_convert_into_crop.cc); with the pass disabled the Convert step is there.
  for (const bool disabled : {false, true}) {
    std::vector<std::string> args = {
        "compile",       "--model", CaffeFile("fcn8s_voc_deploy.prototxt"),
        "--cuda-target", "sm_90",   "--precision",
        "fp16",          "--json"};
    if (disabled) args.insert(args.end(), {"--disable-pass", "fold_convert_into_crop"});
    int rc = 0;
    const std::string fcn = Output(args, &rc);
    ASSERT_EQ(rc, 0) << fcn;
    EXPECT_EQ(fcn.find("\"name\": \"score/to_output\"") != std::string::npos, disabled) << fcn;
    EXPECT_NE(fcn.find("\"name\": \"score\", \"kernel\": \"cuda.crop"), std::string::npos) << fcn;
  }
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
  // conv1 runs in bands of rows (split_rows_for_memory), each its own buffer.
  EXPECT_NE(svg.find("<title>conv1/rows0-"), std::string::npos);
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
