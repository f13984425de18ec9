// JSON text pieces for the reports the CLI and the C API print: a quoted, escaped string and a
// number that stays valid JSON (NaN and infinities, which JSON lacks, become null).
#ifndef KILN_BASE_JSON_TEXT_H_
#define KILN_BASE_JSON_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

std::string JsonString(absl::string_view s);
std::string JsonNumber(double value);

}  // namespace kiln

#endif  // KILN_BASE_JSON_TEXT_H_
