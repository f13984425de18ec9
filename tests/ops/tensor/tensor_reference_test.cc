// The data-movement ops: Concat, Slice, Split, Flatten, Reshape, Crop: the reference backend
// against independent, straightforward formulas written here with double accumulation over logical
// multi-indices (strides, layouts and dtypes are handled by HostTensor, not by the code under
// test), on fresh random inputs of odd sizes and poisoned outputs. Part of
// //tests/kernels:reference_test.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"
#include "tests/util/reference_check.h"

namespace kiln {
namespace testing {
namespace {

using Dims = std::vector<int64_t>;
using Ints = std::vector<int64_t>;

TEST(ReferenceTensorOpsTest, ConcatThenSliceRoundTrips) {
  HostTensor a = RandomTensor(F32({2, 3, 4}), 111);
  HostTensor b3 = RandomTensor(F32({2, 5, 4}), 112);
  auto cat = RunReference("Concat", {a, b3}, {{"axis", int64_t{1}}});
  ASSERT_EQ(cat.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 64; ++i) {
    Dims idx = Unflatten(i, {2, 8, 4});
    expected.push_back(idx[1] < 3 ? a.GetFloat(Flatten(idx, {2, 3, 4}))
                                  : b3.GetFloat(Flatten({idx[0], idx[1] - 3, idx[2]}, {2, 5, 4})));
  }
  ExpectClose(cat[0], expected);
  auto parts = RunReference("Slice", {cat[0]}, {{"slice_points", Ints{3}}});
  ASSERT_EQ(parts.size(), 2u);
  ExpectClose(parts[0], Doubles(a));
  ExpectClose(parts[1], Doubles(b3));
}

TEST(ReferenceTensorOpsTest, SplitFlattenReshapeKeepLogicalOrder) {
  HostTensor x = RandomTensor(Nhwc({2, 3, 2, 2}), 113);
  const std::vector<double> logical = Doubles(x);
  for (const auto& [op, attrs] :
       std::vector<std::pair<std::string, AttrMap>>{{"Split", {{"num_outputs", int64_t{2}}}},
                                                    {"Flatten", {}},
                                                    {"Reshape", {{"shape", Ints{4, -1}}}}}) {
    auto out = RunReference(op, {x}, attrs);
    ASSERT_FALSE(out.empty()) << op;
    for (const HostTensor& o : out) ExpectClose(o, logical);
  }
}

TEST(ReferenceTensorOpsTest, CropAtOffsets) {
  HostTensor x = RandomTensor(F32({1, 2, 7, 8}), 114);
  HostTensor ref = RandomTensor(F32({1, 1, 3, 4}), 115);
  auto out = RunReference("Crop", {x, ref}, {{"offset", Ints{2, 3}}});
  ASSERT_EQ(out.size(), 1u);
  std::vector<double> expected;
  for (int64_t i = 0; i < 24; ++i) {
    Dims idx = Unflatten(i, {1, 2, 3, 4});
    expected.push_back(x.GetFloat(Flatten({0, idx[1], idx[2] + 2, idx[3] + 3}, {1, 2, 7, 8})));
  }
  ExpectClose(out[0], expected);
}

}  // namespace
}  // namespace testing
}  // namespace kiln
