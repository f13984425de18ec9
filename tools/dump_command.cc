#include "tools/dump_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/file_identity.h"
#include "base/file_io.h"
#include "base/status_macros.h"
#include "frontends/caffe/caffe_io.h"
#include "kernels/all_kernels.h"
#include "runtime/compiler.h"
#include "tools/caffe_commands.h"
#include "tools/compile_command.h"
#include "tools/plan_flags.h"

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

}  // namespace

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
  // The value each root holds: the node that writes it first.
  std::map<int, std::string> label;
  for (const PlanStep& s : plan.steps()) {
    for (int b : s.outputs) label.emplace(plan.RootBuffer(b), s.node->name());
  }
  for (const auto& [name, b] : plan.inputs()) label[plan.RootBuffer(b)] = name;
  int colour = 0;
  for (const auto& [root, range] : LiveRanges(plan)) {
    const BufferAssignment& b = plan.buffers()[root];
    const double x0 = x_of(range.first), x1 = x_of(range.second) + x_per_step;
    const double y0 = y_of(b.offset), y1 = y_of(b.offset + b.bytes);
    const int hue = (colour++ * 47) % 360;
    absl::StrAppend(
        &svg, absl::StrFormat("<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" "
                              "fill=\"hsl(%d,60%%,75%%)\" stroke=\"hsl(%d,60%%,40%%)\">"
                              "<title>%s: %s, steps %d..%d, bytes %d..%d</title></rect>\n",
                              x0, y0, std::max(x1 - x0, 1.0), std::max(y1 - y0, 0.5), hue, hue,
                              Escape(label[root]), Mib(b.bytes), range.first, range.second,
                              b.offset, b.offset + b.bytes));
    if (y1 - y0 > 11 && x1 - x0 > 40) {
      absl::StrAppend(&svg, absl::StrFormat("<text x=\"%g\" y=\"%g\">%s</text>\n", x0 + 2, y0 + 10,
                                            Escape(label[root])));
    }
  }
  absl::StrAppend(&svg, absl::StrFormat("<text x=\"%g\" y=\"%g\">step 0</text><text x=\"%g\" "
                                        "y=\"%g\">step %d</text>\n</svg>\n",
                                        left, top + height + 15, left + width - 40,
                                        top + height + 15, steps - 1));
  return svg;
}

namespace {

absl::Status WriteText(const std::string& path, const std::string& text) {
  return WriteFileBytes(path, text);
}

// `dot -Tsvg` run on private files in the temporary folder (no shell, nothing beside the user's
// files), then the SVG written to `svg_path` atomically.
absl::Status RenderSvg(const std::string& dot, const std::string& svg_path) {
  const char* tmp = std::getenv("TMPDIR");
  std::string folder = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/kiln-dot-XXXXXX");
  if (mkdtemp(&folder[0]) == nullptr) {
    return absl::InternalError(
        absl::StrCat("--svg ", svg_path, ": cannot create a temporary folder: ", strerror(errno)));
  }
  const std::string dot_path = folder + "/graph.dot", rendered = folder + "/graph.svg";
  absl::Status status = WriteText(dot_path, dot);
  int rc = -1;
  if (status.ok()) {
    std::vector<std::string> args = {"dot", "-Tsvg", "-o", rendered, dot_path};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawnp(&pid, "dot", nullptr, nullptr, argv.data(), environ) == 0) {
      while (waitpid(pid, &rc, 0) < 0 && errno == EINTR) {
      }
    }
    if (rc != 0) {
      status = absl::UnavailableError(
          absl::StrCat("--svg ", svg_path, ": graphviz's `dot` failed or is missing",
                       rc > 0 && WIFEXITED(rc) ? absl::StrCat(" (exit ", WEXITSTATUS(rc), ")") : "",
                       "; install graphviz, or write the graph with --dot"));
    }
  }
  if (status.ok()) {
    absl::StatusOr<std::string> svg = ReadFileBytes(rendered);
    status = svg.ok() ? WriteText(svg_path, *svg) : svg.status();
  }
  std::remove(rendered.c_str());
  std::remove(dot_path.c_str());
  rmdir(folder.c_str());
  return status;
}

absl::Status Dump(int argc, char** argv) {
  std::set<std::string> flags = CommonModelFlags();
  flags.insert({"fill-seed", "batch", "svg", "dot", "memory", "cuda-target"});
  flags.insert(PlanFlagNames().begin(), PlanFlagNames().end());
  std::set<std::string> switches = CommonModelSwitches();
  switches.insert("why-not-fused");
  KILN_ASSIGN_OR_RETURN(CommandLine line, CommandLine::Parse(argc, argv, 2, flags, switches));
  if (!line.Has("svg") && !line.Has("dot") && !line.Has("memory") && !line.Has("why-not-fused")) {
    return absl::InvalidArgumentError(
        "dump: give --svg FILE, --dot FILE, --memory FILE or --why-not-fused");
  }
  std::vector<FlagPath> outputs;
  for (const char* flag : {"dot", "svg", "memory"}) {
    if (line.Has(flag)) outputs.push_back({absl::StrCat("--", flag), line.Get(flag)});
  }
  KILN_RETURN_IF_ERROR(CheckCommandFiles(line, {}, outputs));
  CaffeImportOptions options;
  KILN_RETURN_IF_ERROR(ParseCommonOptions(line, options));
  KILN_RETURN_IF_ERROR(ApplyFillSeedFlag(line, options));
  CompileOptions compile;
  KILN_RETURN_IF_ERROR(ParsePlanFlags(line, compile));
  KILN_RETURN_IF_ERROR(ParseCudaTargetFlag(line, compile));
  KILN_RETURN_IF_ERROR(ApplyBatchFlag(line, options));
  LoadedModel loaded;
  KILN_RETURN_IF_ERROR(LoadModel(line, options, loaded));
  KILN_ASSIGN_OR_RETURN(auto plan, Compile(*loaded.model.graph, DefaultKernelRegistry(), compile));
  const LayerIndex index(loaded.model);
  if (line.Has("dot")) KILN_RETURN_IF_ERROR(WriteText(line.Get("dot"), PlanToDot(*plan, index)));
  if (line.Has("svg")) KILN_RETURN_IF_ERROR(RenderSvg(PlanToDot(*plan, index), line.Get("svg")));
  if (line.Has("memory")) KILN_RETURN_IF_ERROR(WriteText(line.Get("memory"), MemoryToSvg(*plan)));
  if (line.Has("why-not-fused")) PrintDeclinedRewrites(*plan);
  return absl::OkStatus();
}

}  // namespace

int DumpCommand(int argc, char** argv) {
  absl::Status status = Dump(argc, argv);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace kiln
