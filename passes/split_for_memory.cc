// A Convolution whose only reader is a Pooling (or an across-channel LRN read only by a
// Pooling), at the top of the network's activation sizes, run in slices of its output channels:
// each slice's convolution is pooled straight away and the pooled slices are concatenated along
// the channels. Pooling works channel by channel, so the result is the same, but the
// convolution's full output never exists: the plan's peak drops from (input + conv output +
// pooled output) to (input + one slice + pooled output). This is where the stems of
// AlexNet-style nets and of FCN peak (conv1 is the largest tensor, the pooling after it shrinks
// it 4x). With an LRN between, each slice also computes the local_size/2 channels either side
// that its LRN windows read, and keeps its own channels (a Slice) before pooling.
//
// It costs speed (S narrower convolutions instead of one wide one), so it runs only when the
// caller asks for the smaller plan (CompileOptions::split_for_memory, `--optimize memory`).
// With placed Concat inputs (CUDA plans) the pooled slices are written straight into the
// Concat's output; elsewhere the Concat copies them.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

// Slices keep a multiple of this many channels: channels-last kernels vectorize over 8.
constexpr int64_t kChannelQuantum = 8;
// More slices than this save little more and cost a launch each.
constexpr int64_t kMaxSlices = 16;

// Rows [begin, end) of dim 0 of `t`, same dtype (copied by logical index, so any strides).
absl::StatusOr<HostTensor> SliceDim0(const HostTensor& t, int64_t begin, int64_t end) {
  std::vector<int64_t> dims = t.type().dims();
  const int64_t per_row = t.type().num_elements() / dims[0];
  dims[0] = end - begin;
  KILN_ASSIGN_OR_RETURN(TensorType type, TensorType::Create(t.type().dtype(), dims));
  HostTensor out(type);
  for (int64_t i = 0; i < type.num_elements(); ++i) {
    out.SetFloat(i, t.GetFloat(begin * per_row + i));
  }
  return out;
}

// The rewritten section: conv, an optional across-channel LRN, then the pooling.
struct Section {
  Node* conv = nullptr;
  Node* lrn = nullptr;
  Node* pool = nullptr;
  int64_t width = 0;  // output channels per slice
  int64_t halo = 0;   // extra channels each side a slice's LRN window reads
};

class SplitForMemoryPass : public Pass {
 public:
  absl::string_view name() const override { return "split_for_memory"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    if (!context.inference) return false;
    // Only convolutions near the largest activation are worth the slower plan.
    const int64_t largest = LargestActivationBytes(graph);
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Section section;
      section.conv = graph.FindNode(node_name);
      if (section.conv == nullptr || section.conv->kind() != OpKind::kConvolution) continue;
      if (section.conv->output_types()[0].span_bytes() * 2 < largest) continue;
      Node* reader = SoleConsumer(graph, section.conv->output(0));
      const std::string reason = Legality(graph, reader, section);
      if (!reason.empty()) {
        if (reader != nullptr) context.Explain(name(), *section.conv, *reader, reason);
        continue;
      }
      KILN_RETURN_IF_ERROR(Split(graph, section));
      changed = true;
    }
    return changed;
  }

 private:
  // Why the section starting at `s.conv` cannot be split, or "" with `s` filled in.
  static std::string Legality(const Graph& graph, Node* reader, Section& s) {
    const Node& conv = *s.conv;
    if (reader == nullptr) return "the convolution's output has several readers or is an output";
    if (reader->kind() == OpKind::kLRN) {
      // Across channels, each output channel reads a window of input channels: a slice computes
      // its window's channels too and keeps only its own.
      if (reader->GetString("region") != "across_channels") return "the LRN is within channels";
      s.lrn = reader;
      s.halo = reader->GetInt("local_size") / 2;
      reader = SoleConsumer(graph, reader->output(0));
      if (reader == nullptr) return "the LRN's output has several readers or is an output";
    }
    if (reader->kind() != OpKind::kPooling) {
      return absl::StrCat("its reader is ", reader->op(), ", not Pooling");
    }
    s.pool = reader;
    if (conv.num_inputs() > 3) return "the convolution adds a residual";
    if (conv.GetInt("group") != 1) return "grouped convolution";
    for (int i = 1; i < conv.num_inputs(); ++i) {
      if (ConstantData(conv.input(i)) == nullptr) return "weights are not constants";
    }
    const TensorType& y = conv.output_types()[0];
    const TensorType& pooled = s.pool->output_types()[0];
    if (pooled.span_bytes() * 2 > y.span_bytes()) return "the pooling does not halve the bytes";
    // Slices no larger than the pooled output: the convolution then never holds more than it.
    const int64_t channels = y.dim(1);
    const int64_t want = (y.span_bytes() + pooled.span_bytes() - 1) / pooled.span_bytes();
    // At most kMaxSlices (a global pooling would otherwise ask for one slice per position).
    const int64_t count = std::min<int64_t>(want, kMaxSlices);
    int64_t width = (channels + count - 1) / count;
    width = (width + kChannelQuantum - 1) / kChannelQuantum * kChannelQuantum;
    if (width >= channels) return absl::StrCat("only ", channels, " output channels");
    s.width = width;
    return "";
  }

  // Output channels [begin, end) of the section's convolution, with its own bias and epilogue.
  static absl::StatusOr<Node*> ConvSlice(Graph& graph, const Node& conv, int64_t begin,
                                         int64_t end) {
    const std::string suffix = absl::StrCat("/ch", begin, "-", end);
    std::vector<Value> inputs = {conv.input(0)};
    for (int i = 1; i < conv.num_inputs(); ++i) {
      KILN_ASSIGN_OR_RETURN(HostTensor part, SliceDim0(*ConstantData(conv.input(i)), begin, end));
      const std::string what = i == 1 ? "/filter" : "/bias";
      KILN_ASSIGN_OR_RETURN(
          Value c, graph.AddConstant(UniqueName(graph, conv.name() + suffix + what), part));
      inputs.push_back(c);
    }
    KILN_ASSIGN_OR_RETURN(
        Node * node, graph.AddNode("Convolution", UniqueName(graph, conv.name() + suffix), inputs,
                                   conv.attrs()));
    graph.SetOrigins(node, conv.origins());
    return node;
  }

  static absl::Status Split(Graph& graph, const Section& s) {
    const int64_t channels = s.conv->output_types()[0].dim(1);
    std::vector<Value> pooled;
    for (int64_t begin = 0; begin < channels; begin += s.width) {
      const int64_t end = std::min(channels, begin + s.width);
      const std::string suffix = absl::StrCat("/ch", begin, "-", end);
      // The channels the slice's LRN windows read: its own plus the halo, inside [0, channels).
      const int64_t lo = std::max<int64_t>(0, begin - s.halo);
      const int64_t hi = std::min(channels, end + s.halo);
      KILN_ASSIGN_OR_RETURN(Node * conv, ConvSlice(graph, *s.conv, lo, hi));
      Value part = conv->output(0);
      if (s.lrn != nullptr) {
        KILN_ASSIGN_OR_RETURN(
            Node * lrn, graph.AddNode("LRN", UniqueName(graph, s.lrn->name() + suffix), {part},
                                      s.lrn->attrs()));
        graph.SetOrigins(lrn, s.lrn->origins());
        part = lrn->output(0);
        if (lo < begin || hi > end) {
          // Keep [begin, end): the part between the slice points.
          std::vector<int64_t> points;
          if (lo < begin) points.push_back(begin - lo);
          if (hi > end) points.push_back(end - lo);
          KILN_ASSIGN_OR_RETURN(
              Node * keep,
              graph.AddNode("Slice", UniqueName(graph, s.lrn->name() + suffix + "/own"), {part},
                            {{"axis", AttrValue(int64_t{1})}, {"slice_points", points}}));
          graph.SetOrigins(keep, s.lrn->origins());
          part = keep->output(lo < begin ? 1 : 0);
        }
      }
      KILN_ASSIGN_OR_RETURN(
          Node * pool, graph.AddNode("Pooling", UniqueName(graph, s.pool->name() + suffix), {part},
                                     s.pool->attrs()));
      graph.SetOrigins(pool, s.pool->origins());
      pooled.push_back(pool->output(0));
    }
    // The Concat takes the pooling's place and name, so its output keeps the layer's blob name.
    return ReplaceByConcat(graph, s.pool, std::move(pooled), 1);
  }
};

}  // namespace

std::unique_ptr<Pass> MakeSplitForMemoryPass() { return std::make_unique<SplitForMemoryPass>(); }

}  // namespace kiln
