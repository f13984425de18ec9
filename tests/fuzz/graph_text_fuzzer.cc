// Fuzz target: Kiln's own graph text format, parsed, verified and printed back.
#include <string>

#include "ir/text_format.h"
#include "ir/verifier.h"
#include "ops/all_ops.h"
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto graph = kiln::ParseGraph(text, &kiln::DefaultOpRegistry());
  if (!graph.ok()) return 0;
  (void)kiln::VerifyGraph(**graph);
  (void)kiln::PrintGraph(**graph);
  return 0;
}
