// BatchNorm: the cases of the graph CUDA kernel tests (tests/util/cuda_graph_cases.h): every case
// runs on CUDA against the reference backend in f32, f16 and bf16, NCHW and NHWC.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "ir/graph_builder.h"
#include "kernels/all_kernels.h"
#include "ops/all_ops.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "tests/util/cuda_graph_cases.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace testing {

// Part of //tests/kernels:cuda_graph_nn_test (its case order: the seeds follow it).
std::vector<GraphKernelCase> BatchNormGraphCases() {
  return {
      // BatchNorm: stored statistics (inference), with and without Caffe's scale factor, and the
      // batch's own statistics (training mode).
      {"BatchNormStored",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Param({6}, -0.5, 0.5), Param({6}, 0.5, 2), Param({1}, 0.5, 2)},
       {}},
      {"BatchNormStoredNoFactor",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Param({6}, -0.5, 0.5), Param({6}, 0.5, 2)},
       {{"eps", 1e-3}}},
      // A zero scale factor means "no statistics yet": mean and variance 0.
      {"BatchNormFactorZero",
       "BatchNorm",
       {Data({2, 5, 3, 7}), Param({5}), Param({5}, 0.5, 2), Param({1}, 0, 0)},
       {{"eps", 0.5}}},
      {"BatchNormStoredPerActivation",
       "BatchNorm",
       {Data({3, 4, 5, 6}), Param({4, 5, 6}), Param({4, 5, 6}, 0.5, 2)},
       {{"mode", Str("per_activation")}}},
      // Statistics in the data's dtype are converted to packed f32 in the workspace.
      {"BatchNormStatsInDataType",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Data({6}, -0.5, 0.5), Data({6}, 0.5, 2), Data({1}, 0.5, 2)},
       {}},
      // DenseNet-121's 7x7 planes: vectors of 4 straddle two channels' planes, and a tail.
      {"BatchNormStored7x7",
       "BatchNorm",
       {Data({3, 9, 7, 7}), Param({9}, -0.5, 0.5), Param({9}, 0.5, 2), Param({1}, 0.5, 2)},
       {}},
      // Channels a multiple of 4: channels-last f32 takes the float4 affine kernel.
      {"BatchNormStoredChannels8",
       "BatchNorm",
       {Data({2, 8, 5, 7}), Param({8}, -0.5, 0.5), Param({8}, 0.5, 2), Param({1}, 0.5, 2)},
       {}},
      {"BatchNorm2d", "BatchNorm", {Data({9, 6}), Param({6}), Param({6}, 0.5, 2)}, {}},
      {"BatchNormBatchStats",
       "BatchNorm",
       {Data({3, 6, 5, 7}), Param({6}), Param({6}, 0.5, 2)},
       {{"use_global_stats", false}}},
      {"BatchNormBatchStatsPerActivation",
       "BatchNorm",
       {Data({5, 4, 3, 6}), Param({4, 3, 6}), Param({4, 3, 6}, 0.5, 2)},
       {{"use_global_stats", false}, {"mode", Str("per_activation")}}},
      {"BatchNormBatchStats5d",
       "BatchNorm",
       {Data({2, 3, 4, 5, 3}), Data({3}), Data({3}, 0.5, 2)},
       {{"use_global_stats", false}}},
  };
}

namespace {

// BatchNorm over constant statistics (what compiled inference plans hold) takes its
// coefficients at plan time: the kernel says so without a device, and on the GPU it agrees with
// the reference in every dtype and layout, with Caffe's factor (also 0) and without one.
TEST(CudaGraphNnTest, BatchNormOverConstantStatisticsFixesItsCoefficientsAtPlanTime) {
  const bool gpu = ProbeCuda().usable;
  int ran = 0;
  uint32_t seed = 900;
  for (DataType dtype : kGraphDtypes) {
    for (Variant v : {Variant::kNchw, Variant::kNhwc}) {
      for (const float factor : {-1.0f, 0.5f, 0.0f}) {  // -1: no factor input
        const std::string where =
            absl::StrCat(DataTypeName(dtype), " ", VariantName(v), " factor ", factor);
        GraphBuilder b(&DefaultOpRegistry());
        const int64_t ch = factor == 0.5f ? 8 : 9;  // 8: the channels-last float4 kernel
        const TensorType x_type = InputType(Data({3, ch, 7, 7}), 0, dtype, v);
        Value x = *b.Input("x", x_type);
        std::vector<Value> in = {x,
                                 *b.Constant("mean", RandomTensor(F32({ch}), seed++, -0.5f, 0.5f)),
                                 *b.Constant("var", RandomTensor(F32({ch}), seed++, 0.5f, 2.0f))};
        if (factor >= 0) {
          HostTensor f = RandomTensor(F32({1}), seed++);
          f.SetFloat(0, factor);
          in.push_back(*b.Constant("factor", f));
        }
        auto out = b.Op("BatchNorm", in, {{"eps", 1e-3}}, "bn");
        ASSERT_TRUE(out.ok()) << where << ": " << out.status();
        const Node* bn = (*out)[0].node;
        ASSERT_TRUE(b.Output("y", (*out)[0]).ok());
        auto graph = b.Finish();
        auto factory = DefaultKernelRegistry().Select(*bn, Backend::kCuda);
        ASSERT_TRUE(factory.ok()) << where << ": " << factory.status();
        auto kernel = CreateKernel(**factory, *bn, KernelOptions());
        ASSERT_TRUE(kernel.ok()) << where << ": " << kernel.status();
        EXPECT_TRUE(absl::StrContains((*kernel)->Describe(), "coefficients fixed at plan time"))
            << where << ": " << (*kernel)->Describe();
        EXPECT_EQ((*kernel)->WorkspaceBytes(), 0u) << where;
        if (!gpu) continue;
        const std::map<std::string, HostTensor> inputs = {{"x", RandomTensor(x_type, seed++)}};
        std::map<std::string, HostTensor> results[2];
        const BackendChoice backends[2] = {BackendChoice::kCuda, BackendChoice::kReference};
        for (int k = 0; k < 2; ++k) {
          CompileOptions options;
          options.backend = backends[k];
          auto plan = Compile(*graph, DefaultKernelRegistry(), options);
          ASSERT_TRUE(plan.ok()) << where << ": " << plan.status();
          auto ctx = ExecutionContext::Create(**plan);
          ASSERT_TRUE(ctx.ok()) << where << ": " << ctx.status();
          auto ran_outputs = (*ctx)->Run(inputs);
          ASSERT_TRUE(ran_outputs.ok()) << where << ": " << ran_outputs.status();
          results[k] = *ran_outputs;
        }
        const HostTensor& got = results[0].at("y");
        const HostTensor& want = results[1].at("y");
        ASSERT_EQ(got.type(), want.type()) << where;
        const GraphTolerance tol = GraphToleranceFor(dtype);
        for (int64_t i = 0; i < want.type().num_elements(); ++i) {
          const double w = want.GetFloat(i), g = got.GetFloat(i);
          ASSERT_LE(std::abs(g - w), tol.atol + tol.rtol * std::abs(w)) << where << " at " << i;
        }
        ++ran;
      }
    }
  }
  if (gpu) std::printf("BatchNorm over constant statistics: %d runs checked\n", ran);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
