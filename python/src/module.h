// What the native module's source files share (python/src/).
#ifndef KILN_PYTHON_SRC_MODULE_H_
#define KILN_PYTHON_SRC_MODULE_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "kiln/kiln.hpp"

namespace kiln_python {

// Raises kiln.KilnError(message, code) for a failed status.
[[noreturn]] void Raise(const kiln::Status& status);
void Check(const kiln::Status& status);

// CompileOptions from keyword arguments (None values keep the defaults); ValueError for an
// unknown name.
kiln::CompileOptions ToOptions(const pybind11::dict& options);

// A NumPy array over `data` with `blob`'s dims that keeps `owner` alive (no copy).
pybind11::array_t<float> View(const kiln::BlobInfo& blob, float* data, pybind11::handle owner);

// kiln._kiln._Graph, _Engine, _Context and the DLPack reader.
void BindGraphAndEngine(pybind11::module_& m);

}  // namespace kiln_python

#endif  // KILN_PYTHON_SRC_MODULE_H_
