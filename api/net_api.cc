// Nets as pycaffe shows them through the C API (include/kiln/kiln.h, "Nets as pycaffe shows
// them"): a BlobNet (frontends/caffe/training/blob_net.h) behind an opaque handle, its blobs and
// parameters handed out as host memory the net owns.
#include <string>

#include "absl/strings/str_cat.h"
#include "api/api_state.h"

using kiln::c_api::Guarded;
using kiln::c_api::NotNull;

namespace kiln::c_api {

absl::Status DescribeBlob(const std::string& name, int index, const std::vector<int64_t>& shape,
                          float* data, float* diff, kiln_blob_info& info, const char* where) {
  if (shape.size() > KILN_MAX_RANK) {
    return absl::UnimplementedError(absl::StrCat(where, ": '", name, "' has ", shape.size(),
                                                 " dims (at most ", KILN_MAX_RANK, ")"));
  }
  info = kiln_blob_info{};
  info.name = name.c_str();
  info.index = index;
  info.rank = static_cast<int>(shape.size());
  size_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    info.dims[i] = shape[i];
    count *= static_cast<size_t>(shape[i]);
  }
  info.count = count;
  info.data = data;
  info.diff = diff;
  return absl::OkStatus();
}

}  // namespace kiln::c_api

namespace {

// The error of a handle that is NULL, or of an index past the end.
absl::Status InRange(int index, size_t size, const char* where, const char* what) {
  if (index < 0 || static_cast<size_t>(index) >= size) {
    return absl::OutOfRangeError(
        absl::StrCat(where, ": ", what, " ", index, " (the net has ", size, ")"));
  }
  return absl::OkStatus();
}

const char* NameAt(const kiln_net* net, int index, const std::vector<std::string>& names) {
  if (net == nullptr || index < 0 || static_cast<size_t>(index) >= names.size()) return nullptr;
  return names[index].c_str();
}

}  // namespace

extern "C" {

kiln_status kiln_net_create(const char* prototxt, const char* caffemodel, int phase,
                            const kiln_compile_options* options, kiln_net** net) {
  return Guarded("kiln_net_create", [&]() -> absl::Status {
    const char* where = "kiln_net_create";
    KILN_RETURN_IF_ERROR(NotNull(prototxt, where, "prototxt"));
    KILN_RETURN_IF_ERROR(NotNull(net, where, "net"));
    *net = nullptr;
    if (phase != KILN_PHASE_TEST && phase != KILN_PHASE_TRAIN) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": phase ", static_cast<int>(phase),
                                                     " (KILN_PHASE_TEST or KILN_PHASE_TRAIN)"));
    }
    kiln::BlobNetOptions blob;
    KILN_ASSIGN_OR_RETURN(blob.compile, kiln::c_api::ToCompileOptions(options, where));
    blob.phase = phase == KILN_PHASE_TRAIN ? caffe::TRAIN : caffe::TEST;
    if (options != nullptr) {
      if (options->max_batch > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": options->max_batch is for engines; a net has one batch"));
      }
      blob.batch = options->batch;
    }
    auto made = std::make_unique<kiln_net>();
    absl::StatusOr<std::unique_ptr<kiln::BlobNet>> loaded =
        kiln::BlobNet::Load(prototxt, caffemodel ? caffemodel : "", blob);
    if (!loaded.ok()) return kiln::Annotate(loaded.status(), where);
    made->net = std::move(*loaded);
    *net = made.release();
    return absl::OkStatus();
  });
}

void kiln_net_destroy(kiln_net* net) { delete net; }

const char* kiln_net_describe(const kiln_net* net) {
  return net ? net->net->description().c_str() : "";
}

int kiln_net_num_blobs(const kiln_net* net) {
  return net ? static_cast<int>(net->net->blobs().size()) : 0;
}

kiln_status kiln_net_blob(kiln_net* net, int index, kiln_blob_info* info) {
  return Guarded("kiln_net_blob", [&]() -> absl::Status {
    const char* where = "kiln_net_blob";
    KILN_RETURN_IF_ERROR(NotNull(net, where, "net"));
    KILN_RETURN_IF_ERROR(NotNull(info, where, "info"));
    KILN_RETURN_IF_ERROR(InRange(index, net->net->blobs().size(), where, "blob"));
    kiln::BlobNet::Blob& b = net->net->blobs()[index];
    return kiln::c_api::DescribeBlob(b.name, 0, b.data.type().dims(), b.data.data_as<float>(),
                                     b.diff.data_as<float>(), *info, where);
  });
}

const char* kiln_net_input(const kiln_net* net, int index) {
  return net ? NameAt(net, index, net->net->inputs()) : nullptr;
}

const char* kiln_net_fed_input(const kiln_net* net, int index) {
  return net ? NameAt(net, index, net->net->fed_inputs()) : nullptr;
}

const char* kiln_net_output(const kiln_net* net, int index) {
  return net ? NameAt(net, index, net->net->outputs()) : nullptr;
}

int kiln_net_num_layers(const kiln_net* net) {
  return net ? static_cast<int>(net->net->layers().size()) : 0;
}

kiln_status kiln_net_layer(const kiln_net* net, int index, const char** name, const char** type,
                           int* num_params) {
  return Guarded("kiln_net_layer", [&]() -> absl::Status {
    const char* where = "kiln_net_layer";
    KILN_RETURN_IF_ERROR(NotNull(net, where, "net"));
    KILN_RETURN_IF_ERROR(NotNull(name, where, "name"));
    KILN_RETURN_IF_ERROR(InRange(index, net->net->layers().size(), where, "layer"));
    const kiln::BlobNet::Layer& layer = net->net->layers()[index];
    *name = layer.name.c_str();
    if (type != nullptr) *type = layer.type.c_str();
    if (num_params != nullptr) *num_params = static_cast<int>(layer.params.size());
    return absl::OkStatus();
  });
}

kiln_status kiln_net_param(kiln_net* net, int layer, int index, kiln_blob_info* info) {
  return Guarded("kiln_net_param", [&]() -> absl::Status {
    const char* where = "kiln_net_param";
    KILN_RETURN_IF_ERROR(NotNull(net, where, "net"));
    KILN_RETURN_IF_ERROR(NotNull(info, where, "info"));
    KILN_RETURN_IF_ERROR(InRange(layer, net->net->layers().size(), where, "layer"));
    const kiln::BlobNet::Layer& l = net->net->layers()[layer];
    if (index < 0 || static_cast<size_t>(index) >= l.params.size()) {
      return absl::OutOfRangeError(absl::StrCat(where, ": layer '", l.name, "' blob ", index,
                                                " (it has ", l.params.size(), ")"));
    }
    kiln::BlobNet::Param& p = net->net->params()[l.params[index]];
    return kiln::c_api::DescribeBlob(p.layer, p.index, p.shape, p.data.data_as<float>(),
                                     p.diff.data_as<float>(), *info, where);
  });
}

kiln_status kiln_net_forward(kiln_net* net) {
  return Guarded("kiln_net_forward", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(net, "kiln_net_forward", "net"));
    return net->net->Forward();
  });
}

kiln_status kiln_net_backward(kiln_net* net) {
  return Guarded("kiln_net_backward", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(net, "kiln_net_backward", "net"));
    return net->net->Backward();
  });
}

kiln_status kiln_net_save(const kiln_net* net, const char* path, int overwrite) {
  return Guarded("kiln_net_save", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(net, "kiln_net_save", "net"));
    KILN_RETURN_IF_ERROR(NotNull(path, "kiln_net_save", "path"));
    return net->net->Save(path, overwrite != 0);
  });
}

kiln_status kiln_net_copy_from(kiln_net* net, const char* caffemodel) {
  return Guarded("kiln_net_copy_from", [&]() -> absl::Status {
    KILN_RETURN_IF_ERROR(NotNull(net, "kiln_net_copy_from", "net"));
    KILN_RETURN_IF_ERROR(NotNull(caffemodel, "kiln_net_copy_from", "caffemodel"));
    return net->net->CopyFrom(caffemodel);
  });
}

}  // extern "C"
