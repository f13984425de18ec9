// Fuzz target: bytes parsed as a .npy file (tools/npy.h), and what parses written back and parsed
// again, which must give the same tensor: the same type and the same values, bit for bit except
// that a NaN may come back as another NaN (SerializeNpy writes through float, and a float16 NaN's
// payload is not kept: that is how FloatToHalf rounds, and no caller tells NaNs apart).
#include <cmath>
#include <cstring>
#include <string>

#include "ir/host_tensor.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tools/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto tensor = kiln::ParseNpy(bytes, "fuzz.npy");
  if (!tensor.ok()) return 0;
  auto written = kiln::SerializeNpy(*tensor);
  if (!written.ok()) __builtin_trap();  // what ParseNpy accepts, SerializeNpy can write
  auto again = kiln::ParseNpy(*written, "fuzz-again.npy");
  if (!again.ok()) __builtin_trap();
  if (again->type().ToString() != tensor->type().ToString()) __builtin_trap();
  const int64_t n = tensor->type().num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const float a = tensor->GetFloat(i), b = again->GetFloat(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::memcmp(&a, &b, sizeof(a)) != 0) __builtin_trap();
  }
  return 0;
}
