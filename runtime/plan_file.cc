#include "runtime/plan_file.h"

#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/fnv_hash.h"
#include "base/status_macros.h"
#include "base/version.h"
#include "ir/text_format.h"
#include "runtime/device.h"

namespace kiln {

const char kPlanKilnVersion[] = "0.1.0";
static_assert(sizeof(kPlanKilnVersion) == sizeof(kVersion), "plan files record Kiln's version");

namespace {

// The file: "KILN-PLAN 1\n", header lines "key=value\n", a blank line, then sections of
// (8-byte little-endian length, bytes): the graph text, the tuning entries, then per constant
// its name and its bytes. Last, 8 bytes of FNV-1a over everything before.
constexpr char kMagic[] = "KILN-PLAN 1\n";

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void PutSection(std::string& out, absl::string_view bytes) {
  PutU64(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

// Where a plan runs: the GPU's name and compute capability, or the host.
absl::StatusOr<std::string> DeviceOf(Backend backend, int cuda_device) {
  if (backend != Backend::kCuda) return std::string("host");
  const CudaProbe probe = ProbeCuda();
  if (!probe.usable) return absl::UnavailableError(absl::StrCat("no usable GPU: ", probe.reason));
  if (cuda_device < 0 || cuda_device >= static_cast<int>(probe.devices.size())) {
    return absl::InvalidArgumentError(absl::StrCat("cuda:", cuda_device, " does not exist"));
  }
  const CudaDeviceInfo& d = probe.devices[cuda_device];
  return absl::StrCat(d.name, " sm_", d.major, d.minor);
}

class Reader {
 public:
  Reader(absl::string_view bytes, const std::string& path) : rest_(bytes), path_(path) {}
  absl::StatusOr<absl::string_view> Section(absl::string_view what) {
    if (rest_.size() < 8) return Damaged(absl::StrCat("it ends before ", what));
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>(rest_[i])} << (8 * i);
    rest_.remove_prefix(8);
    if (n > rest_.size()) {
      return Damaged(absl::StrCat(what, " claims ", n, " bytes, ", rest_.size(), " are left"));
    }
    absl::string_view s = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return s;
  }
  bool AtEnd() const { return rest_.empty(); }
  absl::Status Damaged(absl::string_view why) const {
    return absl::DataLossError(absl::StrCat("plan ", path_, " is damaged: ", why));
  }

 private:
  absl::string_view rest_;
  const std::string& path_;
};

}  // namespace

// The compile options a plan file's header records.
static absl::Status OptionsFromHeader(std::map<std::string, std::string>& h,
                                      const std::string& where, CompileOptions& o) {
  // Integers with SimpleAtoi (a double would round int64's maximum), reals with SimpleAtod.
  auto number = [&](const char* key, auto* value) -> absl::Status {
    using T = std::remove_pointer_t<decltype(value)>;
    bool ok = false;
    if constexpr (std::is_floating_point_v<T>) {
      ok = absl::SimpleAtod(h[key], value);
    } else {
      int64_t v = 0;
      ok = absl::SimpleAtoi(h[key], &v) && v >= std::numeric_limits<T>::min() &&
           v <= std::numeric_limits<T>::max();
      *value = static_cast<T>(v);
    }
    if (!ok) {
      return absl::DataLossError(absl::StrCat(where, ": header '", key, "' is '", h[key], "'"));
    }
    return absl::OkStatus();
  };
  int backend = 0, precision = 0, layout = 0, algo = 0, reuse = 1, in_place = 1, in_arena = 1,
      bound = 0, optimize = 0, split = 0;
  KILN_RETURN_IF_ERROR(number("backend_choice", &backend));
  KILN_RETURN_IF_ERROR(number("precision", &precision));
  KILN_RETURN_IF_ERROR(number("layout", &layout));
  KILN_RETURN_IF_ERROR(number("algo", &algo));
  if (backend < 0 || backend > 3 || precision < 0 || precision > 4 || layout < 0 || layout > 3 ||
      algo < 0 || algo > 1) {
    return absl::DataLossError(where + ": a compile option out of range");
  }
  o.backend = static_cast<BackendChoice>(backend);
  o.precision = static_cast<Precision>(precision);
  o.layout = static_cast<LayoutChoice>(layout);
  o.algo = static_cast<AlgoChoice>(algo);
  KILN_RETURN_IF_ERROR(number("workspace_limit", &o.workspace_limit));
  KILN_RETURN_IF_ERROR(number("reuse_activation_memory", &reuse));
  KILN_RETURN_IF_ERROR(number("in_place", &in_place));
  KILN_RETURN_IF_ERROR(number("workspace_in_activation_arena", &in_arena));
  KILN_RETURN_IF_ERROR(number("workspace_peak_slack", &o.workspace_peak_slack));
  KILN_RETURN_IF_ERROR(number("workspace_budget_max_slowdown", &o.workspace_budget_max_slowdown));
  KILN_RETURN_IF_ERROR(number("device_bound_io", &bound));
  KILN_RETURN_IF_ERROR(number("optimize", &optimize));
  KILN_RETURN_IF_ERROR(number("split_for_memory", &split));
  o.reuse_activation_memory = reuse != 0;
  o.in_place = in_place != 0;
  o.workspace_in_activation_arena = in_arena != 0;
  o.device_bound_io = bound != 0;
  o.optimize = optimize != 0;
  o.split_for_memory = split != 0;
  for (absl::string_view pass : absl::StrSplit(h["disabled_passes"], ',', absl::SkipEmpty())) {
    o.disabled_passes.insert(std::string(pass));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SerializePlan(const Graph& source, const CompileOptions& options,
                                          const ExecutionPlan& plan) {
  if (plan.for_absent_device()) {
    return absl::FailedPreconditionError(
        "save plan: a plan for an absent GPU (cuda_target) is for inspection only");
  }
  KILN_ASSIGN_OR_RETURN(std::string device, DeviceOf(plan.backend(), plan.cuda_device()));
  std::string out = kMagic;
  auto header = [&](absl::string_view key, const auto& value) {
    absl::StrAppend(&out, key, "=", value, "\n");
  };
  header("kiln", kPlanKilnVersion);
  header("backend", BackendName(plan.backend()));
  header("device", device);
  header("backend_choice", static_cast<int>(options.backend));
  header("precision", static_cast<int>(options.precision));
  header("layout", static_cast<int>(options.layout));
  header("algo", static_cast<int>(options.algo));
  header("workspace_limit", options.workspace_limit);
  header("reuse_activation_memory", options.reuse_activation_memory ? 1 : 0);
  header("in_place", options.in_place ? 1 : 0);
  header("workspace_in_activation_arena", options.workspace_in_activation_arena ? 1 : 0);
  header("workspace_peak_slack", absl::StrCat(options.workspace_peak_slack));
  header("workspace_budget_max_slowdown", absl::StrCat(options.workspace_budget_max_slowdown));
  header("device_bound_io", options.device_bound_io ? 1 : 0);
  header("optimize", options.optimize ? 1 : 0);
  header("split_for_memory", options.split_for_memory ? 1 : 0);
  header("disabled_passes", absl::StrJoin(options.disabled_passes, ","));
  out += "\n";
  PrintOptions print;
  print.external_constants = true;
  PutSection(out, PrintGraph(source, print));
  std::string tuning;
  for (const auto& [key, value] : plan.tuning_entries())
    absl::StrAppend(&tuning, key, "\t", value, "\n");
  PutSection(out, tuning);
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, source.TopologicalOrder());
  for (const Node* n : order) {
    if (n->constant() == nullptr) continue;
    const HostTensor& t = *n->constant();
    PutSection(out, n->name());
    PutSection(out, absl::string_view(static_cast<const char*>(t.data()),
                                      static_cast<size_t>(t.type().span_bytes())));
  }
  PutU64(out, Fnv1a64(out));
  return out;
}

absl::StatusOr<LoadedPlan> LoadPlan(absl::string_view bytes, const std::string& path,
                                    const OpRegistry& ops, const KernelRegistry& kernels,
                                    int cuda_device) {
  const std::string where = absl::StrCat("plan ", path);
  if (bytes.size() < sizeof(kMagic) - 1 || bytes.substr(0, sizeof(kMagic) - 1) != kMagic) {
    if (bytes.substr(0, 10) == "KILN-PLAN ") {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " has plan-file format '", bytes.substr(10, bytes.find('\n') - 10),
                       "'; this Kiln reads format 1: compile the model again"));
    }
    return absl::InvalidArgumentError(absl::StrCat(where, " is not a Kiln plan file"));
  }
  if (bytes.size() < sizeof(kMagic) - 1 + 8) return absl::DataLossError(where + " is truncated");
  const absl::string_view body = bytes.substr(0, bytes.size() - 8);
  uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) {
    stored |= uint64_t{static_cast<unsigned char>(bytes[bytes.size() - 8 + i])} << (8 * i);
  }
  if (stored != Fnv1a64(body)) {
    return absl::DataLossError(absl::StrCat(where, " is damaged (its checksum does not match)"));
  }
  // The header.
  const size_t end = body.find("\n\n");
  if (end == absl::string_view::npos) return absl::DataLossError(where + " has no header end");
  std::map<std::string, std::string> h;
  for (absl::string_view line :
       absl::StrSplit(body.substr(sizeof(kMagic) - 1, end - (sizeof(kMagic) - 1)), '\n')) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::DataLossError(absl::StrCat(where, ": header line '", line, "'"));
    }
    h[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  if (h["kiln"] != kPlanKilnVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, " was written by Kiln ", h["kiln"], "; this is Kiln ", kPlanKilnVersion,
                     ": compile the model again (plans are not carried across versions)"));
  }
  LoadedPlan loaded;
  CompileOptions& o = loaded.options;
  KILN_RETURN_IF_ERROR(OptionsFromHeader(h, where, o));
  // The device: the same kind of GPU (its kernels and measured choices are for it), or the host.
  const bool cuda = h["backend"] == "cuda";
  if (!cuda && cuda_device >= 0) {
    return absl::FailedPreconditionError(absl::StrCat(where, " runs on the ", h["backend"],
                                                      " backend; a GPU (cuda:", cuda_device,
                                                      ") does not apply to it"));
  }
  if (cuda) {
    o.backend = BackendChoice::kCuda;
    o.cuda_device = cuda_device >= 0 ? cuda_device : 0;
  }
  absl::StatusOr<std::string> here = DeviceOf(cuda ? Backend::kCuda : Backend::kCpu, o.cuda_device);
  if (!here.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " is for ", h["device"], ", and here there is ", here.status().message()));
  }
  if (*here != h["device"]) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, " was compiled for ", h["device"], ", not for ", *here,
                     (cuda ? absl::StrCat(" (cuda:", o.cuda_device, ")") : std::string()),
                     ": compile the model again on this device"));
  }
  // The sections.
  Reader reader(body.substr(end + 2), path);
  KILN_ASSIGN_OR_RETURN(absl::string_view graph_text, reader.Section("the graph"));
  KILN_ASSIGN_OR_RETURN(absl::string_view tuning, reader.Section("the measured choices"));
  for (absl::string_view line : absl::StrSplit(tuning, '\n', absl::SkipEmpty())) {
    const size_t tab = line.find('\t');
    if (tab == absl::string_view::npos) return reader.Damaged("a measured choice without a tab");
    o.tuning_entries[std::string(line.substr(0, tab))] = std::string(line.substr(tab + 1));
  }
  absl::Status constant_error;
  ExternalConstantFn constants = [&](const std::string& name,
                                     const TensorType& type) -> absl::StatusOr<HostTensor> {
    KILN_ASSIGN_OR_RETURN(absl::string_view stored_name, reader.Section("a weight's name"));
    if (stored_name != name) {
      return reader.Damaged(absl::StrCat("weight '", stored_name, "' where '", name, "' was due"));
    }
    KILN_ASSIGN_OR_RETURN(absl::string_view data, reader.Section("a weight's bytes"));
    if (static_cast<int64_t>(data.size()) != type.span_bytes()) {
      return reader.Damaged(absl::StrCat("weight '", name, "' has ", data.size(),
                                         " bytes, its type ", type.ToString(), " needs ",
                                         type.span_bytes()));
    }
    HostTensor t(type);
    std::memcpy(t.data(), data.data(), data.size());
    return t;
  };
  absl::StatusOr<std::unique_ptr<Graph>> graph = ParseGraph(graph_text, &ops, constants);
  if (!graph.ok()) return reader.Damaged(absl::StrCat("its graph: ", graph.status().message()));
  if (!reader.AtEnd()) return reader.Damaged("bytes after the last weight");
  loaded.source = *std::move(graph);
  KILN_ASSIGN_OR_RETURN(loaded.plan, Compile(*loaded.source, kernels, loaded.options));
  return loaded;
}

}  // namespace kiln
