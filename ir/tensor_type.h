// TensorType: dtype + dims + explicit element strides, the cuDNN-style descriptor that makes
// NCHW, NHWC, any dimension order and sub-regions of a larger buffer one concept.
#ifndef KILN_IR_TENSOR_TYPE_H_
#define KILN_IR_TENSOR_TYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/dtype.h"

namespace kiln {

// Physical orders for 4-d (N,C,H,W) and 5-d (N,C,D,H,W) logical shapes.
enum class Layout { kRowMajor, kChannelsLast };

class TensorType {
 public:
  static constexpr int kMaxRank = 8;

  // An empty f32 scalar-less placeholder; only useful as a default before assignment.
  TensorType() = default;

  // A dense row-major tensor (the last dim is contiguous). Validates rank, sizes and overflow.
  static absl::StatusOr<TensorType> Create(DataType dtype, absl::Span<const int64_t> dims);

  // A tensor with explicit element strides. Sizes must be >= 0, strides >= 1 (a stride is
  // irrelevant for a dim of size 1 but still must be >= 1), the element span must not overflow,
  // and the strides must not alias: ordered by stride, each stride is at least the extent of the
  // faster dims it encloses, so no two indices share an element.
  static absl::StatusOr<TensorType> CreateStrided(DataType dtype, absl::Span<const int64_t> dims,
                                                  absl::Span<const int64_t> strides);

  // A dense tensor of logical N,C,(D,)H,W dims stored channels-last (NHWC / NDHWC) or row-major.
  static absl::StatusOr<TensorType> CreateWithLayout(DataType dtype, absl::Span<const int64_t> dims,
                                                     Layout layout);

  // Parses the text form written by ToString().
  static absl::StatusOr<TensorType> Parse(absl::string_view text);

  DataType dtype() const { return dtype_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  const std::vector<int64_t>& dims() const { return dims_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t dim(int i) const { return dims_[i]; }
  int64_t stride(int i) const { return strides_[i]; }

  // Product of the dims (1 for a rank-0 tensor).
  int64_t num_elements() const;
  // Elements a buffer must hold: 1 + the largest offset (0 when any dim is 0).
  int64_t span_elements() const;
  int64_t span_bytes() const {
    return span_elements() * static_cast<int64_t>(DataTypeSize(dtype_));
  }

  // Dense row-major: strides are exactly those Create() would give.
  bool IsContiguous() const;
  // Dense channels-last for a 4-d/5-d tensor.
  bool IsChannelsLast() const;

  // Element offset of a multi-index (rank() entries).
  int64_t Offset(absl::Span<const int64_t> index) const;

  // The same dims and dtype, dense row-major.
  TensorType Contiguous() const;
  // The same dims and strides with another dtype.
  TensorType WithDataType(DataType dtype) const;

  // "f32[2,3,4]" when dense row-major, else "f32[2,3,4]{12,1,3}".
  std::string ToString() const;

  bool SameShape(const TensorType& other) const { return dims_ == other.dims_; }
  bool operator==(const TensorType& other) const {
    return dtype_ == other.dtype_ && dims_ == other.dims_ && strides_ == other.strides_;
  }
  bool operator!=(const TensorType& other) const { return !(*this == other); }

 private:
  DataType dtype_ = DataType::kF32;
  std::vector<int64_t> dims_;
  std::vector<int64_t> strides_;
};

// Row-major strides for `dims` (assumes the product does not overflow).
std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> dims);

// "[1,2,3]" for shapes in messages.
std::string DimsToString(absl::Span<const int64_t> dims);

}  // namespace kiln

#endif  // KILN_IR_TENSOR_TYPE_H_
