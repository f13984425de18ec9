// Dead-code elimination: a node whose outputs reach no graph output never needs to run.
#include "passes/inference_passes.h"

namespace kiln {
namespace {

class DeadCodePass : public Pass {
 public:
  absl::string_view name() const override { return "dead_code"; }
  absl::StatusOr<bool> Run(Graph& graph, const PassContext&) override {
    return graph.RemoveDeadNodes() > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeDeadCodePass() { return std::make_unique<DeadCodePass>(); }

}  // namespace kiln
