// Deliberately broken Caffe files: each gives the right status code and a message that names the
// place (line:column, byte offset, layer, field).
#include <string>
#include <vector>

#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "frontends/caffe/solver.h"
#include "gtest/gtest.h"
#include "ops/all_ops.h"
#include "tests/util/caffe_files.h"

namespace kiln {
namespace {

enum class Kind { kNetText, kNetBinary, kSolver, kWeights };

struct BrokenCase {
  const char* name;
  Kind kind;
  std::string content;  // net/solver text, or binary bytes; kWeights: a binary for LeNet
  absl::StatusCode code;
  std::vector<std::string> mentions;
};

const char kInput[] =
    "layer { name: 'in' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 3 dim: 8 dim: "
    "8 } } }\n";

std::string Net(const std::string& layers) { return std::string(kInput) + layers; }

std::string Bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s += static_cast<char>(v);
  return s;
}

// A valid LeNet caffemodel with one change, to test weight checks.
std::string LenetWeights(int mode) {
  caffe::NetParameter weights = *ReadNetParameter(CaffeFile("lenet_iter_10000.caffemodel"));
  for (caffe::LayerParameter& layer : *weights.mutable_layer()) {
    if (layer.name() != "conv1") continue;
    if (mode == 0) layer.mutable_blobs(0)->mutable_shape()->set_dim(0, 21);  // shape mismatch
    if (mode == 1) layer.mutable_blobs()->RemoveLast();                      // blob count
    if (mode == 2) layer.mutable_blobs(1)->mutable_data()->RemoveLast();     // value count
  }
  return weights.SerializeAsString();
}

// clang-format off
std::vector<BrokenCase> Cases() {
  using C = absl::StatusCode;
  const std::string lenet = *ReadFileBytes(CaffeFile("lenet_iter_10000.caffemodel"));
  return {
    // Text syntax: line:column.
    {"UnterminatedBrace", Kind::kNetText, "name: 'x'\nlayer {\n  name: 'a'\n", C::kInvalidArgument, {":4:1:"}},
    {"UnknownField", Kind::kNetText, "name: 'x'\nlayer { nmae: 'a' }\n", C::kInvalidArgument, {":2:13:", "nmae"}},
    {"WrongValueType", Kind::kNetText, "layer { name: 'a' type: 'ReLU' bottom: 'x' top: 'y' relu_param { negative_slope: 'steep' } }", C::kInvalidArgument, {":1:82:", "steep"}},
    {"StringForInteger", Kind::kNetText, "input: 'data' input_dim: 'ten'", C::kInvalidArgument, {":1:"}},
    {"BadEnum", Kind::kNetText, Net("layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' pooling_param { pool: MEDIAN kernel_size: 2 } }"), C::kInvalidArgument, {":2:", "MEDIAN"}},
    {"NegativeUnsigned", Kind::kNetText, Net("layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c' convolution_param { num_output: -4 kernel_size: 3 } }"), C::kInvalidArgument, {":2:95:", "Expected integer"}},
    {"HugeNumber", Kind::kNetText, Net("layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c' convolution_param { num_output: 99999999999 kernel_size: 3 } }"), C::kInvalidArgument, {":2:"}},
    {"InvalidSolverList", Kind::kSolver, "base_lr: 0.1\nlr_policy: 'fixed'\ndevice_id: 0,1\n", C::kInvalidArgument, {":3:"}},
    // Structure and semantics: the layer and field.
    {"MissingKernelSize", Kind::kNetText, Net("layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c' convolution_param { num_output: 4 } }"), C::kInvalidArgument, {"layer 'c' (Convolution)", "kernel_size missing"}},
    {"MissingNumOutput", Kind::kNetText, Net("layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c' convolution_param { kernel_size: 3 } }"), C::kInvalidArgument, {"layer 'c'", "num_output"}},
    {"KernelLargerThanInput", Kind::kNetText, Net("layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c' convolution_param { num_output: 4 kernel_size: 11 } }"), C::kInvalidArgument, {"layer 'c'"}},
    {"PoolingMissingKernel", Kind::kNetText, Net("layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' }"), C::kInvalidArgument, {"layer 'p' (Pooling)", "kernel_size missing"}},
    {"PoolingPadNotBelowKernel", Kind::kNetText, Net("layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' pooling_param { kernel_size: 2 pad: 2 } }"), C::kInvalidArgument, {"layer 'p'", "pad 2"}},
    {"StochasticPooling", Kind::kNetText, Net("layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' pooling_param { pool: STOCHASTIC kernel_size: 2 } }"), C::kUnimplemented, {"layer 'p'", "STOCHASTIC"}},
    {"NegativeInputDim", Kind::kNetText, "layer { name: 'in' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: -3 dim: 8 dim: 8 } } }", C::kInvalidArgument, {"layer 'in' (Input)", "every dim must be > 0"}},
    {"HugeInputDims", Kind::kNetText, "layer { name: 'in' type: 'Input' top: 'data' input_param { shape { dim: 4000000000 dim: 4000000000 dim: 4000000000 } } }", C::kInvalidArgument, {"layer 'in' (Input)"}},
    {"InputDimCount", Kind::kNetText, "input: 'data' input_dim: 1 input_dim: 3 input_dim: 8", C::kInvalidArgument, {"input_dim"}},
    {"UnknownLayerType", Kind::kNetText, Net("layer { name: 'w' type: 'Warp' bottom: 'data' top: 'w' }"), C::kUnimplemented, {"layer 'w' (Warp)", "not supported"}},
    {"UnsupportedLayerType", Kind::kNetText, Net("layer { name: 'a' type: 'MVN' bottom: 'data' top: 'a' }"), C::kUnimplemented, {"layer 'a' (MVN)"}},
    {"BottomNamesNoBlob", Kind::kNetText, Net("layer { name: 'r' type: 'ReLU' bottom: 'nothing' top: 'r' }"), C::kInvalidArgument, {"layer 'r' (ReLU)", "bottom 'nothing'"}},
    {"Cycle", Kind::kNetText, Net("layer { name: 'a' type: 'ReLU' bottom: 'b' top: 'a' }\nlayer { name: 'b' type: 'ReLU' bottom: 'a' top: 'b' }"), C::kInvalidArgument, {"layer 'a'", "bottom 'b'"}},
    {"TopProducedTwice", Kind::kNetText, Net("layer { name: 'a' type: 'ReLU' bottom: 'data' top: 'x' }\nlayer { name: 'b' type: 'Sigmoid' bottom: 'data' top: 'x' }"), C::kInvalidArgument, {"layer 'b'", "top 'x'"}},
    {"ParamOfAnotherLayer", Kind::kNetText, Net("layer { name: 'r' type: 'ReLU' bottom: 'data' top: 'r' convolution_param { num_output: 3 } }"), C::kInvalidArgument, {"layer 'r'", "convolution_param"}},
    {"IncludeAndExclude", Kind::kNetText, Net("layer { name: 'r' type: 'ReLU' bottom: 'data' top: 'r' include { phase: TEST } exclude { phase: TRAIN } }"), C::kInvalidArgument, {"layer 'r'", "include and exclude"}},
    {"GroupDoesNotDivide", Kind::kNetText, Net("layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c' convolution_param { num_output: 4 kernel_size: 3 group: 2 } }"), C::kInvalidArgument, {"layer 'c'", "group 2"}},
    {"EltwiseShapeMismatch", Kind::kNetText, Net("layer { name: 'p' type: 'Pooling' bottom: 'data' top: 'p' pooling_param { kernel_size: 2 stride: 2 } }\nlayer { name: 'e' type: 'Eltwise' bottom: 'data' bottom: 'p' top: 'e' }"), C::kInvalidArgument, {"layer 'e' (Eltwise)"}},
    {"MixedV1AndV2", Kind::kNetText, "layers { name: 'a' type: RELU bottom: 'x' top: 'x' }\nlayer { name: 'b' type: 'ReLU' bottom: 'x' top: 'x' }", C::kInvalidArgument, {"'layer' (V2) and 'layers' (V1)"}},
    {"UnknownV0Type", Kind::kNetText, "layers { layer { name: 'z' type: 'zoom' } bottom: 'x' top: 'y' }", C::kUnimplemented, {"V0 layer 'z' (zoom)"}},
    {"DataLayerWithoutShape", Kind::kNetText, "layer { name: 'd' type: 'Data' top: 'data' top: 'label' data_param { batch_size: 8 } }", C::kInvalidArgument, {"layer 'd' (Data)", "top 'data'", "[8, C, H, W]"}},
    {"SliceCount", Kind::kNetText, Net("layer { name: 's' type: 'Slice' bottom: 'data' top: 'a' top: 'b' slice_param { slice_point: 1 slice_point: 2 } }"), C::kInvalidArgument, {"layer 's' (Slice)", "slice points"}},
    {"EvenLrnSize", Kind::kNetText, Net("layer { name: 'n' type: 'LRN' bottom: 'data' top: 'n' lrn_param { local_size: 4 } }"), C::kInvalidArgument, {"layer 'n' (LRN)", "odd"}},
    {"UnknownFillerType", Kind::kNetText, Net("layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c' convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: 'orthogonal' } } }"), C::kUnimplemented, {"layer 'c'", "orthogonal"}},
    // Binary: byte offsets.
    {"TruncatedCaffemodel", Kind::kNetBinary, lenet.substr(0, lenet.size() / 2), C::kInvalidArgument, {"byte offset", "layer"}},
    {"LengthPastEnd", Kind::kNetBinary, Bytes({0x0a, 0x7f, 'L', 'e', 'N', 'e', 't'}), C::kInvalidArgument, {"byte offset 1", "length 127"}},
    {"InvalidWireType", Kind::kNetBinary, Bytes({0x0a, 0x01, 'x', 0x0f, 0x00}), C::kInvalidArgument, {"byte offset 3", "wire type 7"}},
    {"OverlongVarint", Kind::kNetBinary, Bytes({0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}), C::kInvalidArgument, {"byte offset 1", "varint"}},
    {"CorruptNestedBlob", Kind::kNetBinary, Bytes({0xa2, 0x06, 0x06, 0x3a, 0x04, 0x2a, 0x09, 0x00, 0x00}), C::kInvalidArgument, {"byte offset", "layer.blobs"}},
    // Weights against the net: the layer and both shapes.
    {"BlobShapeMismatch", Kind::kWeights, LenetWeights(0), C::kInvalidArgument, {"layer 'conv1'", "[21,1,5,5]", "[20,1,5,5]"}},
    {"BlobCountMismatch", Kind::kWeights, LenetWeights(1), C::kInvalidArgument, {"layer 'conv1'", "1 blobs", "needs 2"}},
    {"BlobValueCount", Kind::kWeights, LenetWeights(2), C::kInvalidArgument, {"layer 'conv1'", "19 values"}},
    // Solvers.
    {"SolverBothTypes", Kind::kSolver, "net: 'x.prototxt' base_lr: 0.1 lr_policy: 'fixed' type: 'Adam' solver_type: ADAGRAD", C::kInvalidArgument, {"solver_type", "type"}},
    {"SolverUnknownPolicy", Kind::kSolver, "net_param { name: 'n' } base_lr: 0.1 lr_policy: 'cosine'", C::kUnimplemented, {"lr_policy \"cosine\""}},
    {"SolverStepWithoutStepsize", Kind::kSolver, "net_param { name: 'n' } base_lr: 0.1 lr_policy: 'step'", C::kInvalidArgument, {"stepsize"}},
    {"SolverMissingNetFile", Kind::kSolver, "net: 'nowhere/net.prototxt' base_lr: 0.1 lr_policy: 'fixed'", C::kNotFound, {"nowhere/net.prototxt"}},
    {"SolverTwoTrainNets", Kind::kSolver, "net_param { name: 'a' } train_net_param { name: 'b' } base_lr: 0.1 lr_policy: 'fixed'", C::kInvalidArgument, {"exactly one"}},
    {"SolverTestIterCount", Kind::kSolver, "net_param { name: 'a' } test_net_param { name: 'b' } base_lr: 0.1 lr_policy: 'fixed' test_interval: 10", C::kInvalidArgument, {"test_iter"}},
  };
}
// clang-format on

absl::Status Attempt(const BrokenCase& c) {
  switch (c.kind) {
    case Kind::kNetText:
    case Kind::kNetBinary: {
      auto net = ParseNetParameter(c.content, "broken.prototxt");
      if (!net.ok()) return net.status();
      CaffeImportOptions options;
      return ImportCaffeNet(*net, options, DefaultOpRegistry()).status();
    }
    case Kind::kSolver: {
      caffe::SolverParameter solver;
      absl::Status parsed = ParseTextMessage(c.content, "broken_solver.prototxt", solver);
      if (!parsed.ok()) return parsed;
      return ResolveSolver(solver, ::testing::TempDir()).status();
    }
    case Kind::kWeights: {
      auto weights = ParseNetParameter(c.content, "broken.caffemodel");
      if (!weights.ok()) return weights.status();
      CaffeImportOptions options;
      options.weights = &*weights;
      return ImportCaffeNet(*ReadNetParameter(CaffeFile("lenet.prototxt")), options,
                            DefaultOpRegistry())
          .status();
    }
  }
  return absl::InternalError("unreachable");
}

TEST(CaffeBrokenFilesTest, EachGivesTheRightCodeAndNamesThePlace) {
  const std::vector<BrokenCase> cases = Cases();
  EXPECT_GE(cases.size(), 30u);
  for (const BrokenCase& c : cases) {
    const absl::Status status = Attempt(c);
    EXPECT_EQ(status.code(), c.code) << c.name << ": " << status;
    for (const std::string& m : c.mentions) {
      EXPECT_NE(status.message().find(m), std::string::npos)
          << c.name << ": \"" << status.message() << "\" does not mention \"" << m << "\"";
    }
  }
}

TEST(CaffeBrokenFilesTest, PublishedInvalidSolverIsRejectedClearly) {
  auto solver = LoadSolver(CaffeFile("resnet18_solver.prototxt"));
  ASSERT_EQ(solver.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(solver.status().message().find("resnet18_solver.prototxt:"), std::string::npos)
      << solver.status();
}

TEST(CaffeBrokenFilesTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadNetParameter(ScratchFile("no_such.prototxt")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln
