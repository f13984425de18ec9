// LRN: the CPU reference of the primitives against finite differences and Caffe/cuDNN
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

TEST(PrimitivesReferenceTest, LrnGradients) {
  std::mt19937 rng(4);
  const dnn::LrnDescriptor lrns[] = {
      *dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 5, 0.3, 0.75, 2.0),
      *dnn::LrnDescriptor::Create(dnn::LrnMode::kAcrossChannels, 3, 1.5, 0.6, 1.0),
      *dnn::LrnDescriptor::Create(dnn::LrnMode::kWithinChannel, 3, 0.8, 0.75, 1.0),
  };
  for (const auto& lrn : lrns) {
    for (Layout layout : kLayouts) {
      const LaidOut t = testing::MakeLayout(DataType::kF32, {2, 7, 3, 4}, layout);
      const int64_t o = t.offset;
      UnaryOp op{absl::StrCat("lrn ", lrn.ToString(), " ", testing::LayoutName(layout)), t, t};
      op.forward = [&](const Vec& x, Vec& y) {
        ASSERT_OK(ref::LrnForward(lrn, 1, t.desc, x.data() + o, 0, t.desc, y.data() + o));
      };
      op.backward = [&](const Vec& x, const Vec& y, const Vec& dy, Vec& dx) {
        ASSERT_OK(ref::LrnBackward(lrn, 1, t.desc, y.data() + o, t.desc, dy.data() + o, t.desc,
                                   x.data() + o, 0, t.desc, dx.data() + o));
      };
      CheckUnary(op, testing::Uniform(t.BufferElements(), -2, 2, rng));
    }
  }
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
