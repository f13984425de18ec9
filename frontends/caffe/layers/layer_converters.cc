// One converter per supported Caffe layer type: Caffe's parameters -> Kiln ops and attributes.
// Caffe's rules that the file itself can break (missing kernel size, mixed kernel_size and
// kernel_h, pad >= kernel, ...) are checked here, before the op's own shape inference.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "frontends/caffe/layers/ctc_converter.h"
#include "frontends/caffe/layers/embed_converter.h"
#include "frontends/caffe/layers/layer_builder.h"
#include "frontends/caffe/layers/recurrent_converters.h"
#include "frontends/caffe/layers/sequence_unit_converters.h"
#include "frontends/caffe/layers/shuffle_channel_converter.h"

namespace kiln {

absl::Status NeedBottoms(LayerBuilder& b, int min, int max) {
  const int n = static_cast<int>(b.bottoms().size());
  if (n < min || (max >= 0 && n > max)) {
    return b.Invalid(absl::StrCat(
        "takes ",
        min == max ? absl::StrCat(min) : absl::StrCat(min, "..", max < 0 ? "" : absl::StrCat(max)),
        " bottom(s), got ", n));
  }
  return absl::OkStatus();
}

absl::Status NeedTops(LayerBuilder& b, int min, int max) {
  const int n = b.layer().top_size();
  if (n < min || (max >= 0 && n > max)) {
    return b.Invalid(absl::StrCat(
        "takes ",
        min == max ? absl::StrCat(min) : absl::StrCat(min, "..", max < 0 ? "" : absl::StrCat(max)),
        " top(s), got ", n));
  }
  return absl::OkStatus();
}

namespace {

using Ints = std::vector<int64_t>;

caffe::FillerParameter ConstantFiller(float value) {
  caffe::FillerParameter f;
  f.set_type("constant");
  f.set_value(value);
  return f;
}

// One op, one output, the layer's single top.
absl::Status Simple(LayerBuilder& b, absl::string_view op, const AttrMap& attrs) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode(op, "", {b.bottoms()[0]}, attrs));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

// Resolves Caffe's "once for all spatial dims, or once per dim, or the 2-d _h/_w form" rule.
absl::StatusOr<Ints> SpatialValues(LayerBuilder& b, const char* name,
                                   const google::protobuf::RepeatedField<uint32_t>& repeated,
                                   bool has_h, uint32_t h, bool has_w, uint32_t w, int spatial,
                                   int64_t fallback, bool required) {
  if (has_h || has_w) {
    if (repeated.size() > 0) {
      return b.Invalid(absl::StrCat("give ", name, " or ", name, "_h/", name, "_w, not both"));
    }
    if (spatial != 2) return b.Invalid(absl::StrCat(name, "_h/", name, "_w need 2-d input"));
    if (has_h != has_w) return b.Invalid(absl::StrCat("give both ", name, "_h and ", name, "_w"));
    return Ints{h, w};
  }
  if (repeated.size() == 0) {
    if (required) return b.Invalid(absl::StrCat(name, " missing"));
    return Ints(spatial, fallback);
  }
  if (repeated.size() == 1) return Ints(spatial, repeated.Get(0));
  if (repeated.size() != spatial) {
    return b.Invalid(
        absl::StrCat(repeated.size(), " ", name, " values for ", spatial, " spatial dims"));
  }
  return Ints(repeated.begin(), repeated.end());
}

absl::Status Convolution(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::ConvolutionParameter& p = b.layer().convolution_param();
  const bool deconv = b.layer().type() == "Deconvolution";
  // The forks' ConvolutionDepthwise: a Convolution with one group per input channel.
  const bool depthwise = b.layer().type() == "ConvolutionDepthwise";
  if (p.axis() != 1) return b.Unsupported("convolution_param.axis other than 1");
  if (!p.has_num_output() || p.num_output() == 0) {
    return b.Invalid("convolution_param.num_output missing or 0");
  }
  const TensorType& x = b.bottoms()[0].type();
  const int spatial = x.rank() - 2;
  if (spatial < 1) return b.Invalid(absl::StrCat("input ", x.ToString(), " has no spatial dims"));
  KILN_ASSIGN_OR_RETURN(
      Ints kernel, SpatialValues(b, "kernel_size", p.kernel_size(), p.has_kernel_h(), p.kernel_h(),
                                 p.has_kernel_w(), p.kernel_w(), spatial, 0,
                                 /*required=*/true));
  KILN_ASSIGN_OR_RETURN(Ints stride,
                        SpatialValues(b, "stride", p.stride(), p.has_stride_h(), p.stride_h(),
                                      p.has_stride_w(), p.stride_w(), spatial, 1, false));
  KILN_ASSIGN_OR_RETURN(Ints pad, SpatialValues(b, "pad", p.pad(), p.has_pad_h(), p.pad_h(),
                                                p.has_pad_w(), p.pad_w(), spatial, 0, false));
  if (p.dilation_size() > 1 && p.dilation_size() != spatial) {
    return b.Invalid(
        absl::StrCat(p.dilation_size(), " dilation values for ", spatial, " spatial dims"));
  }
  Ints dilation(spatial, p.dilation_size() == 0 ? 1 : p.dilation(0));
  if (p.dilation_size() == spatial) dilation.assign(p.dilation().begin(), p.dilation().end());
  for (int d = 0; d < spatial; ++d) {
    if (kernel[d] <= 0) return b.Invalid("kernel size must be > 0");
    if (stride[d] <= 0) return b.Invalid("stride must be > 0");
    if (dilation[d] <= 0) return b.Invalid("dilation must be > 0");
  }
  const int64_t channels = x.dim(1);
  if (depthwise && p.has_group() && p.group() != channels) {
    return b.Invalid(absl::StrCat("group ", p.group(), " of a depthwise convolution over ",
                                  channels, " channels (it is one group per channel)"));
  }
  const int64_t group = depthwise ? channels : p.group();
  const int64_t outputs = p.num_output();
  if (group <= 0 || channels % group != 0 || outputs % group != 0) {
    return b.Invalid(absl::StrCat("group ", group, " must divide the input channels (", channels,
                                  ") and num_output (", outputs, ")"));
  }
  Ints weight_shape = deconv ? Ints{channels, outputs / group} : Ints{outputs, channels / group};
  weight_shape.insert(weight_shape.end(), kernel.begin(), kernel.end());
  b.ExpectParams(p.bias_term() ? 2 : 1);
  KILN_ASSIGN_OR_RETURN(Value weight, b.Param(0, weight_shape, p.weight_filler(), true, "weight"));
  std::vector<Value> inputs = {b.bottoms()[0], weight};
  if (p.bias_term()) {
    KILN_ASSIGN_OR_RETURN(Value bias, b.Param(1, {outputs}, p.bias_filler(), true, "bias"));
    inputs.push_back(bias);
  }
  KILN_ASSIGN_OR_RETURN(
      Node * node,
      b.AddNode(deconv ? "Deconvolution" : "Convolution", "", inputs,
                {{"stride", stride}, {"pad", pad}, {"dilation", dilation}, {"group", group}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status Pooling(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 2));
  if (b.layer().top_size() == 2) return b.Unsupported("a second top (max pooling indices)");
  const caffe::PoolingParameter& p = b.layer().pooling_param();
  const TensorType& x = b.bottoms()[0].type();
  if (x.rank() != 4) return b.Invalid(absl::StrCat("input ", x.ToString(), " must be 4-d"));
  std::string mode;
  switch (p.pool()) {
    case caffe::PoolingParameter::MAX:
      mode = "max";
      break;
    case caffe::PoolingParameter::AVE:
      mode = "avg";
      break;
    default:
      return b.Unsupported("pooling_param.pool STOCHASTIC");
  }
  const bool has_kernel = p.has_kernel_size() || p.has_kernel_h() || p.has_kernel_w();
  if (p.global_pooling()) {
    if (has_kernel) return b.Invalid("global_pooling with a kernel size given");
  } else {
    if (!has_kernel) return b.Invalid("kernel_size missing");
    if (p.has_kernel_size() && (p.has_kernel_h() || p.has_kernel_w())) {
      return b.Invalid("give kernel_size or kernel_h/kernel_w, not both");
    }
    if (!p.has_kernel_size() && !(p.has_kernel_h() && p.has_kernel_w())) {
      return b.Invalid("give both kernel_h and kernel_w");
    }
  }
  if (p.has_pad() && (p.has_pad_h() || p.has_pad_w())) {
    return b.Invalid("give pad or pad_h/pad_w, not both");
  }
  if (p.has_stride() && (p.has_stride_h() || p.has_stride_w())) {
    return b.Invalid("give stride or stride_h/stride_w, not both");
  }
  if (p.has_stride_h() != p.has_stride_w()) return b.Invalid("give both stride_h and stride_w");
  const Ints kernel = p.global_pooling()    ? Ints{x.dim(2), x.dim(3)}
                      : p.has_kernel_size() ? Ints{p.kernel_size(), p.kernel_size()}
                                            : Ints{p.kernel_h(), p.kernel_w()};
  const Ints pad =
      p.has_pad_h() || p.has_pad_w() ? Ints{p.pad_h(), p.pad_w()} : Ints{p.pad(), p.pad()};
  const Ints stride =
      p.has_stride_h() ? Ints{p.stride_h(), p.stride_w()} : Ints{p.stride(), p.stride()};
  for (int d = 0; d < 2; ++d) {
    if (kernel[d] <= 0) return b.Invalid("kernel size must be > 0");
    if (stride[d] <= 0) return b.Invalid("stride must be > 0");
    if (pad[d] >= kernel[d]) {
      return b.Invalid(
          absl::StrCat("pad ", pad[d], " must be smaller than the kernel ", kernel[d]));
    }
  }
  if (p.global_pooling() && (pad != Ints{0, 0} || stride != Ints{1, 1})) {
    return b.Invalid("global pooling needs pad 0 and stride 1");
  }
  bool ceil = p.round_mode() == caffe::PoolingParameter::CEIL;
  if (p.has_ceil_mode()) {
    if (p.has_round_mode() && p.ceil_mode() != ceil) {
      return b.Invalid("round_mode and ceil_mode disagree");
    }
    ceil = p.ceil_mode();
  }
  return Simple(b, "Pooling",
                {{"mode", mode},
                 {"kernel", kernel},
                 {"stride", stride},
                 {"pad", pad},
                 {"global", p.global_pooling()},
                 {"rounding", std::string(ceil ? "ceil" : "floor")}});
}

absl::Status Lrn(LayerBuilder& b) {
  const caffe::LRNParameter& p = b.layer().lrn_param();
  if (p.local_size() % 2 == 0) {
    return b.Invalid(absl::StrCat("local_size ", p.local_size(), " must be odd"));
  }
  const bool across = p.norm_region() == caffe::LRNParameter::ACROSS_CHANNELS;
  return Simple(b, "LRN",
                {{"region", std::string(across ? "across_channels" : "within_channel")},
                 {"local_size", int64_t{p.local_size()}},
                 {"alpha", double{p.alpha()}},
                 {"beta", double{p.beta()}},
                 {"k", double{p.k()}}});
}

absl::Status BatchNorm(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::BatchNormParameter& p = b.layer().batch_norm_param();
  for (const caffe::ParamSpec& spec : b.layer().param()) {
    if (spec.lr_mult() != 0) {
      return b.Invalid("BatchNorm statistics are not learned: every param needs lr_mult 0");
    }
  }
  const TensorType& x = b.bottoms()[0].type();
  const int64_t channels = x.rank() > 1 ? x.dim(1) : 1;
  const bool global = p.has_use_global_stats() ? p.use_global_stats() : b.phase() == caffe::TEST;
  b.ExpectParams(3);
  // Caffe fills the statistics with zeros; with a zero scale factor that normalizes by
  // 1/sqrt(eps) (x316 per layer), so an untrained deep net overflows. Filled statistics here are
  // the identity instead (mean 0, variance 1, factor 1): a seeded net then gives finite outputs
  // worth comparing. Loaded weights are used as they are.
  KILN_ASSIGN_OR_RETURN(Value mean, b.Param(0, {channels}, ConstantFiller(0), false, "mean"));
  KILN_ASSIGN_OR_RETURN(Value variance,
                        b.Param(1, {channels}, ConstantFiller(1), false, "variance"));
  KILN_ASSIGN_OR_RETURN(Value factor, b.Param(2, {1}, ConstantFiller(1), false, "scale_factor"));
  KILN_ASSIGN_OR_RETURN(
      Node * node, b.AddNode("BatchNorm", "", {b.bottoms()[0], mean, variance, factor},
                             {{"eps", double{p.eps()}},
                              {"use_global_stats", global},
                              {"moving_average_fraction", double{p.moving_average_fraction()}}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

// The dims of x that a Scale/Bias parameter covers: [axis, axis + num_axes).
absl::StatusOr<Ints> CoveredDims(LayerBuilder& b, const TensorType& x, int64_t axis,
                                 int64_t num_axes) {
  const int64_t a = axis < 0 ? axis + x.rank() : axis;
  if (a < 0 || a > x.rank()) return b.Invalid(absl::StrCat("axis ", axis, " out of range"));
  const int64_t n = num_axes < 0 ? x.rank() - a : num_axes;
  if (num_axes < -1 || a + n > x.rank()) {
    return b.Invalid(
        absl::StrCat("num_axes ", num_axes, " from axis ", a, " exceeds rank ", x.rank()));
  }
  return Ints(x.dims().begin() + a, x.dims().begin() + a + n);
}

absl::Status Scale(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 2));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::ScaleParameter& p = b.layer().scale_param();
  const TensorType& x = b.bottoms()[0].type();
  std::vector<Value> inputs = {b.bottoms()[0]};
  int64_t num_axes = p.num_axes();
  Ints shape;
  int next_blob = 0;
  if (b.bottoms().size() == 2) {
    shape = b.bottoms()[1].type().dims();
    num_axes = static_cast<int64_t>(shape.size());
    inputs.push_back(b.bottoms()[1]);
    b.ExpectParams(p.bias_term() ? 1 : 0);
  } else {
    KILN_ASSIGN_OR_RETURN(shape, CoveredDims(b, x, p.axis(), p.num_axes()));
    b.ExpectParams(p.bias_term() ? 2 : 1);
    KILN_ASSIGN_OR_RETURN(
        Value scale, b.Param(next_blob++, shape, p.has_filler() ? p.filler() : ConstantFiller(1),
                             true, "scale"));
    inputs.push_back(scale);
  }
  if (p.bias_term()) {
    KILN_ASSIGN_OR_RETURN(Value bias, b.Param(next_blob, shape, p.bias_filler(), true, "bias"));
    inputs.push_back(bias);
  }
  KILN_ASSIGN_OR_RETURN(
      Node * node,
      b.AddNode("Scale", "", inputs, {{"axis", int64_t{p.axis()}}, {"num_axes", num_axes}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status Bias(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 2));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::BiasParameter& p = b.layer().bias_param();
  Value bias;
  int64_t num_axes = p.num_axes();
  if (b.bottoms().size() == 2) {
    bias = b.bottoms()[1];
    num_axes = bias.type().rank();
    b.ExpectParams(0);
  } else {
    KILN_ASSIGN_OR_RETURN(Ints shape, CoveredDims(b, b.bottoms()[0].type(), p.axis(), num_axes));
    b.ExpectParams(1);
    KILN_ASSIGN_OR_RETURN(bias, b.Param(0, shape, p.filler(), true, "bias"));
  }
  KILN_ASSIGN_OR_RETURN(Node * node,
                        b.AddNode("Bias", "", {b.bottoms()[0], bias},
                                  {{"axis", int64_t{p.axis()}}, {"num_axes", num_axes}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status Relu(LayerBuilder& b) {
  return Simple(b, "ReLU", {{"negative_slope", double{b.layer().relu_param().negative_slope()}}});
}

absl::Status Prelu(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::PReLUParameter& p = b.layer().prelu_param();
  const TensorType& x = b.bottoms()[0].type();
  if (x.rank() < 2) return b.Invalid("input needs a channel dim");
  b.ExpectParams(1);
  // Caffe stores a shared slope as a 0-axis blob; the op takes it as [1].
  const Ints caffe_shape = p.channel_shared() ? Ints{} : Ints{x.dim(1)};
  KILN_ASSIGN_OR_RETURN(Value slope,
                        b.Param(0, caffe_shape, p.has_filler() ? p.filler() : ConstantFiller(0.25f),
                                true, "slope", Ints{p.channel_shared() ? 1 : x.dim(1)}));
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("PReLU", "", {b.bottoms()[0], slope},
                                               {{"channel_shared", p.channel_shared()}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status Sigmoid(LayerBuilder& b) { return Simple(b, "Sigmoid", {}); }
absl::Status TanH(LayerBuilder& b) { return Simple(b, "TanH", {}); }
absl::Status AbsVal(LayerBuilder& b) { return Simple(b, "AbsVal", {}); }
absl::Status Elu(LayerBuilder& b) {
  return Simple(b, "ELU", {{"alpha", double{b.layer().elu_param().alpha()}}});
}
absl::Status Power(LayerBuilder& b) {
  const caffe::PowerParameter& p = b.layer().power_param();
  return Simple(
      b, "Power",
      {{"power", double{p.power()}}, {"scale", double{p.scale()}}, {"shift", double{p.shift()}}});
}

absl::Status Dropout(LayerBuilder& b) {
  return Simple(b, "Dropout",
                {{"ratio", double{b.layer().dropout_param().dropout_ratio()}},
                 {"training", b.phase() == caffe::TRAIN},
                 {"seed", static_cast<int64_t>(b.seed() & 0x7fffffffffffffffull)}});
}

absl::Status Softmax(LayerBuilder& b) {
  return Simple(b, "Softmax", {{"axis", int64_t{b.layer().softmax_param().axis()}}});
}

// Caffe's normalization for a loss: explicit mode, else the deprecated bool, else `fallback`.
std::string Normalization(const caffe::LossParameter& p, const char* fallback) {
  if (p.has_normalization()) {
    switch (p.normalization()) {
      case caffe::LossParameter::FULL:
        return "full";
      case caffe::LossParameter::VALID:
        return "valid";
      case caffe::LossParameter::BATCH_SIZE:
        return "batch_size";
      case caffe::LossParameter::NONE:
        return "none";
    }
  }
  if (p.has_normalize()) return p.normalize() ? "valid" : "batch_size";
  return fallback;
}

Ints IgnoreLabel(const caffe::LossParameter& p) {
  return p.has_ignore_label() ? Ints{p.ignore_label()} : Ints{};
}

absl::Status SoftmaxWithLoss(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 2, 2));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 2));
  const int64_t axis = b.layer().softmax_param().axis();
  const caffe::LossParameter& loss = b.layer().loss_param();
  KILN_ASSIGN_OR_RETURN(Node * node,
                        b.AddNode("SoftmaxWithLoss", "", {b.bottoms()[0], b.bottoms()[1]},
                                  {{"axis", axis},
                                   {"ignore_label", IgnoreLabel(loss)},
                                   {"normalization", Normalization(loss, "valid")}}));
  std::vector<Value> tops = {node->output(0)};
  if (b.layer().top_size() == 2) {
    KILN_ASSIGN_OR_RETURN(Node * prob,
                          b.AddNode("Softmax", "prob", {b.bottoms()[0]}, {{"axis", axis}}));
    tops.push_back(prob->output(0));
  }
  b.SetTops(tops);
  return absl::OkStatus();
}

absl::Status SigmoidCrossEntropyLoss(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 2, 2));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::LossParameter& loss = b.layer().loss_param();
  KILN_ASSIGN_OR_RETURN(Node * node,
                        b.AddNode("SigmoidCrossEntropyLoss", "", {b.bottoms()[0], b.bottoms()[1]},
                                  {{"ignore_label", IgnoreLabel(loss)},
                                   {"normalization", Normalization(loss, "batch_size")}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status TwoInputOp(LayerBuilder& b, absl::string_view op, const AttrMap& attrs) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 2, 2));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode(op, "", {b.bottoms()[0], b.bottoms()[1]}, attrs));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status EuclideanLoss(LayerBuilder& b) { return TwoInputOp(b, "EuclideanLoss", {}); }

absl::Status ContrastiveLoss(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 3, 3));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::ContrastiveLossParameter& p = b.layer().contrastive_loss_param();
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("ContrastiveLoss", "", b.bottoms(),
                                               {{"margin", double{p.margin()}},
                                                {"legacy_version", p.legacy_version()}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status Accuracy(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 2));
  if (b.layer().top_size() == 2) return b.Unsupported("a second top (per-class accuracy)");
  const caffe::AccuracyParameter& p = b.layer().accuracy_param();
  return TwoInputOp(b, "Accuracy",
                    {{"top_k", int64_t{p.top_k()}},
                     {"axis", int64_t{p.axis()}},
                     {"ignore_label", p.has_ignore_label() ? Ints{p.ignore_label()} : Ints{}}});
}

absl::Status InnerProduct(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::InnerProductParameter& p = b.layer().inner_product_param();
  if (!p.has_num_output() || p.num_output() == 0) {
    return b.Invalid("inner_product_param.num_output missing or 0");
  }
  const TensorType& x = b.bottoms()[0].type();
  const int64_t axis = p.axis() < 0 ? p.axis() + x.rank() : p.axis();
  if (axis < 0 || axis >= x.rank())
    return b.Invalid(absl::StrCat("axis ", p.axis(), " out of range"));
  int64_t k = 1;
  for (int d = static_cast<int>(axis); d < x.rank(); ++d) k *= x.dim(d);
  const int64_t n = p.num_output();
  b.ExpectParams(p.bias_term() ? 2 : 1);
  KILN_ASSIGN_OR_RETURN(Value weight, b.Param(0, p.transpose() ? Ints{k, n} : Ints{n, k},
                                              p.weight_filler(), true, "weight"));
  std::vector<Value> inputs = {b.bottoms()[0], weight};
  if (p.bias_term()) {
    KILN_ASSIGN_OR_RETURN(Value bias, b.Param(1, {n}, p.bias_filler(), true, "bias"));
    inputs.push_back(bias);
  }
  KILN_ASSIGN_OR_RETURN(Node * node,
                        b.AddNode("InnerProduct", "", inputs,
                                  {{"axis", int64_t{p.axis()}}, {"transpose", p.transpose()}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status Reduction(LayerBuilder& b) {
  const caffe::ReductionParameter& p = b.layer().reduction_param();
  const char* op = p.operation() == caffe::ReductionParameter::ASUM    ? "asum"
                   : p.operation() == caffe::ReductionParameter::SUMSQ ? "sumsq"
                   : p.operation() == caffe::ReductionParameter::MEAN  ? "mean"
                                                                       : "sum";
  return Simple(b, "Reduction",
                {{"operation", std::string(op)},
                 {"axis", int64_t{p.axis()}},
                 {"coeff", static_cast<double>(p.coeff())}});
}

absl::Status Tile(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::TileParameter& p = b.layer().tile_param();
  if (!p.has_tiles() || p.tiles() < 1) return b.Invalid("tile_param.tiles missing or < 1");
  return Simple(b, "Tile", {{"axis", int64_t{p.axis()}}, {"tiles", int64_t{p.tiles()}}});
}

absl::Status Concat(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, -1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::ConcatParameter& p = b.layer().concat_param();
  if (p.has_axis() && p.has_concat_dim()) return b.Invalid("give axis or concat_dim, not both");
  const int64_t axis = p.has_concat_dim() ? int64_t{p.concat_dim()} : int64_t{p.axis()};
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("Concat", "", b.bottoms(), {{"axis", axis}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

absl::Status Slice(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, -1));
  const caffe::SliceParameter& p = b.layer().slice_param();
  if (p.has_axis() && p.has_slice_dim()) return b.Invalid("give axis or slice_dim, not both");
  const int64_t axis = p.has_slice_dim() ? int64_t{p.slice_dim()} : int64_t{p.axis()};
  const int tops = b.layer().top_size();
  if (p.slice_point_size() > 0 && p.slice_point_size() != tops - 1) {
    return b.Invalid(absl::StrCat(p.slice_point_size(), " slice points for ", tops, " tops (need ",
                                  tops - 1, ")"));
  }
  KILN_ASSIGN_OR_RETURN(
      Node * node,
      b.AddNode("Slice", "", {b.bottoms()[0]},
                {{"axis", axis},
                 {"slice_points", Ints(p.slice_point().begin(), p.slice_point().end())},
                 {"num_outputs", int64_t{tops}}}));
  std::vector<Value> outs;
  for (int i = 0; i < node->num_outputs(); ++i) outs.push_back(node->output(i));
  b.SetTops(outs);
  return absl::OkStatus();
}

absl::Status Split(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 1, 1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, -1));
  KILN_ASSIGN_OR_RETURN(Node * node, b.AddNode("Split", "", {b.bottoms()[0]},
                                               {{"num_outputs", int64_t{b.layer().top_size()}}}));
  std::vector<Value> outs;
  for (int i = 0; i < node->num_outputs(); ++i) outs.push_back(node->output(i));
  b.SetTops(outs);
  return absl::OkStatus();
}

absl::Status Flatten(LayerBuilder& b) {
  const caffe::FlattenParameter& p = b.layer().flatten_param();
  return Simple(b, "Flatten", {{"axis", int64_t{p.axis()}}, {"end_axis", int64_t{p.end_axis()}}});
}

absl::Status Reshape(LayerBuilder& b) {
  const caffe::ReshapeParameter& p = b.layer().reshape_param();
  if (!p.has_shape()) return b.Invalid("reshape_param.shape missing");
  return Simple(b, "Reshape",
                {{"shape", Ints(p.shape().dim().begin(), p.shape().dim().end())},
                 {"axis", int64_t{p.axis()}},
                 {"num_axes", int64_t{p.num_axes()}}});
}

absl::Status Crop(LayerBuilder& b) {
  const caffe::CropParameter& p = b.layer().crop_param();
  return TwoInputOp(
      b, "Crop",
      {{"axis", int64_t{p.axis()}}, {"offset", Ints(p.offset().begin(), p.offset().end())}});
}

absl::Status Eltwise(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 2, -1));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 1));
  const caffe::EltwiseParameter& p = b.layer().eltwise_param();
  std::string op;
  switch (p.operation()) {
    case caffe::EltwiseParameter::PROD:
      op = "prod";
      break;
    case caffe::EltwiseParameter::SUM:
      op = "sum";
      break;
    case caffe::EltwiseParameter::MAX:
      op = "max";
      break;
  }
  if (p.coeff_size() > 0) {
    if (op != "sum") return b.Invalid("coeff applies only to the SUM operation");
    if (p.coeff_size() != static_cast<int>(b.bottoms().size())) {
      return b.Invalid(
          absl::StrCat(p.coeff_size(), " coeff values for ", b.bottoms().size(), " bottoms"));
    }
  }
  KILN_ASSIGN_OR_RETURN(
      Node * node,
      b.AddNode("Eltwise", "", b.bottoms(),
                {{"operation", op},
                 {"coeffs", std::vector<double>(p.coeff().begin(), p.coeff().end())}}));
  b.SetTops({node->output(0)});
  return absl::OkStatus();
}

// Silence consumes its bottoms and makes nothing.
absl::Status Silence(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedTops(b, 0, 0));
  b.SetTops({});
  return absl::OkStatus();
}

// ---- Layers that become graph inputs.

absl::Status Input(LayerBuilder& b) {
  const caffe::InputParameter& p = b.layer().input_param();
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 0, 0));
  const int tops = b.layer().top_size();
  if (p.shape_size() > 1 && p.shape_size() != tops) {
    return b.Invalid(
        absl::StrCat(p.shape_size(), " shapes for ", tops, " tops (give one, or one per top)"));
  }
  std::vector<Value> values;
  for (int t = 0; t < tops; ++t) {
    Ints dims;
    if (p.shape_size() > 0) {
      const caffe::BlobShape& shape = p.shape(p.shape_size() == 1 ? 0 : t);
      dims.assign(shape.dim().begin(), shape.dim().end());
    }
    KILN_ASSIGN_OR_RETURN(Value v, b.AddInput(t, p.shape_size() > 0 ? dims : Ints{},
                                              "the Input layer gives no shape"));
    values.push_back(v);
  }
  b.SetTops(values);
  return absl::OkStatus();
}

// Data-style layers: top 0 is the data, an optional top 1 the label of shape [batch].
absl::Status DataTops(LayerBuilder& b, int64_t batch, const Ints& data_dims,
                      absl::string_view hint) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 0, 0));
  KILN_RETURN_IF_ERROR(NeedTops(b, 1, 2));
  if (batch <= 0) return b.Invalid("batch_size missing or 0");
  std::vector<Value> values;
  KILN_ASSIGN_OR_RETURN(Value data, b.AddInput(0, data_dims, hint));
  values.push_back(data);
  if (b.layer().top_size() == 2) {
    KILN_ASSIGN_OR_RETURN(Value label, b.AddInput(1, Ints{batch}, ""));
    values.push_back(label);
  }
  b.SetTops(values);
  return absl::OkStatus();
}

absl::Status Data(LayerBuilder& b) {
  const int64_t batch = b.layer().data_param().batch_size();
  const int64_t crop = b.layer().transform_param().crop_size();
  return DataTops(b, batch, {},
                  absl::StrCat("a Data layer's channels and size come from its database; give [",
                               batch, ", C, ", crop > 0 ? absl::StrCat(crop) : "H", ", ",
                               crop > 0 ? absl::StrCat(crop) : "W", "]"));
}

absl::Status ImageData(LayerBuilder& b) {
  const caffe::ImageDataParameter& p = b.layer().image_data_param();
  const int64_t batch = p.batch_size();
  const int64_t channels = p.is_color() ? 3 : 1;
  const int64_t crop = b.layer().transform_param().crop_size();
  Ints dims;
  if (crop > 0) {
    dims = {batch, channels, crop, crop};
  } else if (p.new_height() > 0 && p.new_width() > 0) {
    dims = {batch, channels, p.new_height(), p.new_width()};
  }
  return DataTops(b, batch, dims,
                  absl::StrCat("the images' size is not in the file (no crop_size or new_height/"
                               "new_width); give [",
                               batch, ", ", channels, ", H, W]"));
}

absl::Status MemoryData(LayerBuilder& b) {
  const caffe::MemoryDataParameter& p = b.layer().memory_data_param();
  if (p.channels() == 0 || p.height() == 0 || p.width() == 0) {
    return b.Invalid("memory_data_param needs channels, height and width");
  }
  return DataTops(b, p.batch_size(), {p.batch_size(), p.channels(), p.height(), p.width()}, "");
}

absl::Status Hdf5Data(LayerBuilder& b) {
  KILN_RETURN_IF_ERROR(NeedBottoms(b, 0, 0));
  const int64_t batch = b.layer().hdf5_data_param().batch_size();
  if (batch <= 0) return b.Invalid("batch_size missing or 0");
  std::vector<Value> values;
  for (int t = 0; t < b.layer().top_size(); ++t) {
    KILN_ASSIGN_OR_RETURN(
        Value v, b.AddInput(t, {},
                            absl::StrCat("HDF5 datasets' shapes are in the HDF5 files; give [",
                                         batch, ", ...]")));
    values.push_back(v);
  }
  b.SetTops(values);
  return absl::OkStatus();
}

struct ConverterEntry {
  LayerConverter convert;
  bool loss;
};

const std::map<std::string, ConverterEntry>& Converters() {
  static const auto* const kConverters = new std::map<std::string, ConverterEntry>{
      {"AbsVal", {AbsVal, false}},
      {"Accuracy", {Accuracy, false}},
      {"ArgMax", {ConvertArgMax, false}},
      {"BatchNorm", {BatchNorm, false}},
      {"Bias", {Bias, false}},
      {"CTCLoss", {ConvertCtcLoss, true}},
      {"Concat", {Concat, false}},
      {"ContrastiveLoss", {ContrastiveLoss, true}},
      {"Convolution", {Convolution, false}},
      {"ConvolutionDepthwise", {Convolution, false}},
      {"Crop", {Crop, false}},
      {"Data", {Data, false}},
      {"Deconvolution", {Convolution, false}},
      {"Dropout", {Dropout, false}},
      {"ELU", {Elu, false}},
      {"Eltwise", {Eltwise, false}},
      {"Embed", {ConvertEmbed, false}},
      {"EuclideanLoss", {EuclideanLoss, true}},
      {"Flatten", {Flatten, false}},
      {"HDF5Data", {Hdf5Data, false}},
      {"ImageData", {ImageData, false}},
      {"InnerProduct", {InnerProduct, false}},
      {"Input", {Input, false}},
      {"LRN", {Lrn, false}},
      {"LSTMUnit", {ConvertLstmUnit, false}},
      {"MemoryData", {MemoryData, false}},
      {"PReLU", {Prelu, false}},
      {"Pooling", {Pooling, false}},
      {"LSTM", {ConvertLstm, false}},
      {"Power", {Power, false}},
      {"RNN", {ConvertRnn, false}},
      {"ReLU", {Relu, false}},
      {"Reduction", {Reduction, false}},
      {"Reshape", {Reshape, false}},
      {"Scale", {Scale, false}},
      {"Sigmoid", {Sigmoid, false}},
      {"SigmoidCrossEntropyLoss", {SigmoidCrossEntropyLoss, true}},
      {"ShuffleChannel", {ConvertShuffleChannel, false}},
      {"Silence", {Silence, false}},
      {"Slice", {Slice, false}},
      {"Softmax", {Softmax, false}},
      {"SoftmaxWithLoss", {SoftmaxWithLoss, true}},
      {"Split", {Split, false}},
      {"TanH", {TanH, false}},
      {"Tile", {Tile, false}},
  };
  return *kConverters;
}

}  // namespace

absl::Status LayerBuilder::Invalid(absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(), what));
}

absl::Status LayerBuilder::Unsupported(absl::string_view what) const {
  return absl::UnimplementedError(absl::StrCat(Where(), what, " is not supported"));
}

LayerConverter FindLayerConverter(const std::string& type) {
  auto it = Converters().find(type);
  return it == Converters().end() ? nullptr : it->second.convert;
}

bool IsLossLayerType(const std::string& type) {
  static const char* const kOtherLosses[] = {"HingeLoss", "InfogainLoss",
                                             "MultinomialLogisticLoss"};
  auto it = Converters().find(type);
  if (it != Converters().end()) return it->second.loss;
  for (const char* t : kOtherLosses) {
    if (type == t) return true;
  }
  return false;
}

}  // namespace kiln
