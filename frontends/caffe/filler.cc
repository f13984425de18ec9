#include "frontends/caffe/filler.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln {

namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from draw `n` of stream `seed`; 53 random bits.
double Uniform01(uint64_t seed, uint64_t n) {
  return static_cast<double>(SplitMix64(seed ^ SplitMix64(n)) >> 11) * (1.0 / 9007199254740992.0);
}

// Standard normal for element i by Box-Muller on two draws reserved for it.
double StandardNormal(uint64_t seed, uint64_t i) {
  const double u1 = 1.0 - Uniform01(seed, 2 * i);  // (0, 1]: log is finite.
  const double u2 = Uniform01(seed, 2 * i + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace

uint64_t BlobSeed(uint64_t seed, absl::string_view layer, int blob_index) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the layer name.
  for (char c : layer) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return SplitMix64(seed ^ SplitMix64(h ^ static_cast<uint64_t>(blob_index)));
}

absl::Status FillBlob(const caffe::FillerParameter& filler, uint64_t seed, absl::string_view where,
                      HostTensor& blob) {
  const TensorType& type = blob.type();
  const int64_t count = type.num_elements();
  float* out = blob.data_as<float>();
  const std::string& kind = filler.type();
  auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": filler \"", kind, "\": ", what));
  };
  if (filler.has_sparse() && filler.sparse() >= 0 && kind != "gaussian") {
    return error("'sparse' applies only to the gaussian filler");
  }
  if (count == 0) return absl::OkStatus();
  const int64_t first = type.rank() > 0 ? type.dim(0) : 1;
  const int64_t fan_in = first > 0 ? count / first : count;
  const int64_t fan_out = type.rank() > 1 && type.dim(1) > 0 ? count / type.dim(1) : count;
  auto fan = [&]() -> double {
    switch (filler.variance_norm()) {
      case caffe::FillerParameter::FAN_OUT:
        return static_cast<double>(fan_out);
      case caffe::FillerParameter::AVERAGE:
        return (fan_in + fan_out) / 2.0;
      default:
        return static_cast<double>(fan_in);
    }
  };
  if (kind == "constant") {
    for (int64_t i = 0; i < count; ++i) out[i] = filler.value();
  } else if (kind == "uniform") {
    if (filler.max() < filler.min()) return error("max < min");
    for (int64_t i = 0; i < count; ++i) {
      out[i] =
          static_cast<float>(filler.min() + (filler.max() - filler.min()) * Uniform01(seed, i));
    }
  } else if (kind == "gaussian") {
    if (filler.std() < 0) return error("std < 0");
    for (int64_t i = 0; i < count; ++i) {
      out[i] = static_cast<float>(filler.mean() + filler.std() * StandardNormal(seed, i));
    }
    if (filler.sparse() >= 0) {
      // Keep each weight with probability sparse / (number of outputs).
      const double keep = static_cast<double>(filler.sparse()) / static_cast<double>(first);
      const uint64_t mask_seed = SplitMix64(seed + 1);
      for (int64_t i = 0; i < count; ++i) {
        if (Uniform01(mask_seed, i) >= keep) out[i] = 0.0f;
      }
    }
  } else if (kind == "positive_unitball") {
    if (first <= 0) return error("needs a blob with a first dimension");
    const int64_t row = count / first;
    for (int64_t r = 0; r < first; ++r) {
      double sum = 0.0;
      for (int64_t j = 0; j < row; ++j) {
        const double v = Uniform01(seed, r * row + j);
        out[r * row + j] = static_cast<float>(v);
        sum += v;
      }
      for (int64_t j = 0; j < row && sum > 0; ++j) {
        out[r * row + j] = static_cast<float>(out[r * row + j] / sum);
      }
    }
  } else if (kind == "xavier") {
    const double n = fan();
    if (n <= 0) return error("fan is zero");
    const double scale = std::sqrt(3.0 / n);
    for (int64_t i = 0; i < count; ++i) {
      out[i] = static_cast<float>(-scale + 2.0 * scale * Uniform01(seed, i));
    }
  } else if (kind == "msra") {
    const double n = fan();
    if (n <= 0) return error("fan is zero");
    const double std = std::sqrt(2.0 / n);
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(std * StandardNormal(seed, i));
  } else if (kind == "bilinear") {
    if (type.rank() != 4 || type.dim(2) != type.dim(3)) {
      return error(absl::StrCat("needs a 4-d blob with square kernels, got ", type.ToString()));
    }
    const int64_t k = type.dim(3);
    const int64_t f = (k + 1) / 2;
    const double c = static_cast<double>(k - 1) / (2.0 * static_cast<double>(f));
    for (int64_t i = 0; i < count; ++i) {
      const double x = static_cast<double>(i % k);
      const double y = static_cast<double>((i / k) % k);
      out[i] = static_cast<float>((1.0 - std::fabs(x / f - c)) * (1.0 - std::fabs(y / f - c)));
    }
  } else {
    return absl::UnimplementedError(
        absl::StrCat(where, ": filler type \"", kind, "\" is not supported"));
  }
  return absl::OkStatus();
}

}  // namespace kiln
