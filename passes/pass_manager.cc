#include "passes/pass_manager.h"

#include "absl/strings/str_cat.h"
#include "ir/text_format.h"
#include "ir/verifier.h"
#include "base/status_macros.h"

namespace kiln {

void PassContext::Explain(absl::string_view pass, const Node& producer, const Node& consumer,
                          absl::string_view reason) const {
  if (remarks == nullptr) return;
  remarks->push_back({std::string(pass), producer.name(), consumer.name(), std::string(reason)});
}

PassManager& PassManager::Add(std::unique_ptr<Pass> pass) {
  Stage stage;
  stage.passes.push_back(std::move(pass));
  stages_.push_back(std::move(stage));
  return *this;
}

PassManager& PassManager::AddFixedPointGroup(std::vector<std::unique_ptr<Pass>> passes,
                                             int max_rounds) {
  Stage stage;
  stage.passes = std::move(passes);
  stage.max_rounds = std::max(1, max_rounds);
  stages_.push_back(std::move(stage));
  return *this;
}

std::vector<std::string> PassManager::PassNames() const {
  std::vector<std::string> names;
  for (const Stage& s : stages_) {
    for (const auto& p : s.passes) names.emplace_back(p->name());
  }
  return names;
}

absl::StatusOr<bool> PassManager::RunOne(Pass& pass, Graph& graph, const PassContext& context) {
  const std::string name(pass.name());
  if (options_.disabled.count(name)) return false;
  absl::StatusOr<bool> changed = pass.Run(graph, context);
  if (!changed.ok()) return Annotate(changed.status(), absl::StrCat("pass ", name));
  if (*changed) {
    KILN_RETURN_IF_ERROR(Annotate(VerifyGraph(graph), absl::StrCat("verifier after pass ", name)));
  }
  history_.push_back({name, *changed, graph.num_nodes()});
  if (options_.dump_after.count(name) && options_.dump) options_.dump(name, PrintGraph(graph));
  return *changed;
}

absl::StatusOr<bool> PassManager::Run(Graph& graph, const PassContext& context) {
  bool any = false;
  for (Stage& stage : stages_) {
    bool converged = false;
    // Only the last round's declined rewrites describe the final graph.
    const size_t remarks_before = context.remarks ? context.remarks->size() : 0;
    for (int round = 0; round < stage.max_rounds && !converged; ++round) {
      if (context.remarks != nullptr) context.remarks->resize(remarks_before);
      bool changed = false;
      for (auto& pass : stage.passes) {
        KILN_ASSIGN_OR_RETURN(bool c, RunOne(*pass, graph, context));
        changed = changed || c;
      }
      any = any || changed;
      converged = !changed;
    }
    if (!converged && stage.max_rounds > 1) {
      std::string names;
      for (auto& pass : stage.passes)
        absl::StrAppend(&names, names.empty() ? "" : ", ", pass->name());
      return absl::InternalError(absl::StrCat("passes {", names, "} still change the graph after ",
                                              stage.max_rounds, " rounds"));
    }
  }
  return any;
}

}  // namespace kiln
