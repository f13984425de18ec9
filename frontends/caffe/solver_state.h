// Caffe's .solverstate files (message SolverState in proto/caffe.proto) as plain data: the
// iteration, the snapshot's weights file, the learning-rate schedule's step and the solver's
// history blobs. What we write is byte for byte what Caffe's snapshot writes for the same state
// (BlobShape dims and packed f32 data, fields in number order), followed by Kiln's own field
// with the data position when there is one, which Caffe skips: Caffe can resume from our
// snapshots; we read Caffe's, including the legacy 4-d blobs of old Caffe versions.
//
// History order is Caffe's: one blob per learnable parameter in net order, and for AdaDelta and
// Adam (dnn::HistoryCount == 2) all the first histories of every parameter, then all the second
// ones (see HistoryIndex).
#ifndef KILN_FRONTENDS_CAFFE_SOLVER_STATE_H_
#define KILN_FRONTENDS_CAFFE_SOLVER_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontends/caffe/caffe.pb.h"
#include "training/progress.h"

namespace kiln {

// One solver snapshot. history[i] holds the values of history blob i and history_shapes[i] its
// dims (the product of the dims is history[i].size(); no dims is a scalar, one value).
struct SolverStateData {
  int64_t iter = 0;         // iterations done (Caffe's iter_: the next update uses this iter)
  std::string learned_net;  // the .caffemodel written with this state (Caffe's path, as is)
  int current_step = 0;     // the "multistep" lr policy's position
  std::vector<std::vector<float>> history;
  std::vector<std::vector<int64_t>> history_shapes;
  // Kiln's addition (SolverState.kiln_progress): absent in Caffe's snapshots, whose resumes
  // restart the data at its first record.
  std::optional<TrainingProgress> progress;
};

// The index in SolverStateData::history of history `which` (0 or 1) of learnable parameter
// `param` out of `num_params`, following Caffe's layout (all first histories, then all second).
inline size_t HistoryIndex(int which, size_t param, size_t num_params) {
  return static_cast<size_t>(which) * num_params + param;
}

// True when a stored history shape fits a parameter of shape `param_shape` the way Caffe's
// Blob::ShapeEquals allows: equal dims, or a legacy 4-d blob (num, channels, height, width)
// whose dims equal the parameter's padded on the left with 1s to 4 dims (old snapshots store a
// bias of 20 as 1 x 1 x 1 x 20).
bool HistoryShapeMatches(const std::vector<int64_t>& stored,
                         const std::vector<int64_t>& param_shape);

// The SolverState message Caffe would write for `state`. InvalidArgument (naming the blob) when
// iter is outside Caffe's int32 range or negative, current_step is negative, history_shapes and
// history differ in length, or a blob's dims are negative or do not multiply to its size.
absl::StatusOr<caffe::SolverState> SolverStateToProto(const SolverStateData& state);

// The data of a parsed SolverState. `origin` (usually the file name) starts every error, which
// names the blob and what is wrong ("x.solverstate: history blob 3: shape [50] holds 50 values,
// the blob has 49"). A blob's values come from double_data when it has any (converted to f32),
// otherwise from data; its shape from the legacy num/channels/height/width when any of them is
// set (as Caffe's Blob::FromProto), otherwise from BlobShape.
absl::StatusOr<SolverStateData> SolverStateFromProto(const caffe::SolverState& proto,
                                                     absl::string_view origin);

// Serialized .solverstate bytes (over 2 GiB is ResourceExhausted: protobuf's message limit).
absl::StatusOr<std::string> SerializeSolverState(const SolverStateData& state);

// Parses .solverstate bytes; errors as SolverStateFromProto, plus a byte offset where the
// encoding breaks, and a refusal of bytes that are not a SolverState at all (empty, or fields a
// SolverState does not have, as when a .caffemodel is passed by mistake).
absl::StatusOr<SolverStateData> ParseSolverState(absl::string_view bytes, absl::string_view origin);

// Writes `state` to `path` through a temporary file renamed into place, so a failed write never
// leaves a half file (or clobbers the previous snapshot). Errors name the path.
absl::Status WriteSolverState(const std::string& path, const SolverStateData& state);

// Reads a .solverstate; errors name the file and what is wrong (NotFound when it does not exist).
// Named apart from caffe_io.h's ReadSolverState, which returns the raw caffe::SolverState.
absl::StatusOr<SolverStateData> ReadSolverStateData(const std::string& path);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_SOLVER_STATE_H_
