// MemoryStore: a Store that keeps records in memory. Used by tests, by the
// simulator, and by `--store=memory` for throwaway runs. A second Allocator
// opened on the same MemoryStore recovers what the first one wrote, which
// lets tests exercise recovery without files.
// Thread-safety: all methods are thread-safe.
#ifndef PDC_ALLOCATOR_MEMORY_STORE_H_
#define PDC_ALLOCATOR_MEMORY_STORE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "allocator/store.h"

namespace pdc {

class MemoryStore final : public Store {
 public:
  MemoryStore() = default;

  absl::StatusOr<RecoveryReport> Recover(const RecordVisitor& apply) override;
  absl::StatusOr<Ticket> Append(const Record& record) override;
  absl::Status Sync(Ticket ticket) override;
  uint64_t RecordsSinceCheckpoint() const override;
  uint64_t BytesSinceCheckpoint() const override;
  absl::Status BeginCheckpoint(uint64_t revision) override;
  absl::Status WriteEncodedCheckpoint(uint64_t revision, std::string_view snapshot) override;
  absl::Status Health() const override;

  // Records in the log (after the snapshot), for tests.
  std::vector<Record> LogForTest() const;

 private:
  mutable absl::Mutex mu_;
  std::optional<std::string> snapshot_ ABSL_GUARDED_BY(mu_);  // Encoded.
  struct LoggedRecord {
    uint64_t revision = 0;  // Kept beside the bytes: a checkpoint need not decode.
    std::string bytes;      // The encoded record.
  };
  std::vector<LoggedRecord> log_ ABSL_GUARDED_BY(mu_);
  uint64_t last_revision_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t checkpoint_revision_ ABSL_GUARDED_BY(mu_) = 0;
  // Encoded bytes appended in all, and at the last checkpoint.
  uint64_t log_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t checkpoint_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_MEMORY_STORE_H_
