#include "runtime/memory_planner.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace kiln {

namespace {
int64_t Align(int64_t n) {
  return (n + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}
int64_t AlignedSize(const BufferRequest& r) { return Align(std::max<int64_t>(r.bytes, 1)); }
bool Overlaps(const BufferRequest& a, const BufferRequest& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

// Places the buffers in `order`, each at the lowest offset where it fits beside the buffers
// already placed that are live with it.
MemoryPlan PlaceInOrder(const std::vector<BufferRequest>& requests,
                        const std::vector<size_t>& order, bool reuse) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> placed;
  for (size_t i : order) {
    const int64_t size = AlignedSize(requests[i]);
    // Ranges of already-placed buffers alive at the same time, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      if (!reuse || Overlaps(requests[i], requests[j])) {
        busy.emplace_back(plan.offsets[j], plan.offsets[j] + AlignedSize(requests[j]));
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

// Largest first; ties by index so the plan is deterministic.
std::vector<size_t> BySize(const std::vector<BufferRequest>& requests) {
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  return order;
}

// The steps by how many bytes are live at them, fullest first; each step's not yet ordered
// buffers largest first. The fullest step is then packed tightly, and the buffers of the next
// fullest fit around it, where size order alone can strand a small buffer above a gap that a
// buffer live at a different time left.
std::vector<size_t> ByBreadth(const std::vector<BufferRequest>& requests) {
  std::map<int, int64_t> live;  // step -> bytes
  for (const BufferRequest& r : requests) {
    for (int s = r.first_step; s <= r.last_step; ++s) live[s] += AlignedSize(r);
  }
  std::vector<std::pair<int64_t, int>> steps;
  for (const auto& [step, bytes] : live) steps.emplace_back(-bytes, step);
  std::sort(steps.begin(), steps.end());
  const std::vector<size_t> by_size = BySize(requests);
  std::vector<bool> taken(requests.size(), false);
  std::vector<size_t> order;
  for (const auto& [minus_bytes, step] : steps) {
    for (size_t i : by_size) {
      if (!taken[i] && requests[i].first_step <= step && step <= requests[i].last_step) {
        taken[i] = true;
        order.push_back(i);
      }
    }
  }
  return order;
}

// By first step, larger first among buffers born at the same step: a chain's buffers then take
// the bytes its dead ones left, in the order they die.
std::vector<size_t> ByBirth(const std::vector<BufferRequest>& requests) {
  std::vector<size_t> order = BySize(requests);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].first_step < requests[b].first_step;
  });
  return order;
}

}  // namespace

MemoryPlan PlanMemory(const std::vector<BufferRequest>& requests, bool reuse) {
  MemoryPlan best = PlaceInOrder(requests, BySize(requests), reuse);
  if (!reuse) return best;
  for (const std::vector<size_t>& order : {ByBreadth(requests), ByBirth(requests)}) {
    MemoryPlan plan = PlaceInOrder(requests, order, reuse);
    if (plan.arena_bytes < best.arena_bytes) best = std::move(plan);
  }
  return best;
}

}  // namespace kiln
