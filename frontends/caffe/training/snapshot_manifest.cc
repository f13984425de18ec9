#include "frontends/caffe/training/snapshot_manifest.h"

#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file_io.h"
#include "base/fnv_hash.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

constexpr char kHeader[] = "kiln snapshot manifest 1";

std::string FileName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

std::string Entry(const char* role, const std::string& path, absl::string_view bytes) {
  return absl::StrCat(role, " ", bytes.size(), " ",
                      absl::Hex(SnapshotHash(bytes), absl::kZeroPad16), " ", FileName(path), "\n");
}

// Checks the manifest line of `role` against the file's bytes.
absl::Status CheckEntry(const std::vector<std::string>& lines, const std::string& manifest,
                        const char* role, const std::string& path, absl::string_view bytes) {
  for (const std::string& line : lines) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 3));
    if (parts.size() != 4 || parts[0] != role) continue;
    uint64_t size = 0, hash = 0;
    if (!absl::SimpleAtoi(parts[1], &size) || !absl::SimpleHexAtoi(parts[2], &hash)) break;
    if (parts[3] != FileName(path)) {
      return absl::FailedPreconditionError(absl::StrCat(manifest, " names the ", role, " '",
                                                        parts[3], "', not '", FileName(path),
                                                        "': the files come from two snapshots"));
    }
    if (size != bytes.size() || hash != SnapshotHash(bytes)) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is not the ", role, " ", manifest, " was written with (", bytes.size(),
          " bytes, manifest ", size,
          "): the snapshot was interrupted while being written, or a file was replaced; resume "
          "from an earlier snapshot"));
    }
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat(manifest, ": no valid '", role, "' line (a damaged manifest)"));
}

}  // namespace

std::string ManifestPathFor(const std::string& solverstate_path) {
  return std::filesystem::path(solverstate_path).replace_extension(".manifest").string();
}

uint64_t SnapshotHash(absl::string_view bytes) { return Fnv1a64(bytes); }

absl::Status WriteSnapshotManifest(const std::string& caffemodel_path,
                                   absl::string_view caffemodel_bytes,
                                   const std::string& solverstate_path,
                                   absl::string_view solverstate_bytes) {
  return WriteFileBytes(
      ManifestPathFor(solverstate_path),
      absl::StrCat(kHeader, "\n", Entry("caffemodel", caffemodel_path, caffemodel_bytes),
                   Entry("solverstate", solverstate_path, solverstate_bytes)));
}

absl::Status CheckSnapshotManifest(const std::string& solverstate_path,
                                   absl::string_view solverstate_bytes,
                                   const std::string& caffemodel_path,
                                   absl::string_view caffemodel_bytes) {
  const std::string manifest = ManifestPathFor(solverstate_path);
  absl::StatusOr<std::string> text = ReadFileBytes(manifest, 1 << 16, "bytes of a manifest");
  if (absl::IsNotFound(text.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        solverstate_path, " was written by Kiln but its manifest ", manifest,
        " is missing: the snapshot was interrupted before it was complete, and its .caffemodel "
        "and .solverstate may not belong together; resume from an earlier snapshot"));
  }
  if (!text.ok()) return text.status();
  std::vector<std::string> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  if (lines.empty() || lines[0] != kHeader) {
    return absl::FailedPreconditionError(
        absl::StrCat(manifest, ": not a Kiln snapshot manifest (first line '",
                     lines.empty() ? "" : lines[0], "')"));
  }
  KILN_RETURN_IF_ERROR(
      CheckEntry(lines, manifest, "solverstate", solverstate_path, solverstate_bytes));
  return CheckEntry(lines, manifest, "caffemodel", caffemodel_path, caffemodel_bytes);
}

}  // namespace kiln
