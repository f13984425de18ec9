#include "base/file_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace kiln {

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot be opened"));
  std::string bytes(static_cast<size_t>(info.st_size), '\0');
  if (!bytes.empty() && !in.read(&bytes[0], static_cast<std::streamsize>(bytes.size()))) {
    return absl::InternalError(
        absl::StrCat(path, ": read failed after ", in.gcount(), " of ", bytes.size(), " bytes"));
  }
  return bytes;
}

absl::Status WriteFileBytes(const std::string& path, absl::string_view bytes) {
  const std::string temporary = absl::StrCat(path, ".kiln-partial");
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot be created"));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      return absl::InternalError(absl::StrCat(path, ": write failed"));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace kiln
