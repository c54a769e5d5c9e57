#include "allocator/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc {
namespace {

constexpr char kLockFileName[] = "LOCK";

absl::Status RecordLoss(std::string_view what, const std::string& path,
                        uint64_t offset, std::string_view problem) {
  return absl::DataLossError(absl::StrCat(Sv(what), " ", path, " at offset ",
                                          offset, ": ", Sv(problem)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Open(
    const std::string& dir, FileStoreOptions options) {
  wal::FileOps* ops =
      options.file_ops ? options.file_ops : wal::FileOps::Default();
  struct stat st;
  const bool existed = ::stat(dir.c_str(), &st) == 0;
  RETURN_IF_ERROR(MakeDirectories(dir));
  if (!existed) {
    // The new directory's own entry must be durable before anything in it
    // is acknowledged.
    const size_t slash = dir.find_last_of('/');
    const std::string parent = slash == std::string::npos ? "."
                               : slash == 0               ? "/"
                                            : dir.substr(0, slash);
    RETURN_IF_ERROR(ops->SyncDirectory(parent));
  }
  const std::string lock_path = dir + "/" + kLockFileName;
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return ErrnoStatus("open", lock_path, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data directory ", dir, " is in use by another pdc store (",
          lock_path, " is locked)"));
    }
    return ErrnoStatus("flock", lock_path, err);
  }
  return std::unique_ptr<FileStore>(new FileStore(dir, ops, fd));
}

FileStore::FileStore(std::string dir, wal::FileOps* ops, int lock_fd)
    : dir_(std::move(dir)), ops_(ops), lock_fd_(lock_fd) {}

FileStore::~FileStore() {
  writer_.reset();
  ::close(lock_fd_);  // Releases the flock.
}

std::string FileStore::PathOf(const std::string& name) const {
  return absl::StrCat(dir_, "/", name);
}

// --- Recovery --------------------------------------------------------------

absl::StatusOr<RecoveryReport> FileStore::Recover(const RecordVisitor& apply) {
  {
    absl::MutexLock lock(&mu_);
    if (recovered_)
      return absl::FailedPreconditionError("Recover called twice");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(dir_));
  std::vector<uint64_t> segments;
  std::vector<uint64_t> snapshots;
  std::vector<std::string> temps;
  for (const std::string& name : names) {
    if (auto first = wal::ParseSegmentFileName(name)) {
      segments.push_back(*first);
    } else if (auto rev = wal::ParseSnapshotFileName(name)) {
      snapshots.push_back(*rev);
    } else if (absl::StartsWith(name, "snapshot-") &&
               absl::EndsWith(name, ".tmp")) {
      temps.push_back(name);
    }
  }
  std::sort(segments.begin(), segments.end());
  std::sort(snapshots.begin(), snapshots.end());

  RecoveryReport report;
  // The newest snapshot that decodes; an unreadable one falls back to the
  // one before it (or to none), whose log WriteCheckpoint kept. Nothing is
  // applied before a snapshot decoded, so a fallback starts clean.
  std::vector<uint64_t> unreadable;
  for (auto it = snapshots.rbegin(); it != snapshots.rend(); ++it) {
    absl::StatusOr<Record> snapshot = ReadSnapshot(*it);
    if (!snapshot.ok()) {
      if (!absl::IsDataLoss(snapshot.status())) return snapshot.status();
      report.skipped_snapshots.push_back(std::string(snapshot.status().message()));
      unreadable.push_back(*it);
      continue;
    }
    RETURN_IF_ERROR(apply(*snapshot));
    report.snapshot_revision = *it;
    report.last_revision = *it;
    break;
  }

  uint64_t tail_size = 0;
  uint64_t replayed_bytes = 0;
  if (absl::Status replayed =
          ReplaySegments(segments, apply, &report, &tail_size, &replayed_bytes);
      !replayed.ok()) {
    if (report.skipped_snapshots.empty()) return replayed;
    return absl::Status(replayed.code(),
                        absl::StrCat(replayed.message(), " (recovering without the unreadable ",
                                     report.skipped_snapshots.front(), ")"));
  }
  // Set aside, so that the next checkpoint does not keep it as the previous
  // snapshot and no later recovery tries it again.
  for (uint64_t revision : unreadable) {
    const std::string path = PathOf(wal::SnapshotFileName(revision));
    if (::rename(path.c_str(), (path + ".unreadable").c_str()) != 0) {
      return ErrnoStatus("rename", path, errno);
    }
  }
  if (!unreadable.empty()) RETURN_IF_ERROR(ops_->SyncDirectory(dir_));

  // Where new records go: the last segment, cut after its last valid record,
  // or a fresh one.
  std::unique_ptr<wal::SegmentWriter> writer;
  uint64_t tail_first = report.last_revision + 1;
  uint64_t created = 0;
  if (!segments.empty()) {
    tail_first = segments.back();
    ASSIGN_OR_RETURN(
        writer, wal::SegmentWriter::OpenForAppend(
                    PathOf(wal::SegmentFileName(tail_first)), tail_size, ops_));
  } else {
    ASSIGN_OR_RETURN(writer,
                     wal::SegmentWriter::Create(
                         PathOf(wal::SegmentFileName(tail_first)), ops_));
    RETURN_IF_ERROR(ops_->SyncDirectory(dir_));
    created = 1;
  }
  // An unfinished snapshot from a crash during WriteCheckpoint; never read.
  for (const std::string& name : temps) ::unlink(PathOf(name).c_str());

  absl::MutexLock lock(&mu_);
  writer_ = std::move(writer);
  last_revision_ = report.last_revision;
  durable_revision_ = report.last_revision;
  checkpoint_revision_ = report.snapshot_revision;
  snapshot_revision_ = report.snapshot_revision;
  log_bytes_ = replayed_bytes;
  checkpoint_bytes_ = 0;
  snapshot_bytes_ = 0;
  tail_segment_first_ = tail_first;
  active_segment_first_ = tail_first;
  stats_.segments_created += created;
  recovered_ = true;
  return report;
}

absl::StatusOr<Record> FileStore::ReadSnapshot(uint64_t revision) const {
  const std::string path = PathOf(wal::SnapshotFileName(revision));
  ASSIGN_OR_RETURN(std::string file, ReadFileToString(path));
  ASSIGN_OR_RETURN(std::string_view payload, wal::DecodeSnapshotFile(file, path));
  absl::StatusOr<Record> snapshot = DecodeRecord(payload);
  if (!snapshot.ok()) {
    return RecordLoss("snapshot", path, wal::kSnapshotHeaderSize,
                      StdSv(snapshot.status().message()));
  }
  if (snapshot->revision != revision) {
    return RecordLoss("snapshot", path, wal::kSnapshotHeaderSize,
                      absl::StrCat("holds revision ", snapshot->revision, ", its name says ",
                                   revision));
  }
  return snapshot;
}

absl::Status FileStore::ReplaySegments(const std::vector<uint64_t>& segments,
                                       const RecordVisitor& apply,
                                       RecoveryReport* report,
                                       uint64_t* tail_size,
                                       uint64_t* replayed_bytes) const {
  const uint64_t snapshot = report->snapshot_revision;
  // Segments followed by one starting at or below snapshot + 1 hold only
  // records the snapshot covers (left over when a crash interrupted the
  // deletion in WriteCheckpoint): not even read.
  size_t first = 0;
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    if (segments[i + 1] <= snapshot + 1) first = i + 1;
  }
  for (size_t i = first; i < segments.size(); ++i) {
    const bool last = i + 1 == segments.size();
    const std::string path = PathOf(wal::SegmentFileName(segments[i]));
    if (segments[i] > report->last_revision + 1) {
      return RecordLoss("log segment", path, 0,
                        absl::StrCat("starts at revision ", segments[i],
                                     " but recovery reached only revision ",
                                     report->last_revision,
                                     ": the records between are missing"));
    }
    ASSIGN_OR_RETURN(std::string data, ReadFileToString(path));
    const wal::SegmentScan scan = wal::ScanSegment(data);
    for (const wal::Frame& frame : scan.frames) {
      if (frame.offset == 0 && frame.revision != segments[i]) {
        return RecordLoss(
            "log segment", path, 0,
            absl::StrCat("first record has revision ", frame.revision,
                         ", the file name says ", segments[i]));
      }
      if (frame.revision <= report->last_revision) {
        if (frame.revision <= snapshot) continue;  // In the snapshot.
        return RecordLoss("log segment", path, frame.offset,
                          absl::StrCat("revision ", frame.revision,
                                       " is out of order after revision ",
                                       report->last_revision));
      }
      if (frame.revision != report->last_revision + 1) {
        return RecordLoss(
            "log segment", path, frame.offset,
            absl::StrCat("revision gap: expected ", report->last_revision + 1,
                         ", found ", frame.revision));
      }
      absl::StatusOr<Record> record = DecodeRecord(frame.payload);
      if (!record.ok()) {
        return RecordLoss("log segment", path, frame.offset,
                          StdSv(record.status().message()));
      }
      if (record->revision != frame.revision) {
        return RecordLoss(
            "log segment", path, frame.offset,
            absl::StrCat("record holds revision ", record->revision,
                         ", its frame says ", frame.revision));
      }
      RETURN_IF_ERROR(apply(*record));
      report->last_revision = frame.revision;
      ++report->records_replayed;
      *replayed_bytes += wal::kHeaderSize + frame.payload.size();
    }
    switch (scan.end) {
      case wal::SegmentEnd::kClean:
        *tail_size = data.size();
        break;
      case wal::SegmentEnd::kCorrupt:
        return RecordLoss(
            "log segment", path, scan.bad_offset,
            absl::StrCat(scan.problem, "; a valid record follows at offset ",
                         scan.next_valid,
                         ", so this is corruption, not a torn write"));
      case wal::SegmentEnd::kTorn:
        if (!last) {
          return RecordLoss(
              "log segment", path, scan.bad_offset,
              absl::StrCat(scan.problem, " in a segment that is not the last"));
        }
        report->torn_tail = absl::StrCat(
            path, " at offset ", scan.bad_offset, ": dropped ",
            data.size() - scan.bad_offset, " bytes (", scan.problem, ")");
        *tail_size = scan.bad_offset;
        break;
    }
  }
  return absl::OkStatus();
}

// --- Appends and group commit ---------------------------------------------

absl::StatusOr<Store::Ticket> FileStore::Append(const Record& record) {
  // Encode and checksum before taking the lock; under it only a copy.
  const std::string payload = EncodeRecord(record);
  if (payload.size() > wal::kMaxPayload) {
    return absl::InvalidArgumentError(absl::StrCat(
        "record of revision ", record.revision, " is ", payload.size(),
        " bytes encoded, over the limit of ", wal::kMaxPayload));
  }
  std::string frame;
  wal::AppendFrame(record.revision, payload, &frame);

  absl::MutexLock lock(&mu_);
  if (!recovered_)
    return absl::FailedPreconditionError("Append before Recover");
  RETURN_IF_ERROR(failed_);
  if (record.revision != last_revision_ + 1) {
    return absl::InternalError(absl::StrCat(
        "append of revision ", record.revision, " after ", last_revision_));
  }
  if (pending_.empty())
    pending_.push_back(Batch{record.revision, false, 0, {}});
  Batch& batch = pending_.back();
  batch.frames.append(frame);
  ++batch.records;
  last_revision_ = record.revision;
  log_bytes_ += frame.size();
  return record.revision;
}

absl::Status FileStore::Sync(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  if (!recovered_) return absl::FailedPreconditionError("Sync before Recover");
  if (ticket > last_revision_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sync of ticket ", ticket, " beyond the last append ", last_revision_));
  }
  return WaitDurableLocked(ticket, /*rotated=*/false);
}

bool FileStore::RotationPendingLocked(uint64_t up_to) const {
  for (const Batch& batch : pending_) {
    if (batch.new_segment && batch.first_revision <= up_to) return true;
  }
  return false;
}

absl::Status FileStore::WaitDurableLocked(uint64_t revision, bool rotated) {
  for (;;) {
    RETURN_IF_ERROR(failed_);
    if (durable_revision_ >= revision &&
        !(rotated && RotationPendingLocked(revision + 1))) {
      return absl::OkStatus();
    }
    if (flushing_) {
      // A leader is writing; it may cover us. Re-check when it is done.
      flushed_.Wait(&mu_);
      continue;
    }
    // Everything up to last_revision_ is pending or durable, so one flush
    // covers `revision`.
    FlushLocked();
  }
}

void FileStore::FlushLocked() {
  flushing_ = true;
  std::deque<Batch> batches;
  batches.swap(pending_);
  const uint64_t target = last_revision_;
  uint64_t active = active_segment_first_;
  Stats delta;
  mu_.Unlock();
  absl::Status status = WriteBatches(batches, &delta, &active);
  mu_.Lock();
  flushing_ = false;
  stats_.syncs += delta.syncs;
  stats_.records += delta.records;
  stats_.segments_created += delta.segments_created;
  if (status.ok()) {
    durable_revision_ = target;
    active_segment_first_ = active;
  } else if (failed_.ok()) {
    failed_ = status;
  }
  flushed_.SignalAll();
}

absl::Status FileStore::WriteBatches(const std::deque<Batch>& batches,
                                     Stats* delta, uint64_t* active_segment) {
  bool dirty = false;
  uint64_t records = 0;
  for (const Batch& batch : batches) {
    if (batch.new_segment) {
      // The old segment is complete and synced before the new one exists, so
      // only the last segment can ever end in a torn record.
      if (dirty) {
        RETURN_IF_ERROR(writer_->Sync());
        ++delta->syncs;
        dirty = false;
      }
      ASSIGN_OR_RETURN(
          writer_,
          wal::SegmentWriter::Create(
              PathOf(wal::SegmentFileName(batch.first_revision)), ops_));
      RETURN_IF_ERROR(ops_->SyncDirectory(dir_));
      ++delta->segments_created;
      *active_segment = batch.first_revision;
    }
    if (!batch.frames.empty()) {
      RETURN_IF_ERROR(writer_->Append(batch.frames));
      dirty = true;
      records += batch.records;
    }
  }
  if (dirty) {
    RETURN_IF_ERROR(writer_->Sync());
    ++delta->syncs;
  }
  delta->records += records;
  return absl::OkStatus();
}

// --- Checkpoints -------------------------------------------------------------

uint64_t FileStore::RecordsSinceCheckpoint() const {
  absl::MutexLock lock(&mu_);
  return last_revision_ - checkpoint_revision_;
}

uint64_t FileStore::BytesSinceCheckpoint() const {
  absl::MutexLock lock(&mu_);
  return log_bytes_ - checkpoint_bytes_;
}

absl::Status FileStore::BeginCheckpoint(uint64_t revision) {
  absl::MutexLock lock(&mu_);
  if (!recovered_)
    return absl::FailedPreconditionError("checkpoint before Recover");
  RETURN_IF_ERROR(failed_);
  if (revision != last_revision_) {
    return absl::InternalError(absl::StrCat("checkpoint at revision ", revision,
                                            ", last append is ",
                                            last_revision_));
  }
  checkpoint_revision_ = revision;
  checkpoint_bytes_ = log_bytes_;
  // Nothing was appended since the last rotation: that segment starts at
  // revision + 1 already.
  if (tail_segment_first_ == revision + 1) return absl::OkStatus();
  pending_.push_back(Batch{revision + 1, true, 0, {}});
  tail_segment_first_ = revision + 1;
  return absl::OkStatus();
}

absl::Status FileStore::WriteEncodedCheckpoint(uint64_t revision, std::string_view snapshot) {
  absl::MutexLock checkpoint_lock(&checkpoint_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!recovered_)
      return absl::FailedPreconditionError("checkpoint before Recover");
    if (revision > last_revision_) {
      return absl::InternalError(absl::StrCat("snapshot at revision ", revision,
                                              " is ahead of the log at ",
                                              last_revision_));
    }
    // The segment rotation BeginCheckpoint queued must be on disk before the
    // segments it ends are deleted.
    RETURN_IF_ERROR(WaitDurableLocked(revision, /*rotated=*/true));
  }
  absl::Status written = ops_->WriteFileAtomically(
      PathOf(wal::SnapshotFileName(revision)),
      wal::EncodeSnapshotFile(snapshot));
  {
    absl::MutexLock lock(&mu_);
    if (!written.ok()) {
      // Not sticky: the log holds everything, appends go on, and counting
      // from the last snapshot written makes the checkpoint due again. The
      // rotation stays; recovery reads across segments.
      if (checkpoint_revision_ == revision) {
        checkpoint_revision_ = snapshot_revision_;
        checkpoint_bytes_ = snapshot_bytes_;
      }
      return written;
    }
    snapshot_revision_ = revision;
    if (checkpoint_revision_ == revision) snapshot_bytes_ = checkpoint_bytes_;
    ++stats_.snapshots_written;
  }
  return DeleteCovered(revision);
}

absl::Status FileStore::DeleteCovered(uint64_t revision) {
  // Failures here are returned but not sticky: the snapshot is durable and
  // the leftovers are ignored by recovery and deleted by the next checkpoint.
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(dir_));
  std::vector<uint64_t> segments;
  std::vector<uint64_t> older;  // Snapshots before `revision`.
  for (const std::string& name : names) {
    if (auto first = wal::ParseSegmentFileName(name)) {
      segments.push_back(*first);
    } else if (auto rev = wal::ParseSnapshotFileName(name); rev && *rev < revision) {
      older.push_back(*rev);
    }
  }
  // The previous snapshot stays, with the log after it (0: no snapshot, the
  // log from revision 1).
  std::sort(older.begin(), older.end());
  const uint64_t previous = older.empty() ? 0 : older.back();
  std::vector<std::string> doomed;
  for (uint64_t rev : older) {
    if (rev < previous) doomed.push_back(wal::SnapshotFileName(rev));
  }
  std::sort(segments.begin(), segments.end());
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    // Holds revisions below its successor's first, all <= previous.
    if (segments[i + 1] <= previous + 1) {
      doomed.push_back(wal::SegmentFileName(segments[i]));
    }
  }
  absl::Status status;
  for (const std::string& name : doomed) {
    const std::string path = PathOf(name);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT && status.ok()) {
      status = ErrnoStatus("unlink", path, errno);
    }
  }
  if (doomed.empty()) return status;
  absl::Status synced = ops_->SyncDirectory(dir_);
  return status.ok() ? synced : status;
}

absl::Status FileStore::Health() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

FileStore::Stats FileStore::GetStats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace pdc
