// Whole-file reads and atomic writes, with errors that start with the path.
#ifndef KILN_BASE_FILE_IO_H_
#define KILN_BASE_FILE_IO_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

// Reads a whole file. NotFound when it does not exist, InvalidArgument when it is not a regular
// file, Internal on a read error.
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);
// The same, refusing (InvalidArgument, before reading a byte) a file over `max_bytes`; `why` names
// the limit in the message ("bytes protobuf can parse as one message").
absl::StatusOr<std::string> ReadFileBytes(const std::string& path, int64_t max_bytes,
                                          absl::string_view why);

// Writes `bytes` to `path` atomically: into a new file beside it (`path`.kiln-partial-*), fsync,
// then a rename over `path` (and an fsync of the folder), so a failed or killed write never leaves
// a half-written file behind and never removes the old one. Through a symlink the file it points
// to is replaced (the link stays); a replaced file keeps its permissions. Whether `path` may be
// replaced at all is the caller's check (base/file_identity.h's CheckOutputFiles).
absl::Status WriteFileBytes(const std::string& path, absl::string_view bytes);

}  // namespace kiln

#endif  // KILN_BASE_FILE_IO_H_
