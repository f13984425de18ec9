#include "tests/util/reference_check.h"

#include "gtest/gtest.h"
#include "tests/util/op_test_util.h"

namespace kiln {
namespace testing {
namespace {

// Tolerances per dtype of the tensors involved (outputs are rounded to that dtype).
double Atol(DataType d) { return d == DataType::kF32 ? 2e-5 : d == DataType::kF16 ? 2e-3 : 1.5e-2; }
double Rtol(DataType d) { return d == DataType::kF32 ? 2e-5 : d == DataType::kF16 ? 2e-3 : 1e-2; }

}  // namespace

std::vector<HostTensor> RunReference(const std::string& op, const std::vector<HostTensor>& in,
                                     const AttrMap& attrs) {
  auto out = RunOp(op, in, attrs, BackendChoice::kReference);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  return out.ok() ? *out : std::vector<HostTensor>{};
}

std::vector<double> Doubles(const HostTensor& t) {
  std::vector<double> out;
  for (float v : t.ToF32Vector()) out.push_back(v);
  return out;
}

void ExpectClose(const HostTensor& actual, const std::vector<double>& expected) {
  const DataType d = actual.type().dtype();
  const double ratio = ToleranceRatio(actual, expected, Atol(d), Rtol(d));
  EXPECT_GE(ratio, 0) << "element count differs";
  EXPECT_LE(ratio, 1.0) << "worst error / tolerance = " << ratio;
}

}  // namespace testing
}  // namespace kiln
