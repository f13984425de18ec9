// Fuzz target: one record of a Data layer's database, through what the Data layer does with it
// (frontends/caffe/data): the bytes parsed as a Datum, decoded when encoded, sized and transformed
// under a TransformationParameter. The first two bytes pick the transform (phase, mirror, crop,
// forced color or gray, mean values, scale) so one corpus covers them; the rest is the record.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "frontends/caffe/caffe.pb.h"
#include "frontends/caffe/data/datum_db.h"
#include "frontends/caffe/data/transform.h"
#include "tests/fuzz/fuzz_targets.h"

namespace {

// Outputs above this many floats are not transformed (a record that honestly holds that many
// pixels is larger than any input the fuzzer makes, so this only skips decoder-made sizes).
constexpr int64_t kMaxOutput = int64_t{1} << 24;

caffe::TransformationParameter TransformFrom(uint8_t bits, uint8_t crop, caffe::Phase* phase) {
  caffe::TransformationParameter param;
  *phase = (bits & 1) ? caffe::TRAIN : caffe::TEST;
  if (bits & 2) param.set_mirror(true);
  if (bits & 4) param.set_force_color(true);
  if (bits & 8) param.set_force_gray(true);
  for (int i = 0; i < ((bits >> 4) & 3); ++i) param.add_mean_value(16.0f * (i + 1));
  if (bits & 64) param.set_scale(0.00390625f);
  if (bits & 128) param.set_scale(-INFINITY);
  if (crop != 0) param.set_crop_size(crop & 0x3f);
  return param;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  caffe::Phase phase;
  const caffe::TransformationParameter param = TransformFrom(data[0], data[1], &phase);
  const absl::string_view record(reinterpret_cast<const char*>(data) + 2, size - 2);
  caffe::Datum datum;
  if (!kiln::ParseDatum(record, "fuzz record", &datum).ok()) return 0;
  auto transformer = kiln::DatumTransformer::Create(param, phase, "/nonexistent-kiln-fuzz", 7);
  if (!transformer.ok()) return 0;
  caffe::Datum scratch;
  auto raw = transformer->DecodeIfEncoded(datum, &scratch);
  if (!raw.ok()) return 0;
  auto dims = transformer->OutputDims(**raw);
  if (!dims.ok()) return 0;
  if (dims->size() != 3) __builtin_trap();
  int64_t count = 1;
  for (int64_t d : *dims) {
    if (d <= 0) __builtin_trap();  // OutputDims promises a positive size
    if (d > kMaxOutput || count > kMaxOutput / d) return 0;
    count *= d;
  }
  std::vector<float> out(count);
  for (uint64_t seed : {1, 2}) {
    transformer->Reseed(seed);
    (void)transformer->Transform(**raw, out.data());
  }
  return 0;
}
