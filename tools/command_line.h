// A small flag parser for the kiln subcommands: --name=value or --name value; flags may repeat.
#ifndef KILN_TOOLS_COMMAND_LINE_H_
#define KILN_TOOLS_COMMAND_LINE_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

class CommandLine {
 public:
  // Parses argv[first..argc). `known` lists the accepted flag names (without "--"); `switches`
  // those that take no value. Unknown flags and positional arguments are InvalidArgument.
  static absl::StatusOr<CommandLine> Parse(int argc, char** argv, int first,
                                           const std::set<std::string>& known,
                                           const std::set<std::string>& switches);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  // The last value given for `name`, or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // Every value given for `name`, in order.
  std::vector<std::string> GetAll(const std::string& name) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace kiln

#endif  // KILN_TOOLS_COMMAND_LINE_H_
