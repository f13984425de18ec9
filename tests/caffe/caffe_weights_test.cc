// .caffemodel loading (V1 and V2 binaries, legacy dims, extra layers), running LeNet with its
// trained weights, the writer's bit-identical round trip, and the fillers.
#include <cmath>
#include <string>
#include <vector>

#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "frontends/caffe/caffemodel_writer.h"
#include "frontends/caffe/filler.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "tests/util/caffe_files.h"

namespace kiln {
namespace {

absl::StatusOr<CaffeModel> Load(const std::string& net_file, const std::string& weights_file,
                                caffe::NetParameter& weights_storage) {
  auto net = ReadNetParameter(CaffeFile(net_file));
  if (!net.ok()) return net.status();
  auto weights = ReadNetParameter(CaffeFile(weights_file));
  if (!weights.ok()) return weights.status();
  weights_storage = *weights;
  CaffeImportOptions options;
  options.weights = &weights_storage;
  return ImportCaffeNet(*net, options, DefaultOpRegistry());
}

TEST(CaffeWeightsTest, ShippedCaffemodelsLoadIntoTheirNets) {
  const std::pair<const char*, const char*> pairs[] = {
      {"lenet.prototxt", "lenet_iter_10000.caffemodel"},
      {"v1_lenet.prototxt", "v1_lenet_iter_10000.caffemodel"},
      {"lenet.prototxt", "v1_lenet_iter_10000.caffemodel"},  // V1 weights, V2 net
      {"v1_cifar10_quick.prototxt", "v1_cifar10_quick_iter_5000.caffemodel"},
      {"cifar10_quick.prototxt", "v1_cifar10_quick_iter_5000.caffemodel"},
      {"mtcnn_det1_pnet.prototxt", "mtcnn_det1_pnet.caffemodel"},
      {"mtcnn_det2_rnet.prototxt", "mtcnn_det2_rnet.caffemodel"},  // has an extra layer
  };
  for (const auto& [net, weights] : pairs) {
    caffe::NetParameter storage;
    auto model = Load(net, weights, storage);
    ASSERT_TRUE(model.ok()) << net << " + " << weights << ": " << model.status();
    ASSERT_FALSE(model->params.empty());
    for (const CaffeParam& p : model->params) EXPECT_EQ(p.source, "weights") << p.node;
  }
}

TEST(CaffeWeightsTest, LegacyDimsMatchRightAligned) {
  caffe::NetParameter storage;
  auto model = Load("v1_lenet.prototxt", "v1_lenet_iter_10000.caffemodel", storage);
  ASSERT_TRUE(model.ok()) << model.status();
  // ip1's weight is stored as 1x1x500x800 and its bias as 1x1x1x500.
  const CaffeLayer* ip1 = model->FindLayer("ip1");
  ASSERT_NE(ip1, nullptr);
  EXPECT_EQ(model->params[ip1->params[0]].shape, (std::vector<int64_t>{500, 800}));
  const caffe::BlobProto& stored = storage.layers(5).blobs(0);
  ASSERT_EQ(storage.layers(5).name(), "ip1");
  EXPECT_EQ(stored.height(), 500);
  EXPECT_EQ(ParamTensor(*model, model->params[ip1->params[0]]).GetFloat(12345), stored.data(12345));
}

// LeNet with its trained weights on the reference backend: the class probabilities of each
// image sum to 1, are identical across runs, and agree with the CPU backend.
TEST(CaffeWeightsTest, LenetRunsWithTrainedWeights) {
  caffe::NetParameter storage;
  auto model = Load("lenet.prototxt", "lenet_iter_10000.caffemodel", storage);
  ASSERT_TRUE(model.ok()) << model.status();
  HostTensor image(*TensorType::Create(DataType::kF32, {64, 1, 28, 28}));
  // A crude "1": a vertical bar, in MNIST's 0..1 scale (lenet.prototxt has no scaling layer).
  for (int n = 0; n < 64; ++n) {
    for (int y = 4; y < 24; ++y) {
      for (int x = 12 + n % 3; x < 16 + n % 3; ++x) image.SetFloat((n * 28 + y) * 28 + x, 1.0f);
    }
  }
  std::vector<std::vector<float>> runs;
  for (BackendChoice backend :
       {BackendChoice::kReference, BackendChoice::kReference, BackendChoice::kCpu}) {
    CompileOptions options;
    options.backend = backend;
    auto plan = Compile(*model->graph, DefaultKernelRegistry(), options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto context = ExecutionContext::Create(**plan, {/*poison_buffers=*/true});
    ASSERT_TRUE(context.ok());
    auto out = (*context)->Run({{"data", image}});
    ASSERT_TRUE(out.ok()) << out.status();
    runs.push_back(out->at("prob").ToF32Vector());
  }
  ASSERT_EQ(runs[0].size(), 640u);
  EXPECT_EQ(runs[0], runs[1]);  // deterministic, bit for bit
  for (int n = 0; n < 64; ++n) {
    double sum = 0;
    int best = 0;
    for (int c = 0; c < 10; ++c) {
      sum += runs[0][n * 10 + c];
      if (runs[0][n * 10 + c] > runs[0][n * 10 + best]) best = c;
      EXPECT_NEAR(runs[0][n * 10 + c], runs[2][n * 10 + c], 1e-5);
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_EQ(best, 1) << "image " << n;
  }
}

TEST(CaffeWeightsTest, WriteReadWriteIsBitIdentical) {
  for (const auto& [net, weights] :
       {std::make_pair("lenet.prototxt", "lenet_iter_10000.caffemodel"),
        std::make_pair("v1_cifar10_quick.prototxt", "v1_cifar10_quick_iter_5000.caffemodel"),
        std::make_pair("mtcnn_det2_rnet.prototxt", "mtcnn_det2_rnet.caffemodel")}) {
    caffe::NetParameter storage;
    auto model = Load(net, weights, storage);
    ASSERT_TRUE(model.ok()) << model.status();
    auto first = SerializeCaffemodel(*model);
    ASSERT_TRUE(first.ok()) << first.status();
    const std::string path = ScratchFile(std::string(net) + ".caffemodel");
    ASSERT_TRUE(WriteCaffemodel(*model, path).ok());
    auto reread = ReadNetParameter(path);
    ASSERT_TRUE(reread.ok()) << reread.status();
    auto net_file = ReadNetParameter(CaffeFile(net));
    CaffeImportOptions options;
    options.weights = &*reread;
    auto again = ImportCaffeNet(*net_file, options, DefaultOpRegistry());
    ASSERT_TRUE(again.ok()) << again.status();
    auto second = SerializeCaffemodel(*again);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(*first, *second) << net;
    // The float values are those of the original weights, bit for bit.
    for (size_t i = 0; i < model->params.size(); ++i) {
      const HostTensor& a = ParamTensor(*model, model->params[i]);
      const HostTensor& b = ParamTensor(*again, again->params[i]);
      ASSERT_EQ(a.size_bytes(), b.size_bytes());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size_bytes()));
    }
  }
}

TEST(CaffeWeightsTest, FillersAreSeededAndSaveable) {
  auto net = ReadNetParameter(CaffeFile("lenet.prototxt"));
  CaffeImportOptions options;
  options.fill_seed = 7;
  auto a = ImportCaffeNet(*net, options, DefaultOpRegistry());
  auto b = ImportCaffeNet(*net, options, DefaultOpRegistry());
  options.fill_seed = 8;
  auto c = ImportCaffeNet(*net, options, DefaultOpRegistry());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*SerializeCaffemodel(*a), *SerializeCaffemodel(*b));
  EXPECT_NE(*SerializeCaffemodel(*a), *SerializeCaffemodel(*c));
  // conv1 uses xavier: U(-sqrt(3/fan_in), +sqrt(3/fan_in)) with fan_in 25; biases constant 0.
  const CaffeLayer* conv1 = a->FindLayer("conv1");
  const HostTensor& w = ParamTensor(*a, a->params[conv1->params[0]]);
  const double bound = std::sqrt(3.0 / 25.0);
  double lo = 1, hi = -1;
  for (int64_t i = 0; i < w.type().num_elements(); ++i) {
    lo = std::min<double>(lo, w.GetFloat(i));
    hi = std::max<double>(hi, w.GetFloat(i));
  }
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.8 * bound);
  EXPECT_GT(hi, 0.8 * bound);
  const HostTensor& bias = ParamTensor(*a, a->params[conv1->params[1]]);
  for (int64_t i = 0; i < bias.type().num_elements(); ++i) EXPECT_EQ(bias.GetFloat(i), 0.0f);
  EXPECT_EQ(a->params[conv1->params[0]].source, "filler xavier");
}

HostTensor FillOne(const std::string& text, std::vector<int64_t> dims, uint64_t seed = 3) {
  caffe::FillerParameter filler;
  EXPECT_TRUE(ParseTextMessage(text, "filler", filler).ok()) << text;
  HostTensor t(*TensorType::Create(DataType::kF32, dims));
  EXPECT_TRUE(FillBlob(filler, seed, "test", t).ok()) << text;
  return t;
}

void MeanStd(const HostTensor& t, double& mean, double& std) {
  const int64_t n = t.type().num_elements();
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    s += t.GetFloat(i);
    s2 += double{t.GetFloat(i)} * t.GetFloat(i);
  }
  mean = s / n;
  std = std::sqrt(s2 / n - mean * mean);
}

TEST(FillerTest, DistributionsHaveTheirMoments) {
  double mean, std;
  MeanStd(FillOne("type: 'gaussian' mean: 1 std: 2", {200, 500}), mean, std);
  EXPECT_NEAR(mean, 1.0, 0.02);
  EXPECT_NEAR(std, 2.0, 0.02);
  MeanStd(FillOne("type: 'uniform' min: -1 max: 3", {200, 500}), mean, std);
  EXPECT_NEAR(mean, 1.0, 0.02);
  EXPECT_NEAR(std, 4.0 / std::sqrt(12.0), 0.02);
  MeanStd(FillOne("type: 'msra'", {64, 32, 3, 3}), mean, std);  // fan_in 288
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(std, std::sqrt(2.0 / 288), 0.003);
  MeanStd(FillOne("type: 'xavier' variance_norm: AVERAGE", {64, 32, 3, 3}), mean, std);
  EXPECT_NEAR(std, std::sqrt(3.0 / 432) / std::sqrt(3.0), 0.002);  // n = (288 + 576) / 2
  const HostTensor ball = FillOne("type: 'positive_unitball'", {10, 50});
  for (int r = 0; r < 10; ++r) {
    double sum = 0;
    for (int j = 0; j < 50; ++j) {
      EXPECT_GE(ball.GetFloat(r * 50 + j), 0.0f);
      sum += ball.GetFloat(r * 50 + j);
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  const HostTensor sparse = FillOne("type: 'gaussian' std: 1 sparse: 5", {100, 400});
  int zeros = 0;
  for (int64_t i = 0; i < 40000; ++i) zeros += sparse.GetFloat(i) == 0.0f;
  EXPECT_NEAR(zeros / 40000.0, 0.95, 0.01);  // kept with probability 5/100
  const HostTensor constant = FillOne("type: 'constant' value: 0.25", {7});
  for (int i = 0; i < 7; ++i) EXPECT_EQ(constant.GetFloat(i), 0.25f);
}

TEST(FillerTest, BilinearIsTheUpsamplingKernel) {
  const HostTensor k = FillOne("type: 'bilinear'", {2, 1, 4, 4});
  // f = 2, c = 3/4: 1-D weights 0.25 0.75 0.75 0.25, the kernel is their outer product.
  const float w[4] = {0.25f, 0.75f, 0.75f, 0.25f};
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) {
      EXPECT_FLOAT_EQ(k.GetFloat(y * 4 + x), w[y] * w[x]);
      EXPECT_FLOAT_EQ(k.GetFloat(16 + y * 4 + x), w[y] * w[x]);
    }
  }
}

TEST(FillerTest, SameSeedSameValuesOtherSeedOthers) {
  const HostTensor a = FillOne("type: 'gaussian'", {1000}, 1);
  const HostTensor b = FillOne("type: 'gaussian'", {1000}, 1);
  const HostTensor c = FillOne("type: 'gaussian'", {1000}, 2);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 4000));
  EXPECT_NE(0, std::memcmp(a.data(), c.data(), 4000));
}

}  // namespace
}  // namespace kiln
