#include "ir/op_kind.h"

#include <string>

#include "absl/container/flat_hash_map.h"

namespace kiln {

namespace {

constexpr absl::string_view kNames[] = {"custom",
#define KILN_OP_KIND_NAME(name) #name,
                                        KILN_OP_KINDS(KILN_OP_KIND_NAME)
#undef KILN_OP_KIND_NAME
};

}  // namespace

OpKind OpKindFromName(absl::string_view name) {
  static const auto* const kByName = [] {
    auto* map = new absl::flat_hash_map<std::string, OpKind>();
    for (size_t i = 1; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
      (*map)[std::string(kNames[i])] = static_cast<OpKind>(i);
    }
    return map;
  }();
  auto it = kByName->find(std::string(name));
  return it == kByName->end() ? OpKind::kCustom : it->second;
}

absl::string_view OpKindName(OpKind kind) {
  const size_t i = static_cast<size_t>(kind);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : kNames[0];
}

}  // namespace kiln
