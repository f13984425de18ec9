#include "ir/op_def.h"

#include "absl/strings/str_cat.h"

namespace kiln {

namespace {
template <typename T>
const T& Get(const AttrMap& attrs, const std::string& name) {
  auto it = attrs.find(name);
  if (it == attrs.end() || !std::holds_alternative<T>(it->second)) {
    ABSL_RAW_LOG(FATAL, "InferContext: attribute '%s' missing or of another kind", name.c_str());
  }
  return std::get<T>(it->second);
}
}  // namespace

int64_t InferContext::GetInt(const std::string& name) const { return Get<int64_t>(attrs_, name); }
double InferContext::GetFloat(const std::string& name) const { return Get<double>(attrs_, name); }
bool InferContext::GetBool(const std::string& name) const { return Get<bool>(attrs_, name); }
const std::string& InferContext::GetString(const std::string& name) const {
  return Get<std::string>(attrs_, name);
}
const std::vector<int64_t>& InferContext::GetInts(const std::string& name) const {
  return Get<std::vector<int64_t>>(attrs_, name);
}
const std::vector<double>& InferContext::GetFloats(const std::string& name) const {
  return Get<std::vector<double>>(attrs_, name);
}

const AttrDef* OpDef::FindAttr(absl::string_view attr_name) const {
  for (const AttrDef& a : attrs) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

OpDef MakeOpDef(std::string name, std::string family, std::vector<AttrDef> attrs,
                InferTypesFn infer, std::string summary) {
  OpDef def;
  def.name = std::move(name);
  def.family = std::move(family);
  def.input_names = {"x"};
  def.attrs = std::move(attrs);
  def.infer_types = std::move(infer);
  def.differentiable = true;
  def.summary = std::move(summary);
  return def;
}

absl::StatusOr<AttrMap> NormalizeAttrs(const OpDef& def, const AttrMap& attrs) {
  AttrMap out;
  for (const auto& [name, value] : attrs) {
    const AttrDef* attr_def = def.FindAttr(name);
    if (attr_def == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(def.name, ": unknown attribute '", name, "'"));
    }
    auto coerced = CoerceAttr(value, attr_def->kind);
    if (!coerced.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(def.name, ": attribute '", name, "': ", coerced.status().message()));
    }
    out[name] = *std::move(coerced);
  }
  for (const AttrDef& a : def.attrs) {
    if (out.count(a.name)) continue;
    if (!a.default_value.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(def.name, ": required attribute '", a.name, "' missing"));
    }
    out[a.name] = *a.default_value;
  }
  return out;
}

absl::StatusOr<std::vector<TensorType>> InferNodeTypes(const OpDef& def,
                                                       const std::vector<TensorType>& inputs,
                                                       const AttrMap& normalized_attrs) {
  const int n = static_cast<int>(inputs.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    std::string expected = def.max_inputs < 0 ? absl::StrCat("at least ", def.min_inputs)
                           : def.min_inputs == def.max_inputs
                               ? absl::StrCat(def.min_inputs)
                               : absl::StrCat(def.min_inputs, " to ", def.max_inputs);
    return absl::InvalidArgumentError(
        absl::StrCat(def.name, ": takes ", expected, " inputs, got ", n));
  }
  InferContext ctx(inputs, normalized_attrs);
  auto result = def.infer_types(ctx);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat(def.name, ": ", result.status().message()));
  }
  return result;
}

}  // namespace kiln
