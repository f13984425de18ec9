#include "dnn/cuda/conv/fft_plans.h"

#include <cufft.h>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace dnn {

namespace {

absl::Status CufftOk(cufftResult r, const char* call) {
  if (r == CUFFT_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " failed: cufftResult ", static_cast<int>(r)));
}

}  // namespace

FftPlanCache::~FftPlanCache() {
  for (auto& entry : plans_) cufftDestroy(entry.second.handle);
}

absl::StatusOr<FftPlanCache::Plan> FftPlanCache::Get(const Shape& shape) {
  if (shape.rows <= 0 || shape.cols <= 0 || shape.batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("FFT plan: bad shape ", shape.rows, " x ", shape.cols, " x ", shape.batch));
  }
  const auto key =
      std::make_tuple(shape.rows, shape.cols, shape.batch, static_cast<int>(shape.direction));
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second;
  cufftHandle handle;
  absl::Status s = CufftOk(cufftCreate(&handle), "cufftCreate");
  if (!s.ok()) return s;
  long long n[2] = {shape.rows, shape.cols};
  const long long points = static_cast<long long>(shape.rows) * shape.cols;
  const long long frequencies = static_cast<long long>(shape.rows) * (shape.cols / 2 + 1);
  size_t work = 0;
  s = CufftOk(cufftSetAutoAllocation(handle, 0), "cufftSetAutoAllocation");
  if (s.ok()) {
    s = shape.direction == Direction::kRealToSpectrum
            ? CufftOk(cufftMakePlanMany64(handle, 2, n, nullptr, 1, points, nullptr, 1, frequencies,
                                          CUFFT_R2C, shape.batch, &work),
                      "cufftMakePlanMany64 (R2C)")
            : CufftOk(cufftMakePlanMany64(handle, 2, n, nullptr, 1, frequencies, nullptr, 1, points,
                                          CUFFT_C2R, shape.batch, &work),
                      "cufftMakePlanMany64 (C2R)");
  }
  if (!s.ok()) {
    cufftDestroy(handle);
    return s;
  }
  Plan plan{static_cast<int>(handle), work};
  plans_.emplace(key, plan);
  return plan;
}

absl::StatusOr<size_t> FftPlanCache::WorkBytes(const Shape& shape) {
  absl::StatusOr<Plan> plan = Get(shape);
  if (!plan.ok()) return plan.status();
  return plan->work_bytes;
}

absl::Status FftPlanCache::Execute(const Shape& shape, void* stream, void* in, void* out,
                                   void* work) {
  absl::StatusOr<Plan> plan = Get(shape);
  if (!plan.ok()) return plan.status();
  const cufftHandle h = plan->handle;
  absl::Status s = CufftOk(cufftSetStream(h, static_cast<cudaStream_t>(stream)), "cufftSetStream");
  if (s.ok()) s = CufftOk(cufftSetWorkArea(h, work), "cufftSetWorkArea");
  if (!s.ok()) return s;
  if (shape.direction == Direction::kRealToSpectrum) {
    return CufftOk(cufftExecR2C(h, static_cast<cufftReal*>(in), static_cast<cufftComplex*>(out)),
                   "cufftExecR2C");
  }
  return CufftOk(cufftExecC2R(h, static_cast<cufftComplex*>(in), static_cast<cufftReal*>(out)),
                 "cufftExecC2R");
}

}  // namespace dnn
}  // namespace kiln
