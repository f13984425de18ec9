#include "tools/command_line.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln {

absl::StatusOr<CommandLine> CommandLine::Parse(int argc, char** argv, int first,
                                               const std::set<std::string>& known,
                                               const std::set<std::string>& switches) {
  CommandLine line;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    arg = arg.substr(2);
    std::string value;
    const size_t eq = arg.find('=');
    const std::string name = eq == std::string::npos ? arg : arg.substr(0, eq);
    if (!known.count(name) && !switches.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (switches.count(name)) {
      if (eq != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
    }
    line.values_[name].push_back(value);
  }
  return line;
}

std::string CommandLine::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> CommandLine::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

}  // namespace kiln
