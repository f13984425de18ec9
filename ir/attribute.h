// Node attributes: a small closed set of value kinds, kept in an ordered map so that printing,
// comparison and hashing are deterministic.
#ifndef KILN_IR_ATTRIBUTE_H_
#define KILN_IR_ATTRIBUTE_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln {

enum class AttrKind { kInt, kFloat, kBool, kString, kInts, kFloats };

// One attribute value. Lists of ints and floats are separate kinds; accessors coerce an int
// (list) to a float (list) because the text form cannot tell an empty or integral float list
// from an int list.
using AttrValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;

using AttrMap = std::map<std::string, AttrValue>;

absl::string_view AttrKindName(AttrKind kind);
AttrKind KindOf(const AttrValue& value);

// Converts `value` to `kind` where that loses nothing (int -> float, ints -> floats, an integral
// float -> int); InvalidArgument otherwise.
absl::StatusOr<AttrValue> CoerceAttr(const AttrValue& value, AttrKind kind);

// Text form used by the IR printer: 3, 0.75, true, "s", [1,2], [0.5,1.0]. Floats always carry a
// '.' or an exponent and print with enough digits to round-trip.
std::string AttrValueToString(const AttrValue& value);

// Parses one value written by AttrValueToString from the front of `text`, advancing it.
absl::StatusOr<AttrValue> ConsumeAttrValue(absl::string_view* text);

}  // namespace kiln

#endif  // KILN_IR_ATTRIBUTE_H_
