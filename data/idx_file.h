// IDX files, the format of the MNIST and Fashion-MNIST distributions: a 4-byte magic (two zero
// bytes, an element-type code, the number of dimensions), one big-endian uint32 per dimension,
// then the elements in row-major order. Only unsigned-byte elements (type 0x08) are read, which is
// what every image and label file of those data sets holds.
#ifndef KILN_DATA_IDX_FILE_H_
#define KILN_DATA_IDX_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln {

// The contents of an IDX file: its dimensions (outermost first) and its bytes, product(dims) of
// them. Images are (N, H, W), labels (N).
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Reads an IDX file, plain or gzip'd (detected from the gzip magic, so the .gz files of the
// official downloads work without unpacking). Errors name the file and the problem: NotFound for a
// missing file, InvalidArgument for a bad magic, zero dimensions, a size whose product overflows
// or passes the 2^40-byte cap, data shorter or longer than the header says, or a corrupt gzip
// stream; Unimplemented for element types other than unsigned byte.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// Writes `array` as an uncompressed unsigned-byte IDX file. Used by tests and tools that make
// small data sets; InvalidArgument when dims and data disagree or a dimension passes 2^32 - 1.
absl::Status WriteIdxFile(const std::string& path, const IdxArray& array);

}  // namespace kiln

#endif  // KILN_DATA_IDX_FILE_H_
