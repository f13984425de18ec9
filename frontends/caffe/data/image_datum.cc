#include "frontends/caffe/data/image_datum.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "data/image_resize.h"

namespace kiln {

absl::StatusOr<Image> LoadImage(const std::string& path, bool is_color, int new_height,
                                int new_width) {
  if (new_height < 0 || new_width < 0 || (new_height > 0) != (new_width > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": new_height ", new_height, " and new_width ", new_width,
                     " must both be positive (resize) or both 0 (keep the size)"));
  }
  KILN_ASSIGN_OR_RETURN(Image image,
                        ReadImageFile(path, is_color ? ColorMode::kColor : ColorMode::kGray));
  if (new_height == 0 || (image.height == new_height && image.width == new_width)) return image;
  absl::StatusOr<Image> resized = ResizeBilinear(image, new_height, new_width);
  if (!resized.ok()) return Annotate(resized.status(), path);
  return resized;
}

caffe::Datum ImageToDatum(const Image& image, int label) {
  caffe::Datum datum;
  datum.set_channels(image.channels);
  datum.set_height(image.height);
  datum.set_width(image.width);
  datum.set_label(label);
  const size_t plane = static_cast<size_t>(image.height) * image.width;
  std::string* data = datum.mutable_data();
  data->resize(plane * image.channels);
  for (int c = 0; c < image.channels; ++c) {
    char* dst = &(*data)[c * plane];
    const uint8_t* src = image.pixels.data() + c;
    for (size_t i = 0; i < plane; ++i) dst[i] = static_cast<char>(src[i * image.channels]);
  }
  return datum;
}

absl::Status DecodeDatum(const caffe::Datum& encoded, ColorMode mode, absl::string_view where,
                         caffe::Datum* raw) {
  KILN_ASSIGN_OR_RETURN(const Image image, DecodeImage(encoded.data(), mode, where));
  *raw = ImageToDatum(image, encoded.label());
  return absl::OkStatus();
}

absl::StatusOr<ColorMode> EncodedColorMode(const caffe::TransformationParameter& param) {
  if (param.force_color() && param.force_gray()) {
    return absl::InvalidArgumentError(
        "transform_param: force_color and force_gray cannot both be set");
  }
  if (param.force_color()) return ColorMode::kColor;
  if (param.force_gray()) return ColorMode::kGray;
  return ColorMode::kNative;
}

}  // namespace kiln
