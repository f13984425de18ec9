// HDF5 files for tests of Caffe's HDF5Data layer, written with the HDF5 library (Debian's
// libhdf5): each array a dataset of the given file type, from double values.
#ifndef KILN_TESTS_UTIL_HDF5_FILES_H_
#define KILN_TESTS_UTIL_HDF5_FILES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {
namespace testing {

// The type a dataset is stored as in the file.
enum class H5FileType { kF32, kF64, kI32 };

struct H5Array {
  std::vector<uint64_t> dims;  // empty: a scalar
  std::vector<double> values;
  H5FileType file_type = H5FileType::kF32;
};

// Writes `arrays` as datasets of a new HDF5 file at `path` (a GoogleTest failure if it cannot).
void WriteH5(const std::string& path, const std::map<std::string, H5Array>& arrays);

}  // namespace testing
}  // namespace kiln

#endif  // KILN_TESTS_UTIL_HDF5_FILES_H_
