// The shared-file rendezvous (file:PATH), for clusters where the ranks share a file system but
// not a reachable port. Files beside PATH:
//
//   PATH.rank<r>   each rank's "I am here": the world size it was given and a random nonce,
//                  created atomically and exclusively (written under a temporary name, then
//                  hard-linked), so two processes claiming one rank cannot both succeed
//   PATH           rank 0's answer, written once every rank file is there (temporary name, then
//                  rename): the nonce of every rank and the blob (hex), or an error
//
// A rank accepts an answer only when it carries its own nonce, so an answer left by an earlier
// run is never mistaken for this one. A rank that has read the answer removes its rank file;
// rank 0 waits for that (every rank has the blob), then removes its own file and the answer. A
// rank file left by a crashed run makes the next run fail at once with AlreadyExists naming it.
#ifndef KILN_DISTRIBUTED_FILE_RENDEZVOUS_H_
#define KILN_DISTRIBUTED_FILE_RENDEZVOUS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "distributed/rendezvous.h"

namespace kiln {

class FileRendezvous : public Rendezvous {
 public:
  // Checks the options and that PATH's folder exists; the files are made by ShareFromRankZero.
  static absl::StatusOr<std::unique_ptr<FileRendezvous>> Open(const std::string& path,
                                                              const RendezvousOptions& options);

  absl::StatusOr<std::string> ShareFromRankZero(const std::string& blob) override;

 private:
  FileRendezvous(std::string path, const RendezvousOptions& options)
      : path_(std::move(path)), options_(options) {}
  std::string RankFile(int rank) const;
  absl::StatusOr<std::string> Serve(const std::string& blob, const std::string& nonce);
  absl::StatusOr<std::string> Join(const std::string& nonce);

  std::string path_;
  RendezvousOptions options_;
};

}  // namespace kiln

#endif  // KILN_DISTRIBUTED_FILE_RENDEZVOUS_H_
