#include "kernels/reference/dnn_oracle.h"

#include <algorithm>

namespace kiln {

dnn_plans::OperandTypes TypesOf(const DenseArgs& a) { return {a.in_types, a.out_types}; }

bool NothingToCompute(const DenseArgs& a) {
  if (a.out_types[0].num_elements() != 0) return false;
  for (size_t i = 0; i < a.out.size(); ++i) {
    std::fill(a.out[i], a.out[i] + a.out_types[i].num_elements(), 0.0f);
  }
  return true;
}

DoubleOperands::DoubleOperands(const DenseArgs& a) {
  for (size_t i = 0; i < a.in.size(); ++i) {
    in_.emplace_back(a.in[i], a.in[i] + a.in_types[i].num_elements());
  }
  for (const TensorType& t : a.out_types) {
    out_.emplace_back(static_cast<size_t>(t.num_elements()), 0.0);
  }
}

void DoubleOperands::Store(const DenseArgs& a) const {
  for (size_t i = 0; i < out_.size(); ++i) {
    std::transform(out_[i].begin(), out_[i].end(), a.out[i],
                   [](double v) { return static_cast<float>(v); });
  }
}

}  // namespace kiln
