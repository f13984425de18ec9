// Whole-file reads and atomic writes, with errors that start with the path.
#ifndef KILN_BASE_FILE_IO_H_
#define KILN_BASE_FILE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

// Reads a whole file. NotFound when it does not exist, InvalidArgument when it is not a regular
// file, Internal on a read error.
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);

// Writes `bytes` to `path` through a temporary file renamed into place, so a failed write never
// leaves a half-written file behind.
absl::Status WriteFileBytes(const std::string& path, absl::string_view bytes);

}  // namespace kiln

#endif  // KILN_BASE_FILE_IO_H_
