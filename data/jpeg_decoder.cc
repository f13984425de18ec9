// JPEG decoding through libjpeg-turbo (DecodeJpeg of data/image_decoder.h).
//
// libjpeg reports fatal errors through error_exit, whose default prints and calls exit(). Ours
// formats the message and longjmps back to the one setjmp below. To keep that jump well defined
// in C++, the function holding the setjmp (RunDecoder) owns no objects with destructors, and
// everything it changes that is read after the jump (the libjpeg state, the output image) lives
// in its caller's frame and is passed by pointer.
#include <csetjmp>
#include <cstddef>
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

#include "absl/strings/str_cat.h"
#include "data/image_decoder.h"

namespace kiln {
namespace {

struct JpegError {
  jpeg_error_mgr manager;  // first, so libjpeg's pointer to it is a pointer to the whole struct
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {0};
};

JpegError* ErrorOf(j_common_ptr cinfo) { return reinterpret_cast<JpegError*>(cinfo->err); }

[[noreturn]] void OnFatalError(j_common_ptr cinfo) {
  JpegError* error = ErrorOf(cinfo);
  (*cinfo->err->format_message)(cinfo, error->message);
  std::longjmp(error->jump, 1);
}

// Warnings (level -1) that mean pixels were lost: libjpeg recovers from them by padding the
// image with gray, which would train a network on made-up data, so they are errors here. Other
// warnings (extraneous bytes between markers, for one) leave the pixels intact and pass.
bool LosesData(int code) {
  return code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_HUFF_BAD_CODE ||
         code == JWRN_MUST_RESYNC;
}

void OnMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  if (LosesData(cinfo->err->msg_code)) OnFatalError(cinfo);
  ++cinfo->err->num_warnings;
}

struct JpegState {
  jpeg_decompress_struct cinfo;
  JpegError error;
  bool created = false;
  bool cmyk = false;       // decoded as CMYK into `scratch`, converted afterwards
  bool too_large = false;  // refused before allocating
  int64_t claimed_bytes = 0;
};

// The libjpeg calls, under the setjmp. Returns false when libjpeg failed (the reason is in
// state->error.message) or the image is too large (state->too_large).
bool RunDecoder(const unsigned char* data, unsigned long size, ColorMode mode, JpegState* state,
                Image* image, std::vector<uint8_t>* scratch) {
  jpeg_decompress_struct* cinfo = &state->cinfo;
  cinfo->err = jpeg_std_error(&state->error.manager);
  state->error.manager.error_exit = OnFatalError;
  state->error.manager.emit_message = OnMessage;
  if (setjmp(state->error.jump)) return false;
  jpeg_create_decompress(cinfo);
  state->created = true;
  jpeg_mem_src(cinfo, data, size);
  jpeg_read_header(cinfo, TRUE);

  const bool gray_file = cinfo->jpeg_color_space == JCS_GRAYSCALE;
  state->cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  const bool gray_out = mode == ColorMode::kGray || (mode == ColorMode::kNative && gray_file);
  if (state->cmyk) {
    cinfo->out_color_space = JCS_CMYK;
  } else {
    cinfo->out_color_space = gray_out ? JCS_GRAYSCALE : JCS_EXT_BGR;
  }
  image->channels = gray_out ? 1 : 3;
  const int decoded_channels = state->cmyk ? 4 : image->channels;
  state->claimed_bytes =
      int64_t{cinfo->image_width} * int64_t{cinfo->image_height} * decoded_channels;
  if (state->claimed_bytes > kMaxImageBytes) {
    state->too_large = true;
    return false;
  }
  jpeg_start_decompress(cinfo);
  image->height = static_cast<int>(cinfo->output_height);
  image->width = static_cast<int>(cinfo->output_width);
  std::vector<uint8_t>& target = state->cmyk ? *scratch : image->pixels;
  const size_t stride = static_cast<size_t>(image->width) * decoded_channels;
  // The buffer grows with the rows actually decoded (geometrically, as vectors do), so a small
  // corrupt file whose header claims a huge image fails before it costs that much memory.
  while (cinfo->output_scanline < cinfo->output_height) {
    target.resize(stride * (cinfo->output_scanline + 1));
    JSAMPROW row = target.data() + stride * cinfo->output_scanline;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

// Adobe's CMYK JPEGs store inverted ink amounts, which libjpeg passes through: "c" is 255 for no
// cyan. Red is then c * k / 255, and likewise for green (m) and blue (y).
void CmykToImage(const std::vector<uint8_t>& cmyk, Image* image) {
  const size_t pixels = static_cast<size_t>(image->height) * image->width;
  image->pixels.resize(pixels * image->channels);
  for (size_t i = 0; i < pixels; ++i) {
    const int c = cmyk[4 * i], m = cmyk[4 * i + 1], y = cmyk[4 * i + 2], k = cmyk[4 * i + 3];
    const auto r = static_cast<uint8_t>((c * k + 127) / 255);
    const auto g = static_cast<uint8_t>((m * k + 127) / 255);
    const auto b = static_cast<uint8_t>((y * k + 127) / 255);
    if (image->channels == 1) {
      image->pixels[i] = GrayFromBgr(b, g, r);
    } else {
      image->pixels[3 * i] = b;
      image->pixels[3 * i + 1] = g;
      image->pixels[3 * i + 2] = r;
    }
  }
}

}  // namespace

absl::StatusOr<Image> DecodeJpeg(absl::string_view bytes, ColorMode mode, absl::string_view name) {
  if (!LooksLikeJpeg(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not a JPEG file (no SOI marker)"));
  }
  Image image;
  std::vector<uint8_t> scratch;
  JpegState state;
  const bool ok =
      RunDecoder(reinterpret_cast<const unsigned char*>(bytes.data()),
                 static_cast<unsigned long>(bytes.size()), mode, &state, &image, &scratch);
  if (state.created) jpeg_destroy_decompress(&state.cinfo);
  if (state.too_large) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": JPEG of ", state.claimed_bytes,
                                                   " decoded bytes is larger than the limit of ",
                                                   kMaxImageBytes));
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": corrupt or unsupported JPEG: ", state.error.message));
  }
  if (state.cmyk) CmykToImage(scratch, &image);
  return image;
}

}  // namespace kiln
