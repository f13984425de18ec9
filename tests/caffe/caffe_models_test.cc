// Every shared Caffe net imports, and its input shapes and parameter totals equal those
// ../shared/models/caffe/MODELS.md lists (computed there independently of Kiln).
#include <map>
#include <string>
#include <vector>

#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "gtest/gtest.h"
#include "ops/all_ops.h"
#include "tests/util/caffe_files.h"

namespace kiln {
namespace {

using Dims = std::vector<int64_t>;

struct ModelCase {
  const char* file;
  caffe::Phase phase;
  // Shapes the file does not give (Data layers): supplied as the user would.
  std::map<std::string, Dims> supplied;
  std::map<std::string, Dims> inputs;   // expected graph inputs
  int64_t learnable;                    // MODELS.md "learnable params"
  int64_t bn_stats;                     // MODELS.md "+N BN stats" (2C+1 per BatchNorm)
  std::map<std::string, Dims> outputs;  // a few expected net outputs
};

const Dims kMnist100 = {100, 1, 28, 28};
const Dims kCifar100 = {100, 3, 32, 32};

// clang-format off
const ModelCase kModels[] = {
    {"alexnet_deploy.prototxt", caffe::TEST, {}, {{"data", {10, 3, 227, 227}}}, 60965224, 0, {{"prob", {10, 1000}}}},
    {"alexnet_train_val.prototxt", caffe::TEST, {{"data", {50, 3, 227, 227}}}, {{"data", {50, 3, 227, 227}}, {"label", {50}}}, 60965224, 0, {{"accuracy", {}}, {"loss", {}}}},
    {"caffenet_deploy.prototxt", caffe::TEST, {}, {{"data", {10, 3, 227, 227}}}, 60965224, 0, {{"prob", {10, 1000}}}},
    {"caffenet_train_val.prototxt", caffe::TEST, {{"data", {50, 3, 227, 227}}}, {{"data", {50, 3, 227, 227}}, {"label", {50}}}, 60965224, 0, {}},
    {"cifar10_full_sigmoid_train_test_bn.prototxt", caffe::TEST, {{"data", {1000, 3, 32, 32}}}, {{"data", {1000, 3, 32, 32}}, {"label", {1000}}}, 89450, 259, {}},
    {"cifar10_full_train_test.prototxt", caffe::TEST, {{"data", kCifar100}}, {{"data", kCifar100}, {"label", {100}}}, 89578, 0, {}},
    {"cifar10_quick.prototxt", caffe::TEST, {}, {{"data", {1, 3, 32, 32}}}, 145578, 0, {{"prob", {1, 10}}}},
    {"cifar10_quick_train_test.prototxt", caffe::TEST, {{"data", kCifar100}}, {{"data", kCifar100}, {"label", {100}}}, 145578, 0, {}},
    {"densenet121_deploy.prototxt", caffe::TEST, {}, {{"data", {1, 3, 224, 224}}}, 7978856, 83769, {{"fc6", {1, 1000, 1, 1}}}},
    {"fcn8s_voc_deploy.prototxt", caffe::TEST, {}, {{"data", {1, 3, 500, 500}}}, 134489759, 0, {{"score", {1, 21, 500, 500}}}},
    {"lenet.prototxt", caffe::TEST, {}, {{"data", {64, 1, 28, 28}}}, 431080, 0, {{"prob", {64, 10}}}},
    {"lenet_input_dim.prototxt", caffe::TEST, {}, {{"data", {64, 1, 28, 28}}}, 431080, 0, {{"prob", {64, 10}}}},
    {"lenet_input_shape.prototxt", caffe::TEST, {}, {{"data", {64, 1, 28, 28}}}, 431080, 0, {{"prob", {64, 10}}}},
    {"lenet_train_test.prototxt", caffe::TEST, {{"data", kMnist100}}, {{"data", kMnist100}, {"label", {100}}}, 431080, 0, {{"accuracy", {}}, {"loss", {}}}},
    {"mnist_autoencoder.prototxt", caffe::TRAIN, {{"data", kMnist100}}, {{"data", kMnist100}}, 2837314, 0, {{"cross_entropy_loss", {}}, {"l2_error", {}}}},
    {"mnist_siamese_train_test.prototxt", caffe::TEST, {{"pair_data", {100, 2, 28, 28}}}, {{"pair_data", {100, 2, 28, 28}}, {"sim", {100}}}, 862204, 0, {{"loss", {}}}},
    {"mtcnn_det1_pnet.prototxt", caffe::TEST, {}, {{"data", {1, 3, 12, 12}}}, 6632, 0, {{"conv4-2", {1, 4, 1, 1}}, {"prob1", {1, 2, 1, 1}}}},
    {"mtcnn_det2_rnet.prototxt", caffe::TEST, {}, {{"data", {1, 3, 24, 24}}}, 100178, 0, {{"conv5-2", {1, 4}}, {"prob1", {1, 2}}}},
    {"resnet10_preact_cvgj_deploy.prototxt", caffe::TEST, {}, {{"data", {1, 3, 224, 224}}}, 5417070, 3984, {}},
    {"resnet10_preact_cvgj_train.prototxt", caffe::TEST, {}, {{"data", {10, 3, 224, 224}}, {"label", {10}}}, 5417070, 3984, {}},
    {"resnet18_deploy.prototxt", caffe::TEST, {}, {{"data", {1, 3, 224, 224}}}, 11693736, 9749, {}},
    {"resnet18_train.prototxt", caffe::TEST, {{"data", {50, 3, 224, 224}}}, {{"data", {50, 3, 224, 224}}, {"label", {50}}}, 11693736, 9749, {}},
    {"v0_lenet.prototxt", caffe::TEST, {}, {{"data", {64, 1, 28, 28}}}, 431080, 0, {{"prob", {64, 10}}}},
    {"v1_alexnet_deploy.prototxt", caffe::TEST, {}, {{"data", {10, 3, 227, 227}}}, 60965224, 0, {{"prob", {10, 1000}}}},
    {"v1_caffenet_deploy.prototxt", caffe::TEST, {}, {{"data", {10, 3, 227, 227}}}, 60965224, 0, {{"prob", {10, 1000}}}},
    {"v1_caffenet_train_val.prototxt", caffe::TEST, {{"data", {50, 3, 227, 227}}}, {{"data", {50, 3, 227, 227}}, {"label", {50}}}, 60965224, 0, {}},
    {"v1_cifar10_full_train_test.prototxt", caffe::TEST, {{"data", kCifar100}}, {{"data", kCifar100}, {"label", {100}}}, 89578, 0, {}},
    {"v1_cifar10_quick.prototxt", caffe::TEST, {}, {{"data", {1, 3, 32, 32}}}, 145578, 0, {{"prob", {1, 10}}}},
    {"v1_cifar10_quick_train_test.prototxt", caffe::TEST, {{"data", kCifar100}}, {{"data", kCifar100}, {"label", {100}}}, 145578, 0, {}},
    {"v1_lenet.prototxt", caffe::TEST, {}, {{"data", {64, 1, 28, 28}}}, 431080, 0, {{"prob", {64, 10}}}},
    {"v1_lenet_train_test.prototxt", caffe::TEST, {{"data", kMnist100}}, {{"data", kMnist100}, {"label", {100}}}, 431080, 0, {}},
    {"v1_mnist_autoencoder.prototxt", caffe::TRAIN, {{"data", kMnist100}}, {{"data", kMnist100}}, 2837314, 0, {}},
    {"v1_mnist_siamese_train_test.prototxt", caffe::TEST, {{"pair_data", {100, 2, 28, 28}}}, {{"pair_data", {100, 2, 28, 28}}, {"sim", {100}}}, 862204, 0, {}},
};
// clang-format on

class CaffeModelsTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(CaffeModelsTest, ImportsWithTheShapesAndCountsOfModelsMd) {
  const ModelCase& c = GetParam();
  absl::StatusOr<caffe::NetParameter> file = ReadNetParameter(CaffeFile(c.file));
  ASSERT_TRUE(file.ok()) << file.status();
  CaffeImportOptions options;
  options.phase = c.phase;
  options.input_shapes = c.supplied;
  options.init = ParamInit::kZeros;
  absl::StatusOr<CaffeModel> model = ImportCaffeNet(*file, options, DefaultOpRegistry());
  ASSERT_TRUE(model.ok()) << model.status();
  std::map<std::string, Dims> inputs;
  for (const CaffeInput& input : model->inputs) inputs[input.name] = input.dims;
  EXPECT_EQ(inputs, c.inputs);
  EXPECT_EQ(model->LearnableParams(), c.learnable);
  int64_t stats = 0;
  for (const CaffeParam& p : model->params) {
    if (p.learnable) continue;
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    stats += n;
  }
  EXPECT_EQ(stats, c.bn_stats);
  std::map<std::string, Dims> outputs;
  for (const GraphOutput& o : model->graph->outputs()) outputs[o.name] = o.value.type().dims();
  for (const auto& [name, dims] : c.outputs) {
    ASSERT_TRUE(outputs.count(name)) << "no output " << name;
    EXPECT_EQ(outputs[name], dims) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedFiles, CaffeModelsTest, ::testing::ValuesIn(kModels),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           std::string name = info.param.file;
                           name = name.substr(0, name.find('.'));
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// Older generations describe the same nets: after the upgrade every layer has the same type,
// the same tops and the same top shapes as the current-format copy.
TEST(CaffeUpgradeTest, V0AndV1FilesImportLikeTheirV2Copies) {
  const std::pair<const char*, const char*> pairs[] = {
      {"v0_lenet.prototxt", "lenet_input_dim.prototxt"},
      {"v1_lenet.prototxt", "lenet_input_dim.prototxt"},
      {"v1_alexnet_deploy.prototxt", "alexnet_deploy.prototxt"},
      {"v1_cifar10_quick.prototxt", "cifar10_quick.prototxt"},
  };
  for (const auto& [old_file, new_file] : pairs) {
    CaffeImportOptions options;
    options.init = ParamInit::kZeros;
    auto a = ImportCaffeNet(*ReadNetParameter(CaffeFile(old_file)), options, DefaultOpRegistry());
    auto b = ImportCaffeNet(*ReadNetParameter(CaffeFile(new_file)), options, DefaultOpRegistry());
    ASSERT_TRUE(a.ok() && b.ok()) << old_file << ": " << a.status() << " / " << b.status();
    std::vector<std::string> sa, sb;
    for (const CaffeModel* m : {&*a, &*b}) {
      std::vector<std::string>& out = m == &*a ? sa : sb;
      for (const CaffeLayer& layer : m->layers) {
        if (layer.type == "Input") continue;
        std::string line = layer.type;
        for (const CaffeTop& top : layer.tops) line += " " + top.value.type().ToString();
        out.push_back(line);
      }
    }
    EXPECT_EQ(sa, sb) << old_file;
  }
}

TEST(CaffeUpgradeTest, V1ParamFieldsBecomeParamSpecs) {
  auto net = ReadNetParameter(CaffeFile("v1_lenet_train_test.prototxt"));
  ASSERT_TRUE(net.ok());
  CaffeImportOptions options;
  options.phase = caffe::TRAIN;
  options.init = ParamInit::kZeros;
  options.input_shapes["data"] = {64, 1, 28, 28};  // The TRAIN Data layer's batch is 64.
  auto model = ImportCaffeNet(*net, options, DefaultOpRegistry());
  ASSERT_TRUE(model.ok()) << model.status();
  const CaffeLayer* conv1 = model->FindLayer("conv1");
  ASSERT_NE(conv1, nullptr);
  ASSERT_EQ(conv1->params.size(), 2u);
  EXPECT_EQ(model->params[conv1->params[0]].lr_mult, 1.0f);  // blobs_lr: 1
  EXPECT_EQ(model->params[conv1->params[1]].lr_mult, 2.0f);  // blobs_lr: 2
  const CaffeLayer* loss = model->FindLayer("loss");
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->tops[0].loss_weight, 1.0f);        // loss layers default to weight 1
  EXPECT_EQ(model->FindLayer("accuracy"), nullptr);  // TEST-only layer filtered out in TRAIN
}

TEST(CaffeUpgradeTest, SiameseSharesNamedParams) {
  auto net = ReadNetParameter(CaffeFile("mnist_siamese_train_test.prototxt"));
  CaffeImportOptions options;
  options.init = ParamInit::kZeros;
  options.input_shapes["pair_data"] = {100, 2, 28, 28};
  auto model = ImportCaffeNet(*net, options, DefaultOpRegistry());
  ASSERT_TRUE(model.ok()) << model.status();
  const CaffeLayer* a = model->FindLayer("conv1");
  const CaffeLayer* b = model->FindLayer("conv1_p");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(model->params[a->params[0]].node, model->params[b->params[0]].node);
  EXPECT_EQ(model->params[b->params[0]].source, "shared");
}

TEST(CaffeImportTest, StagesSelectLayers) {
  // mnist_autoencoder's TEST nets exist only with a stage; without one its Flatten has no input.
  auto net = ReadNetParameter(CaffeFile("mnist_autoencoder.prototxt"));
  CaffeImportOptions options;
  options.init = ParamInit::kZeros;
  options.input_shapes["data"] = kMnist100;
  auto none = ImportCaffeNet(*net, options, DefaultOpRegistry());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("bottom 'data' names no blob"), std::string::npos);
  options.stages = {"test-on-test"};
  auto staged = ImportCaffeNet(*net, options, DefaultOpRegistry());
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_EQ(staged->inputs.size(), 1u);
  EXPECT_EQ(staged->inputs[0].layer_type, "Data");
  EXPECT_EQ(staged->net.layer(0).include(0).stage(0), "test-on-test");
}

TEST(CaffeImportTest, InPlaceTopsBecomeFreshValues) {
  CaffeImportOptions options;
  options.init = ParamInit::kZeros;
  auto model =
      ImportCaffeNet(*ReadNetParameter(CaffeFile("lenet.prototxt")), options, DefaultOpRegistry());
  ASSERT_TRUE(model.ok());
  const CaffeLayer* ip1 = model->FindLayer("ip1");
  const CaffeLayer* relu = model->FindLayer("relu1");
  ASSERT_TRUE(ip1 && relu);
  EXPECT_EQ(ip1->tops[0].blob, relu->tops[0].blob);
  EXPECT_NE(ip1->tops[0].value, relu->tops[0].value);
  EXPECT_EQ(relu->tops[0].value.node->input(0), ip1->tops[0].value);
}

TEST(CaffeImportTest, DensenetCeilModeFalseMeansFloor) {
  CaffeImportOptions options;
  options.init = ParamInit::kZeros;
  auto model = ImportCaffeNet(*ReadNetParameter(CaffeFile("densenet121_deploy.prototxt")), options,
                              DefaultOpRegistry());
  ASSERT_TRUE(model.ok());
  const Node* pool1 = model->graph->FindNode("pool1");
  ASSERT_NE(pool1, nullptr);
  EXPECT_EQ(pool1->GetString("rounding"), "floor");
  EXPECT_EQ(pool1->output_types()[0].dims(), (Dims{1, 64, 56, 56}));
}

}  // namespace
}  // namespace kiln
