#include "allocator/memory_store.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pdc {

absl::StatusOr<RecoveryReport> MemoryStore::Recover(const RecordVisitor& apply) {
  // Copy under the lock, replay without it: `apply` may be slow.
  std::optional<std::string> snapshot;
  std::vector<LoggedRecord> log;
  {
    absl::MutexLock lock(&mu_);
    snapshot = snapshot_;
    log = log_;
  }
  RecoveryReport report;
  uint64_t replayed_bytes = 0;
  if (snapshot) {
    ASSIGN_OR_RETURN(Record r, DecodeRecord(*snapshot));
    RETURN_IF_ERROR(apply(r));
    report.snapshot_revision = r.revision;
    report.last_revision = r.revision;
  }
  for (const LoggedRecord& logged : log) {
    ASSIGN_OR_RETURN(Record r, DecodeRecord(logged.bytes));
    if (r.revision <= report.last_revision) continue;
    RETURN_IF_ERROR(apply(r));
    report.last_revision = r.revision;
    ++report.records_replayed;
    replayed_bytes += logged.bytes.size();
  }
  absl::MutexLock lock(&mu_);
  last_revision_ = report.last_revision;
  checkpoint_revision_ = report.snapshot_revision;
  log_bytes_ = replayed_bytes;
  checkpoint_bytes_ = 0;
  return report;
}

absl::StatusOr<Store::Ticket> MemoryStore::Append(const Record& record) {
  absl::MutexLock lock(&mu_);
  if (record.revision != last_revision_ + 1) {
    return absl::InternalError(absl::StrCat("append of revision ", record.revision,
                                            " after ", last_revision_));
  }
  // Encode so the memory store exercises the same codec as the file store.
  log_.push_back(LoggedRecord{record.revision, EncodeRecord(record)});
  log_bytes_ += log_.back().bytes.size();
  last_revision_ = record.revision;
  return record.revision;
}

// An appended record is as durable as memory makes it; there is no I/O to
// wait for or to fail (tests inject failures with a wrapping Store).
absl::Status MemoryStore::Sync(Ticket) { return absl::OkStatus(); }

uint64_t MemoryStore::RecordsSinceCheckpoint() const {
  absl::MutexLock lock(&mu_);
  return last_revision_ - checkpoint_revision_;
}

uint64_t MemoryStore::BytesSinceCheckpoint() const {
  absl::MutexLock lock(&mu_);
  return log_bytes_ - checkpoint_bytes_;
}

absl::Status MemoryStore::BeginCheckpoint(uint64_t revision) {
  absl::MutexLock lock(&mu_);
  if (revision != last_revision_) {
    return absl::InternalError("checkpoint revision is not the last append");
  }
  checkpoint_revision_ = revision;
  checkpoint_bytes_ = log_bytes_;
  return absl::OkStatus();
}

absl::Status MemoryStore::WriteEncodedCheckpoint(uint64_t revision, std::string_view snapshot) {
  // Encoded, as a file would hold it; Recover decodes it. Copied, and the
  // old snapshot and records freed, outside the lock: Append, which the
  // allocator calls under its own lock, waits for this lock (at 40k claims
  // the copy and the frees took longer than the whole pause allowed for a
  // checkpoint).
  std::optional<std::string> written(std::in_place, snapshot);
  std::vector<LoggedRecord> covered;
  {
    absl::MutexLock lock(&mu_);
    snapshot_.swap(written);
    // The log is in revision order: the covered records are a prefix.
    const auto end = std::find_if(log_.begin(), log_.end(), [&](const LoggedRecord& r) {
      return r.revision > revision;
    });
    covered.assign(std::make_move_iterator(log_.begin()), std::make_move_iterator(end));
    log_.erase(log_.begin(), end);
  }
  return absl::OkStatus();
}

absl::Status MemoryStore::Health() const { return absl::OkStatus(); }

std::vector<Record> MemoryStore::LogForTest() const {
  absl::MutexLock lock(&mu_);
  std::vector<Record> out;
  for (const LoggedRecord& logged : log_) {
    auto r = DecodeRecord(logged.bytes);
    if (r.ok()) out.push_back(*std::move(r));
  }
  return out;
}

}  // namespace pdc
