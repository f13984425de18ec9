#include "distributed/rendezvous.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kiln {

absl::Status ValidateRendezvousOptions(const RendezvousOptions& options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: world size ", options.world_size, " must be at least 1"));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: rank ", options.rank, " is outside 0..", options.world_size - 1));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: timeout ", absl::FormatDuration(options.timeout), " must be positive"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RendezvousAddress> ParseRendezvousAddress(absl::string_view address) {
  RendezvousAddress out;
  const std::string shown(address);
  if (absl::ConsumePrefix(&address, "file://") || absl::ConsumePrefix(&address, "file:")) {
    if (address.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous address '", shown, "': the file path is empty"));
    }
    out.kind = RendezvousAddress::Kind::kFile;
    out.path = std::string(address);
    return out;
  }
  absl::ConsumePrefix(&address, "tcp://");
  if (absl::StrContains(address, "://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous address '", shown,
                     "': unknown scheme (HOST:PORT, tcp://HOST:PORT or file:PATH)"));
  }
  absl::string_view port;
  if (absl::ConsumePrefix(&address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous address '", shown, "': expected [IPv6]:PORT"));
    }
    out.host = std::string(address.substr(0, close));
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous address '", shown, "': no port (HOST:PORT)"));
    }
    out.host = std::string(address.substr(0, colon));
    port = address.substr(colon + 1);
    if (absl::StrContains(out.host, ":")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rendezvous address '", shown, "': an IPv6 address needs brackets ([::1]:PORT)"));
    }
  }
  if (out.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous address '", shown, "': no host"));
  }
  if (!absl::SimpleAtoi(port, &out.port) || out.port < 1 || out.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous address '", shown, "': port '", port,
                                                   "' is not a number in 1..65535"));
  }
  return out;
}

}  // namespace kiln
