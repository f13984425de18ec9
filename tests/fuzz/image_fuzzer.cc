// Fuzz target: bytes decoded as an image (JPEG or PNG, by signature) in every color mode, and a
// decoded image resized; errors are expected, crashes and sanitizer reports are not.
#include <string>

#include "data/image_decoder.h"
#include "data/image_resize.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (kiln::ColorMode mode :
       {kiln::ColorMode::kColor, kiln::ColorMode::kGray, kiln::ColorMode::kNative}) {
    auto image = kiln::DecodeImage(bytes, mode, "fuzz");
    if (image.ok()) (void)kiln::ResizeBilinear(*image, 5, 3);
  }
  return 0;
}
