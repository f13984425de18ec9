// Fuzz target: bytes parsed as a .solverstate (frontends/caffe/solver_state.h), then the checks a
// resume makes before it touches the trainer (the history count for one- and two-history
// solvers, each blob's value count and shape against LeNet's parameters, the data position's
// net count), and what parses written back and parsed again, which must give the same state.
#include <cstring>
#include <string>
#include <vector>

#include "frontends/caffe/solver_state.h"
#include "tests/fuzz/fuzz_targets.h"

namespace {

// LeNet's learnable parameters (conv1, conv2, ip1, ip2: weights then bias).
const std::vector<std::vector<int64_t>>& Params() {
  static const auto* params = new std::vector<std::vector<int64_t>>{
      {20, 1, 5, 5}, {20}, {50, 20, 5, 5}, {50}, {500, 800}, {500}, {10, 500}, {10}};
  return *params;
}

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// What SolverTrainer::Restore checks before it copies anything, for `histories` per parameter.
bool RestoreChecksPass(const kiln::SolverStateData& state, int histories) {
  const size_t params = Params().size();
  if (state.history.size() != params * histories) return false;
  for (int which = 0; which < histories; ++which) {
    for (size_t p = 0; p < params; ++p) {
      const size_t k = kiln::HistoryIndex(which, p, params);
      if (k >= state.history.size()) __builtin_trap();
      if (static_cast<int64_t>(state.history[k].size()) != Count(Params()[p])) return false;
      (void)kiln::HistoryShapeMatches(state.history_shapes[k], Params()[p]);
    }
  }
  return !state.progress.has_value() || state.progress->nets.size() == 2;
}

bool SameState(const kiln::SolverStateData& a, const kiln::SolverStateData& b) {
  if (a.iter != b.iter || a.learned_net != b.learned_net || a.current_step != b.current_step ||
      a.history_shapes != b.history_shapes || a.history.size() != b.history.size() ||
      a.progress.has_value() != b.progress.has_value()) {
    return false;
  }
  for (size_t i = 0; i < a.history.size(); ++i) {
    if (a.history[i].size() != b.history[i].size()) return false;
    if (!a.history[i].empty() &&
        std::memcmp(a.history[i].data(), b.history[i].data(), a.history[i].size() * 4) != 0) {
      return false;
    }
  }
  if (!a.progress.has_value()) return true;
  if (a.progress->nets.size() != b.progress->nets.size()) return false;
  for (size_t i = 0; i < a.progress->nets.size(); ++i) {
    if (a.progress->nets[i].passes != b.progress->nets[i].passes ||
        a.progress->nets[i].batches_served != b.progress->nets[i].batches_served) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto state = kiln::ParseSolverState(bytes, "fuzz.solverstate");
  if (!state.ok()) return 0;
  if (state->history.size() != state->history_shapes.size()) __builtin_trap();
  for (size_t i = 0; i < state->history.size(); ++i) {
    if (Count(state->history_shapes[i]) != static_cast<int64_t>(state->history[i].size())) {
      __builtin_trap();  // ParseSolverState promises dims that multiply to the blob's size
    }
  }
  (void)RestoreChecksPass(*state, 1);
  (void)RestoreChecksPass(*state, 2);
  auto written = kiln::SerializeSolverState(*state);
  if (!written.ok()) return 0;  // a state Caffe could not hold (a negative iter): refused, fine
  auto again = kiln::ParseSolverState(*written, "fuzz-again.solverstate");
  if (!again.ok() || !SameState(*state, *again)) __builtin_trap();
  return 0;
}
