#include "base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/fault_injection.h"
#include "base/file_identity.h"

namespace kiln {

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  return ReadFileBytes(path, std::numeric_limits<int64_t>::max(), "");
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path, int64_t max_bytes,
                                          absl::string_view why) {
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (static_cast<int64_t>(info.st_size) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", info.st_size, " bytes, over the ",
                                                   max_bytes, " ", why, "; not read"));
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
  if (path.empty()) return absl::InvalidArgumentError("cannot write to an empty path");
  // Through a link: the file it points to is replaced, and the link stays.
  const std::string target = FollowFinalSymlinks(path);
  static std::atomic<int> counter{0};
  const std::string temporary =
      absl::StrCat(target, ".kiln-partial-", getpid(), "-", counter.fetch_add(1));
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot be created: ", std::strerror(errno)));
  }
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    close(fd);
    unlink(temporary.c_str());
    return absl::InternalError(absl::StrCat(path, ": ", what, ": ", reason));
  };
  struct stat old;
  if (stat(target.c_str(), &old) == 0 && S_ISREG(old.st_mode)) {
    fchmod(fd, old.st_mode & 07777);  // a replaced file keeps its permissions
  }
  size_t done = 0;
  const size_t half = bytes.size() / 2;
  bool half_reached = false;
  while (done < bytes.size()) {
    if (!half_reached && done >= half) {
      half_reached = true;
      ReachWritePoint("half of the bytes written", target);
    }
    const size_t limit = half_reached ? bytes.size() : half;
    const ssize_t n = write(fd, bytes.data() + done, limit - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return fail(absl::StrCat("write failed after ", done, " of ", bytes.size(), " bytes"));
    done += static_cast<size_t>(n);
  }
  if (!half_reached) ReachWritePoint("half of the bytes written", target);  // an empty file
  if (fsync(fd) != 0) return fail("fsync failed");
  if (close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    unlink(temporary.c_str());
    return absl::InternalError(absl::StrCat(path, ": close failed: ", reason));
  }
  ReachWritePoint("synced, before the rename", target);
  if (rename(temporary.c_str(), target.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    unlink(temporary.c_str());
    return absl::InternalError(absl::StrCat(path, ": ", reason));
  }
  ReachWritePoint("renamed", target);
  // The rename itself reaches the disk with the folder.
  const size_t slash = target.rfind('/');
  const std::string folder =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : target.substr(0, slash));
  const int dir = open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    fsync(dir);
    close(dir);
  }
  return absl::OkStatus();
}

}  // namespace kiln
