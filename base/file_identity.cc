#include "base/file_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln {

namespace {

// `path` without trailing slashes (but "/" stays "/").
std::string StripTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The folder part of `path` ("." for a bare name, "/" for "/x").
std::string ParentOf(const std::string& path) {
  const std::string p = StripTrailingSlashes(path);
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

std::string NameOf(const std::string& path) {
  const std::string p = StripTrailingSlashes(path);
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string Describe(const FlagPath& f) {
  if (!f.flag.empty() && f.flag.back() == '=') return absl::StrCat(f.flag, f.path);
  return absl::StrCat(f.flag, " ", f.path);
}

}  // namespace

std::string FollowFinalSymlinks(const std::string& path) {
  std::string p = path;
  for (int hop = 0; hop < 40; ++hop) {
    struct stat info;
    if (lstat(p.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return p;
    std::vector<char> buffer(static_cast<size_t>(info.st_size > 0 ? info.st_size : 255) + 2);
    const ssize_t n = readlink(p.c_str(), buffer.data(), buffer.size() - 1);
    if (n <= 0) return p;
    const std::string target(buffer.data(), static_cast<size_t>(n));
    p = target[0] == '/' ? target : absl::StrCat(ParentOf(p), "/", target);
  }
  return p;
}

absl::StatusOr<FileIdentity> IdentifyFile(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("an empty path");
  const std::string resolved = FollowFinalSymlinks(path);
  FileIdentity id;
  struct stat info;
  if (stat(resolved.c_str(), &info) == 0) {
    id.device = info.st_dev;
    id.inode = info.st_ino;
    id.exists = true;
    id.is_directory = S_ISDIR(info.st_mode);
    return id;
  }
  if (errno == ELOOP) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': too many symbolic links"));
  }
  if (errno != ENOENT && errno != ENOTDIR) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': ", std::strerror(errno)));
  }
  const std::string parent = ParentOf(resolved);
  if (stat(parent.c_str(), &info) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(
          absl::StrCat("'", path, "': the folder '", parent, "' does not exist"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': folder '", parent, "': ", std::strerror(errno)));
  }
  if (!S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': '", parent, "' is not a folder"));
  }
  id.device = info.st_dev;
  id.inode = info.st_ino;
  id.name = NameOf(resolved);
  return id;
}

absl::Status CheckOutputFiles(const std::vector<FlagPath>& inputs,
                              const std::vector<FlagPath>& outputs, ExistingOutput existing,
                              const std::string& overwrite_flag) {
  std::vector<std::pair<const FlagPath*, FileIdentity>> known;
  for (const FlagPath& input : inputs) {
    if (input.path.empty()) continue;
    absl::StatusOr<FileIdentity> id = IdentifyFile(input.path);
    if (id.ok() && id->exists) known.emplace_back(&input, *id);
  }
  const size_t input_count = known.size();
  for (const FlagPath& output : outputs) {
    if (output.path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(output.flag, ": an empty path"));
    }
    absl::StatusOr<FileIdentity> id = IdentifyFile(output.path);
    if (!id.ok()) {
      return absl::Status(id.status().code(),
                          absl::StrCat(Describe(output), ": ", id.status().message()));
    }
    for (size_t k = 0; k < known.size(); ++k) {
      if (known[k].second != *id) continue;
      if (k < input_count) {
        return absl::InvalidArgumentError(absl::StrCat(Describe(output), " is the same file as ",
                                                       Describe(*known[k].first),
                                                       ": an output never replaces an input"));
      }
      return absl::InvalidArgumentError(absl::StrCat(Describe(output), " and ",
                                                     Describe(*known[k].first),
                                                     " name the same file: one would replace the "
                                                     "other"));
    }
    known.emplace_back(&output, *id);
    if (id->is_directory) {
      return absl::InvalidArgumentError(
          absl::StrCat(Describe(output), ": is a folder; give a file name"));
    }
    const std::string folder = ParentOf(FollowFinalSymlinks(output.path));
    if (access(folder.c_str(), W_OK) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(Describe(output), ": cannot write in '",
                                                      folder, "': ", std::strerror(errno)));
    }
    if (id->exists && existing == ExistingOutput::kRefuse && !output.may_exist) {
      return absl::AlreadyExistsError(absl::StrCat(Describe(output), ": '", output.path,
                                                   "' exists; pass ", overwrite_flag,
                                                   " to replace it"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNotInside(const FlagPath& input, const FlagPath& folder) {
  struct stat dir;
  if (folder.path.empty() || stat(folder.path.c_str(), &dir) != 0) return absl::OkStatus();
  char* real = realpath(input.path.c_str(), nullptr);
  if (real == nullptr) return absl::OkStatus();
  std::string p = real;
  std::free(real);
  for (;;) {
    struct stat info;
    if (stat(p.c_str(), &info) == 0 && info.st_dev == dir.st_dev && info.st_ino == dir.st_ino) {
      return absl::InvalidArgumentError(
          absl::StrCat(Describe(input), " is or lies inside ", Describe(folder),
                       ", which the command writes: an output never replaces an input"));
    }
    if (p == "/" || p.empty()) break;
    p = ParentOf(p);
  }
  return absl::OkStatus();
}

absl::Status ProbeWritableFolder(const std::string& folder, const std::string& what) {
  const std::string dir = folder.empty() ? "." : folder;
  struct stat info;
  if (stat(dir.c_str(), &info) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the folder '", dir, "': ", std::strerror(errno)));
  }
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": '", dir, "' is not a folder"));
  }
  std::string probe = absl::StrCat(dir, "/.kiln-write-probe-XXXXXX");
  const int fd = mkstemp(&probe[0]);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": cannot write in the folder '", dir, "': ", std::strerror(errno)));
  }
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

}  // namespace kiln
