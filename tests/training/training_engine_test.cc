// The training engine without Caffe (training/): MemoryBatchSource's batches and refusals, a
// Trainer over a builder-made graph that refuses a batch source giving batches of the wrong size,
// and the order in which a CUDA fp16 training plan writes its gradients.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "training/memory_batch_source.h"
#include "training/producing_step.h"
#include "training/trainable_graph.h"
#include "training/trainer.h"

namespace kiln {
namespace {

TEST(MemoryBatchSourceTest, ServesEveryExampleOncePerEpochAndWraps) {
  std::vector<float> x = {0, 1, 2, 3, 4, 5}, y = {10, 11, 12, 13, 14, 15};
  MemoryBatchOptions options;
  options.batch_size = 4;
  options.shuffle = true;
  options.seed = 7;
  auto source = MemoryBatchSource::Create(x, {1}, y, options);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->BatchDims(), (std::vector<std::vector<int64_t>>{{4, 1}, {4}}));
  std::vector<std::vector<float>> batch;
  std::vector<float> seen;
  for (int i = 0; i < 3; ++i) {  // 12 examples: two whole epochs of 6
    ASSERT_TRUE((*source)->NextBatch(batch).ok());
    ASSERT_EQ(batch.size(), 2u);
    for (size_t j = 0; j < batch[0].size(); ++j) {
      EXPECT_EQ(batch[1][j], batch[0][j] + 10);  // labels travel with their examples
      seen.push_back(batch[0][j]);
    }
  }
  EXPECT_EQ((*source)->epoch(), 1);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<float> one(seen.begin() + 6 * epoch, seen.begin() + 6 * epoch + 6);
    std::sort(one.begin(), one.end());
    EXPECT_EQ(one, x) << "epoch " << epoch;
  }
}

TEST(MemoryBatchSourceTest, RefusesShapesThatDoNotFit) {
  MemoryBatchOptions options;
  options.batch_size = 2;
  const std::vector<float> x(8, 1.0f);
  EXPECT_EQ(MemoryBatchSource::Create(x, {3}, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);  // 8 values are not whole examples of 3
  EXPECT_EQ(MemoryBatchSource::Create(x, {0, 2}, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MemoryBatchSource::Create(x, {-4, -2}, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A product that overflows int64 is refused, not wrapped.
  EXPECT_EQ(MemoryBatchSource::Create(x, {int64_t{1} << 40, int64_t{1} << 40}, {}, options)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MemoryBatchSource::Create(x, {2}, {1, 2, 3}, options).status().code(),
            absl::StatusCode::kInvalidArgument);  // 3 labels for 4 examples
  options.batch_size = 5;
  EXPECT_EQ(MemoryBatchSource::Create(x, {2}, {}, options).status().code(),
            absl::StatusCode::kInvalidArgument);  // a batch larger than the data
}

// A source that says batches of 4 x 3 and gives 5 x 3 values.
class LyingSource : public BatchSource {
 public:
  std::vector<std::vector<int64_t>> BatchDims() const override { return {{4, 3}, {4}}; }
  absl::Status NextBatch(std::vector<std::vector<float>>& values) override {
    values = {std::vector<float>(15, 1.0f), std::vector<float>(4, 0.0f)};
    return absl::OkStatus();
  }
};

TEST(TrainerTest, ABatchOfTheWrongSizeIsAnErrorNotAnOverflow) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", *TensorType::Create(DataType::kF32, {4, 3}));
  Value label = *b.Input("label", *TensorType::Create(DataType::kF32, {4}));
  HostTensor w(*TensorType::Create(DataType::kF32, {2, 3}));
  for (int i = 0; i < 6; ++i) w.data_as<float>()[i] = 0.1f * static_cast<float>(i);
  Value weight = *b.Constant("fc.weight", w);
  Value fc = *b.InnerProduct(x, weight, nullptr, "fc");
  Value loss = *b.Op1("SoftmaxWithLoss", {fc, label}, {}, "loss");
  ASSERT_TRUE(b.Output("loss", loss).ok());
  std::unique_ptr<Graph> graph = b.Finish();
  const std::vector<ParamSpec> params = ConstantsAsParams(*graph);
  ASSERT_EQ(params.size(), 1u);
  auto tg = MakeTrainableGraph(std::move(graph), params, {{loss, "loss", 1.0}}, {"data", "label"},
                               TrainableGraphOptions{});
  ASSERT_TRUE(tg.ok()) << tg.status();
  std::vector<NetFeed> feeds(1);
  feeds[0].source = std::make_unique<LyingSource>();
  feeds[0].inputs = {"data", "label"};
  CompileOptions compile;
  compile.backend = BackendChoice::kCpu;
  auto net = CompileTrainingNet(std::move(*tg), std::move(feeds), compile, 1, "test net");
  ASSERT_TRUE(net.ok()) << net.status();
  auto trainer = Trainer::Create(std::move(*net), {}, OptimizerConfig{}, TrainingOptions{});
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const absl::Status step = (*trainer)->Step();
  EXPECT_EQ(step.code(), absl::StatusCode::kInvalidArgument) << step;
  EXPECT_NE(step.message().find("15 values for input 'data'"), std::string::npos) << step;
}

// In an fp16 NHWC plan every gradient output (f32, the parameters' order) is written by a
// Convert the precision pass adds after all other nodes. Those must run right after their
// layer's backward, not all at the end of the plan: data-parallel training starts reducing a
// bucket when the step writing its last gradient is enqueued, and with every gradient written at
// the end it overlapped nothing (measured: two-GPU CaffeNet fp16 gained nothing from overlap).
TEST(TrainingPlanTest, GradientsAreWrittenAsBackwardReachesTheirLayerInAnFp16Plan) {
  if (ProbeCuda().usable) GTEST_SKIP() << "cuda_target plans only where no GPU is present";
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("data", *TensorType::Create(DataType::kF32, {8, 16, 12, 12}));
  Value label = *b.Input("label", *TensorType::Create(DataType::kF32, {8}));
  Value h = x;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  auto random = [&](std::vector<int64_t> dims) {
    HostTensor t(*TensorType::Create(DataType::kF32, dims));
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.data_as<float>()[i] = normal(rng);
    return t;
  };
  ConvolutionOptions conv;
  conv.pad = {1};
  for (int layer = 1; layer <= 3; ++layer) {
    const std::string name = "conv" + std::to_string(layer);
    Value w = *b.Constant(name + ".weight", random({16, 16, 3, 3}));
    h = *b.Relu(*b.Convolution(h, w, nullptr, conv, name), 0.0, "relu" + std::to_string(layer));
  }
  Value fc =
      *b.InnerProduct(h, *b.Constant("fc.weight", random({10, 16 * 12 * 12})), nullptr, "fc");
  Value loss = *b.Op1("SoftmaxWithLoss", {fc, label}, {}, "loss");
  ASSERT_TRUE(b.Output("loss", loss).ok());
  std::unique_ptr<Graph> graph = b.Finish();
  const std::vector<ParamSpec> params = ConstantsAsParams(*graph);
  ASSERT_EQ(params.size(), 4u);
  auto tg = MakeTrainableGraph(std::move(graph), params, {{loss, "loss", 1.0}}, {"data", "label"},
                               TrainableGraphOptions{});
  ASSERT_TRUE(tg.ok()) << tg.status();
  CompileOptions options;
  options.backend = BackendChoice::kCuda;
  options.precision = Precision::kFp16;
  options.layout = LayoutChoice::kNhwc;
  options.device_bound_io = true;
  options.cuda_target = CudaDeviceInfo{0, "absent H100", 9, 0, int64_t{80} << 30, 132};
  auto plan = Compile(*tg->graph, DefaultKernelRegistry(), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<int> written;  // fc, conv3, conv2, conv1: the order backward reaches them
  for (const std::string layer : {"fc", "conv3", "conv2", "conv1"}) {
    auto param = std::find_if(tg->params.begin(), tg->params.end(),
                              [&](const TrainableParam& p) { return p.node == layer + ".weight"; });
    ASSERT_NE(param, tg->params.end()) << layer;
    written.push_back(ProducingStep(**plan, param->gradient));
    ASSERT_GE(written.back(), 0) << layer << "'s gradient '" << param->gradient << "'";
  }
  std::string steps;
  for (size_t i = 0; i < (*plan)->steps().size(); ++i) {
    absl::StrAppend(&steps, i, " ", (*plan)->steps()[i].node->name(), "\n");
  }
  // Each layer's gradient is written before backward goes on to the layer below it (whose
  // weight gradient and data gradient come between), and the plan does not end right after fc's.
  for (size_t i = 1; i < written.size(); ++i) {
    EXPECT_LT(written[i - 1] + 1, written[i]) << "gradient " << i << "\n" << steps;
  }
  EXPECT_LT(written.front() + 4, static_cast<int>((*plan)->steps().size())) << steps;
}

}  // namespace
}  // namespace kiln
