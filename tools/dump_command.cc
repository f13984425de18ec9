#include "tools/dump_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_identity.h"
#include "base/file_io.h"
#include "base/status_macros.h"
#include "frontends/caffe/caffe_io.h"
#include "frontends/caffe/plan_layers.h"
#include "kernels/all_kernels.h"
#include "runtime/compiler.h"
#include "runtime/plan_report.h"
#include "tools/caffe_commands.h"
#include "tools/plan_flags.h"

namespace kiln {

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
  const LayerIndex index = CaffeLayerIndex(loaded.model);
  if (line.Has("dot")) KILN_RETURN_IF_ERROR(WriteText(line.Get("dot"), PlanToDot(*plan, index)));
  if (line.Has("svg")) KILN_RETURN_IF_ERROR(RenderSvg(PlanToDot(*plan, index), line.Get("svg")));
  if (line.Has("memory")) KILN_RETURN_IF_ERROR(WriteText(line.Get("memory"), MemoryToSvg(*plan)));
  if (line.Has("why-not-fused")) std::fputs(DeclinedRewritesText(*plan).c_str(), stdout);
  return absl::OkStatus();
}

}  // namespace

int DumpCommand(int argc, char** argv) {
  absl::Status status = Dump(argc, argv);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace kiln
