#include "frontends/caffe/data/transform.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/data/image_datum.h"

namespace kiln {
namespace {

std::string Resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return absl::StrCat(base_dir, "/", path);
}

// The mean blob's (C, H, W): a 4-d shape or legacy dims with num 1, or a 3-d shape.
absl::StatusOr<std::vector<int64_t>> MeanDims(const caffe::BlobProto& blob,
                                              const std::string& where) {
  std::vector<int64_t> dims;
  if (blob.has_shape()) {
    dims.assign(blob.shape().dim().begin(), blob.shape().dim().end());
  } else {
    dims = {blob.num(), blob.channels(), blob.height(), blob.width()};
  }
  if (dims.size() == 4 && dims[0] == 1) dims.erase(dims.begin());
  if (dims.size() != 3 || dims[0] < 1 || dims[1] < 1 || dims[2] < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the mean must be one 1xCxHxW blob, this one is (",
                     absl::StrJoin(dims, ","), ")"));
  }
  return dims;
}

}  // namespace

absl::StatusOr<DatumTransformer> DatumTransformer::Create(
    const caffe::TransformationParameter& param, caffe::Phase phase, const std::string& base_dir,
    uint64_t seed) {
  DatumTransformer t;
  t.param_ = param;
  t.phase_ = phase;
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  t.rng_.seed(seq);
  if (!std::isfinite(param.scale())) {
    return absl::InvalidArgumentError(
        absl::StrCat("transform_param: scale ", param.scale(), " is not finite"));
  }
  KILN_ASSIGN_OR_RETURN(t.encoded_mode_, EncodedColorMode(param));
  if (param.has_mean_file() && param.mean_value_size() > 0) {
    return absl::InvalidArgumentError(
        "transform_param: mean_file and mean_value cannot both be given");
  }
  if (param.has_mean_file()) {
    const std::string path = Resolve(param.mean_file(), base_dir);
    const std::string where = absl::StrCat("transform_param: mean_file '", path, "'");
    absl::StatusOr<std::string> bytes = ReadFileBytes(path);
    if (!bytes.ok()) return Annotate(bytes.status(), where);
    caffe::BlobProto blob;
    KILN_RETURN_IF_ERROR(Annotate(ParseBinaryMessage(*bytes, path, blob), where));
    KILN_ASSIGN_OR_RETURN(t.mean_dims_, MeanDims(blob, where));
    const int64_t count = t.mean_dims_[0] * t.mean_dims_[1] * t.mean_dims_[2];
    if (blob.double_data_size() > 0) {
      t.mean_.assign(blob.double_data().begin(), blob.double_data().end());
    } else {
      t.mean_.assign(blob.data().begin(), blob.data().end());
    }
    if (static_cast<int64_t>(t.mean_.size()) != count) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": shape (",
                                                     absl::StrJoin(t.mean_dims_, ","), ") needs ",
                                                     count, " values, it has ", t.mean_.size()));
    }
  }
  return t;
}

void DatumTransformer::Reseed(uint64_t seed) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  rng_.seed(seq);
}

int DatumTransformer::Rand(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }

absl::StatusOr<const caffe::Datum*> DatumTransformer::DecodeIfEncoded(const caffe::Datum& datum,
                                                                      caffe::Datum* scratch) const {
  if (!datum.encoded()) return &datum;
  KILN_RETURN_IF_ERROR(DecodeDatum(datum, encoded_mode_, "encoded datum", scratch));
  return scratch;
}

absl::StatusOr<std::vector<int64_t>> DatumTransformer::OutputDims(const caffe::Datum& datum) const {
  if (datum.encoded()) {
    caffe::Datum decoded;
    KILN_ASSIGN_OR_RETURN(const caffe::Datum* raw, DecodeIfEncoded(datum, &decoded));
    return OutputDims(*raw);
  }
  const int64_t c = datum.channels(), h = datum.height(), w = datum.width();
  if (c < 1 || h < 1 || w < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("datum size ", c, "x", h, "x", w, " is not positive"));
  }
  if (c * h > (int64_t{1} << 31) / w) {  // more than a protobuf message can hold
    return absl::InvalidArgumentError(
        absl::StrCat("datum size ", c, "x", h, "x", w, " is too large"));
  }
  const int64_t crop = param_.crop_size();
  if (crop > 0 && (crop > h || crop > w)) {
    return absl::InvalidArgumentError(
        absl::StrCat("crop_size ", crop, " is larger than the datum (", h, "x", w, ")"));
  }
  if (!mean_.empty() && (mean_dims_[0] != c || mean_dims_[1] != h || mean_dims_[2] != w)) {
    return absl::InvalidArgumentError(absl::StrCat("mean_file is ", absl::StrJoin(mean_dims_, "x"),
                                                   " but the datum is ", c, "x", h, "x", w));
  }
  const int means = param_.mean_value_size();
  if (means > 1 && means != c) {
    return absl::InvalidArgumentError(absl::StrCat(means, " mean_values for a datum of ", c,
                                                   " channels (give one, or one per channel)"));
  }
  return std::vector<int64_t>{c, crop > 0 ? crop : h, crop > 0 ? crop : w};
}

absl::Status DatumTransformer::Transform(const caffe::Datum& encoded_or_raw, float* out) {
  caffe::Datum decoded;
  KILN_ASSIGN_OR_RETURN(const caffe::Datum* raw, DecodeIfEncoded(encoded_or_raw, &decoded));
  const caffe::Datum& datum = *raw;
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> dims, OutputDims(datum));
  const int64_t channels = datum.channels(), height = datum.height(), width = datum.width();
  const int64_t count = channels * height * width;
  const bool bytes = !datum.data().empty();
  const int64_t have = bytes ? static_cast<int64_t>(datum.data().size()) : datum.float_data_size();
  if (have != count) {
    return absl::InvalidArgumentError(absl::StrCat("datum ", channels, "x", height, "x", width,
                                                   " needs ", count, " values, its ",
                                                   bytes ? "data" : "float_data", " has ", have));
  }
  const int64_t out_h = dims[1], out_w = dims[2];
  // The draws, in their fixed order: mirror, then the crop's row and column.
  const bool mirror = param_.mirror() && phase_ == caffe::TRAIN && Rand(2) == 1;
  int64_t h_off = 0, w_off = 0;
  if (param_.crop_size() > 0) {
    if (phase_ == caffe::TRAIN) {
      h_off = Rand(static_cast<int>(height - out_h + 1));
      w_off = Rand(static_cast<int>(width - out_w + 1));
    } else {
      h_off = (height - out_h) / 2;
      w_off = (width - out_w) / 2;
    }
  }
  const float scale = param_.scale();
  const auto* u8 = reinterpret_cast<const uint8_t*>(datum.data().data());
  const float* f32 = datum.float_data().data();
  for (int64_t c = 0; c < channels; ++c) {
    const float channel_mean = param_.mean_value_size() == 0   ? 0.0f
                               : param_.mean_value_size() == 1 ? param_.mean_value(0)
                                                               : param_.mean_value(c);
    for (int64_t y = 0; y < out_h; ++y) {
      const int64_t src_row = (c * height + h_off + y) * width + w_off;
      float* dst_row = out + (c * out_h + y) * out_w;
      for (int64_t x = 0; x < out_w; ++x) {
        const int64_t src = src_row + x;
        const float pixel = bytes ? static_cast<float>(u8[src]) : f32[src];
        const float mean = mean_.empty() ? channel_mean : mean_[src];
        dst_row[mirror ? out_w - 1 - x : x] = (pixel - mean) * scale;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
