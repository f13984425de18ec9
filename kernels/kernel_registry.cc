#include "kernels/kernel_registry.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln {

absl::string_view BackendName(Backend backend) {
  switch (backend) {
    case Backend::kReference:
      return "reference";
    case Backend::kCpu:
      return "cpu";
    case Backend::kCuda:
      return "cuda";
  }
  return "?";
}

std::string KernelKey::Name() const {
  return absl::StrCat(BackendName(backend), ".", absl::AsciiStrToLower(op), ".", dtype, ".", layout,
                      ".", algorithm);
}

absl::Status RequireDenseF32(const Node& node) {
  for (const Value& v : node.inputs()) {
    if (v.type().dtype() != DataType::kF32 || !v.type().IsContiguous()) {
      return absl::UnimplementedError(
          absl::StrCat("needs dense row-major f32 inputs, got ", v.type().ToString()));
    }
  }
  for (const TensorType& t : node.output_types()) {
    if (t.dtype() != DataType::kF32 || !t.IsContiguous()) {
      return absl::UnimplementedError(
          absl::StrCat("needs a dense row-major f32 output, got ", t.ToString()));
    }
  }
  return absl::OkStatus();
}

absl::Status KernelRegistry::Register(KernelFactory factory) {
  std::string name = factory.key.Name();
  if (!factory.can_implement || !factory.choose || !factory.build) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", name, " is incomplete"));
  }
  if (by_name_.count(name)) {
    return absl::AlreadyExistsError(absl::StrCat("kernel ", name, " registered twice"));
  }
  by_name_.emplace(std::move(name), std::move(factory));
  return absl::OkStatus();
}

absl::StatusOr<const KernelFactory*> KernelRegistry::Select(const Node& node,
                                                            Backend backend) const {
  const KernelFactory* best = nullptr;
  std::string reasons;
  for (const auto& [name, f] : by_name_) {
    if (f.key.op != node.op() || f.key.backend != backend) continue;
    absl::Status s = f.can_implement(node);
    if (!s.ok()) {
      absl::StrAppend(&reasons, "; ", name, ": ", s.message());
      continue;
    }
    if (best == nullptr || f.priority > best->priority) best = &f;
  }
  if (best != nullptr) return best;
  return absl::UnimplementedError(absl::StrCat(
      "no ", BackendName(backend), " kernel for node '", node.name(), "' (", node.op(), ", ",
      node.num_inputs() > 0 ? node.input(0).type().ToString() : std::string("no inputs"), ")",
      reasons.empty() ? std::string(": none registered") : reasons));
}

std::vector<const KernelFactory*> KernelRegistry::ForOp(absl::string_view op) const {
  std::vector<const KernelFactory*> out;
  for (const auto& [name, f] : by_name_) {
    if (f.key.op == op) out.push_back(&f);
  }
  return out;
}

std::vector<const KernelFactory*> KernelRegistry::All() const {
  std::vector<const KernelFactory*> out;
  for (const auto& [name, f] : by_name_) out.push_back(&f);
  return out;
}

}  // namespace kiln
