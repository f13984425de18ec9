// The channels-last path of the per-feature reductions (see dnn_reduce_rows.cu).
#ifndef KILN_DNN_CUDA_DNN_REDUCE_ROWS_H_
#define KILN_DNN_CUDA_DNN_REDUCE_ROWS_H_

#include <cstdint>

#include "dnn/cuda/primitive_launch.h"

namespace kiln {
namespace cuda {

// A reduction seen as a [rows][features] matrix of each operand.
struct RowsView {
  int64_t rows = 1;
  int64_t a_row_stride = 0, b_row_stride = 0;
  int64_t mask_row_stride = 0;  // the call's mask operand, when it has one
  int cols = 1;                 // threads across a row (set by the launcher)
};

// True (and *v filled) when the call's one feature dim is contiguous in the operands it reads
// and its reduction dims walk with one row stride.
bool RowsViewOf(const ReduceCall& call, RowsView* v);
// The split count (blocks along the rows) the rows kernel uses for these sizes.
int RowsSplits(int64_t features, int64_t rows);
// Writes the call's partial sums (call.splits must be RowsSplits of the view); the caller
// checks the launch and runs the finishing kernel.
void LaunchReduceRows(const ReduceCall& call, const RowsView& v, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_DNN_REDUCE_ROWS_H_
