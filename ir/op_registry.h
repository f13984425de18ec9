// OpRegistry: an object holding OpDefs by name. There is no global registry; callers build one
// (usually with RegisterAllOps from ops/all_ops.h) and pass it where it is needed.
#ifndef KILN_IR_OP_REGISTRY_H_
#define KILN_IR_OP_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/op_def.h"

namespace kiln {

class OpRegistry {
 public:
  // Adds `def`; AlreadyExists when the name is taken, InvalidArgument when it is incomplete.
  absl::Status Register(OpDef def);

  // Gives the op `name` its gradient builder (ops/gradients/); NotFound for an unknown op.
  absl::Status SetGradient(absl::string_view name, GradientFn gradient);

  // The OpDef named `name`, or NotFound.
  absl::StatusOr<const OpDef*> Find(absl::string_view name) const;

  // All OpDefs ordered by name.
  std::vector<const OpDef*> All() const;

 private:
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> defs_;
};

}  // namespace kiln

#endif  // KILN_IR_OP_REGISTRY_H_
