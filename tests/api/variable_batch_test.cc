// Variable batch through the public API (kiln_compile_options.max_batch): LeNet compiled once for
// batches up to 8 runs batches 1, 3, 5 and 8 and gives what engines compiled for exactly those
// batches give; wrong sizes are refused. On the CPU (CI); ResNet-18 on the GPU is in
// engine_gpu_test.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kiln/kiln.hpp"
#include "tests/util/caffe_files.h"

namespace {

std::vector<float> Images(int64_t batch) {
  std::vector<float> v(static_cast<size_t>(batch) * 28 * 28);
  unsigned seed = 5;
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 16777216.0f;
  }
  return v;
}

kiln::Result<kiln::Engine> Lenet(int64_t batch, int64_t max_batch) {
  kiln::CompileOptions options;
  options.device = "cpu";
  options.batch = batch;
  options.max_batch = max_batch;
  return kiln::Engine::FromCaffe(kiln::CaffeFile("lenet.prototxt"),
                                 kiln::CaffeFile("lenet_iter_10000.caffemodel"), options);
}

TEST(VariableBatchTest, OneEngineRunsEveryBatchUpToItsMaximum) {
  auto variable = Lenet(0, 8);
  ASSERT_TRUE(variable.ok()) << variable.status().ToString();
  EXPECT_EQ(variable->MaxBatch(), 8);
  EXPECT_EQ(variable->Inputs()[0].dims[0], 8);
  auto context = variable->CreateContext();
  ASSERT_TRUE(context.ok());
  for (int64_t batch : {1, 3, 5, 8, 2}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto fixed = Lenet(batch, 0);
    ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
    auto fixed_context = fixed->CreateContext();
    ASSERT_TRUE(fixed_context.ok());
    const std::vector<float> images = Images(batch);
    ASSERT_TRUE(context->SetInput("data", images).ok());
    kiln::Status run = context->Run();
    ASSERT_TRUE(run.ok()) << run.ToString();
    EXPECT_EQ(context->Batch(), batch);
    ASSERT_TRUE(fixed_context->SetInput("data", images).ok());
    ASSERT_TRUE(fixed_context->Run().ok());
    auto got = context->Output<float>("prob", static_cast<size_t>(batch) * 10);
    auto want = fixed_context->Output<float>("prob", static_cast<size_t>(batch) * 10);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(want.ok());
    double worst = 0;
    for (size_t i = 0; i < got->size(); ++i) {
      worst = std::fmax(worst, std::fabs((*got)[i] - (*want)[i]));
    }
    EXPECT_LT(worst, 1e-6);
    // A whole-batch output is asked for with the run's batch, not the maximum.
    if (batch != 8) {
      EXPECT_EQ(context->Output<float>("prob", 80).status().code(), KILN_INVALID_ARGUMENT);
    }
  }
}

TEST(VariableBatchTest, SizesOutsideTheRangeAreRefused) {
  auto variable = Lenet(0, 4);
  ASSERT_TRUE(variable.ok()) << variable.status().ToString();
  auto context = variable->CreateContext();
  ASSERT_TRUE(context.ok());
  kiln::Status too_many = context->SetInput("data", Images(5));
  EXPECT_EQ(too_many.code(), KILN_INVALID_ARGUMENT) << too_many.ToString();
  EXPECT_NE(too_many.message().find("1 to 4 rows"), std::string::npos) << too_many.message();
  std::vector<float> ragged(28 * 28 + 3);
  EXPECT_EQ(context->SetInput("data", ragged).code(), KILN_INVALID_ARGUMENT);
  kiln::CompileOptions both;
  both.device = "cpu";
  both.batch = 2;
  both.max_batch = 4;
  auto refused = kiln::Engine::FromCaffe(kiln::CaffeFile("lenet.prototxt"),
                                         kiln::CaffeFile("lenet_iter_10000.caffemodel"), both);
  EXPECT_EQ(refused.status().code(), KILN_INVALID_ARGUMENT) << refused.status().ToString();
  // Saving a variable-batch engine is not there yet, and says so.
  EXPECT_EQ(variable->Save("/nonexistent/never.plan").code(), KILN_UNIMPLEMENTED);
}

}  // namespace
