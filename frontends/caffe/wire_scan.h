// Finds where a protobuf binary encoding breaks. protobuf's parser only says "failed"; this
// walks the bytes the same way (tags, varints, lengths, groups, nested messages by the schema)
// and reports the first byte offset that cannot be decoded.
#ifndef KILN_FRONTENDS_CAFFE_WIRE_SCAN_H_
#define KILN_FRONTENDS_CAFFE_WIRE_SCAN_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"

namespace kiln {

// OK when `bytes` decode as `type` as far as the wire format goes; otherwise InvalidArgument
// "byte offset N: what (field path)".
absl::Status ScanWireFormat(absl::string_view bytes, const google::protobuf::Descriptor& type);

}  // namespace kiln

#endif  // KILN_FRONTENDS_CAFFE_WIRE_SCAN_H_
