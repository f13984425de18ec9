// OpenRendezvous: the Rendezvous an address names (TCP or a shared file; see rendezvous.h).
#ifndef KILN_DISTRIBUTED_OPEN_RENDEZVOUS_H_
#define KILN_DISTRIBUTED_OPEN_RENDEZVOUS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "distributed/rendezvous.h"

namespace kiln {

// The rendezvous at `address` for `options.rank`. Rank 0 of a TCP rendezvous starts listening
// here, so a peer that connects before rank 0 calls ShareFromRankZero is already queued.
absl::StatusOr<std::unique_ptr<Rendezvous>> OpenRendezvous(absl::string_view address,
                                                           const RendezvousOptions& options);

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_OPEN_RENDEZVOUS_H_
