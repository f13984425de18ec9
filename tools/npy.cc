#include "tools/npy.h"

#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kiln {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

// The value after 'key': in the header dict, up to the next top-level comma or brace.
absl::StatusOr<std::string> DictValue(absl::string_view header, absl::string_view key,
                                      absl::string_view origin) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": header has no '", key, "'"));
  }
  at = header.find(':', at + quoted.size());
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": header entry '", key, "' has no value"));
  }
  size_t end = at + 1;
  int depth = 0;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  if (depth != 0 || end >= header.size()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": malformed header entry '", key, "'"));
  }
  return std::string(absl::StripAsciiWhitespace(header.substr(at + 1, end - at - 1)));
}

}  // namespace

absl::StatusOr<HostTensor> ParseNpy(absl::string_view bytes, absl::string_view origin) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not a .npy file (bad magic)"));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0;
  size_t header_at = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError(absl::StrCat(origin, ": truncated"));
    for (int i = 3; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    header_at = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": .npy version ", major, " unknown"));
  }
  if (header_len > bytes.size() - header_at) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": header runs past the end"));
  }
  const absl::string_view header = bytes.substr(header_at, header_len);
  absl::StatusOr<std::string> descr = DictValue(header, "descr", origin);
  if (!descr.ok()) return descr.status();
  absl::StatusOr<std::string> fortran = DictValue(header, "fortran_order", origin);
  if (!fortran.ok()) return fortran.status();
  absl::StatusOr<std::string> shape_text = DictValue(header, "shape", origin);
  if (!shape_text.ok()) return shape_text.status();
  DataType dtype;
  if (*descr == "'<f4'") {
    dtype = DataType::kF32;
  } else if (*descr == "'<f2'") {
    dtype = DataType::kF16;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": dtype ", *descr, " is not supported (float32 '<f4' or float16 '<f2')"));
  }
  if (*fortran != "False") {
    return absl::InvalidArgumentError(absl::StrCat(origin,
                                                   ": Fortran-order arrays are not "
                                                   "supported; save a C-order array"));
  }
  absl::string_view shape = *shape_text;
  if (!absl::ConsumePrefix(&shape, "(") || !absl::ConsumeSuffix(&shape, ")")) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": malformed shape ", *shape_text));
  }
  std::vector<int64_t> dims;
  for (absl::string_view part : absl::StrSplit(shape, ',', absl::SkipWhitespace())) {
    int64_t d;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": malformed shape ", *shape_text));
    }
    dims.push_back(d);
  }
  absl::StatusOr<TensorType> type = TensorType::Create(dtype, dims);
  if (!type.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", type.status().message()));
  }
  const size_t data_at = header_at + header_len;
  const size_t want = static_cast<size_t>(type->num_elements()) * DataTypeSize(dtype);
  if (bytes.size() - data_at != want) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", bytes.size() - data_at,
                                                   " data bytes for shape ", *shape_text, " (need ",
                                                   want, ")"));
  }
  HostTensor tensor(*type);
  if (want > 0) std::memcpy(tensor.data(), bytes.data() + data_at, want);
  return tensor;
}

absl::StatusOr<std::string> SerializeNpy(const HostTensor& tensor) {
  const TensorType& type = tensor.type();
  const char* descr = nullptr;
  if (type.dtype() == DataType::kF32) descr = "<f4";
  if (type.dtype() == DataType::kF16) descr = "<f2";
  if (descr == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(".npy output of ", type.ToString(), " is not supported"));
  }
  std::string shape = "(";
  for (int d = 0; d < type.rank(); ++d)
    absl::StrAppend(&shape, type.dim(d),
                    type.rank() == 1 ? "," : (d + 1 < type.rank() ? ", " : ""));
  shape += ")";
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces so that the data starts at a multiple of 64, newline-terminated.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  const size_t element = DataTypeSize(type.dtype());
  for (int64_t i = 0; i < type.num_elements(); ++i) {
    if (type.dtype() == DataType::kF32) {
      const float v = tensor.GetFloat(i);
      out.append(reinterpret_cast<const char*>(&v), element);
    } else {
      const uint16_t h = FloatToHalf(tensor.GetFloat(i));
      out.append(reinterpret_cast<const char*>(&h), element);
    }
  }
  return out;
}

}  // namespace kiln
