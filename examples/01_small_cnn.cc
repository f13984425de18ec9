// Example 1: build a small CNN with the C++ GraphBuilder
// (conv -> ReLU -> max-pool -> LRN -> inner product -> softmax), compile it for the best
// available backend, run it on a seeded random image and print the class probabilities and which
// backend ran them.
//
//   bazel run //examples:01_small_cnn [-- --backend=auto|cuda|cpu|reference] [-- --dump]
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "ir/graph_builder.h"
#include "ir/text_format.h"
#include "runtime/compiler.h"
#include "runtime/executor.h"
#include "base/status_macros.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"

namespace {

using kiln::DataType;
using kiln::HostTensor;
using kiln::TensorType;

// Gaussian weights scaled by 1/sqrt(fan_in), from a fixed seed so every run prints the same.
HostTensor RandomTensor(const std::vector<int64_t>& dims, int64_t fan_in, std::mt19937& rng) {
  HostTensor t(*TensorType::Create(DataType::kF32, dims));
  std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(static_cast<float>(fan_in)));
  for (int64_t i = 0; i < t.type().num_elements(); ++i) t.data_as<float>()[i] = dist(rng);
  return t;
}

absl::StatusOr<std::unique_ptr<kiln::Graph>> BuildSmallCnn(std::mt19937& rng) {
  kiln::GraphBuilder b(&kiln::DefaultOpRegistry());
  KILN_ASSIGN_OR_RETURN(auto image, TensorType::Create(DataType::kF32, {1, 3, 32, 32}));
  KILN_ASSIGN_OR_RETURN(kiln::Value x, b.Input("data", image));
  KILN_ASSIGN_OR_RETURN(kiln::Value w1,
                        b.Constant("conv1.weight", RandomTensor({16, 3, 5, 5}, 75, rng)));
  KILN_ASSIGN_OR_RETURN(kiln::Value b1, b.Constant("conv1.bias", RandomTensor({16}, 75, rng)));
  kiln::ConvolutionOptions conv;
  conv.pad = {2};
  KILN_ASSIGN_OR_RETURN(kiln::Value c1, b.Convolution(x, w1, &b1, conv, "conv1"));
  KILN_ASSIGN_OR_RETURN(kiln::Value r1, b.Relu(c1, 0.0, "relu1"));
  kiln::PoolingOptions pool;
  pool.kernel = {3};
  pool.stride = {2};
  pool.ceil_rounding = true;  // Caffe's rounding: 32 -> 16.
  KILN_ASSIGN_OR_RETURN(kiln::Value p1, b.Pooling(r1, pool, "pool1"));
  kiln::LrnOptions lrn;
  lrn.local_size = 5;
  lrn.alpha = 1e-4;
  KILN_ASSIGN_OR_RETURN(kiln::Value n1, b.Lrn(p1, lrn, "norm1"));
  const int64_t features = 16 * 16 * 16;
  KILN_ASSIGN_OR_RETURN(kiln::Value w2,
                        b.Constant("fc.weight", RandomTensor({10, features}, features, rng)));
  KILN_ASSIGN_OR_RETURN(kiln::Value b2, b.Constant("fc.bias", RandomTensor({10}, features, rng)));
  KILN_ASSIGN_OR_RETURN(kiln::Value fc, b.InnerProduct(n1, w2, &b2, "fc"));
  KILN_ASSIGN_OR_RETURN(kiln::Value prob, b.Softmax(fc, 1, "prob"));
  KILN_RETURN_IF_ERROR(b.Output("prob", prob));
  return b.Finish();
}

absl::Status Main(const std::string& backend, bool dump) {
  std::mt19937 rng(2026);
  KILN_ASSIGN_OR_RETURN(auto graph, BuildSmallCnn(rng));
  if (dump) std::printf("%s\n", kiln::PrintGraph(*graph, {false}).c_str());
  kiln::CompileOptions options;
  if (backend == "cuda") options.backend = kiln::BackendChoice::kCuda;
  if (backend == "cpu") options.backend = kiln::BackendChoice::kCpu;
  if (backend == "reference") options.backend = kiln::BackendChoice::kReference;
  KILN_ASSIGN_OR_RETURN(auto plan, kiln::Compile(*graph, kiln::DefaultKernelRegistry(), options));
  if (dump) std::printf("%s\n", plan->ToString().c_str());
  KILN_ASSIGN_OR_RETURN(auto ctx, kiln::ExecutionContext::Create(*plan));
  HostTensor image = RandomTensor({1, 3, 32, 32}, 1, rng);
  KILN_ASSIGN_OR_RETURN(auto outputs, ctx->Run({{"data", image}}));
  const HostTensor& prob = outputs.at("prob");
  std::printf("small CNN: conv(16x5x5) -> relu -> maxpool(3,s2) -> lrn(5) -> fc(10) -> softmax\n");
  std::printf("backend: %s (%s) on %s\n", std::string(kiln::BackendName(plan->backend())).c_str(),
              plan->backend_reason().c_str(), ctx->device().Describe().c_str());
  std::printf("class probabilities:");
  double sum = 0;
  for (int64_t i = 0; i < prob.type().num_elements(); ++i) {
    std::printf(" %.5f", prob.GetFloat(i));
    sum += prob.GetFloat(i);
  }
  std::printf("\nsum: %.6f\n", sum);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "auto";
  bool dump = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--backend=", 10) == 0) {
      backend = argv[i] + 10;
    } else if (std::strcmp(argv[i], "--dump") == 0) {
      dump = true;
    } else {
      std::fprintf(stderr, "usage: %s [--backend=auto|cuda|cpu|reference] [--dump]\n", argv[0]);
      return 2;
    }
  }
  absl::Status s = Main(backend, dump);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
