// The TCP rendezvous (HOST:PORT): rank 0 listens, the others connect with retries until the
// timeout. The conversation, all integers 32-bit big-endian:
//
//   rank r -> rank 0   "KRDZ" version(1) r world_size         (hello)
//   rank 0 -> rank r   "KRDZ" code length bytes               (code 0: bytes is the blob;
//                                                             else an absl::StatusCode and the
//                                                             error's message)
//   rank r -> rank 0   "KACK"                                 (received: rank 0 returns only
//                                                             once every rank has the blob)
//
// Rank 0 waits until every rank 1..W-1 has said hello, checking each against the others (same
// world size, a rank in range and not claimed twice); on any error, or at the timeout, it sends
// the error to every connected rank and returns it. Connections that do not start with the
// magic (a port scanner) are closed and ignored.
#ifndef KILN_DISTRIBUTED_TCP_RENDEZVOUS_H_
#define KILN_DISTRIBUTED_TCP_RENDEZVOUS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "distributed/rendezvous.h"

namespace kiln {

class TcpRendezvous : public Rendezvous {
 public:
  // Rank 0 binds `port` on every interface of `host`'s address family (port 0: a free port the
  // system picks; port() tells which) and listens; other ranks only remember where to connect.
  // Unavailable when the port cannot be bound (in use...), InvalidArgument when `host` does not
  // resolve (rank 0 resolves it to learn the family).
  static absl::StatusOr<std::unique_ptr<TcpRendezvous>> Open(const std::string& host, int port,
                                                             const RendezvousOptions& options);
  ~TcpRendezvous() override;

  // The port rank 0 listens on (the one given, or the one the system picked for 0).
  int port() const { return port_; }

  absl::StatusOr<std::string> ShareFromRankZero(const std::string& blob) override;

 private:
  TcpRendezvous(std::string host, int port, const RendezvousOptions& options)
      : host_(std::move(host)), port_(port), options_(options) {}
  absl::StatusOr<std::string> Serve(const std::string& blob);
  absl::StatusOr<std::string> Join();

  std::string host_;
  int port_ = 0;
  RendezvousOptions options_;
  int listen_fd_ = -1;  // rank 0
};

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_TCP_RENDEZVOUS_H_
