// Test helpers that make image files: JPEG and PNG encoders over libjpeg/libpng (the library
// itself only decodes), synthetic pictures, and file writing.
#ifndef KILN_TESTS_UTIL_IMAGE_FILES_H_
#define KILN_TESTS_UTIL_IMAGE_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "data/image_decoder.h"

namespace kiln {

// A height x width image with `channels` (1 or 3) channels whose pixel values grow linearly with
// x + y (so JPEG keeps them close, up to 250) and differ per channel and per `seed`.
Image SmoothImage(int height, int width, int channels, int seed = 0);

// An image whose every pixel is `value` in each channel (BGR order for 3 channels).
Image SolidImage(int height, int width, uint8_t b, uint8_t g, uint8_t r);
Image SolidGray(int height, int width, uint8_t value);

// PNG bytes of `image`: 8-bit gray for 1 channel, 8-bit RGB (from BGR) for 3.
std::string EncodePng(const Image& image);
// PNG bytes of a 16-bit gray image: values[y * width + x].
std::string EncodePng16Gray(int height, int width, const std::vector<uint16_t>& values);
// PNG bytes of a palette image (8-bit indices) with an alpha (tRNS) entry per palette color;
// palette_rgb holds R, G, B per color.
std::string EncodePalettePng(int height, int width, const std::vector<uint8_t>& palette_rgb,
                             const std::vector<uint8_t>& alpha, const std::vector<uint8_t>& index);
// PNG bytes of an 8-bit RGBA image given as BGR plus an alpha plane.
std::string EncodeRgbaPng(const Image& bgr, const std::vector<uint8_t>& alpha);

// Baseline JPEG bytes of `image` (gray for 1 channel, YCbCr from BGR for 3) at `quality`.
std::string EncodeJpeg(const Image& image, int quality = 95);

// Writes `bytes` to `path`; false on failure.
bool WriteBytes(const std::string& path, const std::string& bytes);

// The largest absolute difference between two images' pixels (-1 when their sizes differ).
int MaxPixelDiff(const Image& a, const Image& b);

}  // namespace kiln

#endif  // KILN_TESTS_UTIL_IMAGE_FILES_H_
