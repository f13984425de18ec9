// The CPU oracle of the RNN primitives (rnn_descriptor.h): forward and backward computed the
// plain way in double precision, one step after another. The CUDA RNN is tested against it, and
// it is tested by finite differences and against hand-computed sequences.
//
// Layouts: x and y as their RnnSequences say; hx, cx, hy, cy (and gradients) [layers *
// directions, N, hidden]; w packed as RnnLayerWeights says; cont [T, N] (sequence-major, may be
// null). Null hx / cx mean zero states, null hy / cy are not written; in backward a null dhy /
// dcy is zero and a null dhx / dcx is not written. cx / cy / dcy / dcx are LSTM-only.
#ifndef KILN_DNN_RNN_RNN_REFERENCE_H_
#define KILN_DNN_RNN_RNN_REFERENCE_H_

#include "absl/status/status.h"
#include "dnn/rnn/rnn_descriptor.h"

namespace kiln {
namespace dnn {
namespace reference {

// `training` applies the dropout between layers (inference does not).
absl::Status RnnForward(const RnnDescriptor& rnn, bool training, const RnnSequences& xs,
                        const double* x, const RnnSequences& ys, double* y, const double* hx,
                        const double* cx, const double* w, const double* cont, double* hy,
                        double* cy);

// The gradients of a training forward with the same inputs: dx (written), dhx / dcx (written
// where not null) and dw (accumulated: dw += the weights' gradient, as cuDNN's add mode).
absl::Status RnnBackward(const RnnDescriptor& rnn, const RnnSequences& xs, const double* x,
                         const RnnSequences& ys, const double* dy, const double* hx,
                         const double* cx, const double* w, const double* cont, const double* dhy,
                         const double* dcy, double* dx, double* dhx, double* dcx, double* dw);

}  // namespace reference
}  // namespace dnn
}  // namespace kiln

#endif  // KILN_DNN_RNN_RNN_REFERENCE_H_
