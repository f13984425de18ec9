// The public API on the GPU (issue 33, item 6), through kiln/kiln.hpp as an embedder uses it:
//   - 8 threads, one engine, a context each: every output equals one thread's to the bit, and
//     the device memory the contexts add is their activations, not 8 copies of the weights;
//   - a run on the caller's stream waits for the caller's earlier work on it, and returns
//     before that work is done (no hidden synchronization);
//   - with two GPUs: an engine on cuda:1 runs there while another runs on cuda:0, both right.
// Skips without a GPU (CI); the two-GPU case skips with one.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kiln/kiln.hpp"

namespace {

std::vector<float> Pseudorandom(size_t n, unsigned seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 16777216.0f - 0.5f;
  }
  return v;
}

int64_t FreeBytes(int device) {
  size_t free_bytes = 0, total = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    return -1;
  }
  return static_cast<int64_t>(free_bytes);
}

// x[batch, features] -> InnerProduct(outputs) -> ReLU -> InnerProduct(10) -> Softmax: weights of
// features x outputs floats, small activations.
kiln::Graph WideMlp(int64_t batch, int64_t features, int64_t outputs) {
  kiln::Result<kiln::Graph> g = kiln::Graph::Create();
  EXPECT_TRUE(g.ok());
  kiln::Graph graph = std::move(g.value());
  auto x = graph.Input("x", {batch, features});
  auto w1 = graph.Constant("fc1.w", {outputs, features},
                           Pseudorandom(static_cast<size_t>(outputs * features), 1));
  auto w2 =
      graph.Constant("fc2.w", {10, outputs}, Pseudorandom(static_cast<size_t>(10 * outputs), 2));
  EXPECT_TRUE(x.ok() && w1.ok() && w2.ok()) << w1.status().ToString();
  auto h = graph.InnerProduct(*x, *w1, nullptr, 1, "fc1");
  auto r = graph.ReLU(*h, 0.0, "relu");
  auto o = graph.InnerProduct(*r, *w2, nullptr, 1, "fc2");
  auto p = graph.Softmax(*o, 1, false, "prob");
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(graph.Output("prob", *p).ok());
  return graph;
}

class EngineGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kiln_cuda_device_count() < 1) GTEST_SKIP() << "no usable CUDA device";
  }
};

TEST_F(EngineGpuTest, EightThreadsShareTheWeightsAndAgreeToTheBit) {
  // 8192 x 4096 floats: 128 MiB of weights; activations of a few KiB.
  kiln::Graph graph = WideMlp(16, 4096, 8192);
  kiln::CompileOptions options;
  options.device = "cuda:0";
  auto engine = kiln::Engine::FromGraph(graph, options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  ASSERT_EQ(engine->CudaDevice(), 0);
  const std::vector<float> x = Pseudorandom(16 * 4096, 3);
  std::vector<float> single;
  {
    auto context = engine->CreateContext();
    ASSERT_TRUE(context.ok()) << context.status().ToString();
    ASSERT_TRUE(context->SetInput("x", x).ok());
    ASSERT_TRUE(context->Run().ok());
    auto out = context->Output<float>("prob", 160);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    single = out.value();
  }
  // The device memory 8 contexts add, for this engine and for one with the same activations
  // but 1/512 of the weights: every context has its own stream, cuBLAS handle and workspace,
  // which both pay; copies of the weights would add 8 x 128 MiB to the first alone.
  kiln::Graph small_graph = WideMlp(16, 4096, 16);
  auto small = kiln::Engine::FromGraph(small_graph, options);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  auto eight_contexts = [](const kiln::Engine& e, std::vector<kiln::Context>* contexts) {
    const int64_t before = FreeBytes(0);
    for (int t = 0; t < 8; ++t) {
      auto context = e.CreateContext();
      if (!context.ok()) return int64_t{-1};
      contexts->push_back(std::move(context.value()));
    }
    return before - FreeBytes(0);
  };
  std::vector<kiln::Context> small_contexts;
  const int64_t added_small = eight_contexts(*small, &small_contexts);
  small_contexts.clear();
  std::vector<kiln::Context> contexts;
  const int64_t added = eight_contexts(*engine, &contexts);
  const int64_t weights = engine->WeightsBytes();
  std::printf(
      "8 contexts added %.1f MiB of device memory (%.1f MiB for an engine with %.2f MiB "
      "of weights); the weights are %.1f MiB, each context's own arenas %.3f MiB\n",
      added / 1048576.0, added_small / 1048576.0, small->WeightsBytes() / 1048576.0,
      weights / 1048576.0, engine->ContextBytes() / 1048576.0);
  EXPECT_GE(weights, int64_t{128} << 20);
  ASSERT_GT(added_small, 0);
  EXPECT_LT(added - added_small, weights / 2) << "8 contexts seem to hold copies of the weights";
  std::vector<std::vector<float>> outputs(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 20; ++repeat) {
        if (!contexts[t].SetInput("x", x).ok() || !contexts[t].Run().ok()) return;
        auto out = contexts[t].Output<float>("prob", 160);
        if (!out.ok() || (repeat > 0 && out.value() != outputs[t])) return;
        outputs[t] = out.value();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(outputs[t], single) << "thread " << t;
}

struct Delay {
  static void CUDART_CB Sleep(void*) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
};

TEST_F(EngineGpuTest, TheCallersStreamIsHonouredWithoutHostSynchronization) {
  kiln::Graph graph = WideMlp(4, 256, 128);
  kiln::CompileOptions options;
  options.device = "cuda:0";
  auto engine = kiln::Engine::FromGraph(graph, options);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto context = engine->CreateContext();
  ASSERT_TRUE(context.ok());
  const std::vector<float> x = Pseudorandom(4 * 256, 5);
  ASSERT_TRUE(context->SetInput("x", x).ok());
  ASSERT_TRUE(context->Run().ok());
  auto expected = context->Output<float>("prob", 40);
  ASSERT_TRUE(expected.ok());

  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void *in = nullptr, *out = nullptr, *pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&in, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, 40 * 4), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, x.size() * 4), cudaSuccess);
  std::memcpy(pinned, x.data(), x.size() * 4);
  ASSERT_EQ(cudaMemset(in, 0, x.size() * 4), cudaSuccess);  // zeros until the caller's copy
  ASSERT_EQ(cudaMemset(out, 0, 40 * 4), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // The caller's work: 200 ms on the host, then the input copied in, all on `stream`.
  ASSERT_EQ(cudaLaunchHostFunc(stream, Delay::Sleep, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(in, pinned, x.size() * 4, cudaMemcpyHostToDevice, stream), cudaSuccess);
  const auto start = std::chrono::steady_clock::now();
  kiln::Status run = context->RunOnDevice({{"x", in}}, {{"prob", out}}, stream);
  const double returned_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(run.ok()) << run.ToString();
  const cudaError_t pending = cudaStreamQuery(stream);
  std::vector<float> result(40, -1.0f);
  ASSERT_EQ(cudaMemcpyAsync(result.data(), out, 40 * 4, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::printf("RunOnDevice returned after %.2f ms while the caller's 200 ms were pending (%s)\n",
              returned_ms, pending == cudaErrorNotReady ? "stream not ready" : "stream done");
  EXPECT_EQ(pending, cudaErrorNotReady) << "the run waited for the caller's stream on the host";
  EXPECT_LT(returned_ms, 100.0);
  double worst = 0;
  for (int i = 0; i < 40; ++i) worst = std::fmax(worst, std::fabs(result[i] - expected.value()[i]));
  EXPECT_LT(worst, 1e-6) << "the run did not see the input the caller's stream copied first";
  cudaFree(in);
  cudaFree(out);
  cudaFreeHost(pinned);
  cudaStreamDestroy(stream);
}

// conv 3x3 (64 -> 64) x3 with ReLUs on [16, 64, 56, 56], then an inner product to 10: enough
// convolutions for --algo measure to take a while.
kiln::Graph ConvStack() {
  kiln::Graph graph = std::move(kiln::Graph::Create().value());
  auto x = graph.Input("x", {16, 64, 56, 56});
  kiln::Value v = *x;
  kiln::ConvolutionOptions conv;
  conv.pad = {1};
  for (int i = 0; i < 3; ++i) {
    const std::string name = "conv" + std::to_string(i);
    auto w = graph.Constant(name + ".w", {64, 64, 3, 3}, Pseudorandom(64 * 64 * 9, 20 + i));
    auto c = graph.Convolution(v, *w, nullptr, conv, name);
    auto r = graph.ReLU(*c, 0.0, name + ".relu");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    v = *r;
  }
  kiln::PoolingOptions pool;
  pool.global = true;
  pool.mode = "avg";
  auto p = graph.Pooling(v, pool, "pool");
  auto fc = graph.Constant("fc.w", {10, 64}, Pseudorandom(640, 30));
  auto logits = graph.InnerProduct(*p, *fc, nullptr, 1, "fc");
  EXPECT_TRUE(logits.ok()) << logits.status().ToString();
  EXPECT_TRUE(graph.Output("logits", *logits).ok());
  return graph;
}

TEST_F(EngineGpuTest, ASavedPlanLoadsWithItsMeasuredChoicesAndTheSameBits) {
  kiln::Graph graph = ConvStack();
  kiln::CompileOptions options;
  options.device = "cuda:0";
  options.algo = "measure";
  options.precision = "fp16";
  const auto t0 = std::chrono::steady_clock::now();
  auto engine = kiln::Engine::FromGraph(graph, options);
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/conv_stack.plan";
  std::remove(path.c_str());
  ASSERT_TRUE(engine->Save(path).ok());
  const auto t2 = std::chrono::steady_clock::now();
  auto loaded = kiln::Engine::Load(path);
  const auto t3 = std::chrono::steady_clock::now();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const double compile_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double load_ms = std::chrono::duration<double, std::milli>(t3 - t2).count();
  std::printf(
      "conv stack, fp16, --algo measure: compiled in %.1f ms, the saved plan loaded in "
      "%.1f ms\n",
      compile_ms, load_ms);
  EXPECT_LT(load_ms, compile_ms / 2) << "the load measured again";
  const std::vector<float> x = Pseudorandom(16 * 64 * 56 * 56, 40);
  auto run = [&](const kiln::Engine& e) {
    auto context = e.CreateContext();
    EXPECT_TRUE(context.ok());
    EXPECT_TRUE(context->SetInput("x", x).ok());
    EXPECT_TRUE(context->Run().ok());
    return context->Output<float>("logits", 160).value();
  };
  EXPECT_EQ(run(*loaded), run(*engine));
}

// ResNet-18 compiled once for batches up to 64 against plans compiled for 1, 7, 33 and 64. Its
// weights come from the environment (KILN_RESNET18_PROTOTXT, KILN_RESNET18_CAFFEMODEL:
// tools/gpu_check_api.sh makes filler weights with `kiln run --save-weights`).
TEST_F(EngineGpuTest, ResNet18UpTo64RunsEveryBatchAsItsOwnPlanDoes) {
  const char* model = std::getenv("KILN_RESNET18_PROTOTXT");
  const char* weights = std::getenv("KILN_RESNET18_CAFFEMODEL");
  if (model == nullptr || weights == nullptr) GTEST_SKIP() << "no ResNet-18 weights given";
  kiln::CompileOptions options;
  options.device = "cuda:0";
  options.max_batch = 64;
  const auto t0 = std::chrono::steady_clock::now();
  auto variable = kiln::Engine::FromCaffe(model, weights, options);
  const double compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(variable.ok()) << variable.status().ToString();
  std::printf("ResNet-18 up to batch 64 compiled in %.0f ms: %s\n", compile_ms,
              variable->Describe().c_str());
  auto context = variable->CreateContext();
  ASSERT_TRUE(context.ok()) << context.status().ToString();
  for (int64_t batch : {1, 7, 33, 64}) {
    kiln::CompileOptions fixed_options;
    fixed_options.device = "cuda:0";
    fixed_options.batch = batch;
    auto fixed = kiln::Engine::FromCaffe(model, weights, fixed_options);
    ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
    auto fixed_context = fixed->CreateContext();
    ASSERT_TRUE(fixed_context.ok());
    const std::vector<float> images =
        Pseudorandom(static_cast<size_t>(batch) * 3 * 224 * 224, static_cast<unsigned>(batch));
    ASSERT_TRUE(context->SetInput("data", images).ok());
    ASSERT_TRUE(fixed_context->SetInput("data", images).ok());
    const auto t1 = std::chrono::steady_clock::now();
    kiln::Status run = context->Run();
    const double run_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    ASSERT_TRUE(run.ok()) << run.ToString();
    ASSERT_TRUE(fixed_context->Run().ok());
    const std::string out = fixed->Outputs()[0].name;
    auto got = context->Output<float>(out, static_cast<size_t>(batch) * 1000);
    auto want = fixed_context->Output<float>(out, static_cast<size_t>(batch) * 1000);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    double worst = 0;
    size_t same = 0;
    for (size_t i = 0; i < got->size(); ++i) {
      worst = std::fmax(worst, std::fabs((*got)[i] - (*want)[i]));
      same += (*got)[i] == (*want)[i];
    }
    std::printf(
        "batch %2lld: largest difference from its own plan %.3g, %zu of %zu values "
        "bit-equal (first run %.1f ms)\n",
        static_cast<long long>(batch), worst, same, got->size(), run_ms);
    EXPECT_LT(worst, 1e-5) << "batch " << batch;
  }
}

TEST_F(EngineGpuTest, AnEngineOnGpuOneRunsThereBesideOneOnGpuZero) {
  if (kiln_cuda_device_count() < 2) GTEST_SKIP() << "one GPU: the two-GPU case needs two";
  kiln::Graph graph = WideMlp(16, 2048, 4096);  // 32 MiB of weights
  kiln::CompileOptions on0, on1, reference;
  on0.device = "cuda:0";
  on1.device = "cuda:1";
  reference.device = "reference";
  const int64_t free1 = FreeBytes(1);
  auto engine0 = kiln::Engine::FromGraph(graph, on0);
  auto engine1 = kiln::Engine::FromGraph(graph, on1);
  auto oracle = kiln::Engine::FromGraph(graph, reference);
  ASSERT_TRUE(engine0.ok() && engine1.ok() && oracle.ok()) << engine1.status().ToString();
  EXPECT_EQ(engine1->CudaDevice(), 1);
  EXPECT_NE(engine1->Describe().find("cuda:1"), std::string::npos) << engine1->Describe();
  const int64_t used1 = free1 - FreeBytes(1);
  std::printf("the engine on cuda:1 took %.1f MiB there (weights %.1f MiB)\n", used1 / 1048576.0,
              engine1->WeightsBytes() / 1048576.0);
  EXPECT_GE(used1, engine1->WeightsBytes()) << "the weights are not on GPU 1";
  const std::vector<float> x = Pseudorandom(16 * 2048, 11);
  auto run = [&](const kiln::Engine& engine, std::vector<float>* out) {
    auto context = engine.CreateContext();
    if (!context.ok()) return;
    for (int i = 0; i < 50; ++i) {
      if (!context->SetInput("x", x).ok() || !context->Run().ok()) return;
    }
    auto o = context->Output<float>("prob", 160);
    if (o.ok()) *out = o.value();
  };
  std::vector<float> out0, out1, expected;
  std::thread t0(run, std::cref(*engine0), &out0);
  std::thread t1(run, std::cref(*engine1), &out1);
  t0.join();
  t1.join();
  run(*oracle, &expected);
  ASSERT_EQ(out0.size(), 160u);
  ASSERT_EQ(out1.size(), 160u);
  ASSERT_EQ(expected.size(), 160u);
  EXPECT_EQ(out0, out1) << "the same plan on two GPUs of one kind gives the same bits";
  double worst = 0;
  for (int i = 0; i < 160; ++i) worst = std::fmax(worst, std::fabs(out1[i] - expected[i]));
  EXPECT_LT(worst, 1e-4);
}

}  // namespace
