// Decodes JPEG (libjpeg-turbo) and PNG (libpng) images into 8-bit pixels, as Caffe reads images
// through OpenCV for its ImageData layer, convert_imageset and encoded Datum records.
#ifndef KILN_DATA_IMAGE_DECODER_H_
#define KILN_DATA_IMAGE_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

// An 8-bit image in HWC order: pixels[(y * width + x) * channels + c]. Color images have 3
// channels in BGR order, the order OpenCV (and so every Caffe database of images) uses;
// grayscale images have 1.
struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
};

// What a decoder turns the file's colors into.
enum class ColorMode {
  kColor,   // 3 channels, BGR; grayscale files are replicated (OpenCV's IMREAD_COLOR)
  kGray,    // 1 channel; color files are converted (OpenCV's IMREAD_GRAYSCALE)
  kNative,  // 1 channel for grayscale files, BGR otherwise (OpenCV's IMREAD_ANYCOLOR)
};

// The largest image the decoders accept, in bytes of decoded pixels: what one Datum can hold
// (protobuf messages stop at 2 GiB). A corrupt header claiming more is refused before any
// allocation.
inline constexpr int64_t kMaxImageBytes = (int64_t{1} << 31) - 1;

// Decodes a JPEG or PNG file held in `bytes`, recognized by its signature (not by the file's
// name). `name` (a path, a record key) only labels errors. Every failure is an InvalidArgument
// whose message starts with `name`: an unknown format, a corrupt or truncated file (a JPEG that
// ends early is an error, although libjpeg would pad it with gray), an image too large.
//
// Conversions follow OpenCV's, so a network sees the pixels Caffe gave it:
//   * JPEG: color from libjpeg's YCbCr conversion; kGray asks libjpeg for grayscale (the luma
//     channel of a YCbCr file); CMYK/YCCK files (Adobe's inverted CMYK) become BGR by
//     R = C*K/255 and so on.
//   * PNG: palettes and low bit depths are expanded, 16-bit samples keep their high byte, alpha
//     is dropped (not composited); color to gray uses the BT.601 weights 0.299 R + 0.587 G +
//     0.114 B, rounded.
absl::StatusOr<Image> DecodeImage(absl::string_view bytes, ColorMode mode, absl::string_view name);

// The two decoders on their own (DecodeImage dispatches to them); same contract.
absl::StatusOr<Image> DecodeJpeg(absl::string_view bytes, ColorMode mode, absl::string_view name);
absl::StatusOr<Image> DecodePng(absl::string_view bytes, ColorMode mode, absl::string_view name);

// Whether `bytes` starts with the JPEG or PNG signature.
bool LooksLikeJpeg(absl::string_view bytes);
bool LooksLikePng(absl::string_view bytes);

// Reads and decodes the image file at `path`; errors name the path (NotFound when it does not
// exist).
absl::StatusOr<Image> ReadImageFile(const std::string& path, ColorMode mode);

// BT.601 luma of one BGR pixel, rounded to nearest in 14-bit fixed point (the weights 0.299,
// 0.587 and 0.114 times 2^14), as OpenCV's BGR-to-gray conversion computes it.
inline uint8_t GrayFromBgr(uint8_t b, uint8_t g, uint8_t r) {
  return static_cast<uint8_t>((1868 * b + 9617 * g + 4899 * r + (1 << 13)) >> 14);
}

}  // namespace kiln

#endif  // KILN_DATA_IMAGE_DECODER_H_
