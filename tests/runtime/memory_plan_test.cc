// The activation memory plan on random graphs: no two buffers live at the same step share a
// byte (in-place outputs and views share their root's bytes by design, so liveness is counted
// per root), and a plan that reuses memory and writes in place computes exactly what a plan
// that gives every value its own poisoned memory computes.
#include <algorithm>
#include <map>
#include <random>

#include "ir/graph_builder.h"
#include "ir/text_format.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "gtest/gtest.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::RandomTensor;

const std::vector<int64_t> kShape = {2, 4, 5, 5};

// A random DAG of same-shape ops: activations, Eltwise over earlier values, per-channel Scale,
// 3x3 convolutions (with and without a bias), BatchNorm, pooling that keeps the size, Dropout
// and Flatten/Reshape views; 1 to 3 outputs.
std::unique_ptr<Graph> RandomGraph(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  GraphBuilder b(&DefaultOpRegistry());
  std::vector<Value> values = {*b.Input("x", F32(kShape))};
  if (pick(2)) values.push_back(*b.Input("x2", F32(kShape)));
  const int nodes = 6 + pick(14);
  for (int i = 0; i < nodes; ++i) {
    // Recent values more often, so chains and long-lived values both occur.
    const Value a = values[values.size() - 1 - std::min<int>(pick(4), values.size() - 1)];
    const Value c = values[pick(static_cast<int>(values.size()))];
    const std::string name = "n" + std::to_string(i);
    Value v;
    switch (pick(9)) {
      case 0:
        v = *b.Relu(a, pick(2) ? 0.0 : 0.1, name);
        break;
      case 1:
        v = *b.Op1(pick(2) ? "TanH" : "Sigmoid", {a}, {}, name);
        break;
      case 2: {
        const char* ops[] = {"sum", "prod", "max"};
        v = *b.Op1("Eltwise", {a, c}, {{"operation", std::string(ops[pick(3)])}}, name);
        break;
      }
      case 3: {
        Value s = *b.Constant(name + "/s", RandomTensor(F32({4}), seed * 100 + i));
        v = *b.Op1("Scale", {a, s}, {}, name);
        break;
      }
      case 4:
      case 5: {
        Value w =
            *b.Constant(name + "/w", RandomTensor(F32({4, 4, 3, 3}), seed * 100 + i, -0.3f, 0.3f));
        std::vector<Value> in = {a, w};
        if (pick(2)) in.push_back(*b.Constant(name + "/b", RandomTensor(F32({4}), seed + i)));
        v = *b.Op1("Convolution", in, {{"pad", std::vector<int64_t>{1}}}, name);
        break;
      }
      case 6: {
        Value mean = *b.Constant(name + "/m", RandomTensor(F32({4}), seed * 7 + i));
        Value var = *b.Constant(name + "/v", RandomTensor(F32({4}), seed * 9 + i, 0.5f, 2.0f));
        v = *b.Op1("BatchNorm", {a, mean, var}, {}, name);
        break;
      }
      case 7:
        v = *b.Op1("Pooling", {a},
                   {{"kernel", std::vector<int64_t>{3}}, {"pad", std::vector<int64_t>{1}}}, name);
        break;
      default: {
        // A view and back: Flatten to [2, 100], Reshape to the shape again.
        Value flat = *b.Op1("Flatten", {a}, {}, name + "/flat");
        v = *b.Op1("Reshape", {flat}, {{"shape", kShape}}, name);
        break;
      }
    }
    values.push_back(v);
  }
  const int outputs = 1 + pick(3);
  for (int i = 0; i < outputs; ++i) {
    const Value v = i == 0 ? values.back() : values[1 + pick(static_cast<int>(values.size()) - 1)];
    bool taken = false;
    for (const GraphOutput& o : b.graph().outputs()) taken |= o.value == v;
    if (!taken) {
      EXPECT_TRUE(b.Output("y" + std::to_string(i), v).ok());
    }
  }
  return b.Finish();
}

// Checks that buffers live at the same step never overlap in the activation arena.
void ExpectNoLiveOverlap(const ExecutionPlan& plan, const std::string& context) {
  const int end = static_cast<int>(plan.steps().size());
  std::map<int, std::pair<int, int>> live;  // root -> [first write, last use]
  auto touch = [&](int buffer, int step) {
    const int root = plan.RootBuffer(buffer);
    if (plan.buffers()[root].arena != Arena::kActivations) return;
    auto [it, added] = live.emplace(root, std::make_pair(step, step));
    it->second.first = std::min(it->second.first, step);
    it->second.second = std::max(it->second.second, step);
  };
  for (const auto& [name, b] : plan.inputs()) touch(b, -1);
  for (int s = 0; s < end; ++s) {
    for (int b : plan.steps()[s].inputs) touch(b, s);
    for (int b : plan.steps()[s].outputs) touch(b, s);
  }
  for (const auto& [name, b] : plan.outputs()) touch(b, end);
  // A step's workspace in the arena shares no byte with a buffer live at that step.
  for (int s = 0; s < end; ++s) {
    const PlanStep& step = plan.steps()[s];
    if (step.workspace_offset < 0) continue;
    const int64_t w0 = step.workspace_offset,
                  w1 = step.workspace_offset + static_cast<int64_t>(step.workspace_bytes);
    EXPECT_LE(w1, plan.activations_bytes()) << context;
    for (const auto& [root, range] : live) {
      if (range.first > s || range.second < s) continue;
      const BufferAssignment& a = plan.buffers()[root];
      EXPECT_FALSE(a.offset < w1 && w0 < a.offset + a.bytes)
          << context << ": step " << s << "'s workspace overlaps live buffer " << root;
    }
  }
  for (auto i = live.begin(); i != live.end(); ++i) {
    for (auto j = std::next(i); j != live.end(); ++j) {
      const bool same_time =
          i->second.first <= j->second.second && j->second.first <= i->second.second;
      const BufferAssignment& a = plan.buffers()[i->first];
      const BufferAssignment& c = plan.buffers()[j->first];
      const bool same_bytes = a.offset < c.offset + c.bytes && c.offset < a.offset + a.bytes;
      EXPECT_FALSE(same_time && same_bytes)
          << context << ": buffers " << i->first << " and " << j->first << " overlap\n"
          << plan.ToString();
    }
  }
}

// A graph input is staged into the arena and dead after its last reader: the pooling's input
// and output are live together (4096 + 1024 bytes), the convolution after it reuses the input's
// bytes, and the arena is no larger than that pair.
TEST(MemoryPlanTest, AnInputsBytesAreReusedAfterItsLastReader) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({1, 4, 16, 16}));
  Value pooled =
      *b.Op1("Pooling", {x},
             {{"kernel", std::vector<int64_t>{2}}, {"stride", std::vector<int64_t>{2}}}, "pool");
  Value w = *b.Constant("conv/w", RandomTensor(F32({4, 4, 3, 3}), 1, -0.3f, 0.3f));
  Value y = *b.Op1("Convolution", {pooled, w}, {{"pad", std::vector<int64_t>{1}}}, "conv");
  ASSERT_TRUE(b.Output("y", y).ok());
  auto graph = b.Finish();
  CompileOptions options;
  options.backend = BackendChoice::kCpu;
  auto plan = Compile(*graph, DefaultKernelRegistry(), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->planned_activation_bytes(), 4096 + 1024) << (*plan)->ToString();
  ExpectNoLiveOverlap(**plan, "input reuse");
  const std::map<std::string, HostTensor> inputs = {{"x", RandomTensor(F32({1, 4, 16, 16}), 2)}};
  CompileOptions separate = options;
  separate.reuse_activation_memory = false;
  auto oracle = Compile(*graph, DefaultKernelRegistry(), separate);
  ASSERT_TRUE(oracle.ok());
  ContextOptions poison;
  poison.poison_buffers = true;
  auto ctx = ExecutionContext::Create(**plan, poison);
  auto oracle_ctx = ExecutionContext::Create(**oracle, poison);
  ASSERT_TRUE(ctx.ok() && oracle_ctx.ok());
  // Twice: the second run stages the input again over bytes the first run reused.
  for (int run = 0; run < 2; ++run) {
    auto got = (*ctx)->Run(inputs);
    auto want = (*oracle_ctx)->Run(inputs);
    ASSERT_TRUE(got.ok() && want.ok());
    const HostTensor& g = got->at("y");
    const HostTensor& e = want->at("y");
    for (int64_t i = 0; i < e.type().num_elements(); ++i) {
      ASSERT_EQ(g.GetFloat(i), e.GetFloat(i)) << "run " << run << " y[" << i << "]";
    }
  }
}

TEST(MemoryPlanTest, RandomGraphsNeverShareLiveBytesAndComputeTheSameAsUnsharedMemory) {
  int in_place_steps = 0, fused_nodes = 0, arena_workspaces = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    auto graph = RandomGraph(seed);
    const std::string context = "seed " + std::to_string(seed);
    std::map<std::string, HostTensor> inputs;
    for (const Node* p : graph->Parameters()) {
      inputs[p->name()] = RandomTensor(p->output_types()[0], seed * 31 + p->id());
    }
    // The oracle: every value in its own memory, poisoned before the run, no rewrites.
    CompileOptions separate;
    separate.backend = BackendChoice::kCpu;
    separate.reuse_activation_memory = false;
    auto oracle_plan = Compile(*graph, DefaultKernelRegistry(), separate);
    ASSERT_TRUE(oracle_plan.ok()) << context << ": " << oracle_plan.status();
    ContextOptions poison;
    poison.poison_buffers = true;
    auto oracle_ctx = ExecutionContext::Create(**oracle_plan, poison);
    ASSERT_TRUE(oracle_ctx.ok());
    auto want = (*oracle_ctx)->Run(inputs);
    ASSERT_TRUE(want.ok()) << context << ": " << want.status();
    for (const bool optimize : {false, true}) {
      CompileOptions options;
      options.backend = BackendChoice::kCpu;
      options.optimize = optimize;
      auto plan = Compile(*graph, DefaultKernelRegistry(), options);
      ASSERT_TRUE(plan.ok()) << context << ": " << plan.status();
      ExpectNoLiveOverlap(**plan, context);
      for (const PlanStep& s : (*plan)->steps()) {
        in_place_steps += s.in_place ? 1 : 0;
        arena_workspaces += s.workspace_offset >= 0 ? 1 : 0;
        fused_nodes += s.node->origins().size() > 1 ? 1 : 0;
      }
      EXPECT_LE((*plan)->activations_bytes(), (*oracle_plan)->activations_bytes()) << context;
      auto ctx = ExecutionContext::Create(**plan, poison);
      ASSERT_TRUE(ctx.ok());
      auto got = (*ctx)->Run(inputs);
      ASSERT_TRUE(got.ok()) << context << ": " << got.status();
      for (const auto& [name, w] : *want) {
        const HostTensor& g = got->at(name);
        for (int64_t i = 0; i < w.type().num_elements(); ++i) {
          const float a = g.GetFloat(i), e = w.GetFloat(i);
          ASSERT_NEAR(a, e, 1e-5f * (1.0f + std::abs(e)))
              << context << (optimize ? " fused" : "") << " output " << name << "[" << i << "]\n"
              << PrintGraph(*graph, {false});
        }
      }
    }
  }
  // The random graphs must exercise what is tested.
  EXPECT_GT(in_place_steps, 50);
  EXPECT_GT(arena_workspaces, 50);
  EXPECT_GT(fused_nodes, 10);
}

}  // namespace
}  // namespace kiln
