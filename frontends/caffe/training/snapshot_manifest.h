// A snapshot's .caffemodel and .solverstate as one unit. Each file is written atomically, but a
// kill between the two renames would leave a new state beside an old model (or the reverse),
// which would resume silently as a mix. So after both files Kiln writes a small manifest,
// <prefix>_iter_<N>.manifest, naming both with their sizes and 64-bit FNV-1a hashes; a resume
// from a Kiln snapshot checks both files against it and refuses a pair whose manifest is missing
// or does not match. (A kill before the manifest's rename leaves the previous snapshot's
// manifest, pair and all, untouched.)
#ifndef KILN_FRONTENDS_CAFFE_TRAINING_SNAPSHOT_MANIFEST_H_
#define KILN_FRONTENDS_CAFFE_TRAINING_SNAPSHOT_MANIFEST_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

// The manifest beside a .solverstate: its path with the extension replaced by ".manifest".
std::string ManifestPathFor(const std::string& solverstate_path);

// 64-bit FNV-1a of `bytes`: a check against a torn or mismatched pair, not against tampering.
uint64_t SnapshotHash(absl::string_view bytes);

// Writes the manifest of a pair whose bytes were just written to the two paths (atomically).
absl::Status WriteSnapshotManifest(const std::string& caffemodel_path,
                                   absl::string_view caffemodel_bytes,
                                   const std::string& solverstate_path,
                                   absl::string_view solverstate_bytes);

// OK when the manifest beside `solverstate_path` exists and names both files (by file name) with
// the sizes and hashes of these bytes; FailedPrecondition naming the file and what differs
// otherwise (a snapshot interrupted while it was written, or files taken from two snapshots).
absl::Status CheckSnapshotManifest(const std::string& solverstate_path,
                                   absl::string_view solverstate_bytes,
                                   const std::string& caffemodel_path,
                                   absl::string_view caffemodel_bytes);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_TRAINING_SNAPSHOT_MANIFEST_H_
