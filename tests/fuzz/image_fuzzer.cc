// Fuzz target: bytes decoded as an image (JPEG or PNG, by signature) in every color mode, and a
// decoded image resized; errors are expected, crashes and sanitizer reports are not.
//
// A JPEG whose frame header claims more than kMaxPixels pixels is skipped: from a few KB of input
// it can only fail as truncated, but libjpeg first allocates the whole image's coefficients
// (gigabytes for a progressive 32472 x 65288 frame), which ASan takes seconds to map, and the
// run fell to 54 executions/s. The size check of the decoder (kMaxImageBytes) is the same code
// for smaller claims, which still run.
#include <string>

#include "data/image_decoder.h"
#include "data/image_resize.h"
#include "tests/fuzz/fuzz_targets.h"

namespace {

constexpr uint64_t kMaxPixels = uint64_t{1} << 24;

// True when some SOFn marker (0xFFC0-0xFFCF except DHT 0xC4, JPG 0xC8, DAC 0xCC) anywhere in the
// bytes claims more than kMaxPixels.
bool ClaimsHugeJpeg(const uint8_t* data, size_t size) {
  for (size_t i = 0; i + 9 <= size; ++i) {
    const uint8_t m = data[i + 1];
    if (data[i] != 0xff || m < 0xc0 || m > 0xcf || m == 0xc4 || m == 0xc8 || m == 0xcc) continue;
    const uint64_t height = (uint64_t{data[i + 5]} << 8) | data[i + 6];
    const uint64_t width = (uint64_t{data[i + 7]} << 8) | data[i + 8];
    if (height * width > kMaxPixels) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (ClaimsHugeJpeg(data, size)) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (kiln::ColorMode mode :
       {kiln::ColorMode::kColor, kiln::ColorMode::kGray, kiln::ColorMode::kNative}) {
    auto image = kiln::DecodeImage(bytes, mode, "fuzz");
    if (image.ok()) (void)kiln::ResizeBilinear(*image, 5, 3);
  }
  return 0;
}
