#include "ir/host_tensor.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln {

float LoadAsFloat(const void* base, DataType dtype, int64_t offset) {
  switch (dtype) {
    case DataType::kF32:
      return static_cast<const float*>(base)[offset];
    case DataType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(base)[offset]);
    case DataType::kBF16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(base)[offset]);
    case DataType::kI32:
      return static_cast<float>(static_cast<const int32_t*>(base)[offset]);
    case DataType::kU8:
      return static_cast<float>(static_cast<const uint8_t*>(base)[offset]);
  }
  return 0.0f;
}

void StoreFromFloat(void* base, DataType dtype, int64_t offset, float value) {
  switch (dtype) {
    case DataType::kF32:
      static_cast<float*>(base)[offset] = value;
      return;
    case DataType::kF16:
      static_cast<uint16_t*>(base)[offset] = FloatToHalf(value);
      return;
    case DataType::kBF16:
      static_cast<uint16_t*>(base)[offset] = FloatToBFloat16(value);
      return;
    case DataType::kI32:
      static_cast<int32_t*>(base)[offset] = static_cast<int32_t>(value);
      return;
    case DataType::kU8:
      static_cast<uint8_t*>(base)[offset] = static_cast<uint8_t>(value);
      return;
  }
}

HostTensor::HostTensor(const TensorType& type)
    : type_(type), storage_(std::make_shared<Storage>()) {
  storage_->bytes = static_cast<size_t>(type.span_bytes());
  storage_->blocks.resize((storage_->bytes + 63) / 64);
  if (!storage_->blocks.empty()) std::memset(storage_->data(), 0, storage_->blocks.size() * 64);
}

absl::StatusOr<HostTensor> HostTensor::FromF32(const TensorType& type,
                                               absl::Span<const float> values) {
  if (static_cast<int64_t>(values.size()) != type.num_elements()) {
    return absl::InvalidArgumentError(absl::StrCat("HostTensor::FromF32: ", values.size(),
                                                   " values for type ", type.ToString(), " of ",
                                                   type.num_elements(), " elements"));
  }
  HostTensor t(type);
  for (size_t i = 0; i < values.size(); ++i) t.SetFloat(static_cast<int64_t>(i), values[i]);
  return t;
}

int64_t HostTensor::PhysicalOffset(int64_t logical_index) const {
  int64_t offset = 0;
  for (int d = type_.rank() - 1; d >= 0; --d) {
    const int64_t n = type_.dim(d);
    offset += (logical_index % n) * type_.stride(d);
    logical_index /= n;
  }
  return offset;
}

float HostTensor::GetFloat(int64_t logical_index) const {
  return LoadAsFloat(data(), type_.dtype(), PhysicalOffset(logical_index));
}

void HostTensor::SetFloat(int64_t logical_index, float value) {
  StoreFromFloat(data(), type_.dtype(), PhysicalOffset(logical_index), value);
}

std::vector<float> HostTensor::ToF32Vector() const {
  std::vector<float> out(static_cast<size_t>(type_.num_elements()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = GetFloat(static_cast<int64_t>(i));
  return out;
}

HostTensor HostTensor::Clone() const {
  HostTensor copy(type_);
  if (size_bytes() > 0) std::memcpy(copy.data(), data(), static_cast<size_t>(size_bytes()));
  return copy;
}

void HostTensor::Poison(uint8_t byte) {
  if (size_bytes() > 0) std::memset(data(), byte, static_cast<size_t>(size_bytes()));
}

}  // namespace kiln
