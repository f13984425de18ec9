// int64 arithmetic on sizes that come from a user's file or attributes (dims, pads, strides,
// dilations, element and byte counts): the result, or nothing when it does not fit, so that the
// caller returns an error naming what overflowed instead of computing with a wrapped value
// (which is undefined behaviour for signed integers).
#ifndef KILN_BASE_CHECKED_INT_H_
#define KILN_BASE_CHECKED_INT_H_

#include <cstdint>
#include <optional>

namespace kiln {

inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> CheckedSub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace kiln

#endif  // KILN_BASE_CHECKED_INT_H_
