#include "frontends/caffe/upgrade.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

using caffe::LayerParameter;
using caffe::NetParameter;
using caffe::V0LayerParameter;
using caffe::V1LayerParameter;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string V0Where(const V0LayerParameter& v0) {
  return absl::StrCat("upgrade: V0 layer '", v0.name(), "' (", v0.type(), ")");
}

absl::StatusOr<V1LayerParameter::LayerType> V0Type(const V0LayerParameter& v0) {
  static const auto* const kTypes = new std::map<std::string, V1LayerParameter::LayerType>{
      {"accuracy", V1LayerParameter::ACCURACY},
      {"bnll", V1LayerParameter::BNLL},
      {"concat", V1LayerParameter::CONCAT},
      {"conv", V1LayerParameter::CONVOLUTION},
      {"data", V1LayerParameter::DATA},
      {"dropout", V1LayerParameter::DROPOUT},
      {"euclidean_loss", V1LayerParameter::EUCLIDEAN_LOSS},
      {"flatten", V1LayerParameter::FLATTEN},
      {"hdf5_data", V1LayerParameter::HDF5_DATA},
      {"hdf5_output", V1LayerParameter::HDF5_OUTPUT},
      {"im2col", V1LayerParameter::IM2COL},
      {"images", V1LayerParameter::IMAGE_DATA},
      {"infogain_loss", V1LayerParameter::INFOGAIN_LOSS},
      {"innerproduct", V1LayerParameter::INNER_PRODUCT},
      {"lrn", V1LayerParameter::LRN},
      {"multinomial_logistic_loss", V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS},
      {"pool", V1LayerParameter::POOLING},
      {"relu", V1LayerParameter::RELU},
      {"sigmoid", V1LayerParameter::SIGMOID},
      {"softmax", V1LayerParameter::SOFTMAX},
      {"softmax_loss", V1LayerParameter::SOFTMAX_LOSS},
      {"split", V1LayerParameter::SPLIT},
      {"tanh", V1LayerParameter::TANH},
      {"window_data", V1LayerParameter::WINDOW_DATA},
  };
  auto it = kTypes->find(v0.type());
  if (it == kTypes->end()) {
    return absl::UnimplementedError(
        absl::StrCat(V0Where(v0), ": unknown V0 layer type \"", v0.type(), "\""));
  }
  return it->second;
}

// Converts one V0 layer (wrapped in `wrapper`, which holds its bottoms and tops) into a V1 layer.
absl::Status UpgradeV0Layer(const V1LayerParameter& wrapper, V1LayerParameter& out) {
  const V0LayerParameter& v0 = wrapper.layer();
  KILN_ASSIGN_OR_RETURN(V1LayerParameter::LayerType type, V0Type(v0));
  out.Clear();
  *out.mutable_bottom() = wrapper.bottom();
  *out.mutable_top() = wrapper.top();
  out.set_name(v0.name());
  out.set_type(type);
  const bool conv = type == V1LayerParameter::CONVOLUTION;
  const bool ip = type == V1LayerParameter::INNER_PRODUCT;
  const bool pool = type == V1LayerParameter::POOLING;
  const bool data = type == V1LayerParameter::DATA;
  const bool images = type == V1LayerParameter::IMAGE_DATA;
  const bool window = type == V1LayerParameter::WINDOW_DATA;
  const bool hdf5 = type == V1LayerParameter::HDF5_DATA;
  auto misplaced = [&](const char* field) {
    return absl::InvalidArgumentError(
        absl::StrCat(V0Where(v0), ": field '", field, "' does not apply to this layer type"));
  };
  if (v0.has_num_output()) {
    if (conv) {
      out.mutable_convolution_param()->set_num_output(v0.num_output());
    } else if (ip) {
      out.mutable_inner_product_param()->set_num_output(v0.num_output());
    } else {
      return misplaced("num_output");
    }
  }
  if (v0.has_biasterm()) {
    if (conv) {
      out.mutable_convolution_param()->set_bias_term(v0.biasterm());
    } else if (ip) {
      out.mutable_inner_product_param()->set_bias_term(v0.biasterm());
    } else {
      return misplaced("biasterm");
    }
  }
  for (const auto& [has, filler, name, is_weight] :
       {std::make_tuple(v0.has_weight_filler(), &v0.weight_filler(), "weight_filler", true),
        std::make_tuple(v0.has_bias_filler(), &v0.bias_filler(), "bias_filler", false)}) {
    if (!has) continue;
    if (conv) {
      *(is_weight ? out.mutable_convolution_param()->mutable_weight_filler()
                  : out.mutable_convolution_param()->mutable_bias_filler()) = *filler;
    } else if (ip) {
      *(is_weight ? out.mutable_inner_product_param()->mutable_weight_filler()
                  : out.mutable_inner_product_param()->mutable_bias_filler()) = *filler;
    } else {
      return misplaced(name);
    }
  }
  if (v0.has_pad()) {
    if (conv) {
      out.mutable_convolution_param()->add_pad(v0.pad());
    } else if (pool) {
      out.mutable_pooling_param()->set_pad(v0.pad());
    } else {
      return misplaced("pad");
    }
  }
  if (v0.has_kernelsize()) {
    if (conv) {
      out.mutable_convolution_param()->add_kernel_size(v0.kernelsize());
    } else if (pool) {
      out.mutable_pooling_param()->set_kernel_size(v0.kernelsize());
    } else {
      return misplaced("kernelsize");
    }
  }
  if (v0.has_group()) {
    if (!conv) return misplaced("group");
    out.mutable_convolution_param()->set_group(v0.group());
  }
  if (v0.has_stride()) {
    if (conv) {
      out.mutable_convolution_param()->add_stride(v0.stride());
    } else if (pool) {
      out.mutable_pooling_param()->set_stride(v0.stride());
    } else {
      return misplaced("stride");
    }
  }
  if (v0.has_pool()) {
    if (!pool) return misplaced("pool");
    out.mutable_pooling_param()->set_pool(
        static_cast<caffe::PoolingParameter::PoolMethod>(v0.pool()));
  }
  if (v0.has_dropout_ratio()) {
    if (type != V1LayerParameter::DROPOUT) return misplaced("dropout_ratio");
    out.mutable_dropout_param()->set_dropout_ratio(v0.dropout_ratio());
  }
  const bool lrn = type == V1LayerParameter::LRN;
  if (v0.has_local_size()) {
    if (!lrn) return misplaced("local_size");
    out.mutable_lrn_param()->set_local_size(v0.local_size());
  }
  if (v0.has_alpha()) {
    if (!lrn) return misplaced("alpha");
    out.mutable_lrn_param()->set_alpha(v0.alpha());
  }
  if (v0.has_beta()) {
    if (!lrn) return misplaced("beta");
    out.mutable_lrn_param()->set_beta(v0.beta());
  }
  if (v0.has_k()) {
    if (!lrn) return misplaced("k");
    out.mutable_lrn_param()->set_k(v0.k());
  }
  if (v0.has_source()) {
    if (data) {
      out.mutable_data_param()->set_source(v0.source());
    } else if (hdf5) {
      out.mutable_hdf5_data_param()->set_source(v0.source());
    } else if (images) {
      out.mutable_image_data_param()->set_source(v0.source());
    } else if (window) {
      out.mutable_window_data_param()->set_source(v0.source());
    } else if (type == V1LayerParameter::INFOGAIN_LOSS) {
      out.mutable_infogain_loss_param()->set_source(v0.source());
    } else {
      return misplaced("source");
    }
  }
  const bool transformable = data || images || window;
  if (v0.has_scale()) {
    if (!transformable) return misplaced("scale");
    out.mutable_transform_param()->set_scale(v0.scale());
  }
  if (v0.has_meanfile()) {
    if (!transformable) return misplaced("meanfile");
    out.mutable_transform_param()->set_mean_file(v0.meanfile());
  }
  if (v0.has_cropsize()) {
    if (!transformable) return misplaced("cropsize");
    out.mutable_transform_param()->set_crop_size(v0.cropsize());
  }
  if (v0.has_mirror()) {
    if (!transformable) return misplaced("mirror");
    out.mutable_transform_param()->set_mirror(v0.mirror());
  }
  if (v0.has_batchsize()) {
    if (data) {
      out.mutable_data_param()->set_batch_size(v0.batchsize());
    } else if (hdf5) {
      out.mutable_hdf5_data_param()->set_batch_size(v0.batchsize());
    } else if (images) {
      out.mutable_image_data_param()->set_batch_size(v0.batchsize());
    } else if (window) {
      out.mutable_window_data_param()->set_batch_size(v0.batchsize());
    } else {
      return misplaced("batchsize");
    }
  }
  if (v0.has_rand_skip()) {
    if (data) {
      out.mutable_data_param()->set_rand_skip(v0.rand_skip());
    } else if (images) {
      out.mutable_image_data_param()->set_rand_skip(v0.rand_skip());
    } else {
      return misplaced("rand_skip");
    }
  }
  if (v0.has_shuffle_images()) {
    if (!images) return misplaced("shuffle_images");
    out.mutable_image_data_param()->set_shuffle(v0.shuffle_images());
  }
  if (v0.has_new_height()) {
    if (!images) return misplaced("new_height");
    out.mutable_image_data_param()->set_new_height(static_cast<uint32_t>(v0.new_height()));
  }
  if (v0.has_new_width()) {
    if (!images) return misplaced("new_width");
    out.mutable_image_data_param()->set_new_width(static_cast<uint32_t>(v0.new_width()));
  }
  if (v0.has_concat_dim()) {
    if (type != V1LayerParameter::CONCAT) return misplaced("concat_dim");
    out.mutable_concat_param()->set_concat_dim(v0.concat_dim());
  }
  if (v0.has_det_fg_threshold()) {
    if (!window) return misplaced("det_fg_threshold");
    out.mutable_window_data_param()->set_fg_threshold(v0.det_fg_threshold());
  }
  if (v0.has_det_bg_threshold()) {
    if (!window) return misplaced("det_bg_threshold");
    out.mutable_window_data_param()->set_bg_threshold(v0.det_bg_threshold());
  }
  if (v0.has_det_fg_fraction()) {
    if (!window) return misplaced("det_fg_fraction");
    out.mutable_window_data_param()->set_fg_fraction(v0.det_fg_fraction());
  }
  if (v0.has_det_context_pad()) {
    if (!window) return misplaced("det_context_pad");
    out.mutable_window_data_param()->set_context_pad(v0.det_context_pad());
  }
  if (v0.has_det_crop_mode()) {
    if (!window) return misplaced("det_crop_mode");
    out.mutable_window_data_param()->set_crop_mode(v0.det_crop_mode());
  }
  if (v0.has_new_num() || v0.has_new_channels()) {
    return absl::UnimplementedError(
        absl::StrCat(V0Where(v0), ": fields 'new_num'/'new_channels' are not supported"));
  }
  if (v0.has_hdf5_output_param()) {
    if (type != V1LayerParameter::HDF5_OUTPUT) return misplaced("hdf5_output_param");
    *out.mutable_hdf5_output_param() = v0.hdf5_output_param();
  }
  *out.mutable_blobs() = v0.blobs();
  *out.mutable_blobs_lr() = v0.blobs_lr();
  *out.mutable_weight_decay() = v0.weight_decay();
  return absl::OkStatus();
}

// V0 -> V1, folding V0 "padding" layers into the convolution that reads them.
absl::Status UpgradeV0(NetParameter& net) {
  struct Padding {
    std::string bottom;
    uint32_t pad;
    std::string name;
  };
  std::map<std::string, Padding> padding_by_top;
  google::protobuf::RepeatedPtrField<V1LayerParameter> upgraded;
  for (const V1LayerParameter& wrapper : net.layers()) {
    if (!wrapper.has_layer()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "upgrade: layer '", wrapper.name(), "' mixes V0 (nested layer) and V1 definitions"));
    }
    const V0LayerParameter& v0 = wrapper.layer();
    if (v0.type() == "padding") {
      if (wrapper.bottom_size() != 1 || wrapper.top_size() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(V0Where(v0), ": a padding layer takes one bottom and one top"));
      }
      padding_by_top[wrapper.top(0)] = {wrapper.bottom(0), v0.pad(), v0.name()};
      continue;
    }
    V1LayerParameter& out = *upgraded.Add();
    KILN_RETURN_IF_ERROR(UpgradeV0Layer(wrapper, out));
    for (int b = 0; b < out.bottom_size(); ++b) {
      auto it = padding_by_top.find(out.bottom(b));
      if (it == padding_by_top.end()) continue;
      if (out.type() != V1LayerParameter::CONVOLUTION || b != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(V0Where(v0), ": reads the output of padding layer '", it->second.name,
                         "', which only a convolution's first bottom may do"));
      }
      out.set_bottom(b, it->second.bottom);
      caffe::ConvolutionParameter& conv = *out.mutable_convolution_param();
      conv.clear_pad();
      conv.add_pad(it->second.pad);
    }
  }
  net.mutable_layers()->Swap(&upgraded);
  return absl::OkStatus();
}

// Moves the deprecated scale/mean_file/crop_size/mirror of V1 data layers into transform_param.
template <typename Param>
void MoveTransformFields(Param& param, caffe::TransformationParameter& transform) {
  if (param.has_scale()) {
    transform.set_scale(param.scale());
    param.clear_scale();
  }
  if (param.has_mean_file()) {
    transform.set_mean_file(param.mean_file());
    param.clear_mean_file();
  }
  if (param.has_crop_size()) {
    transform.set_crop_size(param.crop_size());
    param.clear_crop_size();
  }
  if (param.has_mirror()) {
    transform.set_mirror(param.mirror());
    param.clear_mirror();
  }
}

void UpgradeDataTransforms(NetParameter& net) {
  for (V1LayerParameter& layer : *net.mutable_layers()) {
    switch (layer.type()) {
      case V1LayerParameter::DATA:
        MoveTransformFields(*layer.mutable_data_param(), *layer.mutable_transform_param());
        if (layer.data_param().ByteSizeLong() == 0) layer.clear_data_param();
        break;
      case V1LayerParameter::IMAGE_DATA:
        MoveTransformFields(*layer.mutable_image_data_param(), *layer.mutable_transform_param());
        break;
      case V1LayerParameter::WINDOW_DATA:
        MoveTransformFields(*layer.mutable_window_data_param(), *layer.mutable_transform_param());
        break;
      default:
        break;
    }
    if (layer.has_transform_param() && layer.transform_param().ByteSizeLong() == 0) {
      layer.clear_transform_param();
    }
  }
}

// Copies every `*_param` sub-message set on `from` into the field of the same name on `to`.
absl::Status CopyLayerParams(const Message& from, Message& to, const std::string& where) {
  const Reflection* from_reflection = from.GetReflection();
  const Reflection* to_reflection = to.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  from_reflection->ListFields(from, &fields);
  for (const FieldDescriptor* field : fields) {
    const std::string& name = field->name();
    if (field->type() != FieldDescriptor::TYPE_MESSAGE || field->is_repeated()) continue;
    if (name.size() < 6 || name.compare(name.size() - 6, 6, "_param") != 0) continue;
    const FieldDescriptor* target = to.GetDescriptor()->FindFieldByName(name);
    if (target == nullptr) {
      return absl::UnimplementedError(
          absl::StrCat(where, ": field '", name, "' has no V2 equivalent"));
    }
    to_reflection->MutableMessage(&to, target)->CopyFrom(from_reflection->GetMessage(from, field));
  }
  return absl::OkStatus();
}

absl::Status UpgradeV1(NetParameter& net) {
  if (net.layer_size() > 0) {
    return absl::InvalidArgumentError(
        "upgrade: the net has both 'layer' (V2) and 'layers' (V1) entries; use one format");
  }
  for (const V1LayerParameter& v1 : net.layers()) {
    const std::string where = absl::StrCat("upgrade: V1 layer '", v1.name(), "'");
    if (v1.has_layer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": mixes V0 (nested layer) and V1 definitions"));
    }
    const char* type = V1TypeName(v1.type());
    if (*type == '\0') {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": missing or unknown layer type ", static_cast<int>(v1.type())));
    }
    LayerParameter& layer = *net.add_layer();
    layer.set_name(v1.name());
    layer.set_type(type);
    *layer.mutable_bottom() = v1.bottom();
    *layer.mutable_top() = v1.top();
    *layer.mutable_include() = v1.include();
    *layer.mutable_exclude() = v1.exclude();
    *layer.mutable_loss_weight() = v1.loss_weight();
    *layer.mutable_blobs() = v1.blobs();
    const int specs = std::max(
        {v1.param_size(), v1.blob_share_mode_size(), v1.blobs_lr_size(), v1.weight_decay_size()});
    for (int i = 0; i < specs; ++i) {
      caffe::ParamSpec& spec = *layer.add_param();
      if (i < v1.param_size()) spec.set_name(v1.param(i));
      if (i < v1.blob_share_mode_size()) {
        spec.set_share_mode(static_cast<caffe::ParamSpec::DimCheckMode>(v1.blob_share_mode(i)));
      }
      if (i < v1.blobs_lr_size()) spec.set_lr_mult(v1.blobs_lr(i));
      if (i < v1.weight_decay_size()) spec.set_decay_mult(v1.weight_decay(i));
    }
    KILN_RETURN_IF_ERROR(CopyLayerParams(v1, layer, where));
  }
  net.clear_layers();
  return absl::OkStatus();
}

absl::Status UpgradeInputs(NetParameter& net) {
  const int inputs = net.input_size();
  if (inputs == 0) {
    if (net.input_shape_size() > 0 || net.input_dim_size() > 0) {
      return absl::InvalidArgumentError("upgrade: input_shape/input_dim given without 'input'");
    }
    return absl::OkStatus();
  }
  if (net.input_shape_size() > 0 && net.input_dim_size() > 0) {
    return absl::InvalidArgumentError("upgrade: give input_shape or input_dim, not both");
  }
  if (net.input_shape_size() > 0 && net.input_shape_size() != inputs) {
    return absl::InvalidArgumentError(absl::StrCat("upgrade: ", inputs, " inputs but ",
                                                   net.input_shape_size(), " input_shape entries"));
  }
  if (net.input_dim_size() > 0 && net.input_dim_size() != 4 * inputs) {
    return absl::InvalidArgumentError(absl::StrCat("upgrade: ", inputs, " inputs need ", 4 * inputs,
                                                   " input_dim values, got ",
                                                   net.input_dim_size()));
  }
  const bool has_shapes = net.input_shape_size() > 0 || net.input_dim_size() > 0;
  if (has_shapes) {
    LayerParameter input;
    input.set_name("input");
    input.set_type("Input");
    for (int i = 0; i < inputs; ++i) {
      input.add_top(net.input(i));
      caffe::BlobShape& shape = *input.mutable_input_param()->add_shape();
      if (net.input_shape_size() > 0) {
        shape = net.input_shape(i);
      } else {
        for (int d = 0; d < 4; ++d) shape.add_dim(net.input_dim(4 * i + d));
      }
    }
    net.mutable_layer()->Add(std::move(input));
    // Move the new layer to the front.
    for (int i = net.layer_size() - 1; i > 0; --i) net.mutable_layer()->SwapElements(i, i - 1);
  }
  net.clear_input();
  net.clear_input_shape();
  net.clear_input_dim();
  return absl::OkStatus();
}

void UpgradeBatchNormParams(NetParameter& net) {
  for (LayerParameter& layer : *net.mutable_layer()) {
    if (layer.type() != "BatchNorm" || layer.param_size() != 3) continue;
    for (caffe::ParamSpec& spec : *layer.mutable_param()) {
      spec.set_lr_mult(0);
      spec.set_decay_mult(0);
    }
  }
}

}  // namespace

const char* V1TypeName(V1LayerParameter::LayerType type) {
  switch (type) {
    case V1LayerParameter::ABSVAL:
      return "AbsVal";
    case V1LayerParameter::ACCURACY:
      return "Accuracy";
    case V1LayerParameter::ARGMAX:
      return "ArgMax";
    case V1LayerParameter::BNLL:
      return "BNLL";
    case V1LayerParameter::CONCAT:
      return "Concat";
    case V1LayerParameter::CONTRASTIVE_LOSS:
      return "ContrastiveLoss";
    case V1LayerParameter::CONVOLUTION:
      return "Convolution";
    case V1LayerParameter::DATA:
      return "Data";
    case V1LayerParameter::DECONVOLUTION:
      return "Deconvolution";
    case V1LayerParameter::DROPOUT:
      return "Dropout";
    case V1LayerParameter::DUMMY_DATA:
      return "DummyData";
    case V1LayerParameter::EUCLIDEAN_LOSS:
      return "EuclideanLoss";
    case V1LayerParameter::ELTWISE:
      return "Eltwise";
    case V1LayerParameter::EXP:
      return "Exp";
    case V1LayerParameter::FLATTEN:
      return "Flatten";
    case V1LayerParameter::HDF5_DATA:
      return "HDF5Data";
    case V1LayerParameter::HDF5_OUTPUT:
      return "HDF5Output";
    case V1LayerParameter::HINGE_LOSS:
      return "HingeLoss";
    case V1LayerParameter::IM2COL:
      return "Im2col";
    case V1LayerParameter::IMAGE_DATA:
      return "ImageData";
    case V1LayerParameter::INFOGAIN_LOSS:
      return "InfogainLoss";
    case V1LayerParameter::INNER_PRODUCT:
      return "InnerProduct";
    case V1LayerParameter::LRN:
      return "LRN";
    case V1LayerParameter::MEMORY_DATA:
      return "MemoryData";
    case V1LayerParameter::MULTINOMIAL_LOGISTIC_LOSS:
      return "MultinomialLogisticLoss";
    case V1LayerParameter::MVN:
      return "MVN";
    case V1LayerParameter::POOLING:
      return "Pooling";
    case V1LayerParameter::POWER:
      return "Power";
    case V1LayerParameter::RELU:
      return "ReLU";
    case V1LayerParameter::SIGMOID:
      return "Sigmoid";
    case V1LayerParameter::SIGMOID_CROSS_ENTROPY_LOSS:
      return "SigmoidCrossEntropyLoss";
    case V1LayerParameter::SILENCE:
      return "Silence";
    case V1LayerParameter::SOFTMAX:
      return "Softmax";
    case V1LayerParameter::SOFTMAX_LOSS:
      return "SoftmaxWithLoss";
    case V1LayerParameter::SPLIT:
      return "Split";
    case V1LayerParameter::SLICE:
      return "Slice";
    case V1LayerParameter::TANH:
      return "TanH";
    case V1LayerParameter::WINDOW_DATA:
      return "WindowData";
    case V1LayerParameter::THRESHOLD:
      return "Threshold";
    case V1LayerParameter::NONE:
      return "";
  }
  return "";
}

absl::Status UpgradeNet(NetParameter& net) {
  bool any_v0 = false;
  for (const V1LayerParameter& layer : net.layers()) any_v0 = any_v0 || layer.has_layer();
  if (any_v0) KILN_RETURN_IF_ERROR(UpgradeV0(net));
  if (net.layers_size() > 0) {
    UpgradeDataTransforms(net);
    KILN_RETURN_IF_ERROR(UpgradeV1(net));
  }
  KILN_RETURN_IF_ERROR(UpgradeInputs(net));
  UpgradeBatchNormParams(net);
  return absl::OkStatus();
}

absl::Status UpgradeSolver(caffe::SolverParameter& solver) {
  if (solver.has_solver_type()) {
    if (solver.has_type()) {
      return absl::InvalidArgumentError(
          "solver: 'solver_type' (deprecated enum) and 'type' are both set; keep only 'type'");
    }
    static const char* const kNames[] = {"SGD",     "Nesterov", "AdaGrad",
                                         "RMSProp", "AdaDelta", "Adam"};
    const int index = static_cast<int>(solver.solver_type());
    if (index < 0 || index > 5) {
      return absl::InvalidArgumentError(absl::StrCat("solver: unknown solver_type ", index));
    }
    solver.set_type(kNames[index]);
    solver.clear_solver_type();
  }
  auto upgrade = [](NetParameter& net, const char* which) -> absl::Status {
    absl::Status s = UpgradeNet(net);
    if (!s.ok()) return Annotate(s, absl::StrCat("solver: ", which));
    return absl::OkStatus();
  };
  if (solver.has_net_param())
    KILN_RETURN_IF_ERROR(upgrade(*solver.mutable_net_param(), "net_param"));
  if (solver.has_train_net_param()) {
    KILN_RETURN_IF_ERROR(upgrade(*solver.mutable_train_net_param(), "train_net_param"));
  }
  for (NetParameter& net : *solver.mutable_test_net_param()) {
    KILN_RETURN_IF_ERROR(upgrade(net, "test_net_param"));
  }
  return absl::OkStatus();
}

}  // namespace kiln
