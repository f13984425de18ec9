// CPU convolution: the OpenBLAS im2col+GEMM kernel against the reference kernel on one layer
// shape, through the real compiler and executor (Google Benchmark). Run:
//   bazel run -c opt //bench:cpu_convolution_bench
// GPU comparisons against cuDNN and PyTorch belong to bench/ programs of the CUDA issues.
#include <map>
#include <random>

#include "benchmark/benchmark.h"
#include "ir/graph_builder.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"

namespace {

using kiln::DataType;
using kiln::HostTensor;
using kiln::TensorType;

HostTensor Random(const std::vector<int64_t>& dims, unsigned seed) {
  HostTensor t(*TensorType::Create(DataType::kF32, dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < t.type().num_elements(); ++i) t.data_as<float>()[i] = dist(rng);
  return t;
}

void BM_Convolution(benchmark::State& state, kiln::BackendChoice backend) {
  const int64_t n = 8, c = 64, hw = 28, k = 64;
  kiln::GraphBuilder b(&kiln::DefaultOpRegistry());
  kiln::Value x = *b.Input("x", *TensorType::Create(DataType::kF32, {n, c, hw, hw}));
  kiln::Value w = *b.Constant("w", Random({k, c, 3, 3}, 1));
  kiln::ConvolutionOptions o;
  o.pad = {1};
  if (!b.Output("y", *b.Convolution(x, w, nullptr, o, "conv")).ok()) {
    state.SkipWithError("graph");
    return;
  }
  auto graph = b.Finish();
  auto plan = kiln::Compile(*graph, kiln::DefaultKernelRegistry(), {backend});
  auto ctx = kiln::ExecutionContext::Create(**plan);
  std::map<std::string, HostTensor> inputs = {{"x", Random({n, c, hw, hw}, 2)}};
  for (auto _ : state) {
    auto out = (*ctx)->Run(inputs);
    benchmark::DoNotOptimize(out);
  }
  const double flops = 2.0 * n * k * hw * hw * c * 9;
  state.counters["GFLOP"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel((*plan)->steps()[0].kernel_name);
}

BENCHMARK_CAPTURE(BM_Convolution, cpu_im2col_gemm, kiln::BackendChoice::kCpu)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Convolution, reference, kiln::BackendChoice::kReference)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
