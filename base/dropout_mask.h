// The dropout mask as a pure function of (seed, element index): every backend computes the same
// mask whatever its launch shape, and backward can regenerate it instead of storing it.
#ifndef KILN_BASE_DROPOUT_MASK_H_
#define KILN_BASE_DROPOUT_MASK_H_

#include <cstdint>

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif

namespace kiln {

// A uniform number in [0, 1) from a 64-bit mix (SplitMix64's finalizer) of seed and index.
KILN_HOST_DEVICE inline float DropoutUniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // 24 random bits.
}

// True when element `index` is kept for a drop probability `ratio`.
KILN_HOST_DEVICE inline bool DropoutKeep(uint64_t seed, uint64_t index, float ratio) {
  return DropoutUniform(seed, index) >= ratio;
}

}  // namespace kiln

#endif  // KILN_BASE_DROPOUT_MASK_H_
