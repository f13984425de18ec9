#include "data/image_decoder.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/file_io.h"

namespace kiln {

bool LooksLikeJpeg(absl::string_view bytes) {
  return bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == 0xFF &&
         static_cast<uint8_t>(bytes[1]) == 0xD8 && static_cast<uint8_t>(bytes[2]) == 0xFF;
}

bool LooksLikePng(absl::string_view bytes) {
  static constexpr char kSignature[] = "\x89PNG\r\n\x1a\n";
  return bytes.size() >= 8 && bytes.substr(0, 8) == absl::string_view(kSignature, 8);
}

absl::StatusOr<Image> DecodeImage(absl::string_view bytes, ColorMode mode, absl::string_view name) {
  if (LooksLikeJpeg(bytes)) return DecodeJpeg(bytes, mode, name);
  if (LooksLikePng(bytes)) return DecodePng(bytes, mode, name);
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": empty file"));
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": not a JPEG or PNG image (Kiln decodes only these two formats)"));
}

absl::StatusOr<Image> ReadImageFile(const std::string& path, ColorMode mode) {
  // ReadFileBytes's errors already start with the path.
  KILN_ASSIGN_OR_RETURN(const std::string bytes, ReadFileBytes(path));
  return DecodeImage(bytes, mode, path);
}

}  // namespace kiln
