// Tensor ops (add, reduce, transform, scale, slices): the CPU reference of the primitives against
// finite differences and Caffe/cuDNN semantics. Cases of //tests/kernels:primitives_reference_test
// (tests/util/primitive_reference_check.h).
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dnn/primitive_checks.h"
#include "dnn/primitive_reference.h"
#include "gtest/gtest.h"
#include "tests/util/primitive_reference_check.h"
#include "tests/util/primitive_test_util.h"

namespace kiln {
namespace primitives_test {
namespace {

TEST(PrimitivesReferenceTest, TensorOpsAndTheirAdjoints) {
  std::mt19937 rng(10);
  const LaidOut y = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, Layout::kStrided);
  for (std::vector<int64_t> bdims :
       std::vector<std::vector<int64_t>>{{1, 3, 1, 1}, {2, 1, 4, 1}, {1, 1, 1, 1}, {2, 3, 4, 5}}) {
    const LaidOut b = testing::MakeLayout(DataType::kF32, bdims, Layout::kChannelsLast);
    Vec bv = testing::Uniform(b.BufferElements(), -1, 1, rng);
    const Vec dy = testing::Uniform(y.BufferElements(), -1, 1, rng);
    Vec db(b.BufferElements(), 0.0);
    ASSERT_OK(ref::ReduceTensorSum(1, y.desc, dy.data() + 1, 0, b.desc, db.data() + b.offset));
    testing::ExpectGradient(
        absl::StrCat("add tensor b ", b.desc.ToString()), {}, bv,
        [&](const Vec& at) {
          Vec out(y.BufferElements(), 0.0);
          EXPECT_OK(ref::AddTensor(1, b.desc, at.data() + b.offset, 0, y.desc, out.data() + 1));
          return out;
        },
        dy, db);
  }
  // Transform between layouts keeps every logical element; scale multiplies.
  const LaidOut nhwc = testing::MakeLayout(DataType::kF32, {2, 3, 4, 5}, Layout::kChannelsLast);
  const Vec x = testing::Uniform(y.BufferElements(), -1, 1, rng);
  Vec t1(nhwc.BufferElements()), t2(y.BufferElements(), 0.0);
  ASSERT_OK(ref::TransformTensor(1, y.desc, x.data() + 1, 0, nhwc.desc, t1.data()));
  ASSERT_OK(ref::ScaleTensor(nhwc.desc, t1.data(), 2));
  ASSERT_OK(ref::TransformTensor(0.5, nhwc.desc, t1.data(), 0, y.desc, t2.data() + 1));
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t c = 0; c < 3; ++c) {
      const int64_t off = 1 + n * y.desc.strides[0] + c * y.desc.strides[1] +
                          3 * y.desc.strides[2] + 4 * y.desc.strides[3];
      EXPECT_DOUBLE_EQ(t2[off], x[off]);
    }
  }
  // SliceAlong addresses the part of a tensor a concat writes.
  const dnn::SubTensor part = dnn::SliceAlong(y.desc, 1, 1, 2);
  EXPECT_EQ(part.desc.dims, (std::vector<int64_t>{2, 2, 4, 5}));
  EXPECT_EQ(part.offset, y.desc.strides[1]);
}

}  // namespace
}  // namespace primitives_test
}  // namespace kiln
