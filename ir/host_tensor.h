// HostTensor: a TensorType plus host memory that owns (or shares) its elements. Used for
// constants (weights) in the IR, for inputs and outputs bound to a run, and by tests.
#ifndef KILN_IR_HOST_TENSOR_H_
#define KILN_IR_HOST_TENSOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/tensor_type.h"

namespace kiln {

class HostTensor {
 public:
  HostTensor() = default;

  // Zero-filled storage for `type` (span_elements() elements, so strided types fit).
  explicit HostTensor(const TensorType& type);

  // A dense f32 tensor from values in row-major order; InvalidArgument on a count mismatch.
  static absl::StatusOr<HostTensor> FromF32(const TensorType& type, absl::Span<const float> values);

  const TensorType& type() const { return type_; }
  void* data() { return storage_ ? storage_->data() : nullptr; }
  const void* data() const { return storage_ ? storage_->data() : nullptr; }
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(data());
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data());
  }
  int64_t size_bytes() const { return storage_ ? static_cast<int64_t>(storage_->size()) : 0; }

  // Element `i` of the logical row-major order, whatever the strides and dtype, as float.
  float GetFloat(int64_t logical_index) const;
  // Sets element `i` of the logical row-major order, converting from float.
  void SetFloat(int64_t logical_index, float value);

  // All elements in logical row-major order as floats.
  std::vector<float> ToF32Vector() const;

  // A deep copy (the storage of a HostTensor is shared on plain copy).
  HostTensor Clone() const;

  // Fills every byte of the storage with `byte` (used to poison outputs in tests and debug runs).
  void Poison(uint8_t byte = 0xff);

 private:
  int64_t PhysicalOffset(int64_t logical_index) const;

  TensorType type_;
  // Storage is 64-byte aligned through the vector of a 64-byte type.
  struct alignas(64) Block {
    uint8_t bytes[64];
  };
  struct Storage {
    std::vector<Block> blocks;
    size_t bytes = 0;
    uint8_t* data() { return blocks.empty() ? nullptr : blocks[0].bytes; }
    size_t size() const { return bytes; }
  };
  std::shared_ptr<Storage> storage_;
};

// Reads element `offset` of a buffer of `dtype` as float.
float LoadAsFloat(const void* base, DataType dtype, int64_t offset);
// Writes `value` converted to `dtype` at element `offset`.
void StoreFromFloat(void* base, DataType dtype, int64_t offset, float value);

}  // namespace kiln

#endif  // KILN_IR_HOST_TENSOR_H_
