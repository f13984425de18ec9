#include "tests/util/image_files.h"

#include <png.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>
// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

namespace kiln {
namespace {

void AppendPngBytes(png_structp png, png_bytep data, png_size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<char*>(data), length);
}

void FlushNothing(png_structp) {}

// Encodes rows of `row_bytes` bytes with the given IHDR; `before_rows` may add chunks (PLTE,
// tRNS) after the header. The encoder's own failures (never expected in tests) abort.
template <typename Setup>
std::string WritePng(int height, int width, int bit_depth, int color_type, size_t row_bytes,
                     const uint8_t* pixels, Setup before_rows) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (png == nullptr || info == nullptr || setjmp(png_jmpbuf(png))) std::abort();
  png_set_write_fn(png, &out, AppendPngBytes, FlushNothing);
  png_set_IHDR(png, info, width, height, bit_depth, color_type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  before_rows(png, info);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y) {
    png_write_row(png, const_cast<png_bytep>(pixels + row_bytes * y));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

}  // namespace

Image SmoothImage(int height, int width, int channels, int seed) {
  Image image{height, width, channels, {}};
  image.pixels.resize(static_cast<size_t>(height) * width * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        const int v = 30 + y + x + 40 * c + 5 * seed;
        image.pixels[(static_cast<size_t>(y) * width + x) * channels + c] =
            static_cast<uint8_t>(std::min(v, 250));
      }
    }
  }
  return image;
}

Image SolidImage(int height, int width, uint8_t b, uint8_t g, uint8_t r) {
  Image image{height, width, 3, {}};
  for (int i = 0; i < height * width; ++i) image.pixels.insert(image.pixels.end(), {b, g, r});
  return image;
}

Image SolidGray(int height, int width, uint8_t value) {
  return Image{height, width, 1, std::vector<uint8_t>(static_cast<size_t>(height) * width, value)};
}

std::string EncodePng(const Image& image) {
  const int color_type = image.channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB;
  return WritePng(image.height, image.width, 8, color_type,
                  static_cast<size_t>(image.width) * image.channels, image.pixels.data(),
                  [&image](png_structp png, png_infop) {
                    if (image.channels == 3) png_set_bgr(png);
                  });
}

std::string EncodePng16Gray(int height, int width, const std::vector<uint16_t>& values) {
  std::vector<uint8_t> big_endian;
  for (uint16_t v : values) big_endian.insert(big_endian.end(), {uint8_t(v >> 8), uint8_t(v)});
  return WritePng(height, width, 16, PNG_COLOR_TYPE_GRAY, static_cast<size_t>(width) * 2,
                  big_endian.data(), [](png_structp, png_infop) {});
}

std::string EncodePalettePng(int height, int width, const std::vector<uint8_t>& palette_rgb,
                             const std::vector<uint8_t>& alpha, const std::vector<uint8_t>& index) {
  std::vector<png_color> palette;
  for (size_t i = 0; i + 2 < palette_rgb.size(); i += 3) {
    palette.push_back({palette_rgb[i], palette_rgb[i + 1], palette_rgb[i + 2]});
  }
  return WritePng(height, width, 8, PNG_COLOR_TYPE_PALETTE, static_cast<size_t>(width),
                  index.data(), [&](png_structp png, png_infop info) {
                    png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
                    png_set_tRNS(png, info, alpha.data(), static_cast<int>(alpha.size()), nullptr);
                  });
}

std::string EncodeRgbaPng(const Image& bgr, const std::vector<uint8_t>& alpha) {
  std::vector<uint8_t> rgba;
  for (size_t i = 0; i < alpha.size(); ++i) {
    rgba.insert(rgba.end(),
                {bgr.pixels[3 * i + 2], bgr.pixels[3 * i + 1], bgr.pixels[3 * i], alpha[i]});
  }
  return WritePng(bgr.height, bgr.width, 8, PNG_COLOR_TYPE_RGB_ALPHA,
                  static_cast<size_t>(bgr.width) * 4, rgba.data(), [](png_structp, png_infop) {});
}

std::string EncodeJpeg(const Image& image, int quality) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr error;
  cinfo.err = jpeg_std_error(&error);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = image.width;
  cinfo.image_height = image.height;
  cinfo.input_components = image.channels;
  cinfo.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_EXT_BGR;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = static_cast<size_t>(image.width) * image.channels;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(image.pixels.data() + stride * cinfo.next_scanline);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  return out;
}

bool WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

int MaxPixelDiff(const Image& a, const Image& b) {
  if (a.height != b.height || a.width != b.width || a.channels != b.channels ||
      a.pixels.size() != b.pixels.size()) {
    return -1;
  }
  int worst = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    worst = std::max(worst, std::abs(int{a.pixels[i]} - int{b.pixels[i]}));
  }
  return worst;
}

}  // namespace kiln
