#include "distributed/fake_communicator.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

namespace {

// Sums element i of every rank's buffer in rank order into every buffer. The value type T is
// the dtype's storage; Acc is what it is summed in.
template <typename T, typename Acc, typename Load, typename Store>
void SumInto(const std::vector<void*>& buffers, int64_t count, bool average, Load load,
             Store store) {
  const int n = static_cast<int>(buffers.size());
  for (int64_t i = 0; i < count; ++i) {
    Acc acc = load(static_cast<const T*>(buffers[0])[i]);
    for (int r = 1; r < n; ++r) acc = acc + load(static_cast<const T*>(buffers[r])[i]);
    if (average) acc = acc / static_cast<Acc>(n);
    const T out = store(acc);
    for (int r = 0; r < n; ++r) static_cast<T*>(buffers[r])[i] = out;
  }
}

}  // namespace

// One rank's view of the group.
class FakeCommunicator : public Communicator {
 public:
  FakeCommunicator(std::shared_ptr<FakeCommunicatorGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }
  std::string Describe() const override {
    return absl::StrCat("fake (in-process, ", group_->world_size(), " ranks)");
  }

  absl::Status AllReduce(void* buffer, int64_t count, DataType dtype, ReduceOp op,
                         void* stream) override {
    if (absl::Status s = ValidateReduce(buffer, count, dtype, op); !s.ok()) return s;
    FakeCommunicatorGroup::Call call;
    call.kind = FakeCommunicatorGroup::Kind::kAllReduce;
    call.buffer = buffer;
    call.count = count;
    call.dtype = dtype;
    call.op = op;
    return Record(group_->Collective(rank_, call));
  }

  absl::Status Broadcast(void* buffer, int64_t count, DataType dtype, int root,
                         void* stream) override {
    if (absl::Status s = ValidateCollective("broadcast", buffer, count, dtype); !s.ok()) return s;
    if (absl::Status s = ValidateRoot(root, world_size()); !s.ok()) return s;
    FakeCommunicatorGroup::Call call;
    call.kind = FakeCommunicatorGroup::Kind::kBroadcast;
    call.buffer = buffer;
    call.count = count;
    call.dtype = dtype;
    call.root = root;
    return Record(group_->Collective(rank_, call));
  }

  absl::Status Barrier(void* stream) override {
    return Record(group_->Collective(rank_, FakeCommunicatorGroup::Call()));
  }

  // The operations completed inside their calls: the outcome of this rank's last one (a failure
  // of the group after it, say a peer dying later, is for the next call to report).
  absl::Status Wait(void* stream) override { return last_; }

  void Abort(absl::string_view reason) override {
    std::lock_guard<std::mutex> lock(group_->mu_);
    group_->Fail(absl::AbortedError(
        absl::StrCat("fake communicator: aborted by rank ", rank_, ": ", reason)));
  }

  absl::Duration timeout() const override { return group_->options_.timeout; }

 private:
  absl::Status Record(absl::Status status) {
    if (last_.ok()) last_ = status;
    return status;
  }

  std::shared_ptr<FakeCommunicatorGroup> group_;
  const int rank_;
  absl::Status last_;  // the first failure of this rank's calls (OK while none failed)
};

absl::StatusOr<std::shared_ptr<FakeCommunicatorGroup>> FakeCommunicatorGroup::Create(
    int world_size, const FakeCommunicatorOptions& options) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("fake communicator: world size ", world_size, " must be at least 1"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fake communicator: timeout ", absl::FormatDuration(options.timeout), " must be positive"));
  }
  return std::shared_ptr<FakeCommunicatorGroup>(new FakeCommunicatorGroup(world_size, options));
}

FakeCommunicatorGroup::FakeCommunicatorGroup(int world_size, const FakeCommunicatorOptions& options)
    : world_size_(world_size),
      options_(options),
      buffers_(world_size, nullptr),
      arrived_(world_size, false),
      taken_(world_size, false),
      dead_(world_size, false),
      calls_(world_size, 0),
      kill_at_(world_size, -1),
      kill_fault_(world_size, FakeFault::kSilent) {}

absl::StatusOr<std::unique_ptr<Communicator>> FakeCommunicatorGroup::TakeRank(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= world_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("fake communicator: rank ", rank, " is outside a group of ", world_size_));
  }
  if (taken_[rank]) {
    return absl::FailedPreconditionError(
        absl::StrCat("fake communicator: rank ", rank, " was taken already"));
  }
  taken_[rank] = true;
  return std::unique_ptr<Communicator>(new FakeCommunicator(shared_from_this(), rank));
}

void FakeCommunicatorGroup::Kill(int rank, FakeFault fault) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= world_size_) return;
  KillLocked(rank, fault);
}

void FakeCommunicatorGroup::KillAfter(int rank, int64_t collectives, FakeFault fault) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= world_size_) return;
  kill_at_[rank] = collectives;
  kill_fault_[rank] = fault;
  if (calls_[rank] >= collectives) KillLocked(rank, fault);
}

void FakeCommunicatorGroup::KillLocked(int rank, FakeFault fault) {
  dead_[rank] = true;
  if (fault == FakeFault::kConnectionLost) {
    Fail(absl::UnavailableError(absl::StrCat("fake communicator: lost the connection to rank ",
                                             rank, " (fault injection)")));
  }
}

int64_t FakeCommunicatorGroup::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

absl::Status FakeCommunicatorGroup::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void FakeCommunicatorGroup::Fail(absl::Status status) {
  if (failure_.ok()) failure_ = std::move(status);
  cv_.notify_all();
}

std::string FakeCommunicatorGroup::Describe(const Call& call) {
  switch (call.kind) {
    case Kind::kAllReduce:
      return absl::StrCat("all-reduce (", ReduceOpName(call.op), ") of ", call.count, " ",
                          DataTypeName(call.dtype));
    case Kind::kBroadcast:
      return absl::StrCat("broadcast from rank ", call.root, " of ", call.count, " ",
                          DataTypeName(call.dtype));
    case Kind::kBarrier:
      return "barrier";
  }
  return "?";
}

absl::Status FakeCommunicatorGroup::Collective(int rank, const Call& call) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!failure_.ok()) return failure_;
  if (kill_at_[rank] >= 0 && calls_[rank] >= kill_at_[rank] && !dead_[rank]) {
    KillLocked(rank, kill_fault_[rank]);
  }
  if (dead_[rank]) {
    return absl::AbortedError(
        absl::StrCat("fake communicator: rank ", rank, " was killed (fault injection)"));
  }
  const int64_t collective = generation_;
  ++calls_[rank];
  if (arrivals_ == 0) {
    first_ = call;
    first_rank_ = rank;
  } else if (call.kind != first_.kind || call.count != first_.count ||
             (call.kind != Kind::kBarrier && call.dtype != first_.dtype) ||
             (call.kind == Kind::kAllReduce && call.op != first_.op) ||
             (call.kind == Kind::kBroadcast && call.root != first_.root)) {
    Fail(absl::InvalidArgumentError(
        absl::StrCat("fake communicator: collective #", collective, ": rank ", rank, " calls ",
                     Describe(call), " but rank ", first_rank_, " called ", Describe(first_))));
    return failure_;
  }
  buffers_[rank] = call.buffer;
  arrived_[rank] = true;
  ++arrivals_;
  if (arrivals_ == world_size_) {
    Execute();
    ++generation_;
    arrivals_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    cv_.notify_all();
    return absl::OkStatus();
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::nanoseconds(absl::ToInt64Nanoseconds(options_.timeout));
  const bool woken =
      cv_.wait_until(lock, deadline, [&] { return generation_ > collective || !failure_.ok(); });
  if (generation_ > collective) return absl::OkStatus();
  if (woken) return failure_;
  std::vector<int> missing;
  for (int r = 0; r < world_size_; ++r) {
    if (!arrived_[r]) missing.push_back(r);
  }
  Fail(absl::DeadlineExceededError(
      absl::StrCat("fake communicator: rank ", rank, " waited ",
                   absl::FormatDuration(options_.timeout), " in collective #", collective, " (",
                   Describe(call), ") for rank", missing.size() == 1 ? " " : "s ",
                   absl::StrJoin(missing, ", "), ", which never arrived (dead or stuck)")));
  return failure_;
}

void FakeCommunicatorGroup::Execute() {
  const Call& c = first_;
  if (c.kind == Kind::kBarrier || c.count == 0) return;
  const size_t bytes = static_cast<size_t>(c.count) * DataTypeSize(c.dtype);
  if (c.kind == Kind::kBroadcast) {
    for (int r = 0; r < world_size_; ++r) {
      if (r != c.root && buffers_[r] != buffers_[c.root]) {
        std::memcpy(buffers_[r], buffers_[c.root], bytes);
      }
    }
    return;
  }
  const bool average = c.op == ReduceOp::kAverage;
  auto same = [](auto v) { return v; };
  switch (c.dtype) {
    case DataType::kF32:
      SumInto<float, float>(buffers_, c.count, average, same, same);
      break;
    case DataType::kF16:
      SumInto<uint16_t, float>(buffers_, c.count, average, HalfToFloat, FloatToHalf);
      break;
    case DataType::kBF16:
      SumInto<uint16_t, float>(buffers_, c.count, average, BFloat16ToFloat, FloatToBFloat16);
      break;
    case DataType::kI32:  // two's complement wrap-around, as NCCL's integer sums
      SumInto<int32_t, uint32_t>(
          buffers_, c.count, false, [](int32_t v) { return static_cast<uint32_t>(v); },
          [](uint32_t v) { return static_cast<int32_t>(v); });
      break;
    case DataType::kU8:
      SumInto<uint8_t, uint32_t>(
          buffers_, c.count, false, [](uint8_t v) { return static_cast<uint32_t>(v); },
          [](uint32_t v) { return static_cast<uint8_t>(v); });
      break;
  }
}

}  // namespace kiln
