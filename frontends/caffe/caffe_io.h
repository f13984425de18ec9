// Reading and writing Caffe's files: text-format nets and solvers, binary nets (.caffemodel)
// and solver states. Every failure is a Status that names the file and the place: line:column
// for text, a byte offset for binary.
#ifndef KILN_FRONTENDS_CAFFE_CAFFE_IO_H_
#define KILN_FRONTENDS_CAFFE_CAFFE_IO_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/file_io.h"
#include "google/protobuf/message.h"
#include "frontends/caffe/caffe.pb.h"

namespace kiln {

// True when `bytes` look like protobuf binary rather than text: any byte that text format never
// contains (control characters other than tab/newline/CR, or a NUL) among the first 4 KiB.
bool LooksBinary(absl::string_view bytes);

// Parses protobuf text format into `message`. `origin` (usually the file name) prefixes errors,
// which read "origin:line:column: message" with 1-based line and column.
absl::Status ParseTextMessage(absl::string_view text, absl::string_view origin,
                              google::protobuf::Message& message);

// Parses protobuf binary into `message` with no 64 MB cap (protobuf's own limit, 2 GiB, is the
// only one). On failure the error names the byte offset where the encoding breaks.
absl::Status ParseBinaryMessage(absl::string_view bytes, absl::string_view origin,
                                google::protobuf::Message& message);

// A NetParameter from text or binary bytes (decided by LooksBinary). Not upgraded.
absl::StatusOr<caffe::NetParameter> ParseNetParameter(absl::string_view bytes,
                                                      absl::string_view origin);
absl::StatusOr<caffe::NetParameter> ReadNetParameter(const std::string& path);
// A protobuf file's bytes: refused unread (InvalidArgument naming the size) when over the 2 GiB
// protobuf can parse as one message, so a huge or wrong file is not read whole first.
absl::StatusOr<std::string> ReadMessageBytes(const std::string& path);

absl::StatusOr<caffe::SolverParameter> ReadSolverParameter(const std::string& path);
absl::StatusOr<caffe::SolverState> ReadSolverState(const std::string& path);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_CAFFE_IO_H_
