#include "frontends/caffe/caffe_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/text_format.h"
#include "frontends/caffe/wire_scan.h"

namespace kiln {

namespace {

// Collects the first error protobuf's text parser reports, with its 0-based position.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return has_error_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// protobuf logs (to stderr) when a proto2 string field holds bytes that are not UTF-8, and
// parses on. Caffe files are data, not text we rely on, so the log line would only be noise on
// the user's terminal; Kiln reports problems through Status. Installed once, process-wide.
void SilenceProtobufLogging() {
  static const bool silenced = [] {
    google::protobuf::SetLogHandler(
        [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
    return true;
  }();
  (void)silenced;
}

}  // namespace

bool LooksBinary(absl::string_view bytes) {
  const size_t n = bytes.size() < 4096 ? bytes.size() : 4096;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') return true;
    if (c == 0x7f) return true;
  }
  return false;
}

absl::Status ParseTextMessage(absl::string_view text, absl::string_view origin,
                              google::protobuf::Message& message) {
  if (text.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": text file over 2 GiB"));
  }
  SilenceProtobufLogging();
  FirstErrorCollector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  message.Clear();
  const bool ok = parser.ParseFromString(std::string(text), &message);
  if (ok) return absl::OkStatus();
  if (!errors.has_error()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": not a valid ", message.GetDescriptor()->name(), " text"));
  }
  return absl::InvalidArgumentError(absl::StrCat(origin, ":", errors.line() + 1, ":",
                                                 errors.column() + 1, ": ", errors.message()));
}

absl::Status ParseBinaryMessage(absl::string_view bytes, absl::string_view origin,
                                google::protobuf::Message& message) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": ", bytes.size(), " bytes is over protobuf's 2 GiB limit for one message"));
  }
  SilenceProtobufLogging();
  message.Clear();
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT_MAX);
  if (message.ParsePartialFromCodedStream(&stream) && stream.ConsumedEntireMessage()) {
    if (!message.IsInitialized()) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": missing required fields ", message.InitializationErrorString()));
    }
    return absl::OkStatus();
  }
  absl::Status where = ScanWireFormat(bytes, *message.GetDescriptor());
  if (!where.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": not a valid binary ", message.GetDescriptor()->name(), ": ", where.message()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(origin, ": not a valid binary ", message.GetDescriptor()->name(),
                   " (the wire format is intact; a value is out of range for its field)"));
}

absl::StatusOr<caffe::NetParameter> ParseNetParameter(absl::string_view bytes,
                                                      absl::string_view origin) {
  caffe::NetParameter net;
  if (LooksBinary(bytes)) {
    KILN_RETURN_IF_ERROR(ParseBinaryMessage(bytes, origin, net));
  } else {
    KILN_RETURN_IF_ERROR(ParseTextMessage(bytes, origin, net));
  }
  return net;
}

absl::StatusOr<std::string> ReadMessageBytes(const std::string& path) {
  // Protobuf parses at most 2 GiB - 1 as one message: a larger file is refused unread.
  return ReadFileBytes(path, INT_MAX, "bytes protobuf can parse as one message");
}

absl::StatusOr<caffe::NetParameter> ReadNetParameter(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadMessageBytes(path));
  return ParseNetParameter(bytes, path);
}

absl::StatusOr<caffe::SolverParameter> ReadSolverParameter(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadMessageBytes(path));
  caffe::SolverParameter solver;
  KILN_RETURN_IF_ERROR(ParseTextMessage(bytes, path, solver));
  return solver;
}

absl::StatusOr<caffe::SolverState> ReadSolverState(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadMessageBytes(path));
  caffe::SolverState state;
  KILN_RETURN_IF_ERROR(ParseBinaryMessage(bytes, path, state));
  return state;
}

}  // namespace kiln
