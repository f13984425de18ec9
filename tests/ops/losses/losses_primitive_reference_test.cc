// Softmax with loss: the CPU reference of the primitives against finite differences and Caffe/cuDNN
// semantics. Cases of //tests/kernels:primitives_reference_test
// (tests/util/primitive_reference_check.h).
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_reference_check.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST(PrimitivesReferenceTest, SoftmaxLossGradientAndNormalization) {
  std::mt19937 rng(8);
  using N = dnn::LossNormalization;
  for (N norm : {N::kFull, N::kValid, N::kBatchSize, N::kNone}) {
    for (Layout layout : kLayouts) {
      const LaidOut t = testing::MakeLayout(DataType::kF32, {3, 4, 2, 2}, layout);
      const TensorDescriptor ld =
          *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {3, 1, 2, 2});
      dnn::SoftmaxLossDescriptor loss;
      loss.normalization = norm;
      loss.has_ignore_label = true;
      loss.ignore_label = 2;
      loss.loss_weight = 1.5;
      Vec labels(12);
      for (int i = 0; i < 12; ++i) labels[i] = (i * 5) % 4;  // includes 2 (ignored)
      const int64_t o = t.offset;
      const Vec x = testing::Uniform(t.BufferElements(), -2, 2, rng);
      auto f = [&](const Vec& at) {
        Vec prob(at.size(), 0.0), l(1);
        EXPECT_OK(ref::SoftmaxLossForward(loss, t.desc, at.data() + o, ld, labels.data(), t.desc,
                                          prob.data() + o, l.data()));
        return l;
      };
      Vec prob(x.size(), 0.0), l(1), dx(x.size(), 0.0);
      ASSERT_OK(ref::SoftmaxLossForward(loss, t.desc, x.data() + o, ld, labels.data(), t.desc,
                                        prob.data() + o, l.data()));
      ASSERT_OK(ref::SoftmaxLossBackward(loss, t.desc, prob.data() + o, ld, labels.data(), 1, 0,
                                         t.desc, dx.data() + o));
      testing::ExpectGradient(absl::StrCat("softmax loss norm ", static_cast<int>(norm), " ",
                                           testing::LayoutName(layout)),
                              {}, x, f, {loss.loss_weight}, dx);
    }
  }
  // A label outside [0, C) that is not ignored is refused, naming the label.
  const TensorDescriptor xd =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 3, 1, 1});
  const TensorDescriptor ld =
      *TensorDescriptor::CreatePacked(DataType::kF32, dnn::TensorFormat::kNCHW, {1, 1, 1, 1});
  Vec x = {1, 2, 3}, prob(3), l(1), bad = {3};
  const absl::Status s =
      ref::SoftmaxLossForward({}, xd, x.data(), ld, bad.data(), xd, prob.data(), l.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("label 3"), std::string::npos) << s;
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
