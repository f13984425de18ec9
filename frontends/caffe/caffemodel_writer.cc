#include "frontends/caffe/caffemodel_writer.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "frontends/caffe/blob_convert.h"
#include "frontends/caffe/caffe_io.h"

namespace kiln {

absl::StatusOr<caffe::NetParameter> ModelToNetParameter(const CaffeModel& model) {
  caffe::NetParameter net = model.net;
  if (net.layer_size() != static_cast<int>(model.layers.size())) {
    return absl::InternalError("writer: the model's layers do not match its net definition");
  }
  for (int i = 0; i < net.layer_size(); ++i) {
    caffe::LayerParameter& layer = *net.mutable_layer(i);
    layer.clear_blobs();
    for (int index : model.layers[i].params) {
      const CaffeParam& param = model.params[index];
      TensorToBlob(ParamTensor(model, param), param.shape, *layer.add_blobs());
    }
  }
  return net;
}

absl::StatusOr<std::string> SerializeCaffemodel(const CaffeModel& model) {
  KILN_ASSIGN_OR_RETURN(caffe::NetParameter net, ModelToNetParameter(model));
  const size_t size = net.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX)) {
    return absl::ResourceExhaustedError(absl::StrCat("writer: the .caffemodel would be ", size,
                                                     " bytes, over protobuf's 2 GiB limit"));
  }
  std::string bytes;
  if (!net.SerializeToString(&bytes)) {
    return absl::InternalError("writer: protobuf serialization failed");
  }
  return bytes;
}

absl::Status WriteCaffemodel(const CaffeModel& model, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, SerializeCaffemodel(model));
  return WriteFileBytes(path, bytes);
}

}  // namespace kiln
