// Kiln's version string, bumped with each release.
#ifndef KILN_TOOLS_VERSION_H_
#define KILN_TOOLS_VERSION_H_

namespace kiln {
inline constexpr char kVersion[] = "0.1.0";
}  // namespace kiln

#endif  // KILN_TOOLS_VERSION_H_
