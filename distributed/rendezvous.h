// Rendezvous: how the W processes of one data-parallel job find each other before NCCL can:
// rank 0 has a few bytes (NCCL's unique id, 128 opaque bytes) that every other rank needs. Two
// ways, chosen by the address:
//
//   HOST:PORT, tcp://HOST:PORT, [IPv6]:PORT   rank 0 listens on PORT (every interface of HOST's
//                                            address family); the others connect to HOST:PORT,
//                                            retrying until the timeout (tcp_rendezvous.h)
//   file:PATH, file://PATH                   a folder every rank can see (NFS...): files beside
//                                            PATH (file_rendezvous.h)
//
// Each rank states its rank and the world size; rank 0 checks that the world sizes agree, that
// no rank is claimed twice and that every rank joins within the timeout, and sends every rank
// either the bytes or the error, so a misconfigured job fails on every rank with the same
// message. The bytes are opaque: nothing here knows NCCL. OpenRendezvous (open_rendezvous.h)
// picks the implementation from the address.
#ifndef KILN_DISTRIBUTED_RENDEZVOUS_H_
#define KILN_DISTRIBUTED_RENDEZVOUS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kiln {

struct RendezvousOptions {
  int rank = 0;
  int world_size = 1;
  // How long any rank waits for the others (connecting, joining, answering) before it fails.
  absl::Duration timeout = absl::Minutes(5);
};

// InvalidArgument unless 1 <= world_size, 0 <= rank < world_size and the timeout is positive.
absl::Status ValidateRendezvousOptions(const RendezvousOptions& options);

// The largest blob a rendezvous carries (the NCCL id is 128 bytes; this bounds what a stray
// peer can make rank 0 allocate).
constexpr size_t kMaxRendezvousBlobBytes = 1 << 20;

struct RendezvousAddress {
  enum class Kind { kTcp, kFile };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp: a name or an address (IPv6 without its brackets)
  int port = 0;      // kTcp: 1..65535 (0, any free port, only for tests through TcpRendezvous)
  std::string path;  // kFile
};

// Parses the forms above. InvalidArgument naming the problem (no port, a port out of range, an
// empty path, an unknown scheme).
absl::StatusOr<RendezvousAddress> ParseRendezvousAddress(absl::string_view address);

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Gives rank 0's `blob` to every rank and returns it (on every rank, rank 0 included); the
  // other ranks' `blob` is ignored. Returns once every rank has it. Call once.
  virtual absl::StatusOr<std::string> ShareFromRankZero(const std::string& blob) = 0;
};

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_RENDEZVOUS_H_
