#include "distributed/open_rendezvous.h"

#include <utility>

#include "distributed/file_rendezvous.h"
#include "distributed/tcp_rendezvous.h"
#include "base/status_macros.h"

namespace kiln {

absl::StatusOr<std::unique_ptr<Rendezvous>> OpenRendezvous(absl::string_view address,
                                                           const RendezvousOptions& options) {
  KILN_RETURN_IF_ERROR(ValidateRendezvousOptions(options));
  KILN_ASSIGN_OR_RETURN(RendezvousAddress parsed, ParseRendezvousAddress(address));
  if (parsed.kind == RendezvousAddress::Kind::kFile) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<FileRendezvous> file,
                          FileRendezvous::Open(parsed.path, options));
    return std::unique_ptr<Rendezvous>(std::move(file));
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<TcpRendezvous> tcp,
                        TcpRendezvous::Open(parsed.host, parsed.port, options));
  return std::unique_ptr<Rendezvous>(std::move(tcp));
}

}  // namespace kiln
