// A convolution whose workspace would lift the plan's peak and whose input dies at its step runs
// its batch in two parts with the scratch in dead bytes (kernels/cuda/graph/
// convolution_in_dead_bytes.h): the plan says so, its arena is the activations' own peak, and
// the outputs are the CPU oracle's, in NCHW and NHWC, with and without the bias and ReLU in the
// convolution's epilogue, on the first run and on CUDA-graph replays. Tagged `gpu`: skips
// without a device.
//
// The Winograd passes are made small (SetWinogradPassBytesForTesting) so that a pass fits in
// one image of this test's output, as FCN-8s's 108 MiB passes fit in one of its 476 MiB
// conv1_2 output's images.
#include <cuda_runtime_api.h>

#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "ir/graph_builder.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "dnn/cuda/conv/conv_winograd_passes.h"
#include "dnn/cuda/conv/convolution.h"
#include "ops/all_ops.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::RandomTensor;
using testing::RelativeL2;
using Ints = std::vector<int64_t>;

int CurrentDeviceMultiprocessorsForTest() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 1;
  }
  return sms;
}

// data -> conv_a (3x3) -> ReLU -> conv_b (3x3, [bias]) -> ReLU -> softmax: conv_b's input
// dies at its step, where the plan peaks.
std::unique_ptr<Graph> TwoConvolutions(bool bias) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", F32({3, 32, 64, 64}));
  auto conv = [&](Value in, const std::string& name, uint32_t seed, bool with_bias) {
    std::vector<Value> inputs = {
        in, *b.Constant(name + "/w", RandomTensor(F32({32, 32, 3, 3}), seed, -0.2f, 0.2f))};
    if (with_bias) inputs.push_back(*b.Constant(name + "/b", RandomTensor(F32({32}), seed + 1)));
    return (*b.Op("Convolution", inputs, {{"pad", Ints{1}}}, name))[0];
  };
  Value a = *b.Relu(conv(x, "conv_a", 1, true), 0.0, "relu_a");
  Value y = *b.Relu(conv(a, "conv_b", 3, bias), 0.0, "relu_b");
  // Then a softmax, so that conv_b's output is not the graph's (an output's bytes are never
  // scratch); not a pooling, which would have the fused plans compute conv_b in bands of rows.
  Value out = (*b.Op("Softmax", {y}, {}, "prob"))[0];
  EXPECT_TRUE(b.Output("out", out).ok());
  return b.Finish();
}

TEST(CudaDeadBytesTest, ConvolutionKeepsItsScratchInTheDyingInputAndItsOwnOutput) {
  if (!ProbeCuda().usable) GTEST_SKIP() << "no usable CUDA device";
  // Passes of 2 tile rows (F(4x4, 3x3): 36 points x 64 channels x 2 x 16 tiles x 4 bytes), so
  // that each part's transformed tiles (and the 147 KiB filter transform) fit in one 32 x 64 x
  // 64 image of conv_b's output (512 KiB).
  dnn::SetWinogradPassBytesForTesting(int64_t{36} * 64 * 32 * 4);
  // The heuristic's order puts the precomputed implicit GEMM first: a workspace limit of
  // Winograd's bytes, under the precomputed GEMM's, makes Winograd the plan's choice.
  auto xd = dnn::TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW,
                                                {3, 32, 64, 64});
  auto wd = dnn::FilterDescriptor::Create(DataType::kF32, dnn::TensorFormat::kNCHW, {32, 32, 3, 3});
  auto cd = dnn::ConvolutionDescriptor::Create({1, 1}, {1, 1}, {1, 1});
  ASSERT_TRUE(xd.ok() && wd.ok() && cd.ok());
  auto problem = dnn::MakeConvProblem(*xd, *wd, *cd, *xd, "test");
  ASSERT_TRUE(problem.ok()) << problem.status();
  dnn::Handle probe(nullptr, nullptr, CurrentDeviceMultiprocessorsForTest());
  auto winograd = dnn::GetConvolutionWorkspaceSize(probe, dnn::ConvDirection::kForward, *problem,
                                                   dnn::ConvAlgo::kWinogradNonfused);
  auto precomp = dnn::GetConvolutionWorkspaceSize(probe, dnn::ConvDirection::kForward, *problem,
                                                  dnn::ConvAlgo::kImplicitPrecompGemm);
  ASSERT_TRUE(winograd.ok() && precomp.ok());
  ASSERT_GT(*precomp, *winograd) << "the limit would not steer the heuristic to Winograd";
  int checked = 0;
  for (const bool bias : {false, true}) {
    for (const LayoutChoice layout : {LayoutChoice::kNchw, LayoutChoice::kNhwc}) {
      for (const bool fuse : {false, true}) {
        auto graph = TwoConvolutions(bias);
        const std::map<std::string, HostTensor> inputs = {
            {"data", RandomTensor(F32({3, 32, 64, 64}), 11)}};
        CompileOptions oracle_options;
        oracle_options.backend = BackendChoice::kCpu;
        auto oracle = Compile(*graph, DefaultKernelRegistry(), oracle_options);
        ASSERT_TRUE(oracle.ok()) << oracle.status();
        auto oracle_ctx = ExecutionContext::Create(**oracle);
        ASSERT_TRUE(oracle_ctx.ok()) << oracle_ctx.status();
        auto want = (*oracle_ctx)->Run(inputs);
        ASSERT_TRUE(want.ok()) << want.status();

        CompileOptions options;
        options.backend = BackendChoice::kCuda;
        options.precision = Precision::kFp32;
        options.layout = layout;
        options.optimize = fuse;  // fused: the ReLU in conv_b's epilogue
        options.workspace_limit = static_cast<int64_t>(*winograd);
        auto plan = Compile(*graph, DefaultKernelRegistry(), options);
        ASSERT_TRUE(plan.ok()) << plan.status();
        const std::string where =
            absl::StrCat("bias ", bias, " layout ", layout == LayoutChoice::kNhwc ? "nhwc" : "nchw",
                         " fused ", fuse);
        // conv_b at least (conv_a too where its input is a converted copy of the data, which
        // dies there: NHWC plans).
        bool dead = false;
        for (const PlanStep& step : (*plan)->steps()) {
          if (step.description.find("in dead bytes") != std::string::npos) {
            EXPECT_EQ(step.workspace_bytes, 0u) << where;
            dead = dead || step.node->name().find("conv_b") != std::string::npos;
          }
        }
        EXPECT_TRUE(dead) << where << "\n" << (*plan)->ToString();
        auto ctx = ExecutionContext::Create(**plan);
        ASSERT_TRUE(ctx.ok()) << ctx.status();
        // The first run, then replays of the captured CUDA graph: the scratch written over the
        // dead input must not leak into a later run.
        for (int run = 0; run < 3; ++run) {
          auto got = (*ctx)->Run(inputs);
          ASSERT_TRUE(got.ok()) << got.status();
          const double err = RelativeL2(got->at("out"), want->at("out"));
          EXPECT_LE(err, 1e-5) << where << " run " << run;
        }
        ++checked;
      }
    }
  }
  dnn::SetWinogradPassBytesForTesting(int64_t{128} << 20);
  std::printf("cuda_dead_bytes_test: %d plans with a convolution in dead bytes checked\n", checked);
}

}  // namespace
}  // namespace kiln
