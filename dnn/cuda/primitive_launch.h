// Plain C++ declarations of the CUDA launchers behind the primitives beyond convolution
// (element-wise ops, per-feature reductions, pooling, LRN, softmax and its loss). The primitive
// API (activation.h, pooling.h, normalization.h, softmax.h, tensor_ops.h) validates a call, then
// fills one of these structs. Each launcher enqueues on `stream` and returns the cudaError_t of
// the launch (checked with cudaGetLastError) as an int; 0 is success.
#ifndef KILN_DNN_CUDA_PRIMITIVE_LAUNCH_H_
#define KILN_DNN_CUDA_PRIMITIVE_LAUNCH_H_

#include <cstdint>

#include "dnn/activation_math.h"

namespace kiln {
namespace cuda {

constexpr int kMaxRank = 8;
constexpr int kMaxOperands = 9;  // eltwise backward: 8 inputs and dy

// How a device tensor stores its elements; every kernel computes in f32.
enum class Storage : int { kF32, kF16, kBF16 };

// A device tensor seen through a call's (merged) dims: base pointer and per-dim element strides.
struct Operand {
  const void* data = nullptr;
  Storage type = Storage::kF32;
  int64_t strides[kMaxRank] = {};
};

// What an element-wise call computes from its operands v[0..n) and per-feature parameters
// p[0..4) (dense f32 vectors indexed by the feature index):
enum class ElementwiseOp : int {
  kCopy,                     // v0 (transform, add-tensor with a broadcast operand, scale in place)
  kActivation,               // act(v0)
  kActivationGradient,       // act'(y = v0, dy = v1, x = v2)
  kActivationGradientOfSum,  // act'(y = x = v0, dy = v1 + ... + v_{n-1}): the backward of an
                             // activation whose output has several readers, their gradients
                             // summed in the same pass
  kPRelu,                    // v0 > 0 ? v0 : v1 v0 (v1 the broadcast slope)
  kPReluGradient,            // v0 > 0 ? v1 : v2 v1 (x, dy, slope)
  kDropout,                  // keep(seed, e) ? v0 / (1 - ratio) : 0, e the logical index
  kEltwiseSum,               // Σ coef_i v_i
  kEltwiseProd,              // Π v_i
  kEltwiseMax,               // max v_i
  kEltwiseProdGradient,      // v_n Π_{i != which} v_i (v_n = dy)
  kEltwiseMaxGradient,       // which is the first argmax ? v_n : 0
  kAffine,                   // one operand: p0 (v0 - p3) + p2; two: p0 v0 + p1 (v1 - p3) + p2
                             // (batch norm's apply: forward, and backward with v0 = dy, v1 = x);
  // three: p0 [v1 > 0] v0 + p1 (v2 - p3) + p2 (the backward of batch norm
  // fused with a ReLU: dy = v0 masked by the fused output v1, x = v2)
};

struct ElementwiseCall {
  ElementwiseOp op = ElementwiseOp::kCopy;
  int rank = 1;
  int64_t dims[kMaxRank] = {};
  int num_inputs = 0;
  Operand in[kMaxOperands];
  Operand out;  // written (out.data is cast to void*)
  // The feature index of an element is Σ index[d] feature_strides[d] (batch norm's channel).
  int64_t feature_strides[kMaxRank] = {};
  const float* params[4] = {};
  float coef[kMaxOperands] = {};
  dnn::ActivationParams<float> act;
  // kAffine and the Eltwise forward ops: act applied to the value before the blend (a fused
  // Scale + ReLU, a residual sum + ReLU).
  bool then_activation = false;
  float alpha = 1, beta = 0;
  int which = 0;
  uint64_t seed = 0;
  // kDropout: when set, a device float added to `seed` as read at run time (the training
  // plan's per-iteration offset, so a replayed CUDA graph draws a new mask every iteration).
  const float* seed_offset = nullptr;
  float ratio = 0;
  // A scheduling hint that does not change results: hand out the elements from the end, so a
  // pass that follows one over the same tensor (batch norm's apply after its reduction) starts
  // on the part the first pass left in L2.
  bool from_end = false;
};
// Merges dims the operands allow, then launches; `call` is taken by value and simplified.
int LaunchElementwise(ElementwiseCall call, void* stream);

// Per-feature sums over the other dims, in two deterministic stages: blocks write partial sums
// (double) to `partials`, then one thread per feature adds them in a fixed order and finishes.
enum class ReduceOp : int {
  kMoments,       // Σ x, Σ x^2 -> batch-norm training statistics
  kGradientSums,  // Σ dy, Σ dy x -> batch-norm backward
  kSum,           // Σ dy -> bias gradients (ReduceTensorSum)
  kPReluSlope,    // Σ dy x [x <= 0] -> PReLU slope gradient
  kDot,           // Σ a b -> scale-parameter gradients (Σ x dy)
};

struct ReduceCall {
  ReduceOp op = ReduceOp::kSum;
  // Feature dims and reduction dims, with the strides of the first operand (x, or dy for kSum)
  // and the second (dy), and the feature dims' strides in the parameter tensors.
  int feature_rank = 0, reduce_rank = 0;
  int64_t feature_dims[kMaxRank] = {}, reduce_dims[kMaxRank] = {};
  Operand a, b;  // a's strides: feature dims then reduction dims (feature_strides_a below)
  int64_t a_feature_strides[kMaxRank] = {}, a_reduce_strides[kMaxRank] = {};
  int64_t b_feature_strides[kMaxRank] = {}, b_reduce_strides[kMaxRank] = {};
  int64_t param_strides[kMaxRank] = {};
  int64_t features = 1, reduce_count = 1;
  int splits = 1;              // blocks per feature along the reduction
  bool feature_major = false;  // threads run along features (their stride is the smallest)
  double* partials = nullptr;  // splits x features x 2
  // Outputs of the finishing stage.
  float alpha = 1, beta = 0;
  float* out0 = nullptr;  // kSum / kPReluSlope: the result (param layout), blended
  // Batch norm: training statistics, running updates (param layout) and dense coefficients.
  const float* scale = nullptr;  // param layout
  const float* bias = nullptr;
  const float* mean_in = nullptr;     // backward: the mean and inverse std, in the param
  const float* inv_std_in = nullptr;  // layout, or dense (indexed by feature) when stats_dense
  bool stats_dense = false;
  float* mean_dense = nullptr;  // kMoments: the statistics again, dense, when not null
  float* inv_std_dense = nullptr;
  float* save_mean = nullptr;
  float* save_inv_std = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* caffe_factor = nullptr;
  // Where the running statistics are read from, when not from the pointers above (an update
  // into separate output tensors, with no copy before it).
  const float* running_mean_in = nullptr;
  const float* running_var_in = nullptr;
  const float* caffe_factor_in = nullptr;
  bool caffe_rule = false;
  double factor = 0, epsilon = 1e-5;
  float* dscale = nullptr;
  float* dbias = nullptr;
  float* dense = nullptr;  // 4 x features: the kAffine parameters p0..p3 of the apply pass
  // kGradientSums of batch norm fused with a ReLU: b (dy) counts only where this third operand
  // (the fused forward output y, same dims as a) is > 0. Null data: no mask.
  Operand mask;
  int64_t mask_feature_strides[kMaxRank] = {}, mask_reduce_strides[kMaxRank] = {};
};
// The split count a call uses: enough blocks to fill the GPU, at least ~1024 elements each.
// Depends on the sizes only, so workspace queries and launches agree.
int ReduceSplits(int64_t features, int64_t reduce_count, bool feature_major);
int LaunchReduce(const ReduceCall& call, void* stream);
// Batch norm's training forward (kMoments: statistics, running updates, y = the affine op and
// the ReLU when `relu`) or backward (kGradientSums: dscale, dbias, dx) in one launch, one block
// per channel for f32 channels of at most 65536 elements, a cluster of 8 on Hopper for up to 8
// times that, in runs of contiguous elements; the call must be bound to its workspace (dense
// coefficients) and `out` laid out as its x.
bool BatchNormPlanesServe(const ReduceCall& call);
int LaunchBatchNormPlanes(const ReduceCall& call, float alpha, float beta, bool relu, void* out,
                          void* stream);
// Batch-norm inference: dense kAffine parameters from scale, bias, mean and variance.
int LaunchBatchNormInferenceParams(int64_t features, int feature_rank, const int64_t* feature_dims,
                                   const int64_t* param_strides, const float* scale,
                                   const float* bias, const float* mean, const float* var,
                                   const float* caffe_factor, double epsilon, float* dense,
                                   void* stream);

// Pooling over (N, C, D, H, W) (2-d pooling has D = 1 and a unit window there).
struct PoolingCall {
  int mode = 0;  // 0 max, 1 average including padding, 2 average excluding padding
  int64_t n = 1, c = 1, in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t window[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0};
  Storage type = Storage::kF32;
  // Strides of x, y, dy, dx in (N, C, D, H, W) order.
  int64_t x_strides[5] = {}, y_strides[5] = {}, dy_strides[5] = {}, dx_strides[5] = {};
  const void* x = nullptr;
  const void* y = nullptr;
  const void* dy = nullptr;
  void* result = nullptr;  // y (forward) or dx (backward)
  float alpha = 1, beta = 0;
};
int LaunchPoolingForward(const PoolingCall& call, void* stream);
int LaunchPoolingBackward(const PoolingCall& call, void* stream);
// Average pooling over whole packed planes (dnn_pooling_global.cu); this value when the call is
// not that case.
constexpr int kPoolingGlobalNotApplicable = -1;
int LaunchPoolingGlobalAverage(const PoolingCall& call, bool forward, void* stream);

// LRN over (N, C, D, H, W) views.
struct LrnCall {
  bool across = true;
  int64_t size = 5;
  float alpha = 1e-4f, beta = 0.75f, k = 1;
  int64_t n = 1, c = 1, sp[3] = {1, 1, 1};
  int spatial_rank = 2;  // the last spatial_rank of sp[] are real dims (within channel windows)
  Storage type = Storage::kF32;
  int64_t x_strides[5] = {}, y_strides[5] = {}, dy_strides[5] = {}, dx_strides[5] = {};
  const void* x = nullptr;
  const void* dy = nullptr;  // backward; y is not needed (it is recomputed from x)
  void* out = nullptr;
  float blend_alpha = 1, blend_beta = 0;
};
int LaunchLrnForward(const LrnCall& call, void* stream);
int LaunchLrnBackward(const LrnCall& call, void* stream);

// Softmax over rows: the outer dims index rows, the row dims the elements of a row.
struct SoftmaxCall {
  bool log = false;
  int outer_rank = 0, row_rank = 0;
  int64_t outer_dims[kMaxRank] = {}, row_dims[kMaxRank] = {};
  Storage type = Storage::kF32;
  // Strides of x|y (operand 0), dy (1) and out (2) over outer then row dims.
  int64_t outer_strides[3][kMaxRank] = {}, row_strides[3][kMaxRank] = {};
  int64_t rows = 1, row_length = 1;
  const void* x = nullptr;  // forward: x; backward: y
  const void* dy = nullptr;
  void* out = nullptr;
  float alpha = 1, beta = 0;
};
int LaunchSoftmaxForward(const SoftmaxCall& call, void* stream);
int LaunchSoftmaxBackward(const SoftmaxCall& call, void* stream);

// SoftmaxWithLoss on top of a softmax over one axis. A position is an index of the label dims
// (x's dims with the class axis set to 1); labels are numbers in any float storage. An invalid
// label (outside [0, classes), not ignored) makes the loss and that position's gradient NaN.
struct SoftmaxLossCall {
  int rank = 0, axis = 1;
  int64_t pos_dims[kMaxRank] = {};
  int64_t classes = 1, positions = 1;
  Storage prob_type = Storage::kF32, label_type = Storage::kF32;
  int64_t prob_strides[kMaxRank] = {}, dx_strides[kMaxRank] = {}, label_strides[kMaxRank] = {};
  const void* prob = nullptr;
  const void* labels = nullptr;
  bool has_ignore = false;
  int64_t ignore_label = -1;
  int normalization = 1;  // dnn::LossNormalization
  float loss_weight = 1;
  float* loss = nullptr;     // forward: one element
  void* dx = nullptr;        // backward
  float* scratch = nullptr;  // backward: one element (the normalizer)
  float alpha = 1, beta = 0;
};
int LaunchSoftmaxLossForward(const SoftmaxLossCall& call, void* stream);
int LaunchSoftmaxLossBackward(const SoftmaxLossCall& call, void* stream);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_DNN_CUDA_PRIMITIVE_LAUNCH_H_
