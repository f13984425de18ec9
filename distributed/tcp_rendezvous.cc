#include "distributed/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

constexpr char kMagic[] = "KRDZ";
constexpr char kAck[] = "KACK";
constexpr uint32_t kVersion = 1;
constexpr size_t kHelloBytes = 16;  // magic, version, rank, world size

Clock::time_point DeadlineAfter(absl::Duration d) {
  return Clock::now() + std::chrono::nanoseconds(absl::ToInt64Nanoseconds(d));
}

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

std::string ErrnoText(int e) { return std::strerror(e); }

void PutU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out->push_back(static_cast<char>((v >> shift) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// A socket closed when it goes out of scope.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() { Reset(); }
  int get() const { return fd_; }
  // Gives up ownership: the caller closes the socket.
  int Release() { return std::exchange(fd_, -1); }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Writes all of `data` to the nonblocking socket `fd` before `deadline`.
absl::Status SendAll(int fd, const std::string& data, Clock::time_point deadline,
                     const std::string& who) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p = {fd, POLLOUT, 0};
      if (poll(&p, 1, RemainingMs(deadline)) == 0) {
        return absl::DeadlineExceededError(
            absl::StrCat("rendezvous: sending to ", who, " did not finish in time"));
      }
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat("rendezvous: sending to ", who, ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

// Reads exactly `bytes` bytes from the nonblocking socket `fd` before `deadline`;
// `waiting_for` says what a timeout means.
absl::StatusOr<std::string> RecvExactly(int fd, size_t bytes, Clock::time_point deadline,
                                        const std::string& who, const std::string& waiting_for) {
  std::string out(bytes, '\0');
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = recv(fd, &out[done], bytes - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat("rendezvous: ", who, " closed the connection"));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, RemainingMs(deadline)) == 0) {
        return absl::DeadlineExceededError(absl::StrCat("rendezvous: ", waiting_for));
      }
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat("rendezvous: receiving from ", who, ": ", ErrnoText(errno)));
  }
  return out;
}

std::string PeerAddress(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    port = ntohs(a->sin6_port);
  }
  return absl::StrCat(text, ":", port);
}

// The reply rank 0 sends: the blob (code 0) or an error.
std::string Reply(const absl::Status& status, const std::string& blob) {
  std::string out(kMagic, 4);
  const std::string& payload = status.ok() ? blob : std::string(status.message());
  PutU32(&out, static_cast<uint32_t>(status.code()));
  PutU32(&out, static_cast<uint32_t>(payload.size()));
  out += payload;
  return out;
}

// A connection to rank 0, before and after its hello.
struct Peer {
  UniqueFd fd;
  std::string where;  // its address
  std::string hello;  // the bytes of its hello received so far
  int rank = -1;      // once its hello is complete and accepted
};

}  // namespace

absl::StatusOr<std::unique_ptr<TcpRendezvous>> TcpRendezvous::Open(
    const std::string& host, int port, const RendezvousOptions& options) {
  KILN_RETURN_IF_ERROR(ValidateRendezvousOptions(options));
  if (port < 0 || port > 65535 || (port == 0 && options.rank != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: port ", port, " is not in 1..65535"));
  }
  std::unique_ptr<TcpRendezvous> r(new TcpRendezvous(host, port, options));
  if (options.rank != 0) return r;
  // Rank 0: the address family of `host`, then a listening socket on every interface of it.
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.c_str(), nullptr, &hints, &found); e != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: cannot resolve host '", host, "': ", gai_strerror(e)));
  }
  const int family = found->ai_family;
  freeaddrinfo(found);
  UniqueFd fd(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    return absl::UnavailableError(absl::StrCat("rendezvous: socket: ", ErrnoText(errno)));
  }
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_storage addr = {};
  socklen_t len = 0;
  if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    a->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in);
  }
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous: rank 0 cannot listen on port ", port, ": ", ErrnoText(errno)));
  }
  if (listen(fd.get(), std::max(16, options.world_size)) != 0) {
    return absl::UnavailableError(absl::StrCat("rendezvous: listen: ", ErrnoText(errno)));
  }
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    r->port_ = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  r->listen_fd_ = fd.Release();  // closed by ~TcpRendezvous
  return r;
}

TcpRendezvous::~TcpRendezvous() {
  if (listen_fd_ >= 0) close(listen_fd_);
}

absl::StatusOr<std::string> TcpRendezvous::ShareFromRankZero(const std::string& blob) {
  if (options_.rank != 0) return Join();
  if (blob.size() > kMaxRendezvousBlobBytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous: the blob has ", blob.size(),
                                                   " bytes; at most ", kMaxRendezvousBlobBytes));
  }
  return Serve(blob);
}

absl::StatusOr<std::string> TcpRendezvous::Serve(const std::string& blob) {
  const int world = options_.world_size;
  const Clock::time_point deadline = DeadlineAfter(options_.timeout);
  std::vector<Peer> pending;
  std::vector<Peer> joined(world);
  int joined_count = 0;
  std::vector<Peer> refused;  // the peer whose hello was the error
  absl::Status error;
  while (joined_count < world - 1 && error.ok()) {
    const int remaining = RemainingMs(deadline);
    if (remaining == 0) {
      std::vector<int> missing;
      for (int r = 1; r < world; ++r) {
        if (joined[r].fd.get() < 0) missing.push_back(r);
      }
      error = absl::DeadlineExceededError(absl::StrCat(
          "rendezvous: rank 0 waited ", absl::FormatDuration(options_.timeout), " on port ", port_,
          "; ", joined_count + 1, " of ", world, " ranks joined, missing rank",
          missing.size() == 1 ? " " : "s ", absl::StrJoin(missing, ", ")));
      break;
    }
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
    for (const Peer& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    for (const Peer& p : joined) {
      if (p.fd.get() >= 0) fds.push_back({p.fd.get(), POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), std::min(remaining, 1000)) < 0 && errno != EINTR) {
      error = absl::UnavailableError(absl::StrCat("rendezvous: poll: ", ErrnoText(errno)));
      break;
    }
    // A joined rank has nothing to say before the reply: readable means it went away.
    for (Peer& p : joined) {
      if (p.fd.get() < 0) continue;
      pollfd q = {p.fd.get(), POLLIN, 0};
      if (poll(&q, 1, 0) > 0) {
        error = absl::UnavailableError(absl::StrCat("rendezvous: rank ", p.rank, " (", p.where,
                                                    ") disconnected before every rank joined"));
        p.fd.Reset();
        --joined_count;
      }
    }
    // Hellos.
    for (size_t i = 0; i < pending.size() && error.ok();) {
      Peer& p = pending[i];
      char buffer[kHelloBytes];
      const ssize_t n = recv(p.fd.get(), buffer, kHelloBytes - p.hello.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        ++i;
        continue;
      }
      if (n <= 0) {  // closed before its hello: not one of ours, or gone; forget it
        pending.erase(pending.begin() + i);
        continue;
      }
      p.hello.append(buffer, static_cast<size_t>(n));
      const size_t known = std::min<size_t>(4, p.hello.size());
      if (p.hello.compare(0, known, kMagic, known) != 0) {
        pending.erase(pending.begin() + i);  // not a Kiln rank (a port scanner...): forget it
        continue;
      }
      if (p.hello.size() < kHelloBytes) {
        ++i;
        continue;
      }
      const uint32_t version = GetU32(&p.hello[4]);
      const int rank = static_cast<int>(GetU32(&p.hello[8]));
      const int size = static_cast<int>(GetU32(&p.hello[12]));
      if (version != kVersion) {
        error = absl::InvalidArgumentError(absl::StrCat("rendezvous: the peer at ", p.where,
                                                        " speaks protocol version ", version,
                                                        "; rank 0 speaks ", kVersion));
      } else if (size != world) {
        error = absl::InvalidArgumentError(absl::StrCat("rendezvous: rank ", rank, " (", p.where,
                                                        ") says the world size is ", size,
                                                        "; rank 0 says ", world));
      } else if (rank < 1 || rank >= world) {
        error = absl::InvalidArgumentError(absl::StrCat("rendezvous: the peer at ", p.where,
                                                        " claims rank ", rank, "; ranks 1..",
                                                        world - 1, " join rank 0"));
      } else if (joined[rank].fd.get() >= 0) {
        error = absl::InvalidArgumentError(absl::StrCat("rendezvous: rank ", rank,
                                                        " is claimed twice (by ",
                                                        joined[rank].where, " and ", p.where, ")"));
      }
      if (!error.ok()) {
        refused.push_back(std::move(p));
        pending.erase(pending.begin() + i);
        break;
      }
      p.rank = rank;
      joined[rank] = std::move(p);
      ++joined_count;
      pending.erase(pending.begin() + i);
    }
    // New connections.
    if (error.ok() && (fds[0].revents & POLLIN)) {
      while (true) {
        sockaddr_storage addr = {};
        socklen_t len = sizeof(addr);
        const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        Peer p;
        p.fd = UniqueFd(fd);
        p.where = PeerAddress(addr);
        pending.push_back(std::move(p));
      }
    }
  }
  if (!error.ok()) {
    // Everyone connected learns why, so every rank fails with rank 0's message.
    const std::string reply = Reply(error, "");
    const Clock::time_point soon = DeadlineAfter(absl::Seconds(2));
    for (std::vector<Peer>* group : {&joined, &refused, &pending}) {
      for (Peer& p : *group) {
        if (p.fd.get() >= 0) SendAll(p.fd.get(), reply, soon, p.where).IgnoreError();
      }
    }
    return error;
  }
  const std::string reply = Reply(absl::OkStatus(), blob);
  for (int r = 1; r < world; ++r) {
    KILN_RETURN_IF_ERROR(SendAll(joined[r].fd.get(), reply, deadline,
                                 absl::StrCat("rank ", r, " (", joined[r].where, ")")));
  }
  for (int r = 1; r < world; ++r) {
    const std::string who = absl::StrCat("rank ", r, " (", joined[r].where, ")");
    KILN_ASSIGN_OR_RETURN(std::string ack,
                          RecvExactly(joined[r].fd.get(), 4, deadline, who,
                                      absl::StrCat(who, " did not confirm receipt within ",
                                                   absl::FormatDuration(options_.timeout))));
    if (ack != kAck) {
      return absl::InvalidArgumentError(
          absl::StrCat("rendezvous: ", who, " sent an unexpected confirmation"));
    }
  }
  return blob;
}

absl::StatusOr<std::string> TcpRendezvous::Join() {
  const Clock::time_point deadline = DeadlineAfter(options_.timeout);
  const std::string target = absl::StrCat(host_, ":", port_);
  const std::string me = absl::StrCat("rank ", options_.rank);
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  UniqueFd fd;
  std::string last_error = "no attempt";
  int pause_ms = 50;
  while (fd.get() < 0) {
    addrinfo* found = nullptr;
    const int e = getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found);
    if (e != 0 && e != EAI_AGAIN) {
      return absl::InvalidArgumentError(absl::StrCat("rendezvous: ", me, " cannot resolve host '",
                                                     host_, "': ", gai_strerror(e)));
    }
    if (e != 0) last_error = gai_strerror(e);
    for (addrinfo* a = found; a != nullptr && fd.get() < 0; a = a->ai_next) {
      UniqueFd s(socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (s.get() < 0) {
        last_error = ErrnoText(errno);
        continue;
      }
      int err = 0;
      if (connect(s.get(), a->ai_addr, a->ai_addrlen) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
          pollfd p = {s.get(), POLLOUT, 0};
          if (poll(&p, 1, std::min(RemainingMs(deadline), 2000)) == 1) {
            socklen_t len = sizeof(err);
            getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          } else {
            err = ETIMEDOUT;
          }
        }
      }
      if (err == 0) {
        fd = std::move(s);
      } else {
        last_error = ErrnoText(err);
      }
    }
    if (found != nullptr) freeaddrinfo(found);
    if (fd.get() >= 0) break;
    if (RemainingMs(deadline) <= pause_ms) {
      return absl::DeadlineExceededError(
          absl::StrCat("rendezvous: ", me, " could not connect to rank 0 at ", target, " within ",
                       absl::FormatDuration(options_.timeout), ": ", last_error,
                       " (is rank 0 running, listening there, and reachable?)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min(pause_ms * 2, 1000);
  }
  std::string hello(kMagic, 4);
  PutU32(&hello, kVersion);
  PutU32(&hello, static_cast<uint32_t>(options_.rank));
  PutU32(&hello, static_cast<uint32_t>(options_.world_size));
  const std::string rank0 = absl::StrCat("rank 0 (", target, ")");
  KILN_RETURN_IF_ERROR(SendAll(fd.get(), hello, deadline, rank0));
  const std::string silence = absl::StrCat(me, " reached ", rank0, " but got no answer within ",
                                           absl::FormatDuration(options_.timeout), " (have all ",
                                           options_.world_size, " ranks started?)");
  KILN_ASSIGN_OR_RETURN(std::string header, RecvExactly(fd.get(), 12, deadline, rank0, silence));
  if (header.compare(0, 4, kMagic) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous: ", target, " is not a Kiln rendezvous (wrong magic)"));
  }
  const uint32_t code = GetU32(&header[4]);
  const uint32_t length = GetU32(&header[8]);
  if (length > kMaxRendezvousBlobBytes) {
    return absl::DataLossError(absl::StrCat("rendezvous: ", rank0, " announced ", length,
                                            " bytes; at most ", kMaxRendezvousBlobBytes));
  }
  KILN_ASSIGN_OR_RETURN(std::string payload,
                        RecvExactly(fd.get(), length, deadline, rank0, silence));
  if (code != 0) {
    const absl::StatusCode c =
        code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown;
    return absl::Status(c,
                        absl::StrCat("rendezvous: ", me, " was turned away by rank 0: ", payload));
  }
  KILN_RETURN_IF_ERROR(SendAll(fd.get(), std::string(kAck, 4), deadline, rank0));
  return payload;
}

}  // namespace kiln
