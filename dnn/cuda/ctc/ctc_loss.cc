#include "dnn/cuda/ctc/ctc_loss.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "dnn/cuda/ctc/ctc_loss_launch.h"
#include "dnn/cuda/cuda_status.h"

namespace kiln {
namespace dnn {

namespace {

// The host side of the workspace: sample records and the int32 tables (labels, positions
// sorted by class, distinct classes with their position ranges), as CtcWorkspaceLayout says.
struct HostTables {
  std::vector<cuda::CtcSample> samples;
  std::vector<int32_t> tables;  // 5 Σ L: labels, sorted_pos, unique_class, begin, end
  int32_t max_states = 1, max_unique = 0;
};

HostTables BuildTables(const CtcLossDescriptor& desc, const CtcLossInputs& in) {
  HostTables h;
  const int64_t total = static_cast<int64_t>(in.labels.size());
  h.samples.resize(in.batch);
  h.tables.assign(5 * total, 0);
  int32_t* labels = h.tables.data();
  int32_t* sorted = labels + total;
  int32_t* unique_class = sorted + total;
  int32_t* unique_begin = unique_class + total;
  int32_t* unique_end = unique_begin + total;
  std::copy(in.labels.begin(), in.labels.end(), labels);
  int64_t ab = 0;
  int32_t offset = 0, unique = 0;
  for (int64_t n = 0; n < in.batch; ++n) {
    cuda::CtcSample& s = h.samples[n];
    const int32_t L = in.label_lengths[n];
    s.ab_offset = ab;
    s.label_offset = offset;
    s.label_length = L;
    s.input_length = in.input_lengths[n];
    s.unique_offset = unique;
    s.grad_scale = static_cast<float>(CtcGradientScale(desc, in.batch, L));
    ab += s.input_length * CtcStates(L);
    // Positions by class, ties in label order: each class's γ sums its states in that order.
    int32_t* pos = sorted + offset;
    for (int32_t i = 0; i < L; ++i) pos[i] = i;
    std::stable_sort(pos, pos + L,
                     [&](int32_t a, int32_t b) { return labels[offset + a] < labels[offset + b]; });
    for (int32_t i = 0; i < L; ++i) {
      const int32_t cls = labels[offset + pos[i]];
      if (s.unique_count == 0 || unique_class[unique + s.unique_count - 1] != cls) {
        unique_class[unique + s.unique_count] = cls;
        unique_begin[unique + s.unique_count] = i;
        ++s.unique_count;
      }
      unique_end[unique + s.unique_count - 1] = i + 1;
    }
    h.max_states = std::max<int32_t>(h.max_states, static_cast<int32_t>(CtcStates(L)));
    h.max_unique = std::max(h.max_unique, s.unique_count);
    offset += L;
    unique += s.unique_count;
  }
  return h;
}

}  // namespace

absl::Status CtcLoss(Handle& handle, const CtcLossDescriptor& desc, const CtcLossInputs& in,
                     const void* activations, float* losses, void* grad, void* workspace,
                     size_t workspace_bytes) {
  const char* where = "CtcLoss";
  KILN_RETURN_IF_ERROR(CheckCtcLoss(desc, in, where));
  if (activations == nullptr) return absl::InvalidArgumentError("CtcLoss: activations is null");
  if (losses == nullptr) return absl::InvalidArgumentError("CtcLoss: losses is null");
  // The tables' offsets are int32 on the device.
  if (static_cast<int64_t>(in.labels.size()) > INT32_MAX / 5) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": labels has ", in.labels.size(), " values, at most ", INT32_MAX / 5));
  }
  KILN_ASSIGN_OR_RETURN(const CtcWorkspaceLayout layout, CtcWorkspaceLayoutFor(desc, in));
  if (workspace == nullptr || workspace_bytes < layout.total) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": the workspace needs ", layout.total,
                                                     " bytes, got ", workspace_bytes));
  }
  const HostTables h = BuildTables(desc, in);
  char* ws = static_cast<char*>(workspace);
  cudaStream_t stream = static_cast<cudaStream_t>(handle.stream());
  // Pageable sources: the copies have taken the data when they return, so h may go.
  KILN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws + layout.samples, h.samples.data(),
                                            h.samples.size() * sizeof(cuda::CtcSample),
                                            cudaMemcpyHostToDevice, stream));
  if (!h.tables.empty()) {
    KILN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws + layout.tables, h.tables.data(),
                                              h.tables.size() * sizeof(int32_t),
                                              cudaMemcpyHostToDevice, stream));
  }
  cuda::CtcCall c;
  c.type = in.dtype == DataType::kF16    ? cuda::Storage::kF16
           : in.dtype == DataType::kBF16 ? cuda::Storage::kBF16
                                         : cuda::Storage::kF32;
  c.max_time = in.max_time;
  c.batch = in.batch;
  c.classes = in.classes;
  c.blank = desc.blank;
  c.log_probs = desc.inputs_are_log_probs;
  c.zero_infinity = desc.zero_infinity;
  c.reduction = static_cast<int>(desc.reduction);
  c.max_states = h.max_states;
  c.max_unique = h.max_unique;
  c.activations = activations;
  c.grad = grad;
  c.losses = losses;
  c.samples = reinterpret_cast<const cuda::CtcSample*>(ws + layout.samples);
  const int32_t* tables = reinterpret_cast<const int32_t*>(ws + layout.tables);
  c.labels = tables;
  c.sorted_pos = tables + layout.table_ints;
  c.unique_class = tables + 2 * layout.table_ints;
  c.unique_begin = tables + 3 * layout.table_ints;
  c.unique_end = tables + 4 * layout.table_ints;
  c.lse = reinterpret_cast<float*>(ws + layout.lse);
  c.alpha = reinterpret_cast<float*>(ws + layout.alpha);
  c.beta = reinterpret_cast<float*>(ws + layout.beta);
  c.sample_loss = reinterpret_cast<double*>(ws + layout.losses);
  KILN_CUDA_RETURN_IF_ERROR(cuda::LaunchCtcLoss(c, handle.stream()));
  return absl::OkStatus();
}

}  // namespace dnn
}  // namespace kiln
