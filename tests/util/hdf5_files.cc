#include "tests/util/hdf5_files.h"

#include <hdf5.h>

#include "gtest/gtest.h"

namespace kiln {
namespace testing {

void WriteH5(const std::string& path, const std::map<std::string, H5Array>& arrays) {
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0) << path;
  for (const auto& [name, a] : arrays) {
    const std::vector<hsize_t> dims(a.dims.begin(), a.dims.end());
    hid_t space = dims.empty()
                      ? H5Screate(H5S_SCALAR)
                      : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t type = a.file_type == H5FileType::kF64   ? H5T_IEEE_F64LE
                       : a.file_type == H5FileType::kI32 ? H5T_STD_I32LE
                                                         : H5T_IEEE_F32LE;
    hid_t set = H5Dcreate2(file, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(set, 0) << name;
    ASSERT_GE(H5Dwrite(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.values.data()), 0);
    H5Dclose(set);
    H5Sclose(space);
  }
  H5Fclose(file);
}

}  // namespace testing
}  // namespace kiln
