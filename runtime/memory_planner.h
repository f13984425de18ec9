// Activation memory planning as plain data: each buffer's live interval (in steps) and size in,
// one arena offset per buffer out. Greedy, lowest fitting offset, 256-byte aligned, in three
// orders (largest buffer first; fullest step first, its buffers largest first; by first step),
// keeping the smallest arena; buffers whose intervals overlap never overlap in memory.
#ifndef KILN_RUNTIME_MEMORY_PLANNER_H_
#define KILN_RUNTIME_MEMORY_PLANNER_H_

#include <cstdint>
#include <vector>

namespace kiln {

struct BufferRequest {
  int64_t bytes = 0;
  int first_step = 0;  // Step that writes it (or 0 for inputs).
  int last_step = 0;   // Last step that reads it (inclusive).
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // One per request.
  int64_t arena_bytes = 0;
};

constexpr int64_t kBufferAlignment = 256;

// With `reuse` false every buffer gets its own range (a debug switch).
MemoryPlan PlanMemory(const std::vector<BufferRequest>& requests, bool reuse = true);

}  // namespace kiln

#endif  // KILN_RUNTIME_MEMORY_PLANNER_H_
