// A Convolution read only by a Pooling (through per-pixel ops: ReLU, an across-channel LRN),
// at the top of the network's activation sizes, computed in bands of rows: each band's
// convolution covers just the rows its band of pooled rows reads, is pooled straight away, and
// the pooled bands are concatenated along the height. The convolution's full output never
// exists: the plan's peak at that step drops from (input + conv output + pooled output) to
// (input + one band + pooled output). That is where the stems of AlexNet-style nets, of ResNets
// and of FCN peak (conv1 is the largest tensor, the pooling after it shrinks it 4x).
//
// Unlike passes/split_for_memory.cc (slices of output channels), a band keeps every filter and
// all its channels, so the convolution's tensor-core tiles stay full and the speed stays: the
// only extra work is the rows two bands' pooling windows share (kernel - stride rows at each
// band boundary, none for 2x2 stride-2 pooling). It therefore runs in every optimized plan.
//
// Each band is the whole convolution with its own padding: `pad` before the band's first row
// (negative when the band starts inside the input) and "pad_end" after its last; the weights
// and bias are the original's. The pooling must not pad the rows (its windows would then depend
// on where the band sits); its columns are untouched. With placed Concat inputs (CUDA plans)
// the pooled bands are written straight into the Concat's output; elsewhere the Concat copies
// them.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ops/convolution_params.h"
#include "ops/pooling_params.h"
#include "passes/inference_passes.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

// More bands than this save little more and cost a launch each.
constexpr int64_t kMaxBands = 16;

// The rewritten section: conv, per-pixel ops, then the pooling.
struct Section {
  Node* conv = nullptr;
  std::vector<Node*> pixelwise;  // between the convolution and the pooling, in order
  Node* pool = nullptr;
  int64_t pooled_rows_per_band = 0;
};

// Ops that compute each output pixel from the same pixel of their input (all channels of it),
// so a band of rows in gives the same band of rows out.
std::string PixelwiseReason(const Node& n) {
  if (n.kind() == OpKind::kReLU) return "";
  if (n.kind() == OpKind::kLRN) {
    return n.GetString("region") == "across_channels" ? "" : "the LRN is within channels";
  }
  return absl::StrCat("its reader is ", n.op(), ", not Pooling");
}

class SplitRowsForMemoryPass : public Pass {
 public:
  absl::string_view name() const override { return "split_rows_for_memory"; }

  absl::StatusOr<bool> Run(Graph& graph, const PassContext& context) override {
    if (!context.inference) return false;
    const int64_t largest = LargestActivationBytes(graph);
    bool changed = false;
    for (const std::string& node_name : NodeNames(graph)) {
      Section section;
      section.conv = graph.FindNode(node_name);
      if (section.conv == nullptr || section.conv->kind() != OpKind::kConvolution) continue;
      // Near the largest only: a convolution half its size (FCN's conv2_2 beside conv1_2) is
      // not where the plan peaks, and its bands would only cost launches.
      if (section.conv->output_types()[0].span_bytes() * 4 < largest * 3) continue;
      Node* reader = nullptr;
      const std::string reason = Legality(graph, section, &reader);
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
  // Why the section starting at `s.conv` cannot be split, or "" with `s` filled in. `*reader` is
  // the node the reason is about, for the remark.
  static std::string Legality(const Graph& graph, Section& s, Node** reader) {
    const Node& conv = *s.conv;
    Value v = s.conv->output(0);
    for (;;) {
      *reader = SoleConsumer(graph, v);
      if (*reader == nullptr) {
        return "the convolution's output (or a pixelwise op's after it) has several readers or is "
               "an output";
      }
      if ((*reader)->kind() == OpKind::kPooling) break;
      const std::string why = PixelwiseReason(**reader);
      if (!why.empty()) return why;
      s.pixelwise.push_back(*reader);
      v = (*reader)->output(0);
    }
    s.pool = *reader;
    const TensorType& y = conv.output_types()[0];
    if (y.rank() != 4) return "only 2-d convolutions are split into bands";
    if (conv.num_inputs() > 3) return "the convolution adds a residual";
    // First layers (CaffeNet's 11x11 s4 conv1, ResNet's 7x7 stem) are split too: they are where
    // those nets peak. Their kernels stage the whole filter per launch, which once made bands
    // 1.3-2.3x slower; with that staging vectorized (conv_small_channels.cu) CaffeNet's conv1
    // fp16 runs 0.385 ms whole and 0.497 in 4 bands, ResNet's stem 0.192 and 0.289 (H100,
    // 2026-11-25, `kiln time` of the stems alone).
    auto params = ConvolutionParams::FromAttrs(conv.attrs(), 2);
    if (!params.ok()) return std::string(params.status().message());
    if (params->asymmetric) return "the convolution is already a band";
    const Node& pool = *s.pool;
    if (pool.GetBool("global")) return "global pooling";
    auto pooling = PoolingParams::Create(pool.attrs(), pool.input(0).type());
    if (!pooling.ok()) return std::string(pooling.status().message());
    if (pooling->pad[0] != 0) return "the pooling pads the rows";
    const TensorType& pooled = pool.output_types()[0];
    if (pooled.span_bytes() * 2 > y.span_bytes()) return "the pooling does not halve the bytes";
    // Bands about the size of the pooled output (the nearest whole number of them): the step
    // then holds about twice the pooled bytes beside its input. More bands would save a little more
    // but cost a launch each (and where pooling windows overlap, kernel - stride recomputed rows at
    // each boundary); FCN-8s fp16 in 8 bands ran 0.04 ms slower than in 4 (H100, 2026-11-25).
    const int64_t kernel = pooling->kernel[0], stride = pooling->stride[0];
    const int64_t ratio = (y.span_bytes() + pooled.span_bytes() / 2) / pooled.span_bytes();
    const int64_t pooled_rows = pooled.dim(2);
    int64_t bands = std::min(ratio, kMaxBands);
    bands = std::min(bands, pooled_rows / 2);  // at least 2 pooled rows each
    if (bands < 2) return absl::StrCat("only ", pooled_rows, " pooled rows");
    s.pooled_rows_per_band = (pooled_rows + bands - 1) / bands;
    // Each band's pooling must give its rows of the whole pooling: Caffe's rounding and clip over
    // the band's conv rows (the last band's may be shorter than a window).
    const bool ceil = pool.GetString("rounding") == "ceil";
    bool any_pad = false;
    for (int64_t p : pooling->pad) any_pad |= p > 0;
    for (int64_t a = 0; a < pooled_rows; a += s.pooled_rows_per_band) {
      const int64_t b = std::min(pooled_rows, a + s.pooled_rows_per_band);
      const int64_t rows = ConvRowsEnd(b, kernel, stride, y.dim(2)) - a * stride;
      if (rows < kernel) return absl::StrCat("pooled rows ", a, "-", b, " have too few conv rows");
      const absl::StatusOr<int64_t> pooled = PooledSize(rows, kernel, stride, 0, ceil, any_pad);
      if (!pooled.ok() || *pooled != b - a) {
        return absl::StrCat("pooled rows ", a, "-", b, " are not the pooling of their band");
      }
    }
    return "";
  }

  // One past the last conv row that pooled rows [a, b) read.
  static int64_t ConvRowsEnd(int64_t b, int64_t kernel, int64_t stride, int64_t conv_rows) {
    return std::min(conv_rows, (b - 1) * stride + kernel);
  }

  static absl::Status Split(Graph& graph, const Section& s) {
    const Node& conv = *s.conv;
    KILN_ASSIGN_OR_RETURN(ConvolutionParams params, ConvolutionParams::FromAttrs(conv.attrs(), 2));
    KILN_ASSIGN_OR_RETURN(PoolingParams pooling,
                          PoolingParams::Create(s.pool->attrs(), s.pool->input(0).type()));
    const int64_t in_rows = conv.input(0).type().dim(2);
    const int64_t conv_rows = conv.output_types()[0].dim(2);
    const int64_t extent = params.dilation[0] * (conv.input(1).type().dim(2) - 1) + 1;
    const int64_t kernel = pooling.kernel[0], stride = pooling.stride[0];
    const int64_t pooled_rows = s.pool->output_types()[0].dim(2);
    std::vector<Value> pooled;
    for (int64_t a = 0; a < pooled_rows; a += s.pooled_rows_per_band) {
      const int64_t b = std::min(pooled_rows, a + s.pooled_rows_per_band);
      const int64_t c0 = a * stride, c1 = ConvRowsEnd(b, kernel, stride, conv_rows);
      // Conv rows [c0, c1): padding before row c0 of the output's window, and after, such that
      // (in_rows + before + after - extent) / stride + 1 = c1 - c0 exactly.
      const int64_t before = params.pad[0] - c0 * params.stride[0];
      const int64_t after = (c1 - c0 - 1) * params.stride[0] + extent - in_rows - before;
      AttrMap attrs = conv.attrs();
      attrs["pad"] = AttrValue(std::vector<int64_t>{before, params.pad[1]});
      attrs["pad_end"] = AttrValue(std::vector<int64_t>{after, params.pad_end[1]});
      const std::string conv_suffix = absl::StrCat("/rows", c0, "-", c1);
      KILN_ASSIGN_OR_RETURN(
          Node * band, graph.AddNode("Convolution", UniqueName(graph, conv.name() + conv_suffix),
                                     conv.inputs(), attrs));
      graph.SetOrigins(band, conv.origins());
      Value part = band->output(0);
      for (const Node* op : s.pixelwise) {
        KILN_ASSIGN_OR_RETURN(Node * copy,
                              graph.AddNode(op->op(), UniqueName(graph, op->name() + conv_suffix),
                                            {part}, op->attrs()));
        graph.SetOrigins(copy, op->origins());
        part = copy->output(0);
      }
      KILN_ASSIGN_OR_RETURN(
          Node * pool,
          graph.AddNode("Pooling",
                        UniqueName(graph, absl::StrCat(s.pool->name(), "/rows", a, "-", b)), {part},
                        s.pool->attrs()));
      graph.SetOrigins(pool, s.pool->origins());
      if (pool->output_types()[0].dim(2) != b - a) {
        return absl::InternalError(absl::StrCat(
            "split_rows_for_memory: band ", a, "-", b, " of '", s.pool->name(), "' pools to ",
            pool->output_types()[0].dim(2), " rows (Legality promised ", b - a, ")"));
      }
      pooled.push_back(pool->output(0));
    }
    // The Concat takes the pooling's place and name, so its output keeps the layer's blob name.
    return ReplaceByConcat(graph, s.pool, std::move(pooled), 2);
  }
};

}  // namespace

std::unique_ptr<Pass> MakeSplitRowsForMemoryPass() {
  return std::make_unique<SplitRowsForMemoryPass>();
}

}  // namespace kiln
