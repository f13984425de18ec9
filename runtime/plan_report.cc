#include "runtime/plan_report.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/json_text.h"
#include "runtime/memory_planner.h"

namespace kiln {

namespace {

std::string Escape(const std::string& s) {
  return absl::StrReplaceAll(
      s, {{"\\", "\\\\"}, {"\"", "\\\""}, {"<", "&lt;"}, {">", "&gt;"}, {"&", "&amp;"}});
}

std::string Mib(int64_t bytes) { return absl::StrFormat("%.2f MiB", bytes / 1048576.0); }

// Each activation root buffer's [first write, last use] over the steps (-1: a graph input,
// steps(): a graph output).
std::map<int, std::pair<int, int>> LiveRanges(const ExecutionPlan& plan) {
  const int end = static_cast<int>(plan.steps().size());
  std::map<int, std::pair<int, int>> live;
  auto touch = [&](int buffer, int step) {
    const int root = plan.RootBuffer(buffer);
    if (plan.buffers()[root].arena != Arena::kActivations) return;
    auto [it, added] = live.emplace(root, std::make_pair(step, step));
    it->second.first = std::min(it->second.first, step);
    it->second.second = std::max(it->second.second, step);
  };
  for (const auto& [name, b] : plan.inputs()) touch(b, -1);
  for (int s = 0; s < end; ++s) {
    if (plan.steps()[s].is_view) continue;
    for (int b : plan.steps()[s].outputs) touch(b, s);
  }
  for (int s = 0; s < end; ++s) {
    for (int b : plan.steps()[s].inputs) touch(b, s);
  }
  for (const auto& [name, b] : plan.outputs()) touch(b, end);
  return live;
}

// The algorithm a kernel's description names ("algo=fft tf32 ..." -> "fft"), or "".
std::string AlgorithmOf(const std::string& description) {
  const size_t at = description.find("algo=");
  if (at == std::string::npos) return "";
  const size_t from = at + 5;
  return description.substr(from, description.find(' ', from) - from);
}

}  // namespace

LayerIndex::LayerIndex(std::map<std::string, std::string> layer_of_node,
                       std::map<std::string, std::string> type_of_layer)
    : layer_of_node_(std::move(layer_of_node)), type_of_layer_(std::move(type_of_layer)) {}

std::vector<std::string> LayerIndex::LayersOf(const Node& node) const {
  std::vector<std::string> layers;
  for (const std::string& origin : node.origins()) {
    std::string layer = origin;
    if (!layer_of_node_.empty()) {
      auto it = layer_of_node_.find(origin);
      if (it == layer_of_node_.end()) continue;
      layer = it->second;
    }
    if (std::find(layers.begin(), layers.end(), layer) == layers.end()) {
      layers.push_back(std::move(layer));
    }
  }
  if (layers.empty()) layers.push_back(node.name());
  return layers;
}

std::string LayerIndex::TypeOf(const std::string& layer) const {
  auto it = type_of_layer_.find(layer);
  return it == type_of_layer_.end() ? "" : it->second;
}

std::vector<StepRow> StepRows(const ExecutionPlan& plan, const LayerIndex& layers) {
  std::vector<StepRow> rows;
  rows.reserve(plan.steps().size());
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    const PlanStep& step = plan.steps()[i];
    StepRow row;
    row.index = static_cast<int>(i);
    row.name = step.node->name();
    row.op = step.node->op();
    row.kernel = step.kernel_name;
    row.layers = layers.LayersOf(*step.node);
    row.view = step.is_view;
    row.in_place = step.in_place;
    row.description = step.description;
    row.algorithm = AlgorithmOf(step.description);
    row.workspace_bytes = static_cast<int64_t>(step.workspace_bytes);
    row.workspace_offset = step.workspace_offset;
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string StepJson(const StepRow& row, bool detail) {
  std::vector<std::string> quoted;
  for (const std::string& l : row.layers) quoted.push_back(JsonString(l));
  std::string out =
      absl::StrCat("{\"name\": ", JsonString(row.name), ", \"kernel\": ", JsonString(row.kernel),
                   ", \"layers\": [", absl::StrJoin(quoted, ", "),
                   "], \"in_place\": ", row.in_place ? "true" : "false");
  if (detail) {
    absl::StrAppend(&out, ", \"index\": ", row.index, ", \"op\": ", JsonString(row.op),
                    ", \"view\": ", row.view ? "true" : "false",
                    ", \"description\": ", JsonString(row.description));
    if (!row.algorithm.empty()) {
      absl::StrAppend(&out, ", \"algorithm\": ", JsonString(row.algorithm));
    }
    absl::StrAppend(&out, ", \"workspace_bytes\": ", row.workspace_bytes,
                    ", \"workspace_offset\": ", row.workspace_offset);
  }
  return out + "}";
}

std::string DeclinedRewritesText(const ExecutionPlan& plan) {
  std::string out = absl::StrFormat("%zu rewrites declined (%s plan):\n", plan.remarks().size(),
                                    std::string(BackendName(plan.backend())));
  for (const PassRemark& r : plan.remarks()) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-20s %s -> %s: %s\n", r.pass, r.producer, r.consumer, r.reason));
  }
  return out;
}

std::string DeclinedRewritesJson(const ExecutionPlan& plan) {
  std::string out = "[";
  for (size_t i = 0; i < plan.remarks().size(); ++i) {
    const PassRemark& r = plan.remarks()[i];
    absl::StrAppend(&out, i ? ", " : "", "{\"pass\": ", JsonString(r.pass),
                    ", \"producer\": ", JsonString(r.producer),
                    ", \"consumer\": ", JsonString(r.consumer),
                    ", \"reason\": ", JsonString(r.reason), "}");
  }
  return out + "]";
}

std::vector<ArenaBuffer> ArenaBuffers(const ExecutionPlan& plan) {
  // The value each root holds: the node that writes it first, or the graph input.
  std::map<int, std::string> label;
  for (const PlanStep& s : plan.steps()) {
    for (int b : s.outputs) label.emplace(plan.RootBuffer(b), s.node->name());
  }
  for (const auto& [name, b] : plan.inputs()) label[plan.RootBuffer(b)] = name;
  std::vector<ArenaBuffer> buffers;
  for (const auto& [root, range] : LiveRanges(plan)) {
    ArenaBuffer a;
    a.buffer = root;
    auto it = label.find(root);
    if (it != label.end()) a.name = it->second;
    a.offset = plan.buffers()[root].offset;
    a.bytes = plan.buffers()[root].bytes;
    a.first_step = range.first;
    a.last_step = range.second;
    buffers.push_back(std::move(a));
  }
  return buffers;
}

int64_t UnsharedArenaBytes(const ExecutionPlan& plan) {
  auto aligned = [](int64_t bytes) {
    return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  };
  int64_t total = 0;
  for (const ArenaBuffer& b : ArenaBuffers(plan)) total += aligned(b.bytes);
  for (const PlanStep& step : plan.steps()) {
    if (step.workspace_offset >= 0) total += aligned(static_cast<int64_t>(step.workspace_bytes));
  }
  return total;
}

std::string PlanToDot(const ExecutionPlan& plan, const LayerIndex& layers) {
  std::string dot =
      "digraph plan {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", "
      "fillcolor=\"#eef3fb\", fontname=\"Helvetica\", fontsize=10];\n";
  // Who writes each root buffer, to draw edges from it to its readers.
  std::map<int, std::string> writer;
  for (const auto& [name, b] : plan.inputs()) {
    const std::string id = absl::StrCat("in_", b);
    absl::StrAppend(&dot, "  ", id, " [shape=ellipse, fillcolor=\"#fff4d6\", label=\"",
                    Escape(name), "\\n", Escape(plan.buffers()[b].type.ToString()), "\"];\n");
    writer[b] = id;
  }
  for (size_t i = 0; i < plan.steps().size(); ++i) {
    const PlanStep& s = plan.steps()[i];
    const std::string id = absl::StrCat("s", i);
    const std::vector<std::string> covered = layers.LayersOf(*s.node);
    const std::string what = s.is_view
                                 ? "view (no kernel)"
                                 : absl::StrCat(s.kernel_name, s.in_place ? ", in place" : "");
    if (covered.size() > 1) {
      // A fused kernel: a cluster naming every prototxt layer it stands for.
      absl::StrAppend(
          &dot, "  subgraph cluster_", i, " {\n    label=\"", Escape(absl::StrJoin(covered, " + ")),
          "\";\n    style=\"rounded,filled\"; fillcolor=\"#fde9d9\"; fontsize=10;\n    ");
    } else {
      absl::StrAppend(&dot, "  ");
    }
    absl::StrAppend(&dot, id, " [label=\"", Escape(s.node->name()), " (", s.node->op(), ")\\n",
                    Escape(what), "\"", s.is_view ? ", style=dashed" : "", "];\n");
    if (covered.size() > 1) absl::StrAppend(&dot, "  }\n");
    for (int b : s.inputs) {
      auto w = writer.find(b);
      if (w != writer.end()) {
        absl::StrAppend(&dot, "  ", w->second, " -> ", id, " [tooltip=\"",
                        Escape(plan.buffers()[b].type.ToString()), "\"];\n");
      }
    }
    for (int b : s.outputs) writer[b] = id;
  }
  for (const auto& [name, b] : plan.outputs()) {
    auto w = writer.find(b);
    if (w == writer.end()) continue;
    absl::StrAppend(&dot, "  out_", b, " [shape=ellipse, fillcolor=\"#e3f5e1\", label=\"",
                    Escape(name), "\"];\n  ", w->second, " -> out_", b, ";\n");
  }
  dot += "}\n";
  return dot;
}

std::string MemoryToSvg(const ExecutionPlan& plan) {
  const int steps = static_cast<int>(plan.steps().size());
  const int64_t arena = std::max<int64_t>(plan.activations_bytes(), 1);
  const double left = 70, top = 30, width = 900, height = 480;
  const double x_per_step = width / (steps + 2);
  auto x_of = [&](int step) { return left + (step + 1) * x_per_step; };
  auto y_of = [&](int64_t bytes) { return top + height * static_cast<double>(bytes) / arena; };
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"Helvetica\" font-size=\"10\">\n"
      "<text x=\"%g\" y=\"18\" font-size=\"12\">activation arena over the plan's steps: %s "
      "(planned), %d steps</text>\n"
      "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#999\"/>\n",
      static_cast<int>(left + width + 20), static_cast<int>(top + height + 40), left,
      Mib(plan.activations_bytes()), steps, left, top, width, height);
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"5\" y=\"%g\">0</text>\n<text x=\"5\" "
                                        "y=\"%g\">%s</text>\n",
                                        top + 8, top + height, Mib(arena)));
  int colour = 0;
  for (const ArenaBuffer& b : ArenaBuffers(plan)) {
    const double x0 = x_of(b.first_step), x1 = x_of(b.last_step) + x_per_step;
    const double y0 = y_of(b.offset), y1 = y_of(b.offset + b.bytes);
    const int hue = (colour++ * 47) % 360;
    absl::StrAppend(
        &svg, absl::StrFormat("<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" "
                              "fill=\"hsl(%d,60%%,75%%)\" stroke=\"hsl(%d,60%%,40%%)\">"
                              "<title>%s: %s, steps %d..%d, bytes %d..%d</title></rect>\n",
                              x0, y0, std::max(x1 - x0, 1.0), std::max(y1 - y0, 0.5), hue, hue,
                              Escape(b.name), Mib(b.bytes), b.first_step, b.last_step, b.offset,
                              b.offset + b.bytes));
    if (y1 - y0 > 11 && x1 - x0 > 40) {
      absl::StrAppend(&svg, absl::StrFormat("<text x=\"%g\" y=\"%g\">%s</text>\n", x0 + 2, y0 + 10,
                                            Escape(b.name)));
    }
  }
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"%g\" y=\"%g\">step 0</text><text x=\"%g\" "
                                        "y=\"%g\">step %d</text>\n</svg>\n",
                                        left, top + height + 15, left + width - 40,
                                        top + height + 15, steps - 1));
  return svg;
}

}  // namespace kiln
