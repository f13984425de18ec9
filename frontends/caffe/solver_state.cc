#include "frontends/caffe/solver_state.h"

#include <climits>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "frontends/caffe/caffe_io.h"
#include "google/protobuf/unknown_field_set.h"

namespace kiln {
namespace {

std::string ShapeText(const std::vector<int64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// The number of values `dims` holds, or -1 when a dim is negative or the product overflows.
int64_t ValueCount(const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) return -1;
    count *= d;
  }
  return count;
}

// The first field number a message carries that its schema does not know, or 0.
int FirstUnknownField(const google::protobuf::Message& message) {
  const google::protobuf::UnknownFieldSet& unknown =
      message.GetReflection()->GetUnknownFields(message);
  return unknown.field_count() > 0 ? unknown.field(0).number() : 0;
}

absl::Status BlobError(absl::string_view origin, int index, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": history blob ", index, ": ", what));
}

}  // namespace

bool HistoryShapeMatches(const std::vector<int64_t>& stored,
                         const std::vector<int64_t>& param_shape) {
  if (stored == param_shape) return true;
  if (stored.size() != 4 || param_shape.size() > 4) return false;
  std::vector<int64_t> padded(4 - param_shape.size(), 1);
  padded.insert(padded.end(), param_shape.begin(), param_shape.end());
  return padded == stored;
}

absl::StatusOr<caffe::SolverState> SolverStateToProto(const SolverStateData& state) {
  if (state.iter < 0 || state.iter > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "solver state: iter ", state.iter, " is outside [0, 2^31 - 1] (Caffe's iter is int32)"));
  }
  if (state.current_step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("solver state: current_step ", state.current_step, " is negative"));
  }
  if (state.history_shapes.size() != state.history.size()) {
    return absl::InvalidArgumentError(absl::StrCat("solver state: ", state.history_shapes.size(),
                                                   " history shapes for ", state.history.size(),
                                                   " history blobs"));
  }
  caffe::SolverState proto;
  // Caffe sets all three scalars on every snapshot, defaults included.
  proto.set_iter(static_cast<int32_t>(state.iter));
  proto.set_learned_net(state.learned_net);
  proto.set_current_step(state.current_step);
  for (size_t i = 0; i < state.history.size(); ++i) {
    const std::vector<int64_t>& dims = state.history_shapes[i];
    const int64_t count = ValueCount(dims);
    if (count != static_cast<int64_t>(state.history[i].size())) {
      return BlobError(
          "solver state", static_cast<int>(i),
          absl::StrCat("shape ", ShapeText(dims),
                       count < 0 ? " is invalid" : absl::StrCat(" holds ", count, " values"),
                       ", the blob has ", state.history[i].size()));
    }
    caffe::BlobProto* blob = proto.add_history();
    caffe::BlobShape* shape = blob->mutable_shape();
    for (int64_t d : dims) shape->add_dim(d);
    blob->mutable_data()->Add(state.history[i].begin(), state.history[i].end());
  }
  if (state.progress.has_value()) {
    caffe::KilnProgress* progress = proto.mutable_kiln_progress();
    for (const NetProgress& net : state.progress->nets) {
      caffe::KilnProgress::Net* n = progress->add_net();
      n->set_passes(net.passes);
      for (int64_t b : net.batches_served) n->add_batches_served(b);
      for (const std::vector<float>& values : net.carried_state) {
        n->add_carried_state()->mutable_data()->Add(values.begin(), values.end());
      }
    }
  }
  return proto;
}

absl::StatusOr<SolverStateData> SolverStateFromProto(const caffe::SolverState& proto,
                                                     absl::string_view origin) {
  if (int field = FirstUnknownField(proto); field != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": not a SolverState (it has field ", field,
                     ", which SolverState does not; a .caffemodel or another message?)"));
  }
  SolverStateData state;
  if (proto.iter() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": iter ", proto.iter(), " < 0"));
  }
  if (proto.current_step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": current_step ", proto.current_step(), " < 0"));
  }
  state.iter = proto.iter();
  state.learned_net = proto.learned_net();
  state.current_step = proto.current_step();
  state.history.reserve(proto.history_size());
  state.history_shapes.reserve(proto.history_size());
  for (int i = 0; i < proto.history_size(); ++i) {
    const caffe::BlobProto& blob = proto.history(i);
    if (int field = FirstUnknownField(blob); field != 0) {
      return BlobError(origin, i, absl::StrCat("field ", field, " is not a BlobProto field"));
    }
    std::vector<int64_t> dims;
    if (blob.has_num() || blob.has_channels() || blob.has_height() || blob.has_width()) {
      dims = {blob.num(), blob.channels(), blob.height(), blob.width()};
    } else {
      dims.assign(blob.shape().dim().begin(), blob.shape().dim().end());
    }
    const int64_t count = ValueCount(dims);
    const bool doubles = blob.double_data_size() > 0;
    const int64_t stored = doubles ? blob.double_data_size() : blob.data_size();
    if (count < 0) {
      return BlobError(origin, i, absl::StrCat("shape ", ShapeText(dims), " is invalid"));
    }
    if (count != stored) {
      return BlobError(
          origin, i,
          absl::StrCat("shape ", ShapeText(dims), " holds ", count, " values, the blob has ",
                       stored, doubles ? " (double_data)" : " (data)"));
    }
    if (doubles) {
      state.history.emplace_back(blob.double_data().begin(), blob.double_data().end());
    } else {
      state.history.emplace_back(blob.data().begin(), blob.data().end());
    }
    state.history_shapes.push_back(std::move(dims));
  }
  if (proto.has_kiln_progress()) {
    TrainingProgress progress;
    for (int i = 0; i < proto.kiln_progress().net_size(); ++i) {
      const caffe::KilnProgress::Net& n = proto.kiln_progress().net(i);
      if (n.passes() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(origin, ": kiln_progress net ", i, ": passes ", n.passes(), " < 0"));
      }
      NetProgress net;
      net.passes = n.passes();
      for (int64_t b : n.batches_served()) {
        if (b < -1) {
          return absl::InvalidArgumentError(
              absl::StrCat(origin, ": kiln_progress net ", i, ": batches_served ", b, " < -1"));
        }
        net.batches_served.push_back(b);
      }
      for (const caffe::KilnProgress::CarriedState& c : n.carried_state()) {
        net.carried_state.emplace_back(c.data().begin(), c.data().end());
      }
      progress.nets.push_back(std::move(net));
    }
    state.progress = std::move(progress);
  }
  return state;
}

absl::StatusOr<std::string> SerializeSolverState(const SolverStateData& state) {
  KILN_ASSIGN_OR_RETURN(caffe::SolverState proto, SolverStateToProto(state));
  const size_t size = proto.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "solver state: ", size, " bytes, over protobuf's 2 GiB limit for one message"));
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) {
    return absl::InternalError("solver state: protobuf serialization failed");
  }
  return bytes;
}

absl::StatusOr<SolverStateData> ParseSolverState(absl::string_view bytes,
                                                 absl::string_view origin) {
  if (bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": empty file (a snapshot always holds at least iter)"));
  }
  caffe::SolverState proto;
  KILN_RETURN_IF_ERROR(ParseBinaryMessage(bytes, origin, proto));
  return SolverStateFromProto(proto, origin);
}

absl::Status WriteSolverState(const std::string& path, const SolverStateData& state) {
  absl::StatusOr<std::string> bytes = SerializeSolverState(state);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(), absl::StrCat(path, ": ", bytes.status().message()));
  }
  return WriteFileBytes(path, *bytes);
}

absl::StatusOr<SolverStateData> ReadSolverStateData(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadMessageBytes(path));
  return ParseSolverState(bytes, path);
}

}  // namespace kiln
