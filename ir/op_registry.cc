#include "ir/op_registry.h"

#include "absl/strings/str_cat.h"

namespace kiln {

absl::Status OpRegistry::Register(OpDef def) {
  if (def.name.empty() || !def.infer_types) {
    return absl::InvalidArgumentError(
        absl::StrCat("OpRegistry: op '", def.name, "' needs a name and an InferTypes function"));
  }
  if (defs_.count(def.name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("OpRegistry: op '", def.name, "' registered twice"));
  }
  def.kind = OpKindFromName(def.name);
  for (const AttrDef& a : def.attrs) {
    if (a.default_value.has_value() && !CoerceAttr(*a.default_value, a.kind).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("OpRegistry: op '", def.name,
                                                     "': default of attribute '", a.name,
                                                     "' is not a ", AttrKindName(a.kind)));
    }
  }
  std::string name = def.name;
  defs_.emplace(std::move(name), std::make_unique<OpDef>(std::move(def)));
  return absl::OkStatus();
}

absl::Status OpRegistry::SetGradient(absl::string_view name, GradientFn gradient) {
  auto it = defs_.find(name);
  if (it == defs_.end()) {
    return absl::NotFoundError(absl::StrCat("OpRegistry: no op '", name, "' to give a gradient"));
  }
  it->second->gradient = std::move(gradient);
  return absl::OkStatus();
}

absl::StatusOr<const OpDef*> OpRegistry::Find(absl::string_view name) const {
  auto it = defs_.find(name);
  if (it == defs_.end()) return absl::NotFoundError(absl::StrCat("unknown op '", name, "'"));
  return it->second.get();
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> out;
  for (const auto& [name, def] : defs_) out.push_back(def.get());
  return out;
}

}  // namespace kiln
