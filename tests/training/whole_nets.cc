// The small Caffe nets of the whole-network checks and their preparation (whole_nets.h).
#include "tests/training/whole_nets.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/caffe_model.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "passes/training_passes.h"
#include "training/backward.h"

namespace kiln {
namespace testing {

// LeNet's structure at a size the reference backend differentiates in milliseconds: two
// convolution + max-pooling stages, a hidden layer with an in-place ReLU, a classifier and the
// softmax loss. Weights are small Gaussians (the fillers, seeded), biases small uniforms.
const char kLenet[] = R"pb(
  name: "lenet_small"
  layer {
    name: "data"
    type: "Input"
    top: "data"
    input_param { shape { dim: 2 dim: 1 dim: 14 dim: 14 } }
  }
  layer {
    name: "label"
    type: "Input"
    top: "label"
    input_param { shape { dim: 2 } }
  }
  layer {
    name: "conv1"
    type: "Convolution"
    bottom: "data"
    top: "conv1"
    convolution_param {
      num_output: 4
      kernel_size: 5
      weight_filler { type: "gaussian" std: 0.3 }
      bias_filler { type: "uniform" min: -0.1 max: 0.1 }
    }
  }
  layer {
    name: "pool1"
    type: "Pooling"
    bottom: "conv1"
    top: "pool1"
    pooling_param { pool: MAX kernel_size: 2 stride: 2 }
  }
  layer {
    name: "conv2"
    type: "Convolution"
    bottom: "pool1"
    top: "conv2"
    convolution_param {
      num_output: 6
      kernel_size: 3
      weight_filler { type: "gaussian" std: 0.3 }
      bias_filler { type: "uniform" min: -0.1 max: 0.1 }
    }
  }
  layer {
    name: "pool2"
    type: "Pooling"
    bottom: "conv2"
    top: "pool2"
    pooling_param { pool: MAX kernel_size: 2 stride: 2 }
  }
  layer {
    name: "ip1"
    type: "InnerProduct"
    bottom: "pool2"
    top: "ip1"
    inner_product_param {
      num_output: 12
      weight_filler { type: "gaussian" std: 0.3 }
      bias_filler { type: "uniform" min: -0.1 max: 0.1 }
    }
  }
  layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
  layer {
    name: "ip2"
    type: "InnerProduct"
    bottom: "ip1"
    top: "ip2"
    inner_product_param {
      num_output: 5
      weight_filler { type: "gaussian" std: 0.5 }
      bias_filler { type: "uniform" min: -0.1 max: 0.1 }
    }
  }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
)pb";

// A residual block with batch statistics: conv-BN-Scale-ReLU, then a branch conv-BN-Scale-ReLU-
// conv-BN-Scale added back to the block's input (Eltwise SUM), ReLU, max pooling, a classifier
// and the softmax loss. BatchNorm runs in training mode (use_global_stats false), so the
// gradient flows through the batch mean and variance; "res1" feeds two consumers, so its
// gradient is the sum BuildBackward forms.
const char kResidual[] = R"pb(
  name: "residual_small"
  layer {
    name: "data"
    type: "Input"
    top: "data"
    input_param { shape { dim: 4 dim: 3 dim: 6 dim: 6 } }
  }
  layer {
    name: "label"
    type: "Input"
    top: "label"
    input_param { shape { dim: 4 } }
  }
  layer {
    name: "conv1"
    type: "Convolution"
    bottom: "data"
    top: "conv1"
    convolution_param {
      num_output: 4
      kernel_size: 3
      pad: 1
      weight_filler { type: "gaussian" std: 0.3 }
      bias_term: false
    }
  }
  layer {
    name: "bn1"
    type: "BatchNorm"
    bottom: "conv1"
    top: "bn1"
    batch_norm_param { use_global_stats: false }
  }
  layer {
    name: "scale1"
    type: "Scale"
    bottom: "bn1"
    top: "res1"
    scale_param {
      bias_term: true
      filler { type: "uniform" min: 0.5 max: 1.5 }
      bias_filler { type: "uniform" min: -0.2 max: 0.2 }
    }
  }
  layer { name: "relu1" type: "ReLU" bottom: "res1" top: "res1" }
  layer {
    name: "conv2"
    type: "Convolution"
    bottom: "res1"
    top: "conv2"
    convolution_param {
      num_output: 4
      kernel_size: 3
      pad: 1
      weight_filler { type: "gaussian" std: 0.3 }
      bias_term: false
    }
  }
  layer {
    name: "bn2"
    type: "BatchNorm"
    bottom: "conv2"
    top: "bn2"
    batch_norm_param { use_global_stats: false }
  }
  layer {
    name: "scale2"
    type: "Scale"
    bottom: "bn2"
    top: "branch2"
    scale_param {
      bias_term: true
      filler { type: "uniform" min: 0.5 max: 1.5 }
      bias_filler { type: "uniform" min: -0.2 max: 0.2 }
    }
  }
  layer { name: "relu2" type: "ReLU" bottom: "branch2" top: "branch2" }
  layer {
    name: "conv3"
    type: "Convolution"
    bottom: "branch2"
    top: "conv3"
    convolution_param {
      num_output: 4
      kernel_size: 3
      pad: 1
      weight_filler { type: "gaussian" std: 0.3 }
      bias_term: false
    }
  }
  layer {
    name: "bn3"
    type: "BatchNorm"
    bottom: "conv3"
    top: "bn3"
    batch_norm_param { use_global_stats: false }
  }
  layer {
    name: "scale3"
    type: "Scale"
    bottom: "bn3"
    top: "branch3"
    scale_param {
      bias_term: true
      filler { type: "uniform" min: 0.5 max: 1.5 }
      bias_filler { type: "uniform" min: -0.2 max: 0.2 }
    }
  }
  layer {
    name: "sum"
    type: "Eltwise"
    bottom: "res1"
    bottom: "branch3"
    top: "sum"
    eltwise_param { operation: SUM }
  }
  layer { name: "relu3" type: "ReLU" bottom: "sum" top: "sum" }
  layer {
    name: "pool"
    type: "Pooling"
    bottom: "sum"
    top: "pool"
    pooling_param { pool: MAX kernel_size: 2 stride: 2 }
  }
  layer {
    name: "ip"
    type: "InnerProduct"
    bottom: "pool"
    top: "ip"
    inner_product_param {
      num_output: 3
      weight_filler { type: "gaussian" std: 0.3 }
      bias_filler { type: "uniform" min: -0.1 max: 0.1 }
    }
  }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
)pb";

// Caffe's sequence layers: an Embed of word indices (tiled twice along the features), an LSTM
// over it with sequence-continuation markers (restarts inside the batch rows) and a static input
// (x_static, added at every step through its own weight), a Caffe RNN (tanh,
// with its W_ho output projection) over the LSTM's output, and a per-step classifier with the
// softmax loss over axis 2 (class 1, a third of the labels, ignored: normalized by the rest).
const char kRecurrent[] = R"pb(
  name: "recurrent_small"
  layer {
    name: "words"
    type: "Input"
    top: "words"
    input_param { shape { dim: 4 dim: 3 } }
  }
  layer {
    name: "embed"
    type: "Embed"
    bottom: "words"
    top: "embedded"
    embed_param {
      num_output: 5
      input_dim: 6
      weight_filler { type: "uniform" min: -1 max: 1 }
      bias_filler { type: "uniform" min: -0.1 max: 0.1 }
    }
  }
  layer {
    name: "tile"
    type: "Tile"
    bottom: "embedded"
    top: "data"
    tile_param { axis: 2 tiles: 2 }
  }
  layer {
    name: "cont"
    type: "Input"
    top: "cont"
    input_param { shape { dim: 4 dim: 3 } }
  }
  layer {
    name: "label"
    type: "Input"
    top: "label"
    input_param { shape { dim: 4 dim: 3 } }
  }
  layer {
    name: "static"
    type: "Input"
    top: "static"
    input_param { shape { dim: 3 dim: 2 } }
  }
  layer {
    name: "lstm"
    type: "LSTM"
    bottom: "data"
    bottom: "cont"
    bottom: "static"
    top: "lstm"
    recurrent_param {
      num_output: 4
      weight_filler { type: "uniform" min: -0.5 max: 0.5 }
      bias_filler { type: "uniform" min: -0.2 max: 0.2 }
    }
  }
  layer {
    name: "rnn"
    type: "RNN"
    bottom: "lstm"
    bottom: "cont"
    top: "rnn"
    recurrent_param {
      num_output: 3
      weight_filler { type: "uniform" min: -0.6 max: 0.6 }
      bias_filler { type: "uniform" min: -0.2 max: 0.2 }
    }
  }
  layer {
    name: "score"
    type: "InnerProduct"
    bottom: "rnn"
    top: "score"
    inner_product_param {
      num_output: 3
      axis: 2
      weight_filler { type: "uniform" min: -0.7 max: 0.7 }
      bias_filler { type: "constant" value: 0.1 }
    }
  }
  layer {
    name: "loss"
    type: "SoftmaxWithLoss"
    bottom: "score"
    bottom: "label"
    top: "loss"
    softmax_param { axis: 2 }
    loss_param { ignore_label: 1 }
  }
)pb";

// A CTC head: per-frame scores [T, N, C] from two InnerProducts over the features (axis 2,
// a TanH between) and the CTCLoss layer with PyTorch's mean reduction, blank 0, over ragged
// input and label lengths (FixedIndexInputs).
const char kCtc[] = R"pb(
  name: "ctc_small"
  layer {
    name: "data"
    type: "Input"
    top: "data"
    input_param { shape { dim: 5 dim: 3 dim: 4 } }
  }
  layer {
    name: "targets"
    type: "Input"
    top: "targets"
    input_param { shape { dim: 3 dim: 3 } }
  }
  layer {
    name: "input_lengths"
    type: "Input"
    top: "input_lengths"
    input_param { shape { dim: 3 } }
  }
  layer {
    name: "target_lengths"
    type: "Input"
    top: "target_lengths"
    input_param { shape { dim: 3 } }
  }
  layer {
    name: "hidden"
    type: "InnerProduct"
    bottom: "data"
    top: "hidden"
    inner_product_param {
      num_output: 6
      axis: 2
      weight_filler { type: "uniform" min: -0.8 max: 0.8 }
      bias_filler { type: "uniform" min: -0.2 max: 0.2 }
    }
  }
  layer { name: "tanh" type: "TanH" bottom: "hidden" top: "hidden" }
  layer {
    name: "score"
    type: "InnerProduct"
    bottom: "hidden"
    top: "score"
    inner_product_param {
      num_output: 5
      axis: 2
      weight_filler { type: "uniform" min: -1 max: 1 }
      bias_filler { type: "constant" value: 0.1 }
    }
  }
  layer {
    name: "loss"
    type: "CTCLoss"
    bottom: "score"
    bottom: "targets"
    bottom: "input_lengths"
    bottom: "target_lengths"
    top: "loss"
  }
)pb";

// Index inputs of fixed contents, by name: the CTC net's padded targets (a repeated label, which
// needs its blank between) and their lengths.
const std::map<std::string, std::vector<float>>& FixedIndexInputs() {
  static const auto* const inputs = new std::map<std::string, std::vector<float>>{
      {"targets", {1, 2, 2, 3, 0, 0, 4, 1, 0}},
      {"input_lengths", {5, 3, 4}},
      {"target_lengths", {3, 1, 2}},
  };
  return *inputs;
}

namespace {

std::vector<int64_t> Spatial(const std::vector<int64_t>& v) {
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

}  // namespace

// Imports `text` for TRAIN, promotes every learnable blob to an input "param/<node>", keeps the
// inputs of ReLUs and max poolings visible, and adds the backward of the loss. With `fuse`, the
// training forward pipeline (BatchNorm + Scale as AffineBatchNorm) runs before the backward.
absl::Status Prepare(const char* text, uint64_t seed, CheckedNet& out, bool fuse,
                     BackendChoice backend) {
  caffe::NetParameter net;
  if (absl::Status s = ParseTextMessage(text, "net", net); !s.ok()) return s;
  CaffeImportOptions import;
  import.phase = caffe::TRAIN;
  import.fill_seed = seed;
  absl::StatusOr<CaffeModel> model = ImportCaffeNet(net, import, DefaultOpRegistry());
  if (!model.ok()) return model.status();
  Graph& graph = *model->graph;
  std::vector<Value> wrt;
  std::set<std::string> done;
  for (const CaffeParam& p : model->params) {
    if (!p.learnable || done.count(p.node)) continue;
    done.insert(p.node);
    Node* constant = graph.FindNode(p.node);
    if (constant == nullptr || constant->constant() == nullptr) {
      return absl::InternalError(absl::StrCat(p.node, " is not a Constant"));
    }
    const std::string name = absl::StrCat("param/", p.node);
    out.bindings[name] = constant->constant()->Clone();
    absl::StatusOr<Value> input = graph.AddParameter(name, constant->output_types()[0]);
    if (!input.ok()) return input.status();
    if (absl::Status s = graph.ReplaceAllUsesWith(constant->output(0), *input); !s.ok()) return s;
    wrt.push_back(*input);
    out.checked.push_back(name);
  }
  graph.RemoveDeadNodes();
  if (fuse) {
    PassContext context;
    context.inference = false;
    if (absl::Status s = MakeTrainingForwardPipeline().Run(graph, context).status(); !s.ok()) {
      return s;
    }
  }
  for (Node* node : graph.nodes())
    out.affine_batchnorms += node->kind() == OpKind::kAffineBatchNorm;
  // Data: values in [-1, 1]; labels: fixed classes.
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (Node* node : graph.Parameters()) {
    const std::string& input = node->name();
    auto fixed = FixedIndexInputs().find(input);
    if (fixed != FixedIndexInputs().end()) {
      absl::StatusOr<HostTensor> t = HostTensor::FromF32(node->output_types()[0], fixed->second);
      if (!t.ok()) return t.status();
      out.bindings[input] = *t;
      continue;
    }
    if (input != "data" && input != "label" && input != "cont" && input != "words" &&
        input != "static") {
      continue;
    }
    HostTensor t(node->output_types()[0]);
    for (int64_t i = 0; i < t.type().num_elements(); ++i) {
      // cont: 0 at the first step of every row and at two restarts inside rows ([T, N], N = 3).
      const float cont = i < 3 || i == 5 || i == 7 ? 0.0f : 1.0f;
      // words: indices into a 6-row table, some repeated, row 5 never.
      t.SetFloat(i, input == "data" || input == "static" ? uniform(rng)
                    : input == "cont"                    ? cont
                    : input == "words"                   ? static_cast<float>((i * 7 + 2) % 5)
                                                         : static_cast<float>((i * 2 + 1) % 3));
    }
    out.bindings[node->name()] = t;
    if (node->name() == "data" || node->name() == "static") {
      wrt.push_back(node->output(0));
      out.checked.push_back(node->name());
    }
  }
  // Before the backward exists, so only the forward's kinks are watched.
  int watch = 0;
  for (Node* node : graph.nodes()) {
    // A ReLU folded into an AffineBatchNorm is watched through the fused output, which is
    // positive exactly where the ReLU's input was.
    const bool fused_relu = node->kind() == OpKind::kAffineBatchNorm && node->GetBool("relu");
    const bool relu = node->kind() == OpKind::kReLU || fused_relu;
    const bool max_pool = node->kind() == OpKind::kPooling && node->GetString("mode") == "max";
    if (!relu && !max_pool) continue;
    const std::string name = absl::StrCat("watch", watch++);
    const Value watched = fused_relu ? node->output(0) : node->input(0);
    if (absl::Status s = graph.AddOutput(name, watched); !s.ok()) return s;
    if (relu) {
      out.relu_ins.push_back(name);
    } else {
      MaxPoolWatch w;
      w.output = name;
      w.in_dims = node->input(0).type().dims();
      w.out_dims = node->output_types()[0].dims();
      w.kernel = Spatial(node->GetInts("kernel"));
      w.stride = Spatial(node->GetInts("stride"));
      w.pad = Spatial(node->GetInts("pad"));
      if (w.in_dims.size() != 4 || node->GetBool("global")) {
        return absl::UnimplementedError("the watch handles 2-d windowed pooling only");
      }
      out.pools.push_back(w);
    }
  }
  std::vector<LossTerm> losses;
  for (const CaffeLayer& layer : model->layers) {
    for (const CaffeTop& top : layer.tops) {
      if (top.loss_weight != 0) losses.push_back({top.value, top.loss_weight});
    }
  }
  if (losses.size() != 1) return absl::InternalError("expected one loss");
  if (absl::Status s = graph.AddOutput("objective", losses[0].value); !s.ok()) return s;
  absl::StatusOr<std::vector<Value>> grads = BuildBackward(graph, losses, wrt);
  if (!grads.ok()) return grads.status();
  for (size_t i = 0; i < grads->size(); ++i) {
    if ((*grads)[i].node == nullptr) {
      return absl::InternalError(absl::StrCat("no gradient for ", out.checked[i]));
    }
    if (absl::Status s = graph.AddOutput(absl::StrCat("grad/", out.checked[i]), (*grads)[i]);
        !s.ok()) {
      return s;
    }
  }
  CompileOptions options;
  options.backend = backend;
  options.precision = Precision::kFp32;  // strict f32 products where the plan is CUDA
  absl::StatusOr<std::unique_ptr<ExecutionPlan>> plan =
      Compile(graph, DefaultKernelRegistry(), options);
  if (!plan.ok()) return plan.status();
  out.plan = std::move(*plan);
  ContextOptions context_options;
  context_options.poison_buffers = true;  // a backward step reading unwritten memory shows as NaN
  absl::StatusOr<std::unique_ptr<ExecutionContext>> ctx =
      ExecutionContext::Create(*out.plan, context_options);
  if (!ctx.ok()) return ctx.status();
  out.ctx = std::move(*ctx);
  return absl::OkStatus();
}
}  // namespace testing
}  // namespace kiln
