// Store: where the allocator's durable state lives. The allocator is the only
// writer of its store; every mutation it acknowledges has been made durable
// through this interface first.
//
// Protocol, for one allocator:
//   1. Recover() once, before anything else: the store replays the latest
//      snapshot and then every later record, in revision order.
//   2. For each mutation, under the allocator's lock: Append(record), whose
//      revision is exactly the previous one + 1. Append only queues the
//      record, so the log order is the order the allocator applied them.
//   3. Outside the lock: Sync(ticket) blocks until that record and all before
//      it are durable. Concurrent Sync calls share one flush (group commit).
//   4. From time to time: BeginCheckpoint() under the lock, held at least
//      shared so that no Append runs meanwhile (the cut is exact), then
//      WriteCheckpoint(snapshot) outside it. One checkpoint at a time.
//      Appends go on between the two: the snapshot holds the state at the
//      cut, the records after it stay in the log after it.
//
// How a shared store (etcd) maps onto this: Append is a transaction that
// compares the store's revision key with record.revision - 1 and fails with
// Aborted when another replica wrote first (the allocator then reports the
// race to its caller and reloads); Sync waits for the transaction; change
// notifications from a watch are delivered to the allocator as Records through
// Allocator::ApplyExternal (not needed by the single-writer stores here).
//
// Failure policy: an I/O error on Sync makes the store fail permanently
// (every later Append/Sync returns the same error). The in-memory state may
// then be ahead of the disk, so the process must restart and recover; the
// extender reports itself unhealthy. Retrying fsync after an error is unsafe
// on Linux (the kernel may have dropped the dirty pages). A failed snapshot
// write is not such an error: the log still holds every record, so writes go
// on and the next checkpoint tries again.
//
// Thread-safety: Append is called under the allocator's writer lock,
// BeginCheckpoint under its lock held shared or exclusive (never concurrently
// with an Append or another BeginCheckpoint); Sync, WriteCheckpoint, Failed
// from any thread concurrently.
#ifndef PDC_ALLOCATOR_STORE_H_
#define PDC_ALLOCATOR_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allocator/record.h"

namespace pdc {

struct RecoveryReport {
  uint64_t snapshot_revision = 0;  // 0: no snapshot.
  uint64_t records_replayed = 0;
  uint64_t last_revision = 0;
  // A torn last record (a crash during an unacknowledged append) is dropped
  // and described here; "" when the log ended cleanly.
  std::string torn_tail;
  // Snapshots that could not be read, newest first, each with why; recovery
  // started from an older one (whose log the store keeps for this).
  std::vector<std::string> skipped_snapshots;
};

class Store {
 public:
  using Ticket = uint64_t;
  using RecordVisitor = std::function<absl::Status(const Record&)>;

  virtual ~Store() = default;

  // Calls `apply` with the latest snapshot (one record of puts; skipped when
  // there is none) and then each later record in revision order. A corrupt
  // record anywhere but at the very end is DataLoss naming the file and offset.
  // REQUIRES: called once, before any other method.
  virtual absl::StatusOr<RecoveryReport> Recover(const RecordVisitor& apply) = 0;

  // Queues `record` for durability and returns its ticket. Does not block on
  // I/O. REQUIRES: record.revision == previous revision + 1.
  virtual absl::StatusOr<Ticket> Append(const Record& record) = 0;

  // Returns once the record with `ticket` and every earlier one are durable.
  virtual absl::Status Sync(Ticket ticket) = 0;

  // Records appended since the last checkpoint, and their encoded bytes
  // (the log's growth since).
  virtual uint64_t RecordsSinceCheckpoint() const = 0;
  virtual uint64_t BytesSinceCheckpoint() const = 0;

  // Marks the point a snapshot at `revision` will cover: later Appends go to
  // a new log segment. REQUIRES: revision == revision of the last Append.
  virtual absl::Status BeginCheckpoint(uint64_t revision) = 0;

  // Durably writes a snapshot at `revision` (covering everything up to it,
  // as passed to BeginCheckpoint), given encoded (EncodeRecord of a record
  // of puts), and then drops what recovery can no longer need. On an error
  // nothing durable is lost and the store stays healthy; Records/
  // BytesSinceCheckpoint count again from the last snapshot written.
  virtual absl::Status WriteEncodedCheckpoint(uint64_t revision, std::string_view snapshot) = 0;
  // The same for a snapshot Record.
  absl::Status WriteCheckpoint(const Record& snapshot) {
    return WriteEncodedCheckpoint(snapshot.revision, EncodeRecord(snapshot));
  }

  // The sticky error after an I/O failure; OK while the store is healthy.
  virtual absl::Status Health() const = 0;
};

}  // namespace pdc

#endif  // PDC_ALLOCATOR_STORE_H_
