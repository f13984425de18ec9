// The training engine without Caffe (training/): MemoryBatchSource's batches and refusals, and a
// Trainer over a builder-made graph that refuses a batch source giving batches of the wrong size.
#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "ops/all_ops.h"
#include "training/memory_batch_source.h"
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

}  // namespace
}  // namespace kiln
