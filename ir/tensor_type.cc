#include "ir/tensor_type.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kiln {
namespace {

// Largest element count or span we accept: keeps byte sizes (x8) inside int64.
constexpr int64_t kMaxElements = int64_t{1} << 59;

bool MulOverflows(int64_t a, int64_t b, int64_t limit) { return b != 0 && a > limit / b; }

absl::Status ValidateDims(absl::Span<const int64_t> dims) {
  if (dims.size() > TensorType::kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", dims.size(), " exceeds the maximum of ", TensorType::kMaxRank));
  }
  // The product of the dims with zeros read as 1, as RowMajorStrides multiplies them: a zero dim
  // makes the element count 0 but not the strides of the dims before it, which must fit too.
  int64_t extent = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dim ", i, " of ", DimsToString(dims), " is negative"));
    }
    const int64_t d = std::max<int64_t>(dims[i], 1);
    if (MulOverflows(extent, d, kMaxElements)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", DimsToString(dims), " has too many elements (overflow)"));
    }
    extent *= d;
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= std::max<int64_t>(dims[i], 1);
  }
  return strides;
}

std::string DimsToString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

absl::StatusOr<TensorType> TensorType::Create(DataType dtype, absl::Span<const int64_t> dims) {
  absl::Status s = ValidateDims(dims);
  if (!s.ok()) return s;
  TensorType t;
  t.dtype_ = dtype;
  t.dims_.assign(dims.begin(), dims.end());
  t.strides_ = RowMajorStrides(dims);
  return t;
}

absl::StatusOr<TensorType> TensorType::CreateStrided(DataType dtype, absl::Span<const int64_t> dims,
                                                     absl::Span<const int64_t> strides) {
  absl::Status s = ValidateDims(dims);
  if (!s.ok()) return s;
  if (strides.size() != dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat("strides ", DimsToString(strides), " have rank ",
                                                   strides.size(), " but dims ", DimsToString(dims),
                                                   " have rank ", dims.size()));
  }
  int64_t span = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (strides[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("stride ", i, " of ", DimsToString(strides), " is not positive"));
    }
    if (dims[i] > 0) {
      if (MulOverflows(dims[i] - 1, strides[i], kMaxElements) ||
          span > kMaxElements - (dims[i] - 1) * strides[i]) {
        return absl::InvalidArgumentError(absl::StrCat("strides ", DimsToString(strides),
                                                       " over dims ", DimsToString(dims),
                                                       " address too many elements (overflow)"));
      }
      span += (dims[i] - 1) * strides[i];
    }
  }
  // No aliasing: visit dims of size > 1 from the smallest stride up; each must step over the
  // whole extent of the dims already visited.
  std::vector<int> order;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] > 1) order.push_back(static_cast<int>(i));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return strides[a] < strides[b]; });
  int64_t extent = 1;
  for (int i : order) {
    if (strides[i] < extent) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strides ", DimsToString(strides), " over dims ", DimsToString(dims), " overlap: dim ", i,
          " has stride ", strides[i], " but the faster dims span ", extent, " elements"));
    }
    extent = strides[i] * dims[i];
  }
  TensorType t;
  t.dtype_ = dtype;
  t.dims_.assign(dims.begin(), dims.end());
  t.strides_.assign(strides.begin(), strides.end());
  return t;
}

absl::StatusOr<TensorType> TensorType::CreateWithLayout(DataType dtype,
                                                        absl::Span<const int64_t> dims,
                                                        Layout layout) {
  if (layout == Layout::kRowMajor) return Create(dtype, dims);
  if (dims.size() != 4 && dims.size() != 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("channels-last layout needs a 4-d or 5-d shape, got ", DimsToString(dims)));
  }
  // Physical order N, spatial..., C: compute strides of that permutation.
  std::vector<int> physical = {0};
  for (size_t i = 2; i < dims.size(); ++i) physical.push_back(static_cast<int>(i));
  physical.push_back(1);
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (int i = static_cast<int>(physical.size()) - 1; i >= 0; --i) {
    strides[physical[i]] = s;
    s *= std::max<int64_t>(dims[physical[i]], 1);
  }
  return CreateStrided(dtype, dims, strides);
}

int64_t TensorType::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

int64_t TensorType::span_elements() const {
  int64_t span = 1;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] == 0) return 0;
    span += (dims_[i] - 1) * strides_[i];
  }
  return span;
}

bool TensorType::IsContiguous() const { return strides_ == RowMajorStrides(dims_); }

bool TensorType::IsChannelsLast() const {
  if (rank() != 4 && rank() != 5) return false;
  auto t = CreateWithLayout(dtype_, dims_, Layout::kChannelsLast);
  return t.ok() && t->strides_ == strides_;
}

int64_t TensorType::Offset(absl::Span<const int64_t> index) const {
  int64_t off = 0;
  for (size_t i = 0; i < dims_.size(); ++i) off += index[i] * strides_[i];
  return off;
}

TensorType TensorType::Contiguous() const {
  TensorType t = *this;
  t.strides_ = RowMajorStrides(dims_);
  return t;
}

TensorType TensorType::WithDataType(DataType dtype) const {
  TensorType t = *this;
  t.dtype_ = dtype;
  return t;
}

std::string TensorType::ToString() const {
  std::string s = absl::StrCat(DataTypeName(dtype_), DimsToString(dims_));
  if (!IsContiguous()) absl::StrAppend(&s, "{", absl::StrJoin(strides_, ","), "}");
  return s;
}

namespace {
absl::StatusOr<std::vector<int64_t>> ParseIntList(absl::string_view text, absl::string_view what) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(piece, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad ", what, " entry '", piece, "' in '", text, "'"));
    }
    out.push_back(v);
  }
  return out;
}
}  // namespace

absl::StatusOr<TensorType> TensorType::Parse(absl::string_view text) {
  const size_t open = text.find('[');
  const size_t close = text.find(']');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor type '", text, "' is not of the form dtype[d0,d1,...]"));
  }
  auto dtype = ParseDataType(text.substr(0, open));
  if (!dtype.ok()) return dtype.status();
  auto dims = ParseIntList(text.substr(open + 1, close - open - 1), "dim");
  if (!dims.ok()) return dims.status();
  absl::string_view rest = text.substr(close + 1);
  if (rest.empty()) return Create(*dtype, *dims);
  if (!absl::ConsumePrefix(&rest, "{") || !absl::ConsumeSuffix(&rest, "}")) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor type '", text, "': strides must be written {s0,s1,...}"));
  }
  auto strides = ParseIntList(rest, "stride");
  if (!strides.ok()) return strides.status();
  return CreateStrided(*dtype, *dims, *strides);
}

}  // namespace kiln
