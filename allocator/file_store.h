// FileStore: the embedded, crash-safe Store (docs/design.md §8). One data
// directory holds
//   wal-<first revision>.log   log segments (framing in allocator/wal.h)
//   snapshot-<revision>.snap   the latest snapshot and the one before it
//   snapshot-<revision>.snap.unreadable  a snapshot recovery could not read,
//                              kept aside for inspection, never read again
//   LOCK                       flock()ed while a FileStore has it open
//
// Writes: Append encodes the record into an in-memory pending buffer under
// the store's mutex and returns at once (it runs under the allocator's lock).
// Sync is group commit: the first caller that finds its ticket not yet
// durable becomes the leader, takes everything pending, writes it with one
// write() per segment and one fdatasync, and wakes the others; a caller whose
// ticket the leader covered returns without any I/O of its own, the others
// elect the next leader. No thread of the store's own exists: the leader is
// whichever caller is in Sync (or WriteCheckpoint).
//
// Checkpoints: BeginCheckpoint(R) only queues a segment rotation; the next
// flush syncs the old segment, creates wal-<R+1>.log and fsyncs the
// directory before writing records > R. WriteCheckpoint(snapshot at R) makes
// sure that rotation happened, writes the snapshot atomically (temp file,
// fsync, rename, fsync directory), then keeps the previous snapshot P and the
// log after it, and deletes the snapshots before P and every segment whose
// successor starts at or below P+1 (it holds only records <= P). So the
// directory always holds two ways to the latest state: the newest snapshot
// and the log after it, or the previous snapshot (none: revision 0) and the
// log after that. A failed snapshot write changes nothing durable and is not
// sticky: appends go on, and the checkpoint is due again at once.
//
// Recovery: the latest snapshot, then the records > its revision from the
// segments in order, each revision exactly one above the previous. A
// snapshot that cannot be decoded (DataLoss: a bad checksum, a wrong
// revision) is skipped for the one before it (or none), reported in
// RecoveryReport::skipped_snapshots, and renamed *.unreadable once recovery
// succeeded; the log the older snapshot needs is still there. A torn last
// record of the last segment is dropped, reported in
// RecoveryReport::torn_tail and cut off the file before new appends; any
// other damage (see wal.h for how the two are told apart), or a missing
// revision, is DataLoss naming the file and offset.
//
// Failure policy (store.h): the first log write or sync error is sticky;
// Health() returns it and every later Append, Sync, BeginCheckpoint,
// WriteCheckpoint fails with it. The process must restart and recover. A
// snapshot write error is returned, not sticky.
//
// Thread-safety: all methods are thread-safe; see store.h for the protocol.
#ifndef PDC_ALLOCATOR_FILE_STORE_H_
#define PDC_ALLOCATOR_FILE_STORE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "allocator/store.h"
#include "allocator/wal.h"

namespace pdc {

struct FileStoreOptions {
  // Seam for fault injection; nullptr means the real system calls. Must
  // outlive the store.
  wal::FileOps* file_ops = nullptr;
};

class FileStore final : public Store {
 public:
  // Counters for tests and metrics.
  struct Stats {
    uint64_t syncs = 0;    // fdatasync calls on log segments.
    uint64_t records = 0;  // Records written to the log and synced.
    uint64_t segments_created = 0;
    uint64_t snapshots_written = 0;
  };

  // Creates `dir` when missing and locks it (FailedPrecondition when another
  // FileStore, in this process or another, has it open). Call Recover next.
  static absl::StatusOr<std::unique_ptr<FileStore>> Open(
      const std::string& dir, FileStoreOptions options = {});

  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  absl::StatusOr<RecoveryReport> Recover(const RecordVisitor& apply) override;
  absl::StatusOr<Ticket> Append(const Record& record) override;
  absl::Status Sync(Ticket ticket) override;
  uint64_t RecordsSinceCheckpoint() const override;
  uint64_t BytesSinceCheckpoint() const override;
  absl::Status BeginCheckpoint(uint64_t revision) override;
  absl::Status WriteEncodedCheckpoint(uint64_t revision, std::string_view snapshot) override;
  absl::Status Health() const override;

  Stats GetStats() const;
  const std::string& dir() const { return dir_; }

 private:
  // Records queued for one segment: the one being written, or (new_segment)
  // a segment to create first, whose first revision is `first_revision`.
  struct Batch {
    uint64_t first_revision = 0;
    bool new_segment = false;
    uint64_t records = 0;
    std::string frames;
  };

  FileStore(std::string dir, wal::FileOps* ops, int lock_fd);

  // Replays the segments (first revisions, ascending) after the snapshot
  // in *report; sets *tail_size to the length of the valid part of the last
  // segment (where a torn tail is cut off) and *replayed_bytes to the bytes
  // of the frames replayed.
  absl::Status ReplaySegments(const std::vector<uint64_t>& segments,
                              const RecordVisitor& apply,
                              RecoveryReport* report,
                              uint64_t* tail_size, uint64_t* replayed_bytes) const;
  // Waits until every record up to `revision` is durable and, when
  // `rotated`, every segment rotation queued at or below revision + 1 has
  // been made on disk; leads flushes while no other thread does. Returns the
  // sticky error if there is one.
  absl::Status WaitDurableLocked(uint64_t revision, bool rotated)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RotationPendingLocked(uint64_t up_to) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes and syncs everything pending; releases mu_ during the I/O.
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The I/O part of a flush. Runs without mu_, by the one flushing thread.
  absl::Status WriteBatches(const std::deque<Batch>& batches, Stats* delta,
                            uint64_t* active_segment);
  // The snapshot at `revision`, read and checked; DataLoss naming the file
  // when it cannot be decoded.
  absl::StatusOr<Record> ReadSnapshot(uint64_t revision) const;
  // After a snapshot at `revision`: deletes the snapshots before the
  // previous one and the segments that previous one covers.
  absl::Status DeleteCovered(uint64_t revision);
  std::string PathOf(const std::string& name) const;

  const std::string dir_;
  wal::FileOps* const ops_;
  const int lock_fd_;

  mutable absl::Mutex mu_;
  absl::CondVar flushed_;  // Signalled when a flush ends.
  bool recovered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  uint64_t last_revision_ ABSL_GUARDED_BY(mu_) = 0;     // Last Append.
  uint64_t durable_revision_ ABSL_GUARDED_BY(mu_) = 0;  // Last synced.
  uint64_t checkpoint_revision_ ABSL_GUARDED_BY(mu_) = 0;  // Last BeginCheckpoint.
  uint64_t snapshot_revision_ ABSL_GUARDED_BY(mu_) = 0;    // Last snapshot written.
  // Frame bytes appended in all (since recovery, counting the replayed
  // ones), at the last BeginCheckpoint, and at the last snapshot written.
  uint64_t log_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t checkpoint_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t snapshot_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // First revision of the segment the next Append goes to (maybe queued).
  uint64_t tail_segment_first_ ABSL_GUARDED_BY(mu_) = 1;
  // First revision of the segment file being written (created on disk).
  uint64_t active_segment_first_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<Batch> pending_ ABSL_GUARDED_BY(mu_);
  bool flushing_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);

  // Used only by the thread that set flushing_ (or by Recover, before any
  // flush can start), so it needs no lock of its own.
  std::unique_ptr<wal::SegmentWriter> writer_;

  // Serialises WriteCheckpoint calls.
  absl::Mutex checkpoint_mu_ ABSL_ACQUIRED_BEFORE(mu_);
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_FILE_STORE_H_
