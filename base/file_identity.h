// Which file a path names, by device and inode rather than by spelling, so that `x`, `./x`,
// `/abs/x`, `sub/../x`, a symlink to x and a hard link to x all compare equal; and the checks every
// command that writes files makes before it reads or computes anything: no output is an input or
// another output, and an existing output is replaced only when the user asked for it.
#ifndef KILN_BASE_FILE_IDENTITY_H_
#define KILN_BASE_FILE_IDENTITY_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln {

// An existing file: its device and inode (symlinks followed), `name` empty. A file that does not
// exist yet: the device and inode of its (resolved) parent folder and its name there.
struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  std::string name;
  bool exists = false;
  bool is_directory = false;

  bool operator==(const FileIdentity& o) const {
    return device == o.device && inode == o.inode && name == o.name;
  }
  bool operator!=(const FileIdentity& o) const { return !(*this == o); }
};

// The identity of `path`. NotFound when neither it nor its parent folder exists; InvalidArgument
// when the parent is not a folder, for an empty path, or a symlink loop.
absl::StatusOr<FileIdentity> IdentifyFile(const std::string& path);

// `path` with the symlinks of its last component followed (up to 40 hops), so that writing
// beside the result and renaming replaces the file the link points to, not the link. Paths that
// are not links come back unchanged.
std::string FollowFinalSymlinks(const std::string& path);

// A file a command was given: the flag as the user wrote it ("--output prob", "--weights",
// "snapshot_prefix") and the path.
struct FlagPath {
  std::string flag;
  std::string path;
  // For an output: that it may exist whatever the policy (a cache the command updates, such as
  // a tuning file); it must still be no input and no other output.
  bool may_exist = false;
};

// What may happen to an output that exists already.
enum class ExistingOutput {
  kRefuse,   // AlreadyExists, naming the flag and the overwrite switch
  kReplace,  // the command's documented default (snapshots, training curves) or --overwrite
};

// Before a command reads or computes anything: every output must differ (as a file) from every
// input and from every other output; its folder must exist and be writable; it must not be a
// folder; and when it exists it is refused unless `existing` is kReplace. `overwrite_flag` names
// the switch the message suggests ("--overwrite"). Errors name both flags and both paths. Inputs
// that do not exist are skipped here (the command reports them when it reads them).
absl::Status CheckOutputFiles(const std::vector<FlagPath>& inputs,
                              const std::vector<FlagPath>& outputs, ExistingOutput existing,
                              const std::string& overwrite_flag = "--overwrite");

// OK unless `path` (an input) is `folder` itself or lies somewhere inside it (every parent of its
// resolved path is compared by identity): a command that replaces `folder` wholesale would
// delete it.
absl::Status CheckNotInside(const FlagPath& input, const FlagPath& folder);

// Creates and removes a probe file in `folder`: OK when a file can be written there now.
// `what` starts the message ("snapshot_prefix 'runs/x'").
absl::Status ProbeWritableFolder(const std::string& folder, const std::string& what);

}  // namespace kiln

#endif  // KILN_BASE_FILE_IDENTITY_H_
