#include "dnn/cuda/rnn/rnn.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/cuda_status.h"
#include "dnn/cuda/rnn/rnn_buffers.h"
#include "dnn/cuda/rnn/rnn_calls.h"
#include "dnn/cuda/rnn/rnn_launch.h"

namespace kiln {
namespace dnn {

namespace {

using cuda::Storage;

Storage StorageOf(DataType dtype) {
  return dtype == DataType::kF16    ? Storage::kF16
         : dtype == DataType::kBF16 ? Storage::kBF16
                                    : Storage::kF32;
}

cudaDataType_t CudaType(DataType dtype) {
  return dtype == DataType::kF16 ? CUDA_R_16F : dtype == DataType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

cuda::RnnCellKind CellKind(RnnCell cell) {
  switch (cell) {
    case RnnCell::kRnnRelu:
      return cuda::RnnCellKind::kRelu;
    case RnnCell::kRnnTanh:
      return cuda::RnnCellKind::kTanh;
    case RnnCell::kGru:
      return cuda::RnnCellKind::kGru;
    default:
      return cuda::RnnCellKind::kLstm;
  }
}

// The pieces of one call: the problem, its plan, the buffers resolved to device pointers.
struct Call {
  Handle& handle;
  const RnnProblem& p;
  RnnBufferPlan plan;
  char* ws = nullptr;    // workspace
  char* base = nullptr;  // the reserve (training and backward) or its copy in the workspace
  const int32_t* lengths = nullptr;
  size_t e = 4;  // bytes of a dtype element
  const char* where = "";

  cudaStream_t stream() const { return static_cast<cudaStream_t>(handle.stream()); }
  int64_t T() const { return p.x.max_length; }
  int64_t N() const { return p.x.batch; }
  int64_t H() const { return p.rnn.hidden_size; }
  int64_t D() const { return p.rnn.directions(); }
  int64_t GH() const { return p.rnn.gates() * p.rnn.hidden_size; }
  const RnnCellBuffers& cell(int64_t l, int d) const { return plan.cells[l * D() + d]; }
  // Byte offset of state (l, d) in an hx-like tensor.
  size_t StateOffset(int64_t l, int d) const { return ((l * D() + d) * N() * H()) * e; }

  // Row-major C (m x n, ldc, of c_type) = alpha op(A) op(B) + beta C, A and B of the problem's
  // dtype (row-major, lda / ldb), f32 accumulation. cuBLAS sees the transposed problem.
  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
                    int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
                    DataType c_type) const {
    const int64_t limit = int64_t{1} << 31;
    if (m >= limit || n >= limit || k >= limit || lda >= limit || ldb >= limit || ldc >= limit) {
      return absl::UnimplementedError(absl::StrCat(where, ": a GEMM dimension exceeds int"));
    }
    const float alpha = 1;
    const cublasComputeType_t compute = p.dtype == DataType::kF32 && p.math == MathMode::kTf32
                                            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                            : CUBLAS_COMPUTE_32F;
    const cublasStatus_t s = cublasGemmEx(
        static_cast<cublasHandle_t>(handle.cublas()), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
        trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(k), &alpha, b, CudaType(p.dtype), static_cast<int>(ldb), a,
        CudaType(p.dtype), static_cast<int>(lda), &beta, c, CudaType(c_type), static_cast<int>(ldc),
        compute, CUBLAS_GEMM_DEFAULT);
    if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat(where, ": cublasGemmEx failed: ", cublasGetStatusString(s)));
  }

  absl::Status Launched(int error, const char* what) const {
    if (error == 0) return absl::OkStatus();
    return CudaStatus(error, what, __FILE__, __LINE__);
  }
};

absl::StatusOr<Call> Prepare(Handle& handle, const RnnProblem& p, const RnnTensors& t,
                             bool in_reserve, RnnLengths lengths, const char* where) {
  KILN_ASSIGN_OR_RETURN(RnnBufferPlan plan, PlanRnnBuffers(p));
  KILN_RETURN_IF_ERROR(CheckRnnCall(p.rnn, p.x, p.y, t.cont != nullptr, where));
  if (t.w == nullptr && t.params == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": neither w nor params is given"));
  }
  const size_t need_ws = in_reserve ? plan.scratch : plan.workspace;
  if (t.workspace_bytes < need_ws || (need_ws > 0 && t.workspace == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": workspace of ", t.workspace_bytes,
                                                   " bytes; the call needs ", need_ws));
  }
  if (in_reserve && (t.reserve_bytes < plan.reserve || t.reserve == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": reserve of ", t.reserve_bytes,
                                                   " bytes; training needs ", plan.reserve));
  }
  Call call{handle, p, std::move(plan)};
  call.where = where;
  call.e = DataTypeSize(p.dtype);
  call.ws = static_cast<char*>(t.workspace);
  call.base = in_reserve ? static_cast<char*>(t.reserve) : call.ws + call.plan.scratch;
  if (call.plan.lengths != kRnnNoBuffer) {
    int32_t* dev = reinterpret_cast<int32_t*>(call.ws + call.plan.lengths);
    if (lengths == RnnLengths::kUpload) {
      KILN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev, p.x.lengths.data(),
                                                p.x.lengths.size() * sizeof(int32_t),
                                                cudaMemcpyHostToDevice, call.stream()));
    }
    call.lengths = dev;
  }
  return call;
}

// The weight pointers of (l, d) in a packed weight buffer of the call's dtype.
struct LayerWeights {
  const char *w_ih, *w_hh, *b_ih, *b_hh;
};
LayerWeights WeightsOf(const Call& c, const RnnTensors& t, int64_t l, int d) {
  if (t.params != nullptr) {
    const RnnLayerParams& q = t.params[l * c.D() + d];
    return {static_cast<const char*>(q.w_ih), static_cast<const char*>(q.w_hh),
            static_cast<const char*>(q.b_ih), static_cast<const char*>(q.b_hh)};
  }
  const void* w = t.w;
  const RnnWeightOffsets o = RnnLayerWeights(c.p.rnn, l, d);
  const char* base = static_cast<const char*>(w);
  return {base + o.w_ih * c.e, base + o.w_hh * c.e, o.b_ih >= 0 ? base + o.b_ih * c.e : nullptr,
          o.b_hh >= 0 ? base + o.b_hh * c.e : nullptr};
}

// The gradient pointers of (l, d): the caller's own, or their places in the packed dw.
RnnLayerGrads GradsOf(const Call& c, const RnnTensors& t, int64_t l, int d) {
  if (t.grads != nullptr) return t.grads[l * c.D() + d];
  const RnnWeightOffsets o = RnnLayerWeights(c.p.rnn, l, d);
  char* dw = static_cast<char*>(t.dw);
  RnnLayerGrads g;
  g.w_ih = dw + o.w_ih * c.e;
  g.w_hh = dw + o.w_hh * c.e;
  if (o.b_ih >= 0) g.b_ih = dw + o.b_ih * c.e;
  if (o.b_hh >= 0) g.b_hh = dw + o.b_hh * c.e;
  return g;
}

// Copies (or zeroes) an initial state into f32 or dtype storage.
absl::Status LoadState(const Call& c, const void* src, size_t src_offset, void* dst,
                       Storage dst_storage) {
  const void* from = src != nullptr ? static_cast<const char*>(src) + src_offset : nullptr;
  return c.Launched(cuda::LaunchRnnConvert(from, StorageOf(c.p.dtype), dst, dst_storage,
                                           c.N() * c.H(), c.stream()),
                    "LaunchRnnConvert");
}

absl::Status StoreState(const Call& c, const void* src, Storage src_storage, void* dst,
                        size_t dst_offset) {
  if (dst == nullptr) return absl::OkStatus();
  return c.Launched(cuda::LaunchRnnConvert(src, src_storage, static_cast<char*>(dst) + dst_offset,
                                           StorageOf(c.p.dtype), c.N() * c.H(), c.stream()),
                    "LaunchRnnConvert");
}

// The fields the forward and backward step calls share: the cell, the shapes, the direction,
// the gate blocks, the lengths and the cont markers.
template <typename Step>
void SetStepShape(const Call& c, const RnnTensors& t, int d, Step& step) {
  step.cell = CellKind(c.p.rnn.cell);
  step.storage = StorageOf(c.p.dtype);
  step.batch = c.N();
  step.hidden = c.H();
  step.max_length = c.T();
  step.reverse = d == 1;
  step.g_block = c.p.rnn.LstmBlock(2);
  step.o_block = c.p.rnn.LstmBlock(3);
  step.lengths = c.lengths;
  step.cont = t.cont;
}

// One direction of one layer, forward: the projection GEMM, then per step the recurrent GEMM
// and the cell kernel.
absl::Status ForwardCell(const Call& c, const RnnTensors& t, int64_t l, int d, const void* in,
                         void* out) {
  const RnnCellBuffers& b = c.cell(l, d);
  const LayerWeights w = WeightsOf(c, t, l, d);
  const int64_t T = c.T(), N = c.N(), H = c.H(), GH = c.GH(), F = c.p.rnn.LayerInputSize(l);
  float* gates = reinterpret_cast<float*>(c.base + b.gates);
  KILN_RETURN_IF_ERROR(c.Gemm(false, true, T * N, GH, F, in, F, w.w_ih, F, 0, gates,
                              c.plan.gate_stride, DataType::kF32));
  char* h_states = c.base + b.h_states;
  float* c_states =
      b.c_states != kRnnNoBuffer ? reinterpret_cast<float*>(c.base + b.c_states) : nullptr;
  const size_t state = c.StateOffset(l, d);
  KILN_RETURN_IF_ERROR(LoadState(c, t.hx, state, h_states, StorageOf(c.p.dtype)));
  if (c_states != nullptr) KILN_RETURN_IF_ERROR(LoadState(c, t.cx, state, c_states, Storage::kF32));
  float* rec = reinterpret_cast<float*>(c.ws + c.plan.rec);
  cuda::RnnStepForward step;
  SetStepShape(c, t, d, step);
  step.gates = gates;
  step.gate_stride = c.plan.gate_stride;
  step.rec = rec;
  step.b_ih = w.b_ih;
  step.b_hh = w.b_hh;
  step.out = out;
  step.out_stride = c.D() * H;
  step.out_offset = d * H;
  for (int64_t s = 0; s < T; ++s) {
    const char* h_prev = h_states + s * N * H * c.e;
    KILN_RETURN_IF_ERROR(
        c.Gemm(false, true, N, GH, H, h_prev, H, w.w_hh, H, 0, rec, GH, DataType::kF32));
    step.step = s;
    step.h_prev = h_prev;
    step.h_next = h_states + (s + 1) * N * H * c.e;
    if (c_states != nullptr) {
      step.c_prev = c_states + s * N * H;
      step.c_next = c_states + (s + 1) * N * H;
    }
    KILN_RETURN_IF_ERROR(
        c.Launched(cuda::LaunchRnnStepForward(step, c.stream()), "LaunchRnnStepForward"));
  }
  KILN_RETURN_IF_ERROR(
      StoreState(c, h_states + T * N * H * c.e, StorageOf(c.p.dtype), t.hy, state));
  if (c_states != nullptr) {
    KILN_RETURN_IF_ERROR(StoreState(c, c_states + T * N * H, Storage::kF32, t.cy, state));
  }
  return absl::OkStatus();
}

// One direction of one layer, backward data: per step (last first) the cell's backward kernel
// and the GEMM taking the gradient through W_hh; then the layer input's gradient as one GEMM.
absl::Status BackwardCell(const Call& c, const RnnTensors& t, int64_t l, int d, const void* dout,
                          void* din) {
  const RnnCellBuffers& b = c.cell(l, d);
  const LayerWeights w = WeightsOf(c, t, l, d);
  const int64_t T = c.T(), N = c.N(), H = c.H(), GH = c.GH(), F = c.p.rnn.LayerInputSize(l);
  const size_t state = c.StateOffset(l, d);
  float* dh[2] = {reinterpret_cast<float*>(c.ws + c.plan.dh[0]),
                  reinterpret_cast<float*>(c.ws + c.plan.dh[1])};
  float* dc = reinterpret_cast<float*>(c.ws + c.plan.dc);
  const bool lstm = b.c_states != kRnnNoBuffer;
  KILN_RETURN_IF_ERROR(LoadState(c, t.dhy, state, dh[0], Storage::kF32));
  if (lstm) KILN_RETURN_IF_ERROR(LoadState(c, t.dcy, state, dc, Storage::kF32));
  const char* h_states = c.base + b.h_states;
  const float* c_states = lstm ? reinterpret_cast<const float*>(c.base + b.c_states) : nullptr;
  char* drec = c.base + b.drec;
  cuda::RnnStepBackward step;
  SetStepShape(c, t, d, step);
  step.gates = reinterpret_cast<const float*>(c.base + b.gates);
  step.gate_stride = c.plan.gate_stride;
  step.dout = dout;
  step.out_stride = c.D() * H;
  step.out_offset = d * H;
  step.dc = dc;
  step.dgates = c.base + b.dgates;
  step.dgate_stride = c.plan.dgate_stride;
  int current = 0;  // dh[current] holds the gradient reaching h_next
  for (int64_t s = T - 1; s >= 0; --s) {
    step.step = s;
    step.h_prev = h_states + s * N * H * c.e;
    if (lstm) {
      step.c_prev = c_states + s * N * H;
      step.c_next = c_states + (s + 1) * N * H;
    }
    step.dh_in = dh[current];
    step.dh_out = dh[1 - current];
    step.drec = drec + s * N * GH * c.e;
    KILN_RETURN_IF_ERROR(
        c.Launched(cuda::LaunchRnnStepBackward(step, c.stream()), "LaunchRnnStepBackward"));
    // dh_prev += drec W_hh: [N, GH] x [GH, H].
    KILN_RETURN_IF_ERROR(c.Gemm(false, false, N, H, GH, step.drec, GH, w.w_hh, H, 1,
                                dh[1 - current], H, DataType::kF32));
    current = 1 - current;
  }
  KILN_RETURN_IF_ERROR(StoreState(c, dh[current], Storage::kF32, t.dhx, state));
  if (lstm) KILN_RETURN_IF_ERROR(StoreState(c, dc, Storage::kF32, t.dcx, state));
  // din (+)= dgates W_ih: [T N, G H] x [G H, F]; GRU's fourth block is not a gate of W_ih.
  return c.Gemm(false, false, T * N, F, GH, c.base + b.dgates, c.plan.dgate_stride, w.w_ih, F,
                d == 0 ? 0.f : 1.f, din, F, c.p.dtype);
}

}  // namespace

absl::StatusOr<RnnBufferSizes> RnnGetBufferSizes(const RnnProblem& problem) {
  KILN_ASSIGN_OR_RETURN(RnnBufferPlan plan, PlanRnnBuffers(problem));
  return RnnBufferSizes{plan.workspace, plan.reserve};
}

absl::Status RnnUploadLengths(Handle& handle, const RnnProblem& p, const RnnTensors& t) {
  KILN_ASSIGN_OR_RETURN(RnnBufferPlan plan, PlanRnnBuffers(p));
  if (plan.lengths == kRnnNoBuffer) return absl::OkStatus();
  if (t.workspace == nullptr || t.workspace_bytes < plan.scratch) {
    return absl::InvalidArgumentError("RnnUploadLengths: the workspace is missing or too small");
  }
  KILN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(static_cast<char*>(t.workspace) + plan.lengths, p.x.lengths.data(),
                      p.x.lengths.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                      static_cast<cudaStream_t>(handle.stream())));
  return absl::OkStatus();
}

absl::Status RnnForward(Handle& handle, const RnnProblem& p, RnnForwardMode mode,
                        const RnnTensors& t) {
  return RnnForwardCall(handle, p, mode, t, RnnLengths::kUpload);
}

absl::Status RnnBackwardData(Handle& handle, const RnnProblem& p, const RnnTensors& t) {
  return RnnBackwardDataCall(handle, p, t, RnnLengths::kUpload);
}

absl::Status RnnBackwardWeights(Handle& handle, const RnnProblem& p, const RnnTensors& t) {
  return RnnBackwardWeightsCall(handle, p, t, RnnLengths::kUpload);
}

absl::Status RnnForwardCall(Handle& handle, const RnnProblem& p, RnnForwardMode mode,
                            const RnnTensors& t, RnnLengths lengths) {
  const bool training = mode == RnnForwardMode::kTraining;
  KILN_ASSIGN_OR_RETURN(Call c, Prepare(handle, p, t, training, lengths, "RnnForward"));
  if (t.x == nullptr || t.y == nullptr) {
    return absl::InvalidArgumentError("RnnForward: x or y is null");
  }
  const int64_t T = c.T(), N = c.N(), H = c.H(), D = c.D(), L = p.rnn.layers;
  const bool batch_major = p.x.layout == RnnLayout::kBatchMajor;
  const void* in = t.x;
  if (batch_major) {  // [N, T, I] -> [T, N, I]
    KILN_RETURN_IF_ERROR(c.Launched(
        cuda::LaunchRnnTranspose(t.x, c.base + c.plan.x_seq, N, T, p.x.features * c.e, c.stream()),
        "LaunchRnnTranspose"));
    in = c.base + c.plan.x_seq;
  }
  for (int64_t l = 0; l < L; ++l) {
    void* out = l + 1 < L ? c.base + c.plan.layer_out[l] : batch_major ? c.ws + c.plan.y_seq : t.y;
    for (int d = 0; d < D; ++d) KILN_RETURN_IF_ERROR(ForwardCell(c, t, l, d, in, out));
    if (l + 1 < L && training && p.rnn.dropout > 0) {
      KILN_RETURN_IF_ERROR(c.Launched(
          cuda::LaunchRnnDropout(out, StorageOf(p.dtype), T * N * D * H, p.rnn.dropout_seed + l,
                                 static_cast<float>(p.rnn.dropout), c.stream()),
          "LaunchRnnDropout"));
    }
    in = out;
  }
  if (batch_major) {  // [T, N, D H] -> [N, T, D H]
    KILN_RETURN_IF_ERROR(c.Launched(
        cuda::LaunchRnnTranspose(in, t.y, T, N, D * H * c.e, c.stream()), "LaunchRnnTranspose"));
  }
  return absl::OkStatus();
}

absl::Status RnnBackwardDataCall(Handle& handle, const RnnProblem& p, const RnnTensors& t,
                                 RnnLengths lengths) {
  KILN_ASSIGN_OR_RETURN(Call c,
                        Prepare(handle, p, t, /*in_reserve=*/true, lengths, "RnnBackwardData"));
  if (t.dy == nullptr || t.dx == nullptr) {
    return absl::InvalidArgumentError("RnnBackwardData: dy or dx is null");
  }
  const int64_t T = c.T(), N = c.N(), H = c.H(), D = c.D(), L = p.rnn.layers;
  const bool batch_major = p.x.layout == RnnLayout::kBatchMajor;
  const void* dout = t.dy;
  if (batch_major) {
    KILN_RETURN_IF_ERROR(c.Launched(
        cuda::LaunchRnnTranspose(t.dy, c.ws + c.plan.dy_seq, N, T, D * H * c.e, c.stream()),
        "LaunchRnnTranspose"));
    dout = c.ws + c.plan.dy_seq;
  }
  for (int64_t l = L - 1; l >= 0; --l) {
    void* din = l > 0 ? c.ws + c.plan.din[l % 2] : batch_major ? c.ws + c.plan.dx_seq : t.dx;
    for (int d = 0; d < D; ++d) KILN_RETURN_IF_ERROR(BackwardCell(c, t, l, d, dout, din));
    if (l > 0 && p.rnn.dropout > 0) {  // layer l read layer l - 1's output through the dropout
      KILN_RETURN_IF_ERROR(c.Launched(
          cuda::LaunchRnnDropout(din, StorageOf(p.dtype), T * N * p.rnn.LayerInputSize(l),
                                 p.rnn.dropout_seed + l - 1, static_cast<float>(p.rnn.dropout),
                                 c.stream()),
          "LaunchRnnDropout"));
    }
    dout = din;
  }
  if (batch_major) {
    KILN_RETURN_IF_ERROR(
        c.Launched(cuda::LaunchRnnTranspose(dout, t.dx, T, N, p.x.features * c.e, c.stream()),
                   "LaunchRnnTranspose"));
  }
  return absl::OkStatus();
}

absl::Status RnnBackwardWeightsCall(Handle& handle, const RnnProblem& p, const RnnTensors& t,
                                    RnnLengths lengths) {
  KILN_ASSIGN_OR_RETURN(Call c,
                        Prepare(handle, p, t, /*in_reserve=*/true, lengths, "RnnBackwardWeights"));
  if (t.x == nullptr || (t.dw == nullptr && t.grads == nullptr)) {
    return absl::InvalidArgumentError("RnnBackwardWeights: x, or both dw and grads, are null");
  }
  const int64_t T = c.T(), N = c.N(), H = c.H(), D = c.D(), GH = c.GH(), L = p.rnn.layers;
  const bool gru = p.rnn.cell == RnnCell::kGru;
  void* ones = c.ws + c.plan.ones;
  KILN_RETURN_IF_ERROR(c.Launched(cuda::LaunchRnnOnes(ones, StorageOf(p.dtype), T * N, c.stream()),
                                  "LaunchRnnOnes"));
  for (int64_t l = 0; l < L; ++l) {
    const int64_t F = p.rnn.LayerInputSize(l);
    const void* in = l > 0                                  ? c.base + c.plan.layer_out[l - 1]
                     : p.x.layout == RnnLayout::kBatchMajor ? c.base + c.plan.x_seq
                                                            : t.x;
    for (int d = 0; d < D; ++d) {
      const RnnCellBuffers& b = c.cell(l, d);
      const RnnLayerGrads g = GradsOf(c, t, l, d);
      const char* dgates = c.base + b.dgates;
      const int64_t ld = c.plan.dgate_stride;
      // dW_ih += dgates^T x: [G H, T N] x [T N, F].
      KILN_RETURN_IF_ERROR(
          c.Gemm(true, false, GH, F, T * N, dgates, ld, in, F, 1, g.w_ih, F, p.dtype));
      // dW_hh += drec^T h_prev: [G H, T N] x [T N, H] (h_states 0..T-1 in step order, as drec).
      KILN_RETURN_IF_ERROR(c.Gemm(true, false, GH, H, T * N, c.base + b.drec, GH,
                                  c.base + b.h_states, H, 1, g.w_hh, H, p.dtype));
      // Bias gradients: column sums of the gate gradients, as [1, T N] x [T N, cols] GEMMs.
      if (g.b_ih != nullptr) {
        KILN_RETURN_IF_ERROR(
            c.Gemm(false, false, 1, GH, T * N, ones, T * N, dgates, ld, 1, g.b_ih, GH, p.dtype));
      }
      if (g.b_hh != nullptr && !gru) {
        KILN_RETURN_IF_ERROR(
            c.Gemm(false, false, 1, GH, T * N, ones, T * N, dgates, ld, 1, g.b_hh, GH, p.dtype));
      }
      if (g.b_hh != nullptr && gru) {  // r and z as b_ih's; n from the fourth block (dn r)
        KILN_RETURN_IF_ERROR(c.Gemm(false, false, 1, 2 * H, T * N, ones, T * N, dgates, ld, 1,
                                    g.b_hh, 2 * H, p.dtype));
        KILN_RETURN_IF_ERROR(c.Gemm(false, false, 1, H, T * N, ones, T * N, dgates + 3 * H * c.e,
                                    ld, 1, static_cast<char*>(g.b_hh) + 2 * H * c.e, H, p.dtype));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace dnn
}  // namespace kiln
