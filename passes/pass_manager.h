// Runs passes in order: the verifier after every pass that changed the graph (a failure names
// the pass), the IR dumped after a named pass on request, passes disabled by name, and groups of
// passes repeated until none of them changes the graph.
#ifndef KILN_PASSES_PASS_MANAGER_H_
#define KILN_PASSES_PASS_MANAGER_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace kiln {

struct PassManagerOptions {
  // Passes (by name()) that are skipped.
  std::set<std::string> disabled;
  // After each pass named here runs, `dump` gets the pass name and the printed IR.
  std::set<std::string> dump_after;
  std::function<void(absl::string_view pass, const std::string& ir)> dump;
};

// What one pass run did, in order (a fixed-point group contributes one entry per round).
struct PassRun {
  std::string pass;
  bool changed = false;
  int nodes_after = 0;
};

class PassManager {
 public:
  explicit PassManager(PassManagerOptions options = {}) : options_(std::move(options)) {}

  // Appends a pass run once.
  PassManager& Add(std::unique_ptr<Pass> pass);
  // Appends a group run round after round until a whole round changes nothing;
  // Internal if it still changes the graph after `max_rounds` rounds (a pass that oscillates).
  PassManager& AddFixedPointGroup(std::vector<std::unique_ptr<Pass>> passes, int max_rounds = 16);

  // Every pass name, in order (groups expanded), for `--disable-pass` help and checks.
  std::vector<std::string> PassNames() const;

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context);
  const std::vector<PassRun>& history() const { return history_; }

 private:
  struct Stage {
    std::vector<std::unique_ptr<Pass>> passes;
    int max_rounds = 1;  // 1: run once
  };
  absl::StatusOr<bool> RunOne(Pass& pass, Graph& graph, const PassContext& context);

  PassManagerOptions options_;
  std::vector<Stage> stages_;
  std::vector<PassRun> history_;
};

}  // namespace kiln

#endif  // KILN_PASSES_PASS_MANAGER_H_
