// Errors, versions, options and dtypes of the C API (include/kiln/kiln.h).
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "api/api_state.h"
#include "runtime/device.h"

namespace kiln::c_api {
namespace {

std::string& LastError() {
  thread_local std::string message;
  return message;
}

// An option string, or `fallback` when the caller left it NULL.
std::string Or(const char* value, const char* fallback) { return value ? value : fallback; }

}  // namespace

kiln_status Report(const absl::Status& status) {
  if (status.ok()) return KILN_OK;
  LastError() = std::string(status.message());
  const int code = static_cast<int>(status.code());
  return code >= 1 && code <= 15 ? static_cast<kiln_status>(code) : KILN_UNKNOWN;
}

absl::Status NotNull(const void* p, const char* where, const char* what) {
  if (p != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what, " is NULL"));
}

absl::StatusOr<CompileOptions> ToCompileOptions(const kiln_compile_options* options,
                                                const char* where) {
  kiln_compile_options given;
  kiln_compile_options_init(&given);
  if (options != nullptr) {
    if (options->struct_size < sizeof(size_t) || options->struct_size > (size_t{1} << 16)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": options->struct_size is ", options->struct_size,
                       "; fill the options with kiln_compile_options_init first"));
    }
    // A caller built against an older header passes a shorter struct: its fields only.
    const size_t n = options->struct_size < sizeof(given) ? options->struct_size : sizeof(given);
    std::memcpy(&given, options, n);
    given.struct_size = sizeof(given);
  }
  CompileOptions out;
  auto annotate = [&](const absl::Status& s) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
  };
  absl::Status device = ParseDeviceChoice(Or(given.device, "auto"), out);
  if (!device.ok()) return annotate(device);
  const bool cuda = out.backend == BackendChoice::kAuto || out.backend == BackendChoice::kCuda;
  absl::StatusOr<Precision> precision = ParsePrecision(Or(given.precision, "fp32"));
  if (!precision.ok()) return annotate(precision.status());
  absl::StatusOr<LayoutChoice> layout = ParseLayoutChoice(Or(given.layout, "auto"));
  if (!layout.ok()) return annotate(layout.status());
  absl::StatusOr<AlgoChoice> algo = ParseAlgoChoice(Or(given.algo, "heuristic"));
  if (!algo.ok()) return annotate(algo.status());
  if (cuda) {
    out.precision = *precision;
    out.layout = *layout;
  }
  out.algo = *algo;
  if (given.optimize != 0 && given.optimize != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": options->optimize is ", given.optimize, "; use 1 (on) or 0 (off)"));
  }
  out.optimize = given.optimize == 1;
  if (given.max_batch < 0 || (given.max_batch > 0 && given.batch > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": options->max_batch is ", given.max_batch, " and options->batch ", given.batch,
        "; give one of them (a fixed batch, or every batch up to max_batch)"));
  }
  if (given.max_batch > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": options->max_batch ", given.max_batch, " is over 2^20"));
  }
  if (given.batch < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": options->batch is ", given.batch,
                                                   "; use 0 (as the model says) "
                                                   "or a positive batch size"));
  }
  // The checks of the CLI's --workspace-limit, --workspace-budget and --tuning-file
  // (tools/plan_flags.cc), naming the fields.
  if (given.workspace_limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": options->workspace_limit is ", given.workspace_limit,
                     "; use 0 (no limit) or the most bytes one step may use"));
  }
  if (given.workspace_limit > 0) out.workspace_limit = given.workspace_limit;
  if (given.workspace_budget != 0) {
    absl::Status budget = SetWorkspaceBudget(given.workspace_budget, out);
    if (!budget.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": options->workspace_budget is ",
                                                     given.workspace_budget, ": ", budget.message(),
                                                     ", or 0 for the default"));
    }
  }
  if (given.tuning_file != nullptr && *given.tuning_file != '\0') {
    const std::string file = given.tuning_file;
    if (out.algo != AlgoChoice::kMeasure) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": options->tuning_file ", file,
                       " holds measured choices: use it with options->algo \"measure\""));
    }
    // The compile writes the file back after measuring: its folder must be there.
    std::error_code error;
    const std::filesystem::path folder = std::filesystem::path(file).parent_path();
    if (!folder.empty() && !std::filesystem::is_directory(folder, error)) {
      return absl::NotFoundError(absl::StrCat(where, ": options->tuning_file ", file,
                                              ": the folder ", folder.string(), " does not exist"));
    }
    if (std::filesystem::is_directory(file, error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": options->tuning_file ", file, " is a folder; give a file (made if missing)"));
    }
    out.tuning_file = file;
  }
  return out;
}

absl::StatusOr<DataType> ToDataType(kiln_dtype dtype) {
  switch (dtype) {
    case KILN_F32:
      return DataType::kF32;
    case KILN_F16:
      return DataType::kF16;
    case KILN_BF16:
      return DataType::kBF16;
    case KILN_I32:
      return DataType::kI32;
    case KILN_U8:
      return DataType::kU8;
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype ", static_cast<int>(dtype),
                                                 " is not a kiln_dtype (KILN_F32 .. KILN_U8)"));
}

absl::StatusOr<kiln_dtype> FromDataType(DataType dtype) {
  switch (dtype) {
    case DataType::kF32:
      return KILN_F32;
    case DataType::kF16:
      return KILN_F16;
    case DataType::kBF16:
      return KILN_BF16;
    case DataType::kI32:
      return KILN_I32;
    case DataType::kU8:
      return KILN_U8;
  }
  return absl::InternalError("a dtype the C API has no name for");
}

}  // namespace kiln::c_api

extern "C" {

const char* kiln_last_error(void) { return kiln::c_api::LastError().c_str(); }

const char* kiln_status_name(kiln_status status) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS"};
  const int i = static_cast<int>(status);
  return i >= 0 && i <= 15 ? kNames[i] : "UNKNOWN";
}

const char* kiln_version(void) {
  static const std::string version =
      absl::StrCat(KILN_VERSION_MAJOR, ".", KILN_VERSION_MINOR, ".", KILN_VERSION_PATCH);
  return version.c_str();
}

int kiln_cuda_device_count(void) {
  const kiln::CudaProbe probe = kiln::ProbeCuda();
  return probe.usable ? static_cast<int>(probe.devices.size()) : 0;
}

size_t kiln_dtype_size(kiln_dtype dtype) {
  absl::StatusOr<kiln::DataType> d = kiln::c_api::ToDataType(dtype);
  return d.ok() ? kiln::DataTypeSize(*d) : 0;
}

void kiln_compile_options_init(kiln_compile_options* options) {
  if (options == nullptr) return;
  *options = kiln_compile_options{};
  options->struct_size = sizeof(kiln_compile_options);
  options->device = "auto";
  options->precision = "fp32";
  options->layout = "auto";
  options->algo = "heuristic";
  options->optimize = 1;
  options->batch = 0;
  options->max_batch = 0;
  options->workspace_limit = 0;
  options->workspace_budget = 0;
  options->tuning_file = nullptr;
}

}  // extern "C"
