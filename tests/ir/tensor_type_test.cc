#include "ir/tensor_type.h"

#include <cmath>
#include <limits>

#include "base/dtype.h"
#include "gtest/gtest.h"
#include "ir/host_tensor.h"

namespace kiln {
namespace {

TEST(TensorTypeTest, DenseRowMajorStrides) {
  auto t = TensorType::Create(DataType::kF32, {2, 3, 4, 5});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->strides(), (std::vector<int64_t>{60, 20, 5, 1}));
  EXPECT_EQ(t->num_elements(), 120);
  EXPECT_EQ(t->span_bytes(), 480);
  EXPECT_TRUE(t->IsContiguous());
  EXPECT_FALSE(t->IsChannelsLast());
}

TEST(TensorTypeTest, ChannelsLastIsOneDescriptor) {
  auto t = TensorType::CreateWithLayout(DataType::kF16, {2, 3, 4, 5}, Layout::kChannelsLast);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->strides(), (std::vector<int64_t>{60, 1, 15, 3}));
  EXPECT_TRUE(t->IsChannelsLast());
  EXPECT_FALSE(t->IsContiguous());
  EXPECT_EQ(t->span_elements(), 120);
}

TEST(TensorTypeTest, ChannelsLast5d) {
  auto t = TensorType::CreateWithLayout(DataType::kF32, {1, 2, 3, 4, 5}, Layout::kChannelsLast);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->strides(), (std::vector<int64_t>{120, 1, 40, 10, 2}));
}

TEST(TensorTypeTest, ChannelsLastNeeds4or5Dims) {
  EXPECT_EQ(
      TensorType::CreateWithLayout(DataType::kF32, {2, 3}, Layout::kChannelsLast).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(TensorTypeTest, SubRegionOfLargerBuffer) {
  // A 2x3 window of a 4x10 row-major matrix: row stride 10.
  auto t = TensorType::CreateStrided(DataType::kF32, {2, 3}, {10, 1});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->span_elements(), 13);
  EXPECT_EQ(t->Offset({1, 2}), 12);
  EXPECT_FALSE(t->IsContiguous());
}

TEST(TensorTypeTest, RejectsNegativeDim) {
  auto t = TensorType::Create(DataType::kF32, {2, -1});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("negative"), std::string::npos);
}

TEST(TensorTypeTest, RejectsRankAboveEight) {
  EXPECT_FALSE(TensorType::Create(DataType::kF32, {1, 1, 1, 1, 1, 1, 1, 1, 1}).ok());
  EXPECT_TRUE(TensorType::Create(DataType::kF32, {1, 1, 1, 1, 1, 1, 1, 1}).ok());
}

TEST(TensorTypeTest, RejectsElementCountOverflow) {
  auto t = TensorType::Create(DataType::kF32, {1 << 30, 1 << 30, 1 << 30});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("overflow"), std::string::npos);
}

// Found by tests/fuzz/npy (corpus/npy/regress_zero_dim_stride_overflow): a zero dim makes the
// element count 0, but the row-major strides of the other dims still overflowed int64.
TEST(TensorTypeTest, RejectsOverflowBehindAZeroDim) {
  auto t = TensorType::Create(DataType::kF32, {4, 666, 6666666666660, 0, 10, 12, 12});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("overflow"), std::string::npos);
  EXPECT_FALSE(TensorType::Create(DataType::kF32, {int64_t{1} << 40, 0, int64_t{1} << 40}).ok());
  auto empty = TensorType::Create(DataType::kF32, {0, int64_t{1} << 40});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->num_elements(), 0);
}

TEST(TensorTypeTest, RejectsStrideOverflow) {
  auto t = TensorType::CreateStrided(DataType::kF32, {3, 2},
                                     {std::numeric_limits<int64_t>::max() / 2, 1});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTypeTest, RejectsOverlappingStrides) {
  // Row stride 2 for rows of 3 elements: rows overlap.
  auto t = TensorType::CreateStrided(DataType::kF32, {4, 3}, {2, 1});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("overlap"), std::string::npos);
}

TEST(TensorTypeTest, RejectsZeroOrNegativeStride) {
  EXPECT_FALSE(TensorType::CreateStrided(DataType::kF32, {4, 3}, {3, 0}).ok());
  EXPECT_FALSE(TensorType::CreateStrided(DataType::kF32, {4, 3}, {-3, 1}).ok());
}

TEST(TensorTypeTest, RejectsStrideRankMismatch) {
  EXPECT_FALSE(TensorType::CreateStrided(DataType::kF32, {4, 3}, {3}).ok());
}

TEST(TensorTypeTest, SizeOneDimsIgnoreStrideForAliasing) {
  EXPECT_TRUE(TensorType::CreateStrided(DataType::kF32, {1, 3}, {1, 1}).ok());
}

TEST(TensorTypeTest, EmptyTensorHasNoSpan) {
  auto t = TensorType::Create(DataType::kF32, {0, 5});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->num_elements(), 0);
  EXPECT_EQ(t->span_elements(), 0);
}

TEST(TensorTypeTest, TextRoundTrip) {
  for (const char* text :
       {"f32[2,3,4]", "bf16[1,3,4,4]{48,1,12,3}", "i32[]", "u8[7]", "f16[2,3]{10,1}"}) {
    auto t = TensorType::Parse(text);
    ASSERT_TRUE(t.ok()) << text << ": " << t.status();
    EXPECT_EQ(t->ToString(), text);
  }
}

TEST(TensorTypeTest, ParseErrors) {
  EXPECT_FALSE(TensorType::Parse("f64[2]").ok());
  EXPECT_FALSE(TensorType::Parse("f32(2)").ok());
  EXPECT_FALSE(TensorType::Parse("f32[2,x]").ok());
  EXPECT_FALSE(TensorType::Parse("f32[2,3]{3}").ok());
  EXPECT_FALSE(TensorType::Parse("f32[2,3]<1,2>").ok());
}

TEST(DataTypeTest, SizesAndNames) {
  EXPECT_EQ(DataTypeSize(DataType::kF32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kBF16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kU8), 1u);
  EXPECT_EQ(*ParseDataType("bf16"), DataType::kBF16);
  EXPECT_FALSE(ParseDataType("float").ok());
}

TEST(DataTypeTest, HalfConversionIsExactOnRepresentableValues) {
  for (float v :
       {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(v)), v) << v;
  }
}

TEST(DataTypeTest, HalfRoundsToNearestEvenAndSaturatesToInf) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 1.0f / 4096)), 1.0f);                // Halfway: to even.
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.0f + 3.0f / 4096)), 1.0f + 1.0f / 1024);  // Up.
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(70000.0f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  EXPECT_EQ(HalfToFloat(FloatToHalf(1e-9f)), 0.0f);
}

TEST(DataTypeTest, BFloat16Conversion) {
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f)), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(-3.140625f)), -3.140625f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f + 1.0f / 256)), 1.0f);  // Halfway: to even.
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

TEST(HostTensorTest, LogicalOrderIndependentOfStrides) {
  auto nhwc = TensorType::CreateWithLayout(DataType::kF32, {1, 2, 2, 3}, Layout::kChannelsLast);
  HostTensor t(*nhwc);
  for (int64_t i = 0; i < 12; ++i) t.SetFloat(i, static_cast<float>(i));
  // Logical (n=0, c=1, h=0, w=2) is flat 1*6+0*3+2 = 8; physically at 2*2... stride: c=1, w=2.
  EXPECT_EQ(t.data_as<float>()[nhwc->Offset({0, 1, 0, 2})], 8.0f);
  EXPECT_EQ(t.ToF32Vector()[8], 8.0f);
}

TEST(HostTensorTest, FromF32ChecksCount) {
  EXPECT_FALSE(HostTensor::FromF32(*TensorType::Create(DataType::kF32, {2}), {1, 2, 3}).ok());
  auto t = HostTensor::FromF32(*TensorType::Create(DataType::kBF16, {2}), {1, 2});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->GetFloat(1), 2.0f);
}

}  // namespace
}  // namespace kiln
