// Kiln's version, bumped with each release. include/kiln/kiln.h's KILN_VERSION_* macros must
// equal it (api/status_api.cc checks at compile time); a saved plan records it (runtime/plan_file.h).
#ifndef KILN_BASE_VERSION_H_
#define KILN_BASE_VERSION_H_

namespace kiln {
inline constexpr char kVersion[] = "0.1.0";
}  // namespace kiln

#endif  // KILN_BASE_VERSION_H_
