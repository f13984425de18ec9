// Parameter (a graph input) and Constant (a weight tensor held by the node).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/all_ops.h"

namespace kiln {

namespace {
absl::StatusOr<std::vector<TensorType>> TypeFromAttrs(const InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(DataType dtype, ParseDataType(ctx.GetString("dtype")));
  const auto& strides = ctx.GetInts("strides");
  if (strides.empty()) {
    KILN_ASSIGN_OR_RETURN(TensorType t, TensorType::Create(dtype, ctx.GetInts("shape")));
    return std::vector<TensorType>{t};
  }
  KILN_ASSIGN_OR_RETURN(TensorType t,
                        TensorType::CreateStrided(dtype, ctx.GetInts("shape"), strides));
  return std::vector<TensorType>{t};
}
}  // namespace

absl::Status RegisterGraphOps(OpRegistry& registry) {
  for (const char* name : {"Parameter", "Constant"}) {
    OpDef def;
    def.name = name;
    def.family = "graph";
    def.min_inputs = def.max_inputs = 0;
    def.attrs = {{"dtype", AttrKind::kString, std::nullopt},
                 {"shape", AttrKind::kInts, std::nullopt},
                 {"strides", AttrKind::kInts, AttrValue(std::vector<int64_t>{})}};
    def.infer_types = TypeFromAttrs;
    def.summary = std::string(name) == "Parameter"
                      ? "A graph input, bound by name when the plan runs."
                      : "A weight tensor stored in the graph.";
    KILN_RETURN_IF_ERROR(registry.Register(std::move(def)));
  }
  return absl::OkStatus();
}

}  // namespace kiln
