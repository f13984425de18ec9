// Element types a Kiln tensor can hold, with their sizes and names.
#ifndef KILN_BASE_DTYPE_H_
#define KILN_BASE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

// The dtypes of the IR. f32/f16/bf16 are the compute types; i32 and u8 carry labels, indices
// and masks.
enum class DataType : uint8_t { kF32, kF16, kBF16, kI32, kU8 };

// Bytes one element occupies.
size_t DataTypeSize(DataType dtype);

// The short name used by the text IR and the CLI: "f32", "f16", "bf16", "i32", "u8".
absl::string_view DataTypeName(DataType dtype);

// Inverse of DataTypeName; InvalidArgument names the unknown string.
absl::StatusOr<DataType> ParseDataType(absl::string_view name);

// True for the three floating-point dtypes.
bool IsFloatingPoint(DataType dtype);

// IEEE binary16 and bfloat16 conversions with round-to-nearest-even; NaN stays NaN.
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

}  // namespace kiln

#endif  // KILN_BASE_DTYPE_H_
