#include "frontends/caffe/blob_convert.h"

#include "absl/strings/str_cat.h"
#include "ops/shape_util.h"

namespace kiln {

namespace {

bool IsLegacy(const caffe::BlobProto& blob) {
  return !blob.has_shape() &&
         (blob.has_num() || blob.has_channels() || blob.has_height() || blob.has_width());
}

}  // namespace

std::vector<int64_t> BlobShapeOf(const caffe::BlobProto& blob) {
  if (IsLegacy(blob)) return {blob.num(), blob.channels(), blob.height(), blob.width()};
  return std::vector<int64_t>(blob.shape().dim().begin(), blob.shape().dim().end());
}

absl::Status BlobToTensor(const caffe::BlobProto& blob, const std::vector<int64_t>& expected,
                          absl::string_view where, HostTensor& tensor) {
  const std::vector<int64_t> declared = BlobShapeOf(blob);
  bool matches = declared == expected;
  if (IsLegacy(blob)) {
    if (expected.size() <= 4) {
      std::vector<int64_t> padded(4 - expected.size(), 1);
      padded.insert(padded.end(), expected.begin(), expected.end());
      matches = padded == declared;
    } else {
      matches = false;
    }
  }
  if (!matches) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the weights have shape ", DimsToString(declared),
                     IsLegacy(blob) ? " (legacy num/channels/height/width)" : "",
                     ", the net needs ", DimsToString(expected)));
  }
  int64_t count = 1;
  for (int64_t d : expected) count *= d;
  const bool doubles = blob.double_data_size() > 0;
  const int64_t stored = doubles ? blob.double_data_size() : blob.data_size();
  if (stored != count) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the weights hold ", stored,
                                                   " values for shape ", DimsToString(expected),
                                                   " (", count, " elements)"));
  }
  float* out = tensor.data_as<float>();
  for (int64_t i = 0; i < count; ++i) {
    out[i] = doubles ? static_cast<float>(blob.double_data(static_cast<int>(i)))
                     : blob.data(static_cast<int>(i));
  }
  return absl::OkStatus();
}

void TensorToBlob(const HostTensor& tensor, const std::vector<int64_t>& shape,
                  caffe::BlobProto& blob) {
  blob.Clear();
  for (int64_t d : shape) blob.mutable_shape()->add_dim(d);
  const int64_t count = tensor.type().num_elements();
  blob.mutable_data()->Resize(static_cast<int>(count), 0.0f);
  float* out = blob.mutable_data()->mutable_data();
  for (int64_t i = 0; i < count; ++i) out[i] = tensor.GetFloat(i);
}

}  // namespace kiln
