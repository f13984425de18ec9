#include "data/image_resize.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

// One output coordinate's two source neighbours and the weight of the second, as the fraction
// `weight / denominator`. Computed in integers: with s = in/out, the sample position
// (d + 0.5) * s - 0.5 equals ((2d + 1) * in - out) / (2 * out) exactly, so the floor and the
// fraction carry no rounding error and every platform gives the same pixels.
struct Tap {
  int64_t first = 0;
  int64_t second = 0;
  int64_t weight = 0;  // of `second`; `first` gets denominator - weight
};

std::vector<Tap> Taps(int64_t in, int64_t out) {
  std::vector<Tap> taps(static_cast<size_t>(out));
  const int64_t denominator = 2 * out;
  for (int64_t d = 0; d < out; ++d) {
    Tap& tap = taps[d];
    const int64_t numerator = (2 * d + 1) * in - out;
    if (numerator <= 0) {  // before the first pixel's center: clamped to it
      tap = {0, 0, 0};
      continue;
    }
    tap.first = numerator / denominator;
    tap.weight = numerator % denominator;
    if (tap.first >= in - 1) {  // at or past the last pixel's center: clamped to it
      tap = {in - 1, in - 1, 0};
      continue;
    }
    tap.second = tap.first + 1;
  }
  return taps;
}

}  // namespace

absl::StatusOr<Image> ResizeBilinear(const Image& image, int height, int width) {
  if (image.height < 1 || image.width < 1 || image.channels < 1 ||
      image.pixels.size() != static_cast<size_t>(image.height) * image.width * image.channels) {
    return absl::InvalidArgumentError(absl::StrCat("resize: the source image (", image.height, "x",
                                                   image.width, "x", image.channels,
                                                   ") is empty or inconsistent"));
  }
  if (height < 1 || width < 1 || int64_t{height} * width * image.channels > kMaxImageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("resize: target size ", height, "x", width, " is not positive or too large"));
  }
  const std::vector<Tap> rows = Taps(image.height, height);
  const std::vector<Tap> cols = Taps(image.width, width);
  const int64_t dy = 2 * int64_t{height}, dx = 2 * int64_t{width};
  const int64_t denominator = dy * dx;  // at most 4 * kMaxImageBytes: no overflow below
  const int channels = image.channels;
  const size_t in_stride = static_cast<size_t>(image.width) * channels;

  Image out;
  out.height = height;
  out.width = width;
  out.channels = channels;
  out.pixels.resize(static_cast<size_t>(height) * width * channels);
  uint8_t* dst = out.pixels.data();
  for (int y = 0; y < height; ++y) {
    const Tap& r = rows[y];
    const uint8_t* top = image.pixels.data() + r.first * in_stride;
    const uint8_t* bottom = image.pixels.data() + r.second * in_stride;
    for (int x = 0; x < width; ++x) {
      const Tap& c = cols[x];
      const size_t left = c.first * channels, right = c.second * channels;
      for (int ch = 0; ch < channels; ++ch) {
        const int64_t upper = (dx - c.weight) * top[left + ch] + c.weight * top[right + ch];
        const int64_t lower = (dx - c.weight) * bottom[left + ch] + c.weight * bottom[right + ch];
        const int64_t sum = (dy - r.weight) * upper + r.weight * lower;
        // sum / denominator rounded to nearest, halves up (sum >= 0).
        *dst++ = static_cast<uint8_t>((2 * sum + denominator) / (2 * denominator));
      }
    }
  }
  return out;
}

}  // namespace kiln
