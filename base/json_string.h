// JSON text of a string, for the reports the CLI and the C API write by hand.
#ifndef KILN_BASE_JSON_STRING_H_
#define KILN_BASE_JSON_STRING_H_

#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

// `s` quoted, with '"', '\\' and the control characters escaped (UTF-8 passes through).
std::string JsonString(absl::string_view s);

}  // namespace kiln

#endif  // KILN_BASE_JSON_STRING_H_
