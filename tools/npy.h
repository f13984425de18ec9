// NumPy .npy files (format versions 1-3), little-endian float32 and float16 in C order: the
// format `kiln run` reads inputs from and writes outputs to.
#ifndef KILN_TOOLS_NPY_H_
#define KILN_TOOLS_NPY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/host_tensor.h"

namespace kiln {

// Parses .npy bytes. dtype '<f4' gives f32, '<f2' gives f16; anything else (other dtypes,
// big-endian, Fortran order, object arrays) is InvalidArgument naming it. `origin` prefixes errors.
absl::StatusOr<HostTensor> ParseNpy(absl::string_view bytes, absl::string_view origin);

// .npy version 1.0 bytes for a dense f32 or f16 tensor.
absl::StatusOr<std::string> SerializeNpy(const HostTensor& tensor);

}  // namespace kiln

#endif  // KILN_TOOLS_NPY_H_
