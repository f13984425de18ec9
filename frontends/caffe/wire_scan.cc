#include "frontends/caffe/wire_scan.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace kiln {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// protobuf refuses to nest messages deeper than this by default; so do we.
constexpr int kMaxDepth = 100;

class Scanner {
 public:
  explicit Scanner(absl::string_view bytes)
      : data_(reinterpret_cast<const uint8_t*>(bytes.data())), size_(bytes.size()) {}

  // Scans [begin, end) as fields of `type` (null: unknown, only the wire format is checked).
  // With `group_field` > 0 the range ends at that group's end tag instead.
  absl::Status Scan(size_t begin, size_t end, const Descriptor* type, int depth,
                    const std::string& path, uint32_t group_field, size_t* stop) {
    if (depth > kMaxDepth) return Error(begin, "messages nested deeper than 100", path);
    size_t pos = begin;
    while (pos < end) {
      const size_t tag_at = pos;
      uint64_t tag = 0;
      if (!ReadVarint(pos, end, tag)) return Error(tag_at, "truncated or overlong tag", path);
      const uint32_t field_number = static_cast<uint32_t>(tag >> 3);
      const int wire_type = static_cast<int>(tag & 7);
      if (field_number == 0 || (tag >> 3) > 536870911) {
        return Error(tag_at, "invalid field number", path);
      }
      const FieldDescriptor* field = type ? type->FindFieldByNumber(field_number) : nullptr;
      const std::string field_path = absl::StrCat(
          path, path.empty() ? "" : ".", field ? field->name() : absl::StrCat("#", field_number));
      switch (wire_type) {
        case 0: {
          uint64_t ignored;
          if (!ReadVarint(pos, end, ignored)) {
            return Error(pos, "truncated or overlong varint", field_path);
          }
          break;
        }
        case 1:
          if (end - pos < 8) return Error(pos, "truncated 64-bit value", field_path);
          pos += 8;
          break;
        case 5:
          if (end - pos < 4) return Error(pos, "truncated 32-bit value", field_path);
          pos += 4;
          break;
        case 2: {
          const size_t length_at = pos;
          uint64_t length = 0;
          if (!ReadVarint(pos, end, length)) {
            return Error(length_at, "truncated or overlong length", field_path);
          }
          if (length > end - pos) {
            return Error(
                length_at,
                absl::StrCat("length ", length, " runs past the end (", end - pos, " bytes left)"),
                field_path);
          }
          if (field && field->type() == FieldDescriptor::TYPE_MESSAGE) {
            size_t unused;
            absl::Status inner =
                Scan(pos, pos + length, field->message_type(), depth + 1, field_path, 0, &unused);
            if (!inner.ok()) return inner;
          }
          pos += length;
          break;
        }
        case 3: {
          const Descriptor* inner_type = field && field->type() == FieldDescriptor::TYPE_GROUP
                                             ? field->message_type()
                                             : nullptr;
          size_t after = 0;
          absl::Status inner =
              Scan(pos, end, inner_type, depth + 1, field_path, field_number, &after);
          if (!inner.ok()) return inner;
          pos = after;
          break;
        }
        case 4:
          if (group_field == field_number) {
            *stop = pos;
            return absl::OkStatus();
          }
          return Error(tag_at, "end-group tag with no matching start", field_path);
        default:
          return Error(tag_at, absl::StrCat("invalid wire type ", wire_type), field_path);
      }
    }
    if (group_field > 0) return Error(end, "group never closed", path);
    *stop = pos;
    return absl::OkStatus();
  }

 private:
  bool ReadVarint(size_t& pos, size_t end, uint64_t& value) const {
    value = 0;
    for (int i = 0; i < 10; ++i) {
      if (pos >= end) return false;
      const uint8_t byte = data_[pos++];
      value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  static absl::Status Error(size_t offset, absl::string_view what, const std::string& path) {
    return absl::InvalidArgumentError(absl::StrCat("byte offset ", offset, ": ", what,
                                                   path.empty() ? "" : " (in ", path,
                                                   path.empty() ? "" : ")"));
  }

  const uint8_t* data_;
  size_t size_;
};

}  // namespace

absl::Status ScanWireFormat(absl::string_view bytes, const Descriptor& type) {
  Scanner scanner(bytes);
  size_t stop = 0;
  return scanner.Scan(0, bytes.size(), &type, 0, "", 0, &stop);
}

}  // namespace kiln
