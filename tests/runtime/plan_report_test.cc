// runtime/plan_report.h on its own: the step rows (the algorithm a CUDA convolution chose, read
// from a plan for an absent H100), the source layers a fused step covers with and without a
// layer map, and the arena's buffers against the planned and unshared bytes.
#include "runtime/plan_report.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::RandomTensor;

// x -> convolution "conv" (3x3, pad 1) -> ReLU "relu" -> output "y".
std::unique_ptr<Graph> ConvRelu() {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({2, 8, 16, 16}));
  Value w = *b.Constant("w", RandomTensor(F32({16, 8, 3, 3}), 1));
  ConvolutionOptions same;
  same.pad = {1};
  Value c = *b.Convolution(x, w, nullptr, same, "conv");
  EXPECT_TRUE(b.Output("y", *b.Relu(c, 0.0, "relu")).ok());
  return b.Finish();
}

CompileOptions Optimized(BackendChoice backend) {
  CompileOptions options;
  options.backend = backend;
  options.optimize = true;
  return options;
}

TEST(PlanReportTest, FusedStepsCoverTheirNodesOrTheirLayers) {
  auto g = ConvRelu();
  auto plan = Compile(*g, DefaultKernelRegistry(), Optimized(BackendChoice::kCpu));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<StepRow> rows = StepRows(**plan, LayerIndex());
  ASSERT_EQ(rows.size(), (*plan)->steps().size());
  ASSERT_EQ(rows[0].index, 0);
  EXPECT_EQ(rows[0].op, "Convolution");
  EXPECT_EQ(rows[0].layers, (std::vector<std::string>{"conv", "relu"}));
  // With a layer map, the layers the nodes came from.
  const LayerIndex caffe({{"conv", "conv1"}, {"relu", "relu1"}},
                         {{"conv1", "Convolution"}, {"relu1", "ReLU"}});
  EXPECT_EQ(StepRows(**plan, caffe)[0].layers, (std::vector<std::string>{"conv1", "relu1"}));
  EXPECT_EQ(caffe.TypeOf("relu1"), "ReLU");
  EXPECT_EQ(caffe.TypeOf("conv"), "");
  EXPECT_EQ(StepJson(rows[0], /*detail=*/false).rfind("{\"name\": \"conv\", \"kernel\": ", 0), 0u);
  EXPECT_EQ(StepJson(rows[0], false).find("\"index\""), std::string::npos);
  EXPECT_NE(StepJson(rows[0], true).find("\"index\": 0, \"op\": \"Convolution\""),
            std::string::npos);
}

TEST(PlanReportTest, ArenaBuffersLieInsideTheArenaAndUnsharedBytesBoundIt) {
  auto g = ConvRelu();
  auto plan = Compile(*g, DefaultKernelRegistry(), Optimized(BackendChoice::kCpu));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const ExecutionPlan& p = **plan;
  const std::vector<ArenaBuffer> buffers = ArenaBuffers(p);
  ASSERT_FALSE(buffers.empty());
  EXPECT_EQ(buffers.front().name, "x");
  EXPECT_EQ(buffers.front().first_step, -1);
  EXPECT_EQ(buffers.back().last_step, static_cast<int>(p.steps().size()));
  for (const ArenaBuffer& b : buffers) {
    EXPECT_LE(b.first_step, b.last_step) << b.name;
    EXPECT_LE(b.offset + b.bytes, p.activations_bytes()) << b.name;
  }
  EXPECT_LE(p.planned_activation_bytes(), p.activations_bytes());
  EXPECT_LE(p.activations_bytes(), UnsharedArenaBytes(p));
}

// The algorithm a CUDA convolution chose is in its description ("algo=..."); the row and the
// detailed JSON carry it.
TEST(PlanReportTest, CudaConvolutionsNameTheirAlgorithm) {
  if (ProbeCuda().usable) GTEST_SKIP() << "cuda_target plans only where no GPU is present";
  auto g = ConvRelu();
  CompileOptions options = Optimized(BackendChoice::kCuda);
  options.precision = Precision::kFp32;
  options.cuda_target = CudaDeviceInfo{0, "absent H100", 9, 0, int64_t{80} << 30, 132};
  auto plan = Compile(*g, DefaultKernelRegistry(), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  bool found = false;
  for (const StepRow& row : StepRows(**plan, LayerIndex())) {
    if (row.op != "Convolution") continue;
    found = true;
    ASSERT_FALSE(row.algorithm.empty()) << row.description;
    EXPECT_EQ(row.description.rfind("algo=" + row.algorithm, 0), 0u) << row.description;
    EXPECT_NE(StepJson(row, true).find("\"algorithm\": \"" + row.algorithm + "\""),
              std::string::npos);
  }
  EXPECT_TRUE(found);
  // The graphviz text draws the fused step as a cluster of its nodes.
  EXPECT_NE(PlanToDot(**plan, LayerIndex()).find("label=\"conv + relu\""), std::string::npos);
  EXPECT_EQ(MemoryToSvg(**plan).rfind("<svg", 0), 0u);
}

}  // namespace
}  // namespace kiln
