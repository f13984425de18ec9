// The frame of the reference kernels whose op the primitive library has (activations, PReLU,
// softmax, pooling, LRN, convolution): each plans its node into descriptors with the plan
// function the CUDA adapters use (kernels/dnn_plans), on the dense f32 types it computes on, and
// calls the primitive library's oracle (dnn::reference). The op's formula thus exists once, in
// dnn/, and the node-to-descriptor mapping exists once, in kernels/dnn_plans.
#ifndef KILN_KERNELS_REFERENCE_DNN_ORACLE_H_
#define KILN_KERNELS_REFERENCE_DNN_ORACLE_H_

#include <vector>

#include "kernels/dnn_plans/tensor.h"
#include "kernels/reference/reference_kernel.h"

namespace kiln {

// The dense f32 operands' types, to plan on.
dnn_plans::OperandTypes TypesOf(const DenseArgs& a);

// True (and every output zeroed) when output 0 has no elements: the descriptors refuse zero-sized
// dims, and there is nothing to compute, but a sum over nothing (a parameter's gradient) is 0.
bool NothingToCompute(const DenseArgs& a);

// The dense operands widened to double, as the oracle takes them; outputs start at 0 (the
// oracle does not read them with beta = 0, and a gradient written into a view of dx leaves the
// rest 0).
class DoubleOperands {
 public:
  explicit DoubleOperands(const DenseArgs& a);
  const double* in(int i) const { return in_[i].data(); }
  double* out(int i) { return out_[i].data(); }
  // Rounds every output to f32 into the dense result buffers.
  void Store(const DenseArgs& a) const;

 private:
  std::vector<std::vector<double>> in_, out_;
};

}  // namespace kiln

#endif  // KILN_KERNELS_REFERENCE_DNN_ORACLE_H_
