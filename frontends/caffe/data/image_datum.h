// Between images and Caffe's Datum records: what Caffe's io.cpp does with ReadImageToCVMat,
// CVMatToDatum and DecodeDatumToCVMat, over Kiln's decoder and resize.
#ifndef KILN_FRONTENDS_CAFFE_DATA_IMAGE_DATUM_H_
#define KILN_FRONTENDS_CAFFE_DATA_IMAGE_DATUM_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/image_decoder.h"
#include "frontends/caffe/caffe.pb.h"

namespace kiln {

// Reads the image file at `path` in color (3 channels, BGR) or grayscale and, when both
// new_height and new_width are positive, resizes it to new_height x new_width (ResizeBilinear);
// when both are 0 the image keeps its size. InvalidArgument when only one of them is positive
// (Caffe's ImageData layer refuses that too) or either is negative. Errors name the path.
absl::StatusOr<Image> LoadImage(const std::string& path, bool is_color, int new_height,
                                int new_width);

// A raw (not encoded) Datum of `image`: channels, height, width, and `data` holding the pixels
// in CHW order (channel 0 is blue for a color image), as Caffe's CVMatToDatum lays them out.
caffe::Datum ImageToDatum(const Image& image, int label);

// Decodes an encoded Datum (data holds a JPEG or PNG file) into a raw one with the same label.
// `mode` as for DecodeImage; `where` (the record's key) starts every error.
absl::Status DecodeDatum(const caffe::Datum& encoded, ColorMode mode, absl::string_view where,
                         caffe::Datum* raw);

// How Caffe's DataTransformer decodes encoded records: force_color -> kColor, force_gray ->
// kGray, neither -> kNative (the file's own channel count). InvalidArgument when both are set.
absl::StatusOr<ColorMode> EncodedColorMode(const caffe::TransformationParameter& param);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_DATA_IMAGE_DATUM_H_
