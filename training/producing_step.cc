#include "training/producing_step.h"

namespace kiln {

int ProducingStep(const ExecutionPlan& plan, const std::string& output) {
  auto it = plan.outputs().find(output);
  if (output.empty() || it == plan.outputs().end()) return -1;
  const int root = plan.RootBuffer(it->second);
  int last = -1;
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    for (int o : plan.steps()[i].outputs) {
      if (plan.RootBuffer(o) == root) last = static_cast<int>(i);
    }
  }
  return last;
}

}  // namespace kiln
