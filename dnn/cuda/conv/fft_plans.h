// cuFFT plans for the FFT convolution, made on first use and kept by the handle (making one
// takes milliseconds). Plans never allocate a work area of their own: each call passes a slice of
// the convolution's workspace, so the workspace the caller was told about is all the memory used.
//
// Every plan is a batch of 2-d real transforms of rows x cols points between dense real planes
// [batch][rows][cols] and dense spectra [batch][rows][cols / 2 + 1] (cuFFT's own layouts: with
// strided, frequency-major spectra cuFFT ran 4 to 8 times slower on an H100 than this plus a
// separate transpose).
#ifndef KILN_DNN_CUDA_CONV_FFT_PLANS_H_
#define KILN_DNN_CUDA_CONV_FFT_PLANS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "absl/status/statusor.h"

namespace kiln {
namespace dnn {

class FftPlanCache {
 public:
  enum class Direction { kRealToSpectrum, kSpectrumToReal };
  struct Shape {
    int rows = 0, cols = 0;
    int64_t batch = 0;
    Direction direction = Direction::kRealToSpectrum;
  };

  FftPlanCache() = default;
  ~FftPlanCache();
  FftPlanCache(const FftPlanCache&) = delete;
  FftPlanCache& operator=(const FftPlanCache&) = delete;

  // Work-area bytes of the plan for `shape` (made now if new).
  absl::StatusOr<size_t> WorkBytes(const Shape& shape);
  // Runs the plan for `shape` on `stream`: real planes -> spectra (unnormalized) or spectra ->
  // real planes (unnormalized; `in` is overwritten). `work` holds WorkBytes(shape) bytes.
  absl::Status Execute(const Shape& shape, void* stream, void* in, void* out, void* work);

 private:
  struct Plan {
    int handle = 0;  // cufftHandle
    size_t work_bytes = 0;
  };
  absl::StatusOr<Plan> Get(const Shape& shape);
  std::map<std::tuple<int, int, int64_t, int>, Plan> plans_;
};

}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_CUDA_CONV_FFT_PLANS_H_
