// PNG decoding through libpng 1.6 (DecodePng of data/image_decoder.h).
//
// libpng's default error handler prints and longjmps to the jmp_buf the caller set, aborting
// when there is none. Ours records the message and longjmps back to the setjmp in RunDecoder,
// which, as in jpeg_decoder.cc, owns no objects with destructors and changes only state that
// lives in its caller's frame.
#include <png.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "data/image_decoder.h"

namespace kiln {
namespace {

struct PngState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const unsigned char* data = nullptr;
  size_t size = 0;
  size_t position = 0;
  char message[256] = {0};
  bool too_large = false;
  int64_t claimed_bytes = 0;
  bool to_gray = false;  // decoded as BGR, converted to gray afterwards
};

[[noreturn]] void OnError(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message ? message : "unknown");
  png_longjmp(png, 1);
}

// Warnings (a bad CRC in an ancillary chunk, an unknown sRGB profile) leave the pixels intact.
void OnWarning(png_structp, png_const_charp) {}

// libpng's input: the bytes in memory. Running out is the truncated-file error.
void ReadBytes(png_structp png, png_bytep out, png_size_t count) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (count > state->size - state->position) png_error(png, "truncated (the file ends early)");
  std::memcpy(out, state->data + state->position, count);
  state->position += count;
}

bool RunDecoder(ColorMode mode, PngState* state, Image* image, std::vector<png_bytep>* rows) {
  png_structp png = state->png;
  png_infop info = state->info;
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, state, ReadBytes);
  png_read_info(png, info);
  const png_uint_32 width = png_get_image_width(png, info);
  const png_uint_32 height = png_get_image_height(png, info);
  const int color_type = png_get_color_type(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  const bool gray_file = (color_type & PNG_COLOR_MASK_COLOR) == 0;
  const bool gray_out = mode == ColorMode::kGray || (mode == ColorMode::kNative && gray_file);

  // Every file becomes 8-bit gray or 8-bit BGR without alpha.
  if (bit_depth == 16) png_set_strip_16(png);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (gray_file && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  // Also drops the alpha that palette expansion makes from a tRNS chunk.
  png_set_strip_alpha(png);
  if (gray_file && !gray_out) png_set_gray_to_rgb(png);
  if (!gray_file) png_set_bgr(png);
  state->to_gray = gray_out && !gray_file;
  png_set_interlace_handling(png);
  png_read_update_info(png, info);

  const int channels = png_get_channels(png, info);
  if (channels != (gray_file && gray_out ? 1 : 3) || png_get_bit_depth(png, info) != 8) {
    png_error(png, "unsupported color type after conversion");
  }
  state->claimed_bytes = int64_t{width} * int64_t{height} * channels;
  if (state->claimed_bytes > kMaxImageBytes) {
    state->too_large = true;
    return false;
  }
  // Deflate expands at most 1032-fold, and the conversions above at most 24-fold (1-bit palette
  // indices to BGR), so a header claiming more pixels than the file can hold is corrupt: refused
  // before the buffer is allocated.
  if (state->claimed_bytes > 24 * (1032 * static_cast<int64_t>(state->size) + (1 << 16))) {
    png_error(png, "the header claims more pixels than the file can hold");
  }
  image->width = static_cast<int>(width);
  image->height = static_cast<int>(height);
  image->channels = channels;
  const size_t stride = png_get_rowbytes(png, info);
  if (stride != static_cast<size_t>(width) * channels) png_error(png, "unexpected row size");
  image->pixels.resize(stride * height);
  rows->resize(height);
  for (png_uint_32 y = 0; y < height; ++y) (*rows)[y] = image->pixels.data() + stride * y;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  return true;
}

}  // namespace

absl::StatusOr<Image> DecodePng(absl::string_view bytes, ColorMode mode, absl::string_view name) {
  if (!LooksLikePng(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not a PNG file (no PNG signature)"));
  }
  PngState state;
  state.data = reinterpret_cast<const unsigned char*>(bytes.data());
  state.size = bytes.size();
  state.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, OnError, OnWarning);
  if (state.png == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(name, ": libpng could not start"));
  }
  state.info = png_create_info_struct(state.png);
  if (state.info == nullptr) {
    png_destroy_read_struct(&state.png, nullptr, nullptr);
    return absl::ResourceExhaustedError(absl::StrCat(name, ": libpng could not start"));
  }
  Image image;
  std::vector<png_bytep> rows;
  const bool ok = RunDecoder(mode, &state, &image, &rows);
  png_destroy_read_struct(&state.png, &state.info, nullptr);
  if (state.too_large) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": PNG of ", state.claimed_bytes,
                                                   " decoded bytes is larger than the limit of ",
                                                   kMaxImageBytes));
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": corrupt or unsupported PNG: ", state.message));
  }
  if (state.to_gray) {
    const size_t pixels = static_cast<size_t>(image.height) * image.width;
    for (size_t i = 0; i < pixels; ++i) {
      const uint8_t* bgr = &image.pixels[3 * i];
      image.pixels[i] = GrayFromBgr(bgr[0], bgr[1], bgr[2]);  // i <= 3i: in place is safe
    }
    image.pixels.resize(pixels);
    image.channels = 1;
  }
  return image;
}

}  // namespace kiln
