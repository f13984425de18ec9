// Softmax: the CPU reference of the primitives against finite differences and Caffe/cuDNN
// semantics. Cases of //tests/kernels:primitives_reference_test
// (tests/util/primitive_reference_check.h).
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_reference_check.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST(PrimitivesReferenceTest, SoftmaxGradients) {
  std::mt19937 rng(6);
  for (auto algo : {dnn::SoftmaxAlgorithm::kAccurate, dnn::SoftmaxAlgorithm::kLog}) {
    for (auto softmax :
         {dnn::SoftmaxDescriptor::Channel(algo), dnn::SoftmaxDescriptor::Instance(algo, 4),
          dnn::SoftmaxDescriptor::Axis(algo, 3)}) {
      for (Layout layout : kLayouts) {
        const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 5, 3, 4}, layout);
        const int64_t o = t.offset;
        UnaryOp op{absl::StrCat("softmax ", static_cast<int>(algo), " axes ", softmax.first_axis,
                                "-", softmax.last_axis, " ", testing::LayoutName(layout)),
                   t, t};
        op.forward = [&](const Vec& x, Vec& y) {
          ASSERT_OK(ref::SoftmaxForward(softmax, 1, t.desc, x.data() + o, 0, t.desc, y.data() + o));
        };
        op.backward = [&](const Vec&, const Vec& y, const Vec& dy, Vec& dx) {
          ASSERT_OK(ref::SoftmaxBackward(softmax, 1, t.desc, y.data() + o, t.desc, dy.data() + o, 0,
                                         t.desc, dx.data() + o));
        };
        CheckUnary(op, testing::Uniform(t.BufferElements(), -3, 3, rng));
      }
    }
  }
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
