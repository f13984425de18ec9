#include "tests/util/gradient_cases.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ir/graph_builder.h"
#include "ops/all_ops.h"
#include "ops/gradients/gradient_request.h"

namespace kiln {
namespace testing {

namespace {

using Ints = std::vector<int64_t>;

AttrValue I(int64_t v) { return AttrValue(v); }
AttrValue Is(Ints v) { return AttrValue(std::move(v)); }
AttrValue F(double v) { return AttrValue(v); }
AttrValue S(const char* v) { return AttrValue(std::string(v)); }
AttrValue B(bool v) { return AttrValue(v); }

// Integer class labels in [0, classes), one per element; every `ignore_every`-th set to
// `ignore` when ignore_every > 0.
std::function<void(HostTensor&)> Labels(int64_t classes, int ignore_every = 0, int ignore = -1) {
  return [=](HostTensor& t) {
    for (int64_t i = 0; i < t.type().num_elements(); ++i) {
      const bool ignored = ignore_every > 0 && i % ignore_every == 1;
      t.SetFloat(i, static_cast<float>(ignored ? ignore : (i * 7 + 3) % classes));
    }
  };
}

std::function<void(HostTensor&)> Constant(float value) {
  return [=](HostTensor& t) {
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, value);
  };
}

// Uniform in [lo, hi), seeded by the element count (fixed inputs need no case seed).
std::function<void(HostTensor&)> Uniform(float lo, float hi) {
  return [=](HostTensor& t) {
    std::mt19937 rng(static_cast<uint32_t>(t.type().num_elements()));
    std::uniform_real_distribution<float> d(lo, hi);
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, d(rng));
  };
}

GradientCase Case(std::string name, std::string op, std::vector<Ints> dims, AttrMap attrs = {}) {
  GradientCase c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.input_dims = std::move(dims);
  c.attrs = std::move(attrs);
  return c;
}

void AddConvolutionCases(std::vector<GradientCase>& out) {
  out.push_back(
      Case("conv_3x3_pad1", "Convolution", {{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}, {{"pad", Is({1})}}));
  out.push_back(Case("conv_stride2_group2", "Convolution", {{2, 4, 6, 7}, {6, 2, 3, 2}, {6}},
                     {{"stride", Is({2})}, {"pad", Is({1, 0})}, {"group", I(2)}}));
  out.push_back(Case("conv_dilated_nobias", "Convolution", {{1, 2, 7, 6}, {3, 2, 2, 3}},
                     {{"dilation", Is({2})}, {"stride", Is({1, 2})}}));
  out.push_back(Case("conv_flip", "Convolution", {{1, 2, 4, 4}, {2, 2, 3, 3}, {2}},
                     {{"mode", S("convolution")}}));
  out.push_back(Case("conv_3d", "Convolution", {{1, 2, 3, 4, 4}, {2, 2, 2, 2, 2}, {2}}));
  out.push_back(Case("deconv_stride2", "Deconvolution", {{2, 3, 3, 4}, {3, 2, 3, 3}, {2}},
                     {{"stride", Is({2})}, {"pad", Is({1})}}));
  out.push_back(Case("ip", "InnerProduct", {{3, 2, 2, 2}, {5, 8}, {5}}));
  out.push_back(
      Case("ip_transpose", "InnerProduct", {{3, 6}, {6, 4}, {4}}, {{"transpose", B(true)}}));
  out.push_back(Case("ip_axis2", "InnerProduct", {{2, 3, 2, 2}, {3, 4}}, {{"axis", I(2)}}));
}

void AddWindowCases(std::vector<GradientCase>& out) {
  out.push_back(Case("maxpool_3x3s2_ceil", "Pooling", {{2, 2, 7, 7}},
                     {{"kernel", Is({3})}, {"stride", Is({2})}, {"rounding", S("ceil")}}));
  out.push_back(Case("maxpool_pad", "Pooling", {{1, 2, 6, 5}},
                     {{"kernel", Is({2})}, {"stride", Is({2})}, {"pad", Is({1})}}));
  out.push_back(Case("avepool_pad", "Pooling", {{2, 2, 5, 6}},
                     {{"mode", S("avg")},
                      {"kernel", Is({3})},
                      {"stride", Is({2})},
                      {"pad", Is({1})},
                      {"rounding", S("ceil")}}));
  out.push_back(Case("avepool_exclude", "Pooling", {{1, 2, 5, 5}},
                     {{"mode", S("avg_exclude_pad")}, {"kernel", Is({3})}, {"pad", Is({1})}}));
  out.push_back(
      Case("globalpool", "Pooling", {{2, 3, 3, 4}}, {{"mode", S("avg")}, {"global", B(true)}}));
  out.push_back(Case("lrn_across", "LRN", {{2, 7, 3, 3}},
                     {{"local_size", I(5)}, {"alpha", F(0.5)}, {"beta", F(0.75)}, {"k", F(2.0)}}));
  out.push_back(Case("lrn_within", "LRN", {{2, 2, 5, 5}},
                     {{"region", S("within_channel")},
                      {"local_size", I(3)},
                      {"alpha", F(0.8)},
                      {"beta", F(0.75)}}));
  out.push_back(Case("softmax", "Softmax", {{3, 5, 2}}));
  out.push_back(Case("log_softmax", "Softmax", {{4, 6}}, {{"log", B(true)}}));
  GradientCase bn = Case("batchnorm_batch_stats", "BatchNorm", {{4, 3, 2, 3}, {3}, {3}},
                         {{"use_global_stats", B(false)}});
  bn.fixed_inputs[1] = Constant(0.0f);
  bn.fixed_inputs[2] = Constant(1.0f);
  out.push_back(bn);
  GradientCase bn_global = Case("batchnorm_global_stats", "BatchNorm",
                                {{3, 3, 2, 2}, {3}, {3}, {1}}, {{"use_global_stats", B(true)}});
  bn_global.fixed_inputs[1] = Uniform(-0.5f, 0.5f);
  bn_global.fixed_inputs[2] = Uniform(0.5f, 2.0f);
  bn_global.fixed_inputs[3] = Constant(2.0f);
  out.push_back(bn_global);
  // The fused training form of Caffe's BatchNorm + Scale: x, scale and bias get gradients.
  GradientCase affine =
      Case("affine_batchnorm", "AffineBatchNorm", {{4, 3, 2, 3}, {3}, {3}, {1}, {3}, {3}});
  affine.fixed_inputs[1] = Uniform(-0.5f, 0.5f);
  affine.fixed_inputs[2] = Uniform(0.5f, 2.0f);
  affine.fixed_inputs[3] = Constant(2.0f);
  affine.gradient_outputs = 1;  // y; the saved mean and inverse std feed only the backward
  out.push_back(affine);
  // Training's form: the running statistics updated into new outputs (no gradient either).
  GradientCase affine_running = affine;
  affine_running.name = "affine_batchnorm_running_stats";
  affine_running.attrs = {{"update_running_stats", B(true)}, {"moving_average_fraction", F(0.9)}};
  out.push_back(affine_running);
  // With the ReLU after the pair folded in: dy counts where the output is positive.
  GradientCase affine_relu = affine;
  affine_relu.name = "affine_batchnorm_relu";
  affine_relu.attrs = {{"relu", B(true)}};
  out.push_back(affine_relu);
  out.push_back(Case("scale_bias", "Scale", {{2, 3, 4, 4}, {3}, {3}}));
  out.push_back(Case("scale_two_axes", "Scale", {{2, 3, 4, 2}, {3, 4}}, {{"num_axes", I(2)}}));
  out.push_back(Case("bias", "Bias", {{2, 3, 2, 2}, {3}}));
}

void AddPointwiseCases(std::vector<GradientCase>& out) {
  const std::vector<Ints> x = {{2, 3, 4, 5}};
  out.push_back(Case("relu", "ReLU", x));
  out.push_back(Case("leaky_relu", "ReLU", x, {{"negative_slope", F(0.1)}}));
  out.push_back(Case("relu_negative_slope", "ReLU", x, {{"negative_slope", F(-0.3)}}));
  out.push_back(Case("sigmoid", "Sigmoid", x));
  out.push_back(Case("tanh", "TanH", x));
  out.push_back(Case("elu", "ELU", x, {{"alpha", F(0.7)}}));
  out.push_back(Case("clipped_relu", "ClippedReLU", x, {{"ceiling", F(0.55)}}));
  out.push_back(
      Case("power", "Power", x, {{"power", F(2.0)}, {"scale", F(0.5)}, {"shift", F(1.5)}}));
  out.push_back(Case("absval", "AbsVal", x));
  out.push_back(Case("prelu", "PReLU", {{2, 3, 3, 2}, {3}}));
  out.push_back(Case("prelu_shared", "PReLU", {{2, 3, 3, 2}, {1}}, {{"channel_shared", B(true)}}));
  out.push_back(Case("dropout_training", "Dropout", x,
                     {{"training", B(true)}, {"ratio", F(0.3)}, {"seed", I(7)}}));
  out.push_back(Case("eltwise_sum_coeffs", "Eltwise", {{2, 3, 4}, {2, 3, 4}},
                     {{"coeffs", AttrValue(std::vector<double>{0.5, -2.0})}}));
  out.push_back(Case("eltwise_prod", "Eltwise", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                     {{"operation", S("prod")}}));
  out.push_back(
      Case("eltwise_max", "Eltwise", {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{"operation", S("max")}}));
  // With a fused ReLU (a residual sum and its ReLU), plain and leaky.
  out.push_back(Case("eltwise_sum_relu", "Eltwise", {{2, 3, 4, 5}, {2, 3, 4, 5}},
                     {{"activation", S("relu")}}));
  out.push_back(
      Case("eltwise_max_leaky_relu", "Eltwise", {{2, 3, 4}, {2, 3, 4}},
           {{"operation", S("max")}, {"activation", S("relu")}, {"negative_slope", F(0.2)}}));
}

void AddTensorCases(std::vector<GradientCase>& out) {
  out.push_back(Case("concat", "Concat", {{2, 2, 3}, {2, 3, 3}, {2, 1, 3}}));
  out.push_back(Case("concat_axis0", "Concat", {{1, 3}, {2, 3}}, {{"axis", I(0)}}));
  out.push_back(Case("slice", "Slice", {{2, 6, 3}}, {{"slice_points", Is({1, 4})}}));
  out.push_back(Case("split", "Split", {{2, 3, 4}}, {{"num_outputs", I(3)}}));
  out.push_back(Case("flatten", "Flatten", {{2, 3, 2, 2}}));
  out.push_back(Case("reshape", "Reshape", {{2, 3, 4}}, {{"shape", Is({0, -1, 2})}}));
  GradientCase crop = Case("crop", "Crop", {{2, 3, 6, 7}, {1, 1, 3, 4}}, {{"offset", Is({2, 1})}});
  crop.fixed_inputs[1] = Constant(0.0f);
  out.push_back(crop);
}

void AddLossCases(std::vector<GradientCase>& out) {
  GradientCase swl = Case("softmax_loss", "SoftmaxWithLoss", {{4, 5}, {4}});
  swl.fixed_inputs[1] = Labels(5);
  swl.loss_weight = 1.5;
  out.push_back(swl);
  GradientCase swl_spatial =
      Case("softmax_loss_spatial_ignore", "SoftmaxWithLoss", {{2, 4, 3, 2}, {2, 1, 3, 2}},
           {{"ignore_label", Is({2})}, {"normalization", S("full")}});
  swl_spatial.fixed_inputs[1] = Labels(4, 3, 2);
  swl_spatial.loss_weight = 0.7;
  out.push_back(swl_spatial);
  GradientCase euclid = Case("euclidean_loss", "EuclideanLoss", {{3, 4}, {3, 4}});
  euclid.loss_weight = 2.0;
  out.push_back(euclid);
  GradientCase sce = Case("sigmoid_cross_entropy", "SigmoidCrossEntropyLoss", {{3, 5}, {3, 5}});
  sce.fixed_inputs[1] = Uniform(0.0f, 1.0f);
  sce.loss_weight = 1.0;
  out.push_back(sce);
  GradientCase con =
      Case("contrastive", "ContrastiveLoss", {{4, 3}, {4, 3}, {4}}, {{"margin", F(2.0)}});
  con.fixed_inputs[2] = [](HostTensor& t) {
    for (int64_t i = 0; i < t.type().num_elements(); ++i) t.SetFloat(i, i % 2 ? 1.0f : 0.0f);
  };
  con.loss_weight = 1.0;
  out.push_back(con);
  GradientCase con_legacy = con;
  con_legacy.name = "contrastive_legacy";
  con_legacy.attrs["legacy_version"] = B(true);
  con_legacy.attrs["margin"] = F(3.0);
  out.push_back(con_legacy);
}

}  // namespace

std::vector<GradientCase> AllGradientCases() {
  std::vector<GradientCase> out;
  AddConvolutionCases(out);
  AddWindowCases(out);
  AddPointwiseCases(out);
  AddTensorCases(out);
  AddLossCases(out);
  return out;
}

absl::StatusOr<GradientInputs> MakeGradientInputs(const GradientCase& c, uint32_t seed) {
  GradientInputs in;
  std::mt19937 rng(seed);
  for (size_t i = 0; i < c.input_dims.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(TensorType t, TensorType::Create(DataType::kF32, c.input_dims[i]));
    HostTensor x(t);
    auto fixed = c.fixed_inputs.find(static_cast<int>(i));
    if (fixed != c.fixed_inputs.end()) {
      fixed->second(x);
    } else {
      // Distinct values (-1 + (k + offset) 2/n), shuffled: no two elements closer than 2/n, none
      // on a kink (0, ties) within the finite-difference step; each input offset differently so
      // inputs never tie with each other either.
      const int64_t n = t.num_elements();
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      const double offset = 0.5 + 0.3 * static_cast<double>(i % 2) - 0.15 * (i >= 2);
      for (int64_t k = 0; k < n; ++k) {
        x.SetFloat(order[k], static_cast<float>(-1.0 + (k + offset) * 2.0 / n));
      }
    }
    in.inputs.push_back(x);
  }
  if (c.loss_weight != 0) return in;
  // Forward output types come from shape inference: build the node once to learn them.
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> values;
  for (size_t i = 0; i < in.inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, b.Input(absl::StrCat("x", i), in.inputs[i].type()));
    values.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> outs, b.Op(c.op, values, c.attrs, "op"));
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  if (c.gradient_outputs >= 0) outs.resize(std::min<size_t>(outs.size(), c.gradient_outputs));
  for (const Value& y : outs) {
    HostTensor dy(y.type().Contiguous());
    for (int64_t i = 0; i < dy.type().num_elements(); ++i) dy.SetFloat(i, d(rng));
    in.output_grads.push_back(dy);
  }
  return in;
}

absl::StatusOr<std::unique_ptr<Graph>> BuildGradientGraph(const GradientCase& c,
                                                          const GradientInputs& in,
                                                          std::vector<int>* grads) {
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> values;
  for (size_t i = 0; i < in.inputs.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, b.Input(absl::StrCat("x", i), in.inputs[i].type()));
    values.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Value> outs, b.Op(c.op, values, c.attrs, "op"));
  GradientRequest request;
  request.node = outs[0].node;
  for (size_t j = 0; j < outs.size(); ++j) {
    KILN_RETURN_IF_ERROR(b.Output(absl::StrCat("y", j), outs[j]));
    if (c.loss_weight != 0) {
      request.output_grads.push_back(Value{});
      request.loss_weights.push_back(c.loss_weight);
    } else if (j >= in.output_grads.size()) {  // a saved value: no gradient flows into it
      request.output_grads.push_back(Value{});
      request.loss_weights.push_back(0.0);
    } else {
      KILN_ASSIGN_OR_RETURN(Value dy, b.Input(absl::StrCat("dy", j), in.output_grads[j].type()));
      request.output_grads.push_back(dy);
      request.loss_weights.push_back(0.0);
    }
  }
  for (size_t i = 0; i < in.inputs.size(); ++i) {
    request.needs_grad.push_back(c.fixed_inputs.count(static_cast<int>(i)) == 0);
  }
  const OpDef& def = request.node->def();
  if (!def.gradient) return absl::UnimplementedError(c.op + " has no gradient builder");
  KILN_ASSIGN_OR_RETURN(std::vector<Value> g, def.gradient(b, request));
  grads->clear();
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i].node == nullptr) continue;
    grads->push_back(static_cast<int>(i));
    KILN_RETURN_IF_ERROR(b.Output(absl::StrCat("grad", i), g[i]));
  }
  return b.Finish();
}

std::map<std::string, HostTensor> GradientBindings(const GradientInputs& in) {
  std::map<std::string, HostTensor> out;
  for (size_t i = 0; i < in.inputs.size(); ++i) out[absl::StrCat("x", i)] = in.inputs[i];
  for (size_t j = 0; j < in.output_grads.size(); ++j) {
    out[absl::StrCat("dy", j)] = in.output_grads[j];
  }
  return out;
}

}  // namespace testing
}  // namespace kiln
