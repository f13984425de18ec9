// FNV-1a, 64 bits: the checksum of Kiln's own files (snapshot manifests, plan files). Catches
// torn and damaged files, not tampering.
#ifndef KILN_BASE_FNV_HASH_H_
#define KILN_BASE_FNV_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace kiln {

inline uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace kiln

#endif  // KILN_BASE_FNV_HASH_H_
