// Caffe's DataTransformer for Datum records: turns one record into floats in CHW order for the
// data top of a Data layer, applying TransformationParameter the way Caffe does.
#ifndef KILN_FRONTENDS_CAFFE_DATA_TRANSFORM_H_
#define KILN_FRONTENDS_CAFFE_DATA_TRANSFORM_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/image_decoder.h"
#include "frontends/caffe/caffe.pb.h"

namespace kiln {

// Applies a TransformationParameter to Datum records. For each output element, in Caffe's order:
// pick the source pixel (crop offset, mirrored column), subtract the mean (mean_file at the source
// pixel's position, or the channel's mean_value), then multiply by scale.
//   * crop_size: a random window in TRAIN, the centred window in TEST.
//   * mirror: a random horizontal flip in TRAIN only. Caffe also flips at random in TEST when
//     mirror is set; Kiln does not, so that test scores are deterministic and repeatable.
//   * encoded records (data holds a JPEG or PNG file, as convert_imageset --encoded writes them)
//     are decoded first (data/image_datum.h): in the file's own channels, or forced to color or
//     gray by force_color / force_gray, as Caffe's transformer does.
// Random choices come from one std::mt19937 seeded at creation, drawn in a fixed order (mirror,
// then the crop's row, then its column), so the same seed and the same records give the same
// outputs on every run and platform.
class DatumTransformer {
 public:
  // Checks the parameters and loads mean_file (a BlobProto .binaryproto; a relative path is
  // resolved against `base_dir`). InvalidArgument for mean_file together with mean_value, a
  // non-finite scale, force_color together with force_gray, or a mean file that is not one
  // 1xCxHxW blob.
  static absl::StatusOr<DatumTransformer> Create(const caffe::TransformationParameter& param,
                                                 caffe::Phase phase, const std::string& base_dir,
                                                 uint64_t seed);

  // The (C, H, W) a record becomes: its own size, or crop_size x crop_size. An encoded record is
  // decoded to learn its size (callers that also transform it decode once, DecodeIfEncoded, and
  // pass the result). InvalidArgument for
  // a record with a non-positive size, a crop larger than the record, or (checked here so that the
  // error comes before the first batch) a mean whose size does not fit the record.
  absl::StatusOr<std::vector<int64_t>> OutputDims(const caffe::Datum& datum) const;

  // Writes the transformed record to out[0 .. C*H'*W'). Takes the pixels from `data` (bytes,
  // as unsigned) when it is non-empty, else from `float_data`; InvalidArgument when their count is
  // not C*H*W or when OutputDims fails.
  absl::Status Transform(const caffe::Datum& datum, float* out);

  // `datum` itself when it is raw; for an encoded record, its decoded form, written to `scratch`.
  // InvalidArgument from the decoder (a corrupt or unsupported image).
  absl::StatusOr<const caffe::Datum*> DecodeIfEncoded(const caffe::Datum& datum,
                                                      caffe::Datum* scratch) const;

  const caffe::TransformationParameter& param() const { return param_; }

  // Starts the random choices (mirror, crop offsets) from `seed`. The batch source seeds each
  // record from its position in the stream, so a record's transform does not depend on the
  // records before it: a resumed run (DatumBatchSource::Seek) draws what an uninterrupted one
  // would have.
  void Reseed(uint64_t seed);

 private:
  DatumTransformer() = default;
  // A number in [0, n): the generator's output modulo n (the small bias is irrelevant for crop
  // offsets, and unlike std::uniform_int_distribution it is the same in every standard library).
  int Rand(int n);

  caffe::TransformationParameter param_;
  caffe::Phase phase_ = caffe::TEST;
  ColorMode encoded_mode_ = ColorMode::kNative;  // how encoded records are decoded
  std::vector<float> mean_;                      // mean_file's values, C*H*W of them
  std::vector<int64_t> mean_dims_;               // (C, H, W) of mean_file
  std::mt19937 rng_;
};

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_DATA_TRANSFORM_H_
