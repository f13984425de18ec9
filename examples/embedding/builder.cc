// Embedding Kiln from C++ (kiln/kiln.hpp): a network written with the typed builder, compiled
// with the defaults (fusion on), run from four threads that share its weights
// (docs/EMBEDDING.md walks through it).
//   bazel run //examples/embedding:builder [-- DEVICE]
#include <cstdio>
#include <kiln/kiln.hpp>
#include <thread>
#include <vector>

namespace {

std::vector<float> Values(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 101) / 101.0f;
  return v;
}

// conv 3x3 (8) -> BatchNorm -> ReLU -> max-pool 2 -> inner product (10) -> softmax.
kiln::Result<kiln::Graph> SmallCnn() {
  auto made = kiln::Graph::Create();
  if (!made.ok()) return made.status();
  kiln::Graph g = std::move(made.value());
  auto x = g.Input("image", {2, 3, 16, 16});
  auto w = g.Constant("conv.w", {8, 3, 3, 3}, Values(8 * 27, 0.2f));
  auto mean = g.Constant("bn.mean", {8}, Values(8, 0.1f));
  auto var = g.Constant("bn.var", {8}, Values(8, 1.0f));
  auto factor = g.Constant("bn.factor", {1}, {1.0f});
  auto fc = g.Constant("fc.w", {10, 8 * 8 * 8}, Values(10 * 512, 0.05f));
  for (const kiln::Status& s :
       {x.status(), w.status(), mean.status(), var.status(), factor.status(), fc.status()}) {
    if (!s.ok()) return s;
  }
  kiln::ConvolutionOptions conv;
  conv.pad = {1};
  auto c = g.Convolution(*x, *w, nullptr, conv, "conv");
  if (!c.ok()) return c.status();
  auto bn = g.BatchNorm(*c, *mean, *var, *factor, {}, "bn");
  if (!bn.ok()) return bn.status();
  auto r = g.ReLU(*bn, 0.0, "relu");
  if (!r.ok()) return r.status();
  kiln::PoolingOptions pool;
  pool.kernel = {2};
  pool.stride = {2};
  auto p = g.Pooling(*r, pool, "pool");
  if (!p.ok()) return p.status();
  auto logits = g.InnerProduct(*p, *fc, nullptr, 1, "fc");
  if (!logits.ok()) return logits.status();
  auto prob = g.Softmax(*logits, 1, false, "prob");
  if (!prob.ok()) return prob.status();
  kiln::Status out = g.Output("prob", *prob);
  if (!out.ok()) return out;
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  auto graph = SmallCnn();
  if (!graph.ok()) {
    std::fprintf(stderr, "build: %s\n", graph.status().ToString().c_str());
    return 1;
  }
  kiln::CompileOptions options;  // fusion on: BatchNorm folds into the convolution
  if (argc > 1) options.device = argv[1];
  auto engine = kiln::Engine::FromGraph(*graph, options);
  if (!engine.ok()) {
    std::fprintf(stderr, "compile: %s\n", engine.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", engine->Describe().c_str());
  const std::vector<float> image = Values(2 * 3 * 16 * 16, 1.0f);
  std::vector<std::vector<float>> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto context = engine->CreateContext();  // per thread: its own activations
      if (!context.ok() || !context->SetInput("image", image).ok() || !context->Run().ok()) return;
      auto prob = context->Output<float>("prob", 20);
      if (prob.ok()) results[t] = prob.value();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t) {
    if (results[t].size() != 20 || results[t] != results[0]) {
      std::fprintf(stderr, "thread %d: no result, or not the same as thread 0's\n", t);
      return 1;
    }
  }
  std::printf("4 threads agree; image 0:");
  for (int c = 0; c < 10; ++c) std::printf(" %.3f", results[0][c]);
  std::printf("\n");
  return 0;
}
