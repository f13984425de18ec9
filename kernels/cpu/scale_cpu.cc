// CPU BiasGradient, the broadcast-parameter gradient sum of Bias (and of Scale's bias), written
// for speed as pooling_cpu.cc is: the reference kernel stays the oracle the CPU tests compare
// against; this is what CPU training runs.
#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/cpu_kernels.h"
#include "ops/broadcast_params.h"

namespace kiln {

namespace {

class BiasGradientSum : public Kernel {
 public:
  explicit BiasGradientSum(BroadcastParams b) : b_(b) {}
  absl::Status Run(const KernelArgs& args) const override {
    const float* dy = static_cast<const float*>(args.inputs[0].data);
    float* db = static_cast<float*>(args.outputs[0].data);
    for (int64_t c = 0; c < b_.channels; ++c) {
      double sum = 0;
      for (int64_t o = 0; o < b_.outer; ++o) {
        const float* run = dy + (o * b_.channels + c) * b_.inner;
        float part = 0;  // one run in f32, the runs in double: short sums stay exact enough
        for (int64_t i = 0; i < b_.inner; ++i) part += run[i];
        sum += part;
      }
      db[c] = static_cast<float>(sum);
    }
    return absl::OkStatus();
  }

 private:
  BroadcastParams b_;
};

}  // namespace

absl::Status RegisterCpuScale(KernelRegistry& registry) {
  return RegisterCpuKernel(registry, "BiasGradient", "any", "direct", RequireDenseF32,
                           [](const Node& n) -> absl::StatusOr<Kernel*> {
                             KILN_ASSIGN_OR_RETURN(
                                 BroadcastParams b,
                                 BroadcastParams::Create(n.input(0).type(), n.output_types()[0],
                                                         n.GetInt("axis"), n.GetInt("num_axes")));
                             return new BiasGradientSum(b);
                           });
}

}  // namespace kiln
