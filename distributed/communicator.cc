#include "distributed/communicator.h"

#include "absl/strings/str_cat.h"

namespace kiln {

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAverage:
      return "average";
  }
  return "?";
}

absl::Status ValidateCollective(absl::string_view what, const void* buffer, int64_t count,
                                DataType dtype) {
  if (count < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": negative count ", count));
  }
  if (count > 0 && buffer == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": null buffer for ", count, " ", DataTypeName(dtype), " elements"));
  }
  return absl::OkStatus();
}

absl::Status ValidateReduce(const void* buffer, int64_t count, DataType dtype, ReduceOp op) {
  const std::string what = absl::StrCat("all-reduce (", ReduceOpName(op), ")");
  if (absl::Status s = ValidateCollective(what, buffer, count, dtype); !s.ok()) return s;
  if (op == ReduceOp::kAverage && !IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": averaging needs a floating-point dtype, got ", DataTypeName(dtype)));
  }
  return absl::OkStatus();
}

absl::Status ValidateRoot(int root, int world_size) {
  if (root < 0 || root >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast: root ", root, " is not a rank of a group of ", world_size));
  }
  return absl::OkStatus();
}

}  // namespace kiln
