// Example 2: train a CNN built with the C++ GraphBuilder on Fashion-MNIST, with no Caffe file:
// the graph, its loss, the optimizer and the batches are all plain C++. It reads the IDX files
// of Debian's dataset-fashion-mnist, trains a LeNet-like net (conv 20x5x5 -> ReLU -> max-pool ->
// conv 50x5x5 -> ReLU -> max-pool -> fc 500 -> ReLU -> fc 10, softmax loss) with Adam, shows a
// live progress line, and prints the accuracy on the 10,000 test images.
//
//   bazel run //examples:02_train_builder_graph -- [--iterations=N] [--backend=auto|cpu|cuda]
//       [--data=DIR] [--min-accuracy=F]   (exit status 1 when the accuracy is below F)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/idx_file.h"
#include "ir/graph_builder.h"
#include "ops/all_ops.h"
#include "training/memory_batch_source.h"
#include "training/trainable_graph.h"
#include "training/trainer.h"

namespace {

using kiln::DataType;
using kiln::HostTensor;
using kiln::TensorType;
using kiln::Value;

struct Options {
  int iterations = 2000;
  std::string backend = "auto";
  std::string data = "/usr/share/datasets/fashion-mnist";
  double min_accuracy = -1;
};

// He-initialised weights (N(0, 2 / fan_in)) or zero biases, from a fixed seed.
HostTensor Weights(const std::vector<int64_t>& dims, int64_t fan_in, std::mt19937& rng) {
  HostTensor t(*TensorType::Create(DataType::kF32, dims));
  std::normal_distribution<float> dist(0.0f, std::sqrt(2.0f / static_cast<float>(fan_in)));
  for (int64_t i = 0; i < t.type().num_elements(); ++i) {
    t.data_as<float>()[i] = fan_in > 0 ? dist(rng) : 0.0f;
  }
  return t;
}

// The net for batches of `batch` images, with outputs "loss" and "accuracy". Built twice (the
// training and the test batch size) with the same node names, so the test graph can take the
// training graph's parameters by name.
absl::StatusOr<std::unique_ptr<kiln::Graph>> BuildNet(int64_t batch, Value* loss) {
  std::mt19937 rng(2026);
  kiln::GraphBuilder b(&kiln::DefaultOpRegistry());
  KILN_ASSIGN_OR_RETURN(auto image, TensorType::Create(DataType::kF32, {batch, 1, 28, 28}));
  KILN_ASSIGN_OR_RETURN(auto labels, TensorType::Create(DataType::kF32, {batch}));
  KILN_ASSIGN_OR_RETURN(Value x, b.Input("data", image));
  KILN_ASSIGN_OR_RETURN(Value label, b.Input("label", labels));
  kiln::PoolingOptions pool;
  pool.kernel = {2};
  pool.stride = {2};
  auto conv_block = [&](Value in, int64_t in_channels, int64_t out_channels,
                        const std::string& name) -> absl::StatusOr<Value> {
    const int64_t fan_in = in_channels * 25;
    KILN_ASSIGN_OR_RETURN(
        Value w,
        b.Constant(name + ".weight", Weights({out_channels, in_channels, 5, 5}, fan_in, rng)));
    KILN_ASSIGN_OR_RETURN(Value bias, b.Constant(name + ".bias", Weights({out_channels}, 0, rng)));
    KILN_ASSIGN_OR_RETURN(Value c, b.Convolution(in, w, &bias, kiln::ConvolutionOptions{}, name));
    KILN_ASSIGN_OR_RETURN(Value r, b.Relu(c, 0.0, name + ".relu"));
    return b.Pooling(r, pool, name + ".pool");
  };
  auto dense = [&](Value in, int64_t inputs, int64_t outputs,
                   const std::string& name) -> absl::StatusOr<Value> {
    KILN_ASSIGN_OR_RETURN(Value w,
                          b.Constant(name + ".weight", Weights({outputs, inputs}, inputs, rng)));
    KILN_ASSIGN_OR_RETURN(Value bias, b.Constant(name + ".bias", Weights({outputs}, 0, rng)));
    return b.InnerProduct(in, w, &bias, name);
  };
  KILN_ASSIGN_OR_RETURN(Value c1, conv_block(x, 1, 20, "conv1"));    // 20 x 12 x 12
  KILN_ASSIGN_OR_RETURN(Value c2, conv_block(c1, 20, 50, "conv2"));  // 50 x 4 x 4
  KILN_ASSIGN_OR_RETURN(Value f1, dense(c2, 50 * 4 * 4, 500, "fc1"));
  KILN_ASSIGN_OR_RETURN(Value r1, b.Relu(f1, 0.0, "fc1.relu"));
  KILN_ASSIGN_OR_RETURN(Value scores, dense(r1, 500, 10, "fc2"));
  KILN_ASSIGN_OR_RETURN(*loss, b.Op1("SoftmaxWithLoss", {scores, label}, {}, "loss"));
  KILN_ASSIGN_OR_RETURN(Value accuracy, b.Op1("Accuracy", {scores, label}, {}, "accuracy"));
  KILN_RETURN_IF_ERROR(b.Output("loss", *loss));
  KILN_RETURN_IF_ERROR(b.Output("accuracy", accuracy));
  return b.Finish();
}

// Images scaled to [0, 1) (Caffe's 1/256) and labels as floats, from the IDX pair `prefix`.
absl::StatusOr<std::unique_ptr<kiln::MemoryBatchSource>> LoadSet(
    const std::string& dir, const std::string& prefix, const kiln::MemoryBatchOptions& options) {
  KILN_ASSIGN_OR_RETURN(kiln::IdxArray images,
                        kiln::ReadIdxFile(dir + "/" + prefix + "-images-idx3-ubyte.gz"));
  KILN_ASSIGN_OR_RETURN(kiln::IdxArray labels,
                        kiln::ReadIdxFile(dir + "/" + prefix + "-labels-idx1-ubyte.gz"));
  if (images.dims.size() != 3 || labels.dims.size() != 1 || images.dims[0] != labels.dims[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, "/", prefix, ": images and labels disagree"));
  }
  std::vector<float> x(images.data.size()), y(labels.data.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = images.data[i] / 256.0f;
  for (size_t i = 0; i < y.size(); ++i) y[i] = labels.data[i];
  return kiln::MemoryBatchSource::Create(std::move(x), {1, images.dims[1], images.dims[2]},
                                         std::move(y), options);
}

// The graph made trainable (with backward) or an evaluation graph over `trained`'s parameters.
absl::StatusOr<std::unique_ptr<kiln::TrainingNet>> MakeNet(
    int64_t batch, std::unique_ptr<kiln::MemoryBatchSource> source,
    const kiln::CompileOptions& compile, const std::vector<std::string>* trained,
    const std::string& what) {
  Value loss;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<kiln::Graph> graph, BuildNet(batch, &loss));
  const std::vector<kiln::ParamSpec> params = kiln::ConstantsAsParams(*graph);
  kiln::TrainableGraphOptions options;
  options.with_backward = trained == nullptr;
  options.only = trained;
  KILN_ASSIGN_OR_RETURN(kiln::TrainableGraph tg,
                        kiln::MakeTrainableGraph(std::move(graph), params, {{loss, "loss", 1.0}},
                                                 {"data", "label"}, options));
  std::vector<kiln::NetFeed> feeds(1);
  feeds[0].source = std::move(source);
  feeds[0].inputs = {"data", "label"};
  return kiln::CompileTrainingNet(std::move(tg), std::move(feeds), compile, 1, what);
}

absl::Status Main(const Options& o) {
  kiln::CompileOptions compile;
  if (o.backend == "cuda") compile.backend = kiln::BackendChoice::kCuda;
  if (o.backend == "cpu") compile.backend = kiln::BackendChoice::kCpu;
  kiln::MemoryBatchOptions train_batches;
  train_batches.batch_size = 64;
  train_batches.shuffle = true;
  kiln::MemoryBatchOptions test_batches;
  test_batches.batch_size = 100;
  KILN_ASSIGN_OR_RETURN(auto train_set, LoadSet(o.data, "train", train_batches));
  KILN_ASSIGN_OR_RETURN(auto test_set, LoadSet(o.data, "t10k", test_batches));
  const int test_iter = static_cast<int>(test_set->size() / test_batches.batch_size);
  KILN_ASSIGN_OR_RETURN(auto train,
                        MakeNet(64, std::move(train_set), compile, nullptr, "train net"));
  std::vector<std::string> trained;
  for (const kiln::TrainableParam& p : train->tg.params) trained.push_back(p.node);
  KILN_ASSIGN_OR_RETURN(auto test,
                        MakeNet(100, std::move(test_set), compile, &trained, "test net"));
  test->test_iter = test_iter;
  std::vector<std::unique_ptr<kiln::TrainingNet>> evaluations;
  evaluations.push_back(std::move(test));

  kiln::OptimizerConfig adam;
  adam.type = kiln::dnn::SolverType::kAdam;
  adam.learning_rate.base_lr = 0.001;
  adam.momentum = 0.9;
  adam.average_loss = 50;
  KILN_ASSIGN_OR_RETURN(auto trainer,
                        kiln::Trainer::Create(std::move(train), std::move(evaluations), adam,
                                              kiln::TrainingOptions{}));
  std::printf("training on %s\n", trainer->backend_description().c_str());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; i <= o.iterations; ++i) {
    KILN_RETURN_IF_ERROR(trainer->Step());
    if (i % 20 == 0 || i == o.iterations) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double rate = i / s;
      std::fprintf(stderr, "\riteration %d/%d  loss %.4f  %.1f it/s  ETA %.0f s   ", i,
                   o.iterations, trainer->smoothed_loss(), rate, (o.iterations - i) / rate);
    }
  }
  std::fprintf(stderr, "\n");
  KILN_ASSIGN_OR_RETURN(std::vector<kiln::NetOutput> outputs, trainer->Test(0));
  double accuracy = -1;
  for (const kiln::NetOutput& out : outputs) {
    std::printf("test %s: %.4f\n", out.name.c_str(), out.value);
    if (out.name == "accuracy") accuracy = out.value;
  }
  std::printf("test accuracy: %.4f after %d iterations of 64 images\n", accuracy, o.iterations);
  if (o.min_accuracy >= 0 && !(accuracy >= o.min_accuracy)) {
    return absl::FailedPreconditionError(
        absl::StrCat("test accuracy ", accuracy, " is below --min-accuracy ", o.min_accuracy));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) { return arg.substr(std::strlen(flag)); };
    if (arg.rfind("--iterations=", 0) == 0) {
      if (!absl::SimpleAtoi(value("--iterations="), &o.iterations) || o.iterations < 1) {
        std::fprintf(stderr, "error: --iterations must be a positive number\n");
        return 2;
      }
    } else if (arg.rfind("--backend=", 0) == 0) {
      o.backend = value("--backend=");
    } else if (arg.rfind("--data=", 0) == 0) {
      o.data = value("--data=");
    } else if (arg.rfind("--min-accuracy=", 0) == 0) {
      if (!absl::SimpleAtod(value("--min-accuracy="), &o.min_accuracy)) {
        std::fprintf(stderr, "error: --min-accuracy must be a number\n");
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: %s [--iterations=N] [--backend=auto|cpu|cuda] [--data=DIR] "
                   "[--min-accuracy=F]\n",
                   argv[0]);
      return 2;
    }
  }
  absl::Status s = Main(o);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
