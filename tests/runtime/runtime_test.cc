// Compiler, memory planner and executor.
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "kernels/all_kernels.h"
#include "kernels/reference/reference_kernel.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "runtime/memory_planner.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace {

using testing::F32;
using testing::RandomTensor;

// Test kernels whose properties follow from the options they are prepared with: choose reads
// them off a kernel made for those options (counting in `chosen`), build makes the kernel again
// from the options of the choice (counting in `built`).
using MakeKernelFn = std::function<std::unique_ptr<Kernel>(const KernelOptions& options)>;
void SetChooseAndBuild(KernelFactory& f, MakeKernelFn make,
                       std::shared_ptr<int> chosen = std::make_shared<int>(0),
                       std::shared_ptr<int> built = std::make_shared<int>(0)) {
  f.choose = [make, chosen](const Node&, const KernelOptions& o) -> absl::StatusOr<KernelChoice> {
    ++*chosen;
    std::unique_ptr<Kernel> k = make(o);
    KernelChoice c;
    c.workspace_bytes = k->WorkspaceBytes();
    c.aliased_input = k->AliasedInput();
    c.in_place_input = k->InPlaceInput();
    c.description = k->Describe();
    c.measured_ms = k->MeasuredMs();
    c.decision = std::make_shared<const KernelOptions>(o);
    return c;
  };
  f.build = [make, built](const Node&,
                          const KernelChoice& c) -> absl::StatusOr<std::unique_ptr<Kernel>> {
    ++*built;
    return make(*static_cast<const KernelOptions*>(c.decision.get()));
  };
}

TEST(MemoryPlannerTest, DisjointLifetimesShareMemory) {
  MemoryPlan plan = PlanMemory({{1000, 0, 1}, {1000, 2, 3}});
  EXPECT_EQ(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.arena_bytes, 1024);
}

TEST(MemoryPlannerTest, OverlappingLifetimesNeverOverlapInMemory) {
  std::vector<BufferRequest> requests = {
      {300, 0, 2}, {5000, 1, 3}, {256, 2, 2}, {1, 3, 4}, {700, 0, 4}};
  MemoryPlan plan = PlanMemory(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % kBufferAlignment, 0);
    for (size_t j = i + 1; j < requests.size(); ++j) {
      const bool live_together = requests[i].first_step <= requests[j].last_step &&
                                 requests[j].first_step <= requests[i].last_step;
      const bool disjoint = plan.offsets[i] + requests[i].bytes <= plan.offsets[j] ||
                            plan.offsets[j] + requests[j].bytes <= plan.offsets[i];
      if (live_together) {
        EXPECT_TRUE(disjoint) << i << " vs " << j;
      }
    }
  }
}

TEST(MemoryPlannerTest, NoReuseGivesEveryBufferItsOwnRange) {
  MemoryPlan plan = PlanMemory({{1000, 0, 1}, {1000, 2, 3}}, /*reuse=*/false);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.arena_bytes, 2048);
}

std::unique_ptr<Graph> Chain(int length) {
  GraphBuilder b(&DefaultOpRegistry());
  Value v = *b.Input("x", F32({4, 64}));
  for (int i = 0; i < length; ++i) v = *b.Op1(i % 2 ? "TanH" : "Sigmoid", {v}, {});
  EXPECT_TRUE(b.Output("y", v).ok());
  return b.Finish();
}

TEST(CompilerTest, ActivationReuseBoundsTheArena) {
  auto g = Chain(10);
  auto plan = Compile(*g, DefaultKernelRegistry(), {BackendChoice::kCpu});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // A chain needs at most three live buffers (input, one in flight, output), not eleven.
  EXPECT_LE((*plan)->planned_activation_bytes(), 3 * 4 * 64 * 4);
  CompileOptions no_reuse{BackendChoice::kCpu};
  no_reuse.reuse_activation_memory = false;
  auto big = Compile(*g, DefaultKernelRegistry(), no_reuse);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ((*big)->planned_activation_bytes(), 11 * 4 * 64 * 4);
}

TEST(CompilerTest, PlanDumpNamesKernelsAndBackend) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({2, 3, 8, 8}));
  Value w = *b.Constant("w", RandomTensor(F32({4, 3, 3, 3}), 1));
  ASSERT_TRUE(b.Output("y", *b.Convolution(x, w, nullptr, {}, "conv")).ok());
  auto g = b.Finish();
  auto plan = Compile(*g, DefaultKernelRegistry(), {BackendChoice::kCpu});
  ASSERT_TRUE(plan.ok());
  const std::string dump = (*plan)->ToString();
  EXPECT_NE(dump.find("cpu.convolution.f32.nchw.im2col_gemm"), std::string::npos) << dump;
  EXPECT_NE(dump.find("backend cpu"), std::string::npos);
  EXPECT_GT((*plan)->largest_step_workspace(), 0);
  EXPECT_EQ((*plan)->workspace_bytes(), 0);  // the step workspaces are in the activation arena
}

TEST(CompilerTest, CpuBackendFallsBackToReferencePerNode) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({2, 3, 8, 8}));
  Value w = *b.Constant("w", RandomTensor(F32({4, 3, 3, 3}), 1));
  ConvolutionOptions o;
  Value c = *b.Convolution(x, w, nullptr, o, "conv");
  // LRN has no fast CPU kernel: its node runs the reference kernel in the same plan.
  ASSERT_TRUE(b.Output("y", *b.Lrn(c, LrnOptions{}, "norm")).ok());
  auto plan = Compile(*b.Finish(), DefaultKernelRegistry(), {BackendChoice::kCpu});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)->steps()[0].kernel_name, "cpu.convolution.f32.nchw.im2col_gemm");
  EXPECT_EQ((*plan)->steps()[1].kernel_name.rfind("reference.lrn.", 0), 0u)
      << (*plan)->steps()[1].kernel_name;
}

TEST(CompilerTest, WorkspaceLimitIsResourceExhausted) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({1, 8, 16, 16}));
  Value w = *b.Constant("w", RandomTensor(F32({8, 8, 3, 3}), 1));
  ASSERT_TRUE(b.Output("y", *b.Convolution(x, w, nullptr, {}, "conv")).ok());
  CompileOptions o{BackendChoice::kCpu};
  o.workspace_limit = 1024;
  auto plan = Compile(*b.Finish(), DefaultKernelRegistry(), o);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("'conv'"), std::string::npos);
}

TEST(CompilerTest, GraphWithoutOutputsIsRejected) {
  GraphBuilder b(&DefaultOpRegistry());
  ASSERT_TRUE(b.Input("x", F32({1})).ok());
  EXPECT_EQ(Compile(*b.Finish(), DefaultKernelRegistry()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CompilerTest, AutoWithoutGpuSaysWhyItUsesTheCpu) {
  auto g = Chain(2);
  auto plan = Compile(*g, DefaultKernelRegistry(), {BackendChoice::kAuto});
  ASSERT_TRUE(plan.ok());
  if (!ProbeCuda().usable) {
    EXPECT_EQ((*plan)->backend(), Backend::kCpu);
    EXPECT_NE((*plan)->backend_reason().find("cuda not used"), std::string::npos);
  }
}

TEST(CompilerTest, ForcedCudaWithoutGpuIsAnError) {
  if (ProbeCuda().usable) GTEST_SKIP() << "a GPU is present";
  auto g = Chain(2);
  EXPECT_FALSE(Compile(*g, DefaultKernelRegistry(), {BackendChoice::kCuda}).ok());
}

// A plan for an absent GPU (cuda_target) compiles where there is none, says what it is
// for, and is refused by the executor; where a GPU is usable, Compile refuses the target.
TEST(CompilerTest, PlansForAnAbsentGpuAreForInspectionOnly) {
  auto g = Chain(2);
  CompileOptions options;
  options.backend = BackendChoice::kCuda;
  options.cuda_target = CudaDeviceInfo{0, "absent H100", 9, 0, int64_t{80} << 30, 132};
  auto plan = Compile(*g, DefaultKernelRegistry(), options);
  if (ProbeCuda().usable) {
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
    return;
  }
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->backend(), Backend::kCuda);
  EXPECT_TRUE((*plan)->for_absent_device());
  EXPECT_NE((*plan)->backend_reason().find("absent H100"), std::string::npos);
  auto ctx = ExecutionContext::Create(**plan);
  EXPECT_EQ(ctx.status().code(), absl::StatusCode::kFailedPrecondition);
  options.algo = AlgoChoice::kMeasure;
  EXPECT_FALSE(Compile(*g, DefaultKernelRegistry(), options).ok());
}

// check_finite names the first step that writes a NaN: sqrt(x - 1) of values below 1, after a
// finite ReLU step; the same run without the switch returns the NaNs.
TEST(ExecutorTest, CheckFiniteNamesTheFirstStepWritingNaN) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({2, 8}));
  Value r = *b.Relu(x, 0.0, "relu");
  Value root = *b.Op1("Power", {r}, {{"power", 0.5}, {"shift", -1.0}}, "root");  // NaN below 1
  ASSERT_TRUE(b.Output("y", *b.Op1("TanH", {root}, {}, "tanh")).ok());
  auto g = b.Finish();
  auto plan = Compile(*g, DefaultKernelRegistry(), {BackendChoice::kCpu});
  ASSERT_TRUE(plan.ok()) << plan.status();
  HostTensor in(F32({2, 8}));
  for (int i = 0; i < 16; ++i) in.SetFloat(i, static_cast<float>(i) / 4);  // 0 .. 3.75
  auto plain = ExecutionContext::Create(**plan);
  ASSERT_TRUE(plain.ok());
  auto unchecked = (*plain)->Run({{"x", in}});
  ASSERT_TRUE(unchecked.ok());
  EXPECT_TRUE(std::isnan(unchecked->at("y").GetFloat(0)));
  ContextOptions check;
  check.check_finite = true;
  auto ctx = ExecutionContext::Create(**plan, check);
  ASSERT_TRUE(ctx.ok());
  auto checked = (*ctx)->Run({{"x", in}});
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(checked.status().message().find("'root'"), std::string::npos) << checked.status();
  EXPECT_NE(checked.status().message().find("NaN at element 0 of output 0"), std::string::npos)
      << checked.status();
  // Finite inputs pass, with the outputs of the unchecked run.
  for (int i = 0; i < 16; ++i) in.SetFloat(i, 1.0f + static_cast<float>(i) / 4);
  auto fine = (*ctx)->Run({{"x", in}});
  auto fine_plain = (*plain)->Run({{"x", in}});
  ASSERT_TRUE(fine.ok() && fine_plain.ok()) << fine.status();
  EXPECT_EQ(fine->at("y").ToF32Vector(), fine_plain->at("y").ToF32Vector());
}

TEST(ExecutorTest, BindingErrorsNameTheInput) {
  auto g = Chain(2);
  auto plan = *Compile(*g, DefaultKernelRegistry(), {BackendChoice::kCpu});
  auto ctx = *ExecutionContext::Create(*plan);
  auto missing = ctx->Run({});
  EXPECT_NE(missing.status().message().find("input 'x' is not bound"), std::string::npos);
  auto extra = ctx->Run({{"x", RandomTensor(F32({4, 64}), 1)}, {"z", RandomTensor(F32({1}), 1)}});
  EXPECT_NE(extra.status().message().find("'z' is not a graph input"), std::string::npos);
  auto shape = ctx->Run({{"x", RandomTensor(F32({4, 63}), 1)}});
  EXPECT_NE(shape.status().message().find("f32[4,63]"), std::string::npos);
}

TEST(ExecutorTest, RepeatedRunsAreDeterministicAndStridedInputsAreRelaid) {
  auto g = Chain(3);
  auto plan = *Compile(*g, DefaultKernelRegistry(), {BackendChoice::kCpu});
  auto ctx = *ExecutionContext::Create(*plan, {/*poison_buffers=*/true});
  HostTensor x = RandomTensor(F32({4, 64}), 7);
  auto first = ctx->Run({{"x", x}});
  auto second = ctx->Run({{"x", x}});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->at("y").ToF32Vector(), second->at("y").ToF32Vector());
  // The same values through a column-major binding.
  HostTensor col(*TensorType::CreateStrided(DataType::kF32, {4, 64}, {1, 4}));
  for (int64_t i = 0; i < 256; ++i) col.SetFloat(i, x.GetFloat(i));
  auto third = ctx->Run({{"x", col}});
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->at("y").ToF32Vector(), first->at("y").ToF32Vector());
}

TEST(ExecutorTest, RuntimeKernelErrorNamesTheNode) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({2, 3}));
  Value l = *b.Input("label", F32({2}));
  ASSERT_TRUE(b.Output("loss", *b.Op1("SoftmaxWithLoss", {x, l}, {}, "loss")).ok());
  auto plan = *Compile(*b.Finish(), DefaultKernelRegistry(), {BackendChoice::kCpu});
  auto ctx = *ExecutionContext::Create(*plan);
  HostTensor labels = *HostTensor::FromF32(F32({2}), {1, 7});
  auto r = ctx->Run({{"x", RandomTensor(F32({2, 3}), 1)}, {"label", labels}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("label 7 is outside [0, 3)"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("'loss'"), std::string::npos);
}

// The plan of y = tanh(a), a = sigmoid(x), with both a and y outputs, and the step writing a.
struct TwoOutputs {
  std::unique_ptr<ExecutionPlan> plan;
  int writes_a = -1;
};

TwoOutputs TwoOutputPlan() {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({4, 8}));
  Value a = *b.Op1("Sigmoid", {x}, {}, "sig");
  EXPECT_TRUE(b.Output("a", a).ok());
  EXPECT_TRUE(b.Output("y", *b.Op1("TanH", {a}, {}, "tanh")).ok());
  auto graph = b.Finish();
  TwoOutputs out;
  auto plan = Compile(*graph, DefaultKernelRegistry(), {BackendChoice::kCpu});
  EXPECT_TRUE(plan.ok()) << plan.status();
  out.plan = std::move(*plan);
  const int root = out.plan->RootBuffer(out.plan->outputs().at("a"));
  for (size_t i = 0; i < out.plan->steps().size(); ++i) {
    for (int o : out.plan->steps()[i].outputs) {
      if (out.plan->RootBuffer(o) == root) out.writes_a = static_cast<int>(i);
    }
  }
  return out;
}

TEST(ExecutorTest, AStepObserverHearsEveryStepInOrderOnceItIsEnqueued) {
  TwoOutputs p = TwoOutputPlan();
  ASSERT_GE(p.writes_a, 0);
  const int steps = static_cast<int>(p.plan->steps().size());
  ASSERT_GE(steps, 2);
  auto ctx = *ExecutionContext::Create(*p.plan);
  HostTensor x = RandomTensor(F32({4, 8}), 5);
  std::vector<float> a(32, 7.0f), y(32, 7.0f);
  std::vector<int> heard;
  std::vector<float> a_then, y_then;
  StepObserver observer;
  observer.after_step = [&](int step, void* stream) -> absl::Status {
    heard.push_back(step);
    EXPECT_EQ(stream, ctx->device().stream());
    if (step == p.writes_a) {
      // The host device runs a step inside its enqueueing: a is written, y not yet.
      a_then = a;
      y_then = y;
    }
    return absl::OkStatus();
  };
  ASSERT_TRUE(
      ctx->RunOnDevice({{"x", x.data()}}, {{"a", a.data()}, {"y", y.data()}}, &observer).ok());
  std::vector<int> expected(steps);
  for (int i = 0; i < steps; ++i) expected[i] = i;
  EXPECT_EQ(heard, expected);
  for (int i = 0; i < 32; ++i) {
    const float sigmoid = 1.0f / (1.0f + std::exp(-x.GetFloat(i)));
    EXPECT_NEAR(a_then[i], sigmoid, 1e-6) << i;
    EXPECT_EQ(y_then[i], 7.0f) << i;
    EXPECT_NEAR(y[i], std::tanh(sigmoid), 1e-6) << i;
  }
  // The same run without an observer computes the same bytes.
  std::vector<float> a2(32), y2(32);
  ASSERT_TRUE(ctx->RunOnDevice({{"x", x.data()}}, {{"a", a2.data()}, {"y", y2.data()}}).ok());
  EXPECT_EQ(a2, a);
  EXPECT_EQ(y2, y);
}

// An observer naming its stops (call_after) hears only those, in order, and the run computes the
// same bytes; stops that are not ascending steps of the plan are refused before anything runs.
TEST(ExecutorTest, AnObserverWithStopsHearsOnlyThem) {
  TwoOutputs p = TwoOutputPlan();
  ASSERT_GE(p.writes_a, 0);
  const int steps = static_cast<int>(p.plan->steps().size());
  ASSERT_LT(p.writes_a, steps - 1);
  auto ctx = *ExecutionContext::Create(*p.plan);
  HostTensor x = RandomTensor(F32({4, 8}), 7);
  std::vector<int> heard;
  StepObserver observer;
  observer.after_step = [&](int step, void*) -> absl::Status {
    heard.push_back(step);
    return absl::OkStatus();
  };
  observer.call_after = {p.writes_a, steps - 1};
  std::vector<float> a(32), y(32), a2(32), y2(32);
  for (int run = 0; run < 3; ++run) {  // first run, then the runs that capture/replay on a GPU
    heard.clear();
    ASSERT_TRUE(
        ctx->RunOnDevice({{"x", x.data()}}, {{"a", a.data()}, {"y", y.data()}}, &observer).ok());
    EXPECT_EQ(heard, observer.call_after) << "run " << run;
  }
  ASSERT_TRUE(ctx->RunOnDevice({{"x", x.data()}}, {{"a", a2.data()}, {"y", y2.data()}}).ok());
  EXPECT_EQ(a2, a);
  EXPECT_EQ(y2, y);
  for (const std::vector<int>& bad :
       {std::vector<int>{steps - 1, p.writes_a}, std::vector<int>{p.writes_a, p.writes_a},
        std::vector<int>{steps}, std::vector<int>{-1}}) {
    observer.call_after = bad;
    heard.clear();
    const absl::Status status =
        ctx->RunOnDevice({{"x", x.data()}}, {{"a", a.data()}, {"y", y.data()}}, &observer);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("call_after"), std::string::npos) << status;
    EXPECT_TRUE(heard.empty());
  }
}

TEST(ExecutorTest, AnObserverErrorStopsTheRunAndNamesTheStep) {
  TwoOutputs p = TwoOutputPlan();
  ASSERT_GE(p.writes_a, 0);
  ASSERT_LT(p.writes_a, static_cast<int>(p.plan->steps().size()) - 1);
  auto ctx = *ExecutionContext::Create(*p.plan);
  HostTensor x = RandomTensor(F32({4, 8}), 6);
  std::vector<float> a(32, 7.0f), y(32, 7.0f);
  int calls = 0;
  StepObserver observer;
  observer.after_step = [&](int step, void*) -> absl::Status {
    ++calls;
    if (step == p.writes_a) return absl::UnavailableError("peer gone");
    return absl::OkStatus();
  };
  absl::Status status =
      ctx->RunOnDevice({{"x", x.data()}}, {{"a", a.data()}, {"y", y.data()}}, &observer);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find(absl::StrCat("after step ", p.writes_a, " (node '")),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("peer gone"), std::string::npos) << status;
  EXPECT_EQ(calls, p.writes_a + 1);
  EXPECT_EQ(y, std::vector<float>(32, 7.0f)) << "the steps after the failing call ran";
}

TEST(DeviceTest, HostStreamsAndEventsAreTrivial) {
  std::unique_ptr<Device> host = CreateHostDevice();
  auto stream = host->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ((*stream)->handle(), nullptr);
  auto event = host->CreateEvent();
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_TRUE((*event)->MakeStreamWait((*stream)->handle()).ok());  // nothing recorded yet
  EXPECT_TRUE((*event)->Record(host->stream()).ok());
  EXPECT_TRUE((*event)->MakeStreamWait((*stream)->handle()).ok());
}

// A kernel that declares its output a view of its input: the planner must give the output the
// input's bytes, never run it, and keep the input alive as long as the view is read.
class ViewKernel : public Kernel {
 public:
  int AliasedInput() const override { return 0; }
  absl::Status Run(const KernelArgs&) const override {
    return absl::InternalError("a view kernel must never run");
  }
};

TEST(CompilerTest, ViewsShareTheirInputsBytesAndNeverRun) {
  KernelRegistry registry;
  ASSERT_TRUE(RegisterReferenceKernels(registry).ok());
  KernelFactory view;
  view.key = {"Flatten", Backend::kCpu, "any", "any", "test_view"};
  view.can_implement = [](const Node&) { return absl::OkStatus(); };
  SetChooseAndBuild(view, [](const KernelOptions&) { return std::make_unique<ViewKernel>(); });
  ASSERT_TRUE(registry.Register(std::move(view)).ok());

  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({2, 3, 4}));
  Value r = *b.Relu(x, 0.0, "relu");
  Value flat = (*b.Op("Flatten", {r}, {}, "flat"))[0];
  Value y = (*b.Op("Power", {flat}, {{"scale", 2.0}}, "double"))[0];
  Value z = (*b.Op("Power", {flat}, {{"shift", 1.0}}, "plus_one"))[0];
  ASSERT_TRUE(b.Output("y", y).ok());
  ASSERT_TRUE(b.Output("z", z).ok());
  auto graph = b.Finish();
  CompileOptions options;
  options.backend = BackendChoice::kCpu;
  auto plan = Compile(*graph, registry, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  int views = 0;
  for (const PlanStep& step : (*plan)->steps()) {
    if (!step.is_view) continue;
    ++views;
    const BufferAssignment& out = (*plan)->buffers()[step.outputs[0]];
    const BufferAssignment& in = (*plan)->buffers()[step.inputs[0]];
    EXPECT_EQ(out.alias_of, step.inputs[0]);
    EXPECT_EQ(out.offset, in.offset);
  }
  EXPECT_EQ(views, 1);
  EXPECT_NE((*plan)->ToString().find("(view)"), std::string::npos);
  ContextOptions poison;
  poison.poison_buffers = true;
  auto ctx = ExecutionContext::Create(**plan, poison);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  HostTensor input = RandomTensor(F32({2, 3, 4}), 3);
  auto out = (*ctx)->Run({{"x", input}});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t i = 0; i < 24; ++i) {
    const float relu = std::max(0.0f, input.GetFloat(i));
    EXPECT_FLOAT_EQ(out->at("y").GetFloat(i), 2 * relu);
    EXPECT_FLOAT_EQ(out->at("z").GetFloat(i), relu + 1);
  }
}

// Precision and layout are CUDA options: a CPU plan runs the graph's own types and says so.
TEST(CompilerTest, CpuPlansSayThatPrecisionIsACudaOption) {
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({2, 3}));
  ASSERT_TRUE(b.Output("y", *b.Relu(x)).ok());
  auto graph = b.Finish();
  CompileOptions options;
  options.backend = BackendChoice::kCpu;
  options.precision = Precision::kFp16;
  auto plan = Compile(*graph, DefaultKernelRegistry(), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NE((*plan)->backend_reason().find("precision and layout apply to CUDA plans"),
            std::string::npos);
  EXPECT_EQ((*plan)->precision(), "as graph");
}

// A copy kernel with two algorithms, as a convolution has: a fast one that wants `kScratch`
// workspace bytes and a slow one that wants none, each reporting a measured time. For the
// compiler's workspace budget.
constexpr size_t kScratch = 1 << 20;
class TwoAlgorithmCopy : public Kernel {
 public:
  TwoAlgorithmCopy(size_t workspace, double ms) : workspace_(workspace), ms_(ms) {}
  size_t WorkspaceBytes() const override { return workspace_; }
  double MeasuredMs() const override { return ms_; }
  std::string Describe() const override { return workspace_ ? "algo=fast" : "algo=slow"; }
  absl::Status Run(const KernelArgs& a) const override {
    if (a.workspace_bytes < workspace_) return absl::InternalError("workspace too small");
    std::memcpy(a.outputs[0].data, a.inputs[0].data, a.inputs[0].type.span_bytes());
    return absl::OkStatus();
  }

 private:
  size_t workspace_;
  double ms_;
};

// Two copies of a 1 KiB tensor whose fast algorithm wants 1 MiB: far over 1.125 x the
// activations' peak, so the budget re-chooses while the measured slowdown allows it.
std::unique_ptr<ExecutionPlan> CompileTwoCopies(double fast_ms, double slow_ms, double peak_slack,
                                                double max_slowdown) {
  KernelRegistry registry;
  EXPECT_TRUE(RegisterReferenceKernels(registry).ok());
  KernelFactory copy;
  copy.key = {"Power", Backend::kCpu, "any", "any", "test_two_algorithms"};
  copy.priority = 100;
  copy.can_implement = [](const Node&) { return absl::OkStatus(); };
  SetChooseAndBuild(copy, [=](const KernelOptions& o) {
    return o.workspace_limit >= static_cast<int64_t>(kScratch)
               ? std::make_unique<TwoAlgorithmCopy>(kScratch, fast_ms)
               : std::make_unique<TwoAlgorithmCopy>(0, slow_ms);
  });
  EXPECT_TRUE(registry.Register(std::move(copy)).ok());
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({256}));
  Value y = (*b.Op("Power", {x}, {}, "first"))[0];
  Value z = (*b.Op("Power", {y}, {}, "second"))[0];
  EXPECT_TRUE(b.Output("z", z).ok());
  auto graph = b.Finish();
  CompileOptions options;
  options.backend = BackendChoice::kCpu;
  options.workspace_peak_slack = peak_slack;
  options.workspace_budget_max_slowdown = max_slowdown;
  auto plan = Compile(*graph, registry, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : nullptr;
}

std::vector<size_t> StepWorkspaces(const ExecutionPlan& plan) {
  std::vector<size_t> bytes;
  for (const PlanStep& step : plan.steps()) bytes.push_back(step.workspace_bytes);
  return bytes;
}

TEST(CompilerTest, WorkspaceBudgetTradesMeasuredTimeForMemory) {
  const std::vector<size_t> fast = {kScratch, kScratch}, slow = {0, 0};
  // Within 2% of the plan's measured 2 ms: both steps re-chosen, and the dump says so.
  auto cheap = CompileTwoCopies(1.0, 1.01, 0.125, 0.02);
  ASSERT_NE(cheap, nullptr);
  EXPECT_EQ(StepWorkspaces(*cheap), slow);
  EXPECT_NE(cheap->steps()[0].description.find("unbounded: algo=fast"), std::string::npos)
      << cheap->steps()[0].description;
  EXPECT_LT(cheap->activations_bytes(), static_cast<int64_t>(kScratch));
  // The cost is reported: two re-choices of +0.01 ms each, on 2 ms measured.
  EXPECT_EQ(cheap->budget_rechosen_steps(), 2);
  EXPECT_NEAR(cheap->budget_added_ms(), 0.02, 1e-9);
  EXPECT_NEAR(cheap->measured_ms(), 2.0, 1e-9);
  EXPECT_NE(cheap->ToString().find("workspace budget: 2 step(s) re-chosen with less workspace, "
                                   "adding 0.020 ms to the 2.000 ms measured"),
            std::string::npos)
      << cheap->ToString();
  // 0.025 ms each: the first fits the 0.04 ms allowance, the second would pass it.
  auto half = CompileTwoCopies(1.0, 1.025, 0.125, 0.02);
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(StepWorkspaces(*half), (std::vector<size_t>{0, kScratch}));
  EXPECT_EQ(half->budget_rechosen_steps(), 1);
  EXPECT_NEAR(half->budget_added_ms(), 0.025, 1e-9);
  // Twice as slow: nothing re-chosen.
  auto dear = CompileTwoCopies(1.0, 2.0, 0.125, 0.02);
  ASSERT_NE(dear, nullptr);
  EXPECT_EQ(StepWorkspaces(*dear), fast);
  EXPECT_EQ(dear->budget_rechosen_steps(), 0);
  EXPECT_GE(dear->activations_bytes(), static_cast<int64_t>(kScratch));
  // No measured times: nothing to weigh, nothing re-chosen; unless asked whatever it costs.
  auto unmeasured = CompileTwoCopies(-1, -1, 0.125, 0.02);
  ASSERT_NE(unmeasured, nullptr);
  EXPECT_EQ(StepWorkspaces(*unmeasured), fast);
  auto asked = CompileTwoCopies(-1, -1, 0.125, -1);
  ASSERT_NE(asked, nullptr);
  EXPECT_EQ(StepWorkspaces(*asked), slow);
  EXPECT_EQ(asked->budget_rechosen_steps(), 2);
  EXPECT_LT(asked->budget_added_ms(), 0);  // re-chosen without measured times: unknown cost
  // The budget off.
  auto off = CompileTwoCopies(1.0, 1.0, -1, 0.02);
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(StepWorkspaces(*off), fast);
  // Either way the plan copies.
  for (const auto* plan : {cheap.get(), dear.get()}) {
    auto ctx = ExecutionContext::Create(*plan);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    HostTensor input = RandomTensor(F32({256}), 5);
    auto out = (*ctx)->Run({{"x", input}});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t i = 0; i < 256; ++i) EXPECT_EQ(out->at("z").GetFloat(i), input.GetFloat(i));
  }
}

// Each node's factory is selected once (the selection that settles the CUDA backend is the one
// the step uses); the workspace budget asks that factory for another choice, and each step's
// kernel is built once, from the choice kept. Planned for an absent GPU, so it runs without one.
TEST(CompilerTest, SelectsEachFactoryOnceAndBuildsEachKernelOnce) {
  if (ProbeCuda().usable) GTEST_SKIP() << "cuda_target plans only where no GPU is present";
  auto selected = std::make_shared<int>(0);
  auto chosen = std::make_shared<int>(0);
  auto built = std::make_shared<int>(0);
  KernelRegistry registry;
  KernelFactory copy;
  copy.key = {"Power", Backend::kCuda, "any", "any", "test_counted"};
  copy.can_implement = [selected](const Node&) {
    ++*selected;
    return absl::OkStatus();
  };
  SetChooseAndBuild(
      copy,
      [](const KernelOptions& o) {
        const size_t workspace = o.workspace_limit >= static_cast<int64_t>(kScratch) ? kScratch : 0;
        return std::make_unique<TwoAlgorithmCopy>(workspace, -1);
      },
      chosen, built);
  ASSERT_TRUE(registry.Register(std::move(copy)).ok());
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({256}));
  Value y = (*b.Op("Power", {x}, {}, "first"))[0];
  ASSERT_TRUE(b.Output("z", (*b.Op("Power", {y}, {}, "second"))[0]).ok());
  auto graph = b.Finish();
  CompileOptions options;
  options.backend = BackendChoice::kCuda;
  options.cuda_target = CudaDeviceInfo{0, "absent test GPU", 9, 0, int64_t{80} << 30, 132};
  options.workspace_budget_max_slowdown = -1;  // every step re-prepared within the budget
  auto plan = Compile(*graph, registry, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->backend(), Backend::kCuda);
  EXPECT_EQ((*plan)->budget_rechosen_steps(), 2);
  EXPECT_EQ(*selected, 2);  // Select once per node
  EXPECT_EQ(*chosen, 4);    // each step, then each again within the budget
  EXPECT_EQ(*built, 2);     // each step's kernel built once, from the choice kept
  for (const PlanStep& step : (*plan)->steps()) EXPECT_EQ(step.kernel->WorkspaceBytes(), 0u);
}

// A copy kernel for the planner's dead-byte re-preparation (KernelOptions::input_dies_here):
// prepared with it, it needs no workspace and, as a convolution would with its scratch, writes
// garbage over its input once it has copied it; otherwise it wants kScratch workspace bytes.
class ScribblingCopy : public Kernel {
 public:
  ScribblingCopy(bool scribble, double ms) : scribble_(scribble), ms_(ms) {}
  size_t WorkspaceBytes() const override { return scribble_ ? 0 : kScratch; }
  double MeasuredMs() const override { return ms_; }
  std::string Describe() const override { return scribble_ ? "in dead bytes" : "with workspace"; }
  absl::Status Run(const KernelArgs& a) const override {
    if (a.workspace_bytes < WorkspaceBytes()) return absl::InternalError("workspace too small");
    const size_t bytes = a.inputs[0].type.span_bytes();
    std::memcpy(a.outputs[0].data, a.inputs[0].data, bytes);
    if (scribble_) std::memset(a.inputs[0].data, 0xff, bytes);  // NaNs
    return absl::OkStatus();
  }

 private:
  bool scribble_;
  double ms_;
};

// x (graph input) -> first -> y -> second -> z -> third -> w; out = w + z. Each copy's
// workspace lifts the arena far above the activations' peak, but only second's input dies where
// it runs: x is the caller's, z is read again by the sum. `dead_ms` is what the copy measures
// when prepared to scribble; 1 ms otherwise.
std::unique_ptr<ExecutionPlan> CompileScribblingCopies(double dead_ms) {
  KernelRegistry registry;
  EXPECT_TRUE(RegisterReferenceKernels(registry).ok());
  KernelFactory copy;
  copy.key = {"Power", Backend::kCpu, "any", "any", "test_scribbling_copy"};
  copy.priority = 100;
  copy.can_implement = [](const Node&) { return absl::OkStatus(); };
  SetChooseAndBuild(copy, [=](const KernelOptions& o) {
    return std::make_unique<ScribblingCopy>(o.input_dies_here, o.input_dies_here ? dead_ms : 1.0);
  });
  EXPECT_TRUE(registry.Register(std::move(copy)).ok());
  GraphBuilder b(&DefaultOpRegistry());
  Value x = *b.Input("x", F32({256}));
  Value y = (*b.Op("Power", {x}, {}, "first"))[0];
  Value z = (*b.Op("Power", {y}, {}, "second"))[0];
  Value w = (*b.Op("Power", {z}, {}, "third"))[0];
  Value out = (*b.Op("Eltwise", {w, z}, {}, "sum"))[0];
  EXPECT_TRUE(b.Output("out", out).ok());
  auto graph = b.Finish();
  CompileOptions options;
  options.backend = BackendChoice::kCpu;
  auto plan = Compile(*graph, registry, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : nullptr;
}

TEST(CompilerTest, AStepWhoseInputDiesThereKeepsItsScratchInDeadBytes) {
  auto plan = CompileScribblingCopies(1.0);
  ASSERT_NE(plan, nullptr);
  // (The sum's reference kernel has a small workspace of its own.)
  std::vector<size_t> copies = StepWorkspaces(*plan);
  copies.pop_back();
  EXPECT_EQ(copies, (std::vector<size_t>{kScratch, 0, kScratch}));
  EXPECT_EQ(plan->steps()[1].description, "in dead bytes");
  EXPECT_EQ(plan->steps()[0].description, "with workspace");  // x is the caller's
  EXPECT_EQ(plan->steps()[2].description, "with workspace");  // z is read again
  // The scribbled input is never read again: out = 2x exactly, and the caller's x is intact.
  auto ctx = ExecutionContext::Create(*plan);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  HostTensor input = RandomTensor(F32({256}), 7);
  const HostTensor kept = input;
  auto out = (*ctx)->Run({{"x", input}});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t i = 0; i < 256; ++i) {
    EXPECT_EQ(out->at("out").GetFloat(i), 2 * kept.GetFloat(i)) << i;
    EXPECT_EQ(input.GetFloat(i), kept.GetFloat(i)) << i;
  }
  // Measured slower (beyond 5%): the workspace stays.
  auto slower = CompileScribblingCopies(1.2);
  ASSERT_NE(slower, nullptr);
  EXPECT_EQ(slower->steps()[1].workspace_bytes, kScratch);
}

// A Crop's reference gives only its shape (OpDef::shape_only_inputs): the planner lets its bytes
// die after their last real reader, as FCN-8s's final Crop of its input. x (16 KiB) -> three
// copies -> Crop(c, reference x): without the rule x would live to the Crop, beside two copies.
TEST(CompilerTest, ACropsReferenceDiesAfterItsLastRealReader) {
  GraphBuilder b(&DefaultOpRegistry());
  const TensorType image = F32({1, 1, 64, 64});
  Value x = *b.Input("x", image);
  Value a = (*b.Op("Power", {x}, {}, "a"))[0];
  Value c = (*b.Op("Power", {(*b.Op("Power", {a}, {}, "b"))[0]}, {}, "c"))[0];
  Value out = (*b.Op("Crop", {c, x}, {}, "crop"))[0];
  ASSERT_TRUE(b.Output("out", out).ok());
  auto graph = b.Finish();
  CompileOptions options;
  options.backend = BackendChoice::kReference;
  options.in_place = false;  // every copy its own buffer
  auto plan = Compile(*graph, DefaultKernelRegistry(), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t bytes = image.span_bytes();
  EXPECT_LE((*plan)->planned_activation_bytes(), 2 * bytes + 512) << (*plan)->ToString();
  auto ctx = ExecutionContext::Create(**plan);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  HostTensor input = RandomTensor(image, 9);
  auto got = (*ctx)->Run({{"x", input}});
  ASSERT_TRUE(got.ok()) << got.status();
  for (int64_t i = 0; i < image.num_elements(); ++i) {
    EXPECT_EQ(got->at("out").GetFloat(i), input.GetFloat(i)) << i;
  }
}

}  // namespace
}  // namespace kiln
