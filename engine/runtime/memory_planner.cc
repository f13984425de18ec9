#include "engine/runtime/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace kiln {

namespace {
int64_t Align(int64_t n) {
  return (n + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}
bool Overlaps(const BufferRequest& a, const BufferRequest& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}
}  // namespace

MemoryPlan PlanMemory(const std::vector<BufferRequest>& requests, bool reuse) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by index so the plan is deterministic.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const int64_t size = Align(std::max<int64_t>(requests[i].bytes, 1));
    // Ranges of already-placed buffers alive at the same time, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      if (!reuse || Overlaps(requests[i], requests[j])) {
        busy.emplace_back(plan.offsets[j],
                          plan.offsets[j] + Align(std::max<int64_t>(requests[j].bytes, 1)));
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace kiln
