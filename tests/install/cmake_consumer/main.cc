// A C++ program against an installed Kiln through kiln/kiln.hpp (find_package(Kiln)):
//   1. LeNet with its trained weights, compiled with the defaults (fusion on, device auto), against
//      the reference backend;
//   2. one engine, four threads with a context each: every thread's output equals one thread's
//      to the bit, and the weights are held once;
//   3. a small CNN written with the typed builder helpers, auto against reference;
//   4. a bad shape is a Status naming the node.
//   cmake_consumer LENET_PROTOTXT LENET_CAFFEMODEL
// Prints "cmake consumer: PASS" and exits 0, or says what failed and exits 1.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "cmake consumer: FAILED: %s\n", what.c_str());
  ++failures;
}

template <typename T>
bool Ok(const T& result, const std::string& what) {
  if (result.ok()) return true;
  Check(false, what + ": " + result.status().ToString());
  return false;
}

bool Ok(const kiln::Status& status, const std::string& what) {
  Check(status.ok(), what + ": " + status.ToString());
  return status.ok();
}

std::vector<float> Pseudorandom(size_t n, unsigned seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 16777216.0f;
  }
  return v;
}

// Runs `engine` once on `input` into the output named `output` (`count` floats).
std::vector<float> RunOnce(const kiln::Engine& engine, const std::string& input,
                           const std::vector<float>& data, const std::string& output,
                           size_t count) {
  auto context = engine.CreateContext();
  if (!Ok(context, "CreateContext")) return {};
  if (!Ok(context->SetInput(input, data), "SetInput") || !Ok(context->Run(), "Run")) return {};
  auto out = context->Output<float>(output, count);
  return Ok(out, "Output") ? out.value() : std::vector<float>{};
}

double LargestDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::fmax(worst, std::fabs(a[i] - b[i]));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: cmake_consumer LENET_PROTOTXT LENET_CAFFEMODEL\n");
    return 2;
  }
  // 1. LeNet, defaults against the reference backend.
  kiln::CompileOptions defaults;
  defaults.batch = 4;
  kiln::CompileOptions reference = defaults;
  reference.device = "reference";
  auto lenet = kiln::Engine::FromCaffe(argv[1], argv[2], defaults);
  auto lenet_reference = kiln::Engine::FromCaffe(argv[1], argv[2], reference);
  if (!Ok(lenet, "LeNet") || !Ok(lenet_reference, "LeNet on the reference backend")) return 1;
  std::printf("LeNet: %s\n", lenet->Describe().c_str());
  const std::vector<kiln::TensorInfo> inputs = lenet->Inputs();
  Check(inputs.size() == 1 && inputs[0].name == "data" && inputs[0].elements() == 4 * 28 * 28,
        "LeNet's one input is data[4,1,28,28]");
  const std::vector<float> images = Pseudorandom(4 * 28 * 28, 7);
  const std::vector<float> prob = RunOnce(*lenet, "data", images, "prob", 40);
  const std::vector<float> expected = RunOnce(*lenet_reference, "data", images, "prob", 40);
  const double lenet_error = LargestDifference(prob, expected);
  // A GPU engine computes in another order (and fuses): equal to rounding, not to the bit.
  Check(lenet_error < (lenet->CudaDevice() >= 0 ? 1e-4 : 1e-5),
        "LeNet against the reference: " + std::to_string(lenet_error));

  // 2. One engine, four threads.
  std::vector<std::vector<float>> per_thread(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 3; ++repeat) {
        per_thread[t] = RunOnce(*lenet, "data", images, "prob", 40);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t) {
    Check(per_thread[t] == prob, "thread " + std::to_string(t) + "'s output equals one thread's");
  }
  Check(lenet->WeightsBytes() > 400000, "LeNet's weights (431,080 floats) are counted");

  // 3. A small CNN from the builder.
  auto graph = kiln::Graph::Create();
  if (!Ok(graph, "Graph::Create")) return 1;
  auto x = graph->Input("image", {2, 3, 16, 16});
  auto w = graph->Constant("conv.w", {8, 3, 3, 3}, Pseudorandom(8 * 3 * 3 * 3, 3));
  auto b = graph->Constant("conv.b", {8}, Pseudorandom(8, 4));
  auto fc_w = graph->Constant("fc.w", {5, 8 * 8 * 8}, Pseudorandom(5 * 8 * 8 * 8, 5));
  if (!Ok(x, "Input") || !Ok(w, "Constant") || !Ok(b, "Constant") || !Ok(fc_w, "Constant")) {
    return 1;
  }
  kiln::ConvolutionOptions conv;
  conv.pad = {1};
  auto c = graph->Convolution(*x, *w, &b.value(), conv, "conv");
  if (!Ok(c, "Convolution")) return 1;
  auto r = graph->ReLU(*c, 0.0, "relu");
  kiln::PoolingOptions pool;
  pool.kernel = {2};
  pool.stride = {2};
  auto p = r.ok() ? graph->Pooling(*r, pool, "pool") : kiln::Result<kiln::Value>(r.status());
  auto fc = p.ok() ? graph->InnerProduct(*p, *fc_w, nullptr, 1, "fc")
                   : kiln::Result<kiln::Value>(p.status());
  auto s = fc.ok() ? graph->Softmax(*fc, 1, false, "prob") : kiln::Result<kiln::Value>(fc.status());
  if (!Ok(s, "the builder's CNN") || !Ok(graph->Output("prob", *s), "Output")) return 1;
  kiln::CompileOptions graph_reference;
  graph_reference.device = "reference";
  auto built = kiln::Engine::FromGraph(*graph);
  auto built_reference = kiln::Engine::FromGraph(*graph, graph_reference);
  if (!Ok(built, "FromGraph") || !Ok(built_reference, "FromGraph reference")) return 1;
  const std::vector<float> image = Pseudorandom(2 * 3 * 16 * 16, 9);
  const double built_error =
      LargestDifference(RunOnce(*built, "image", image, "prob", 10),
                        RunOnce(*built_reference, "image", image, "prob", 10));
  Check(built_error < 1e-4, "the builder's CNN against the reference: " +
                                std::to_string(built_error));

  // 4. Errors are Statuses naming the node.
  auto bad_filter = graph->Constant("bad.w", {4, 5, 3, 3}, Pseudorandom(4 * 5 * 9, 1));
  auto bad = bad_filter.ok() ? graph->Convolution(*x, *bad_filter, nullptr, {}, "bad_conv")
                             : kiln::Result<kiln::Value>(bad_filter.status());
  Check(!bad.ok() && bad.status().code() == KILN_INVALID_ARGUMENT &&
            bad.status().message().find("bad_conv") != std::string::npos,
        "a convolution over the wrong channel count is refused, naming it: " +
            bad.status().ToString());
  auto missing = kiln::Engine::FromCaffe("missing.prototxt", "");
  Check(!missing.ok() && missing.status().code() == KILN_NOT_FOUND,
        "a missing file: " + missing.status().ToString());

  std::printf("LeNet vs reference %.3g, builder CNN vs reference %.3g\n", lenet_error,
              built_error);
  if (failures) return 1;
  std::printf("cmake consumer: PASS\n");
  return 0;
}
