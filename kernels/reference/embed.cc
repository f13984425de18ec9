// Reference Embed and EmbedGradient (ops/embed_ops.cc): row lookups and their sums, in index
// order, double accumulation. An index that is not an integer in [0, V) is InvalidArgument.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

namespace {

absl::StatusOr<int64_t> RowOf(const float* x, int64_t m, int64_t rows) {
  const float v = x[m];
  if (!(v >= 0) || v >= static_cast<float>(rows) || std::floor(v) != v) {
    return absl::InvalidArgumentError(absl::StrCat("Embed: index ", v, " at element ", m,
                                                   " is not an integer in [0, ", rows, ")"));
  }
  return static_cast<int64_t>(v);
}

absl::Status Embed(const Node& node, const DenseArgs& a) {
  const int64_t m_count = a.in_types[0].num_elements();
  const int64_t rows = a.in_types[1].dim(0), d = a.in_types[1].dim(1);
  const float* bias = a.in.size() > 2 ? a.in[2] : nullptr;
  for (int64_t m = 0; m < m_count; ++m) {
    KILN_ASSIGN_OR_RETURN(int64_t row, RowOf(a.in[0], m, rows));
    for (int64_t j = 0; j < d; ++j) {
      a.out[0][m * d + j] = static_cast<float>(double{a.in[1][row * d + j]} + (bias ? bias[j] : 0));
    }
  }
  return absl::OkStatus();
}

absl::Status EmbedGradient(const Node& node, const DenseArgs& a) {
  const int64_t m_count = a.in_types[0].num_elements();
  const int64_t rows = a.out_types[0].dim(0), d = a.out_types[0].dim(1);
  std::vector<double> sum(rows * d, 0.0);
  for (int64_t m = 0; m < m_count; ++m) {
    KILN_ASSIGN_OR_RETURN(int64_t row, RowOf(a.in[0], m, rows));
    for (int64_t j = 0; j < d; ++j) sum[row * d + j] += a.in[1][m * d + j];
  }
  for (int64_t i = 0; i < rows * d; ++i) a.out[0][i] = static_cast<float>(sum[i]);
  return absl::OkStatus();
}

}  // namespace

absl::Status RegisterReferenceEmbed(KernelRegistry& registry) {
  KILN_RETURN_IF_ERROR(RegisterReference(registry, "Embed", Embed));
  return RegisterReference(registry, "EmbedGradient", EmbedGradient);
}

}  // namespace kiln
