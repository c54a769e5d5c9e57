// FaultyStore: a Store (allocator/store.h) that forwards to a real one and
// fails when a test says so, to exercise the allocator's side of the
// store's failure policy without a disk that breaks.
//   FailNextAppend(s): the next Append returns `s` and queues nothing; later
//     calls are forwarded again (a refused record: over the size limit, or a
//     lost race on a shared store).
//   FailNextSync(s): the next Sync returns `s`, and from then on every
//     Append, Sync, BeginCheckpoint and WriteEncodedCheckpoint returns `s`
//     without reaching the wrapped store, and Health() reports it: the
//     store.h policy after an I/O error (as FileStore does after a failed
//     fsync).
//   FailNextCheckpointWrite(s): the next WriteEncodedCheckpoint returns `s`
//     without reaching the wrapped store; nothing else changes (a failed
//     snapshot write is not sticky). checkpoint_writes() counts the ones that
//     reached it.
// Tests using it link pdc_allocator.
// Thread-safety: thread-safe when the wrapped store is; calls to the wrapped
// store are made without holding this wrapper's lock, so concurrent Syncs
// still share the wrapped store's group commit.
#ifndef PDC_TESTS_TESTING_FAULTY_STORE_H_
#define PDC_TESTS_TESTING_FAULTY_STORE_H_

#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "allocator/store.h"

namespace pdc::testing {

class FaultyStore final : public Store {
 public:
  // `store` must outlive this wrapper.
  explicit FaultyStore(Store* store) : store_(store) {}

  void FailNextAppend(absl::Status error) {
    absl::MutexLock lock(&mu_);
    next_append_ = std::move(error);
  }
  void FailNextSync(absl::Status error) {
    absl::MutexLock lock(&mu_);
    next_sync_ = std::move(error);
  }
  void FailNextCheckpointWrite(absl::Status error) {
    absl::MutexLock lock(&mu_);
    next_checkpoint_write_ = std::move(error);
  }
  int checkpoint_writes() const {
    absl::MutexLock lock(&mu_);
    return checkpoint_writes_;
  }

  absl::StatusOr<RecoveryReport> Recover(const RecordVisitor& apply) override {
    return store_->Recover(apply);
  }

  absl::StatusOr<Ticket> Append(const Record& record) override {
    {
      absl::MutexLock lock(&mu_);
      if (!failed_.ok()) return failed_;
      if (!next_append_.ok()) {
        return std::exchange(next_append_, absl::OkStatus());
      }
    }
    return store_->Append(record);
  }

  absl::Status Sync(Ticket ticket) override {
    {
      absl::MutexLock lock(&mu_);
      if (!next_sync_.ok()) {
        failed_ = std::exchange(next_sync_, absl::OkStatus());
      }
      if (!failed_.ok()) return failed_;
    }
    return store_->Sync(ticket);
  }

  uint64_t RecordsSinceCheckpoint() const override {
    return store_->RecordsSinceCheckpoint();
  }
  uint64_t BytesSinceCheckpoint() const override { return store_->BytesSinceCheckpoint(); }

  absl::Status BeginCheckpoint(uint64_t revision) override {
    if (absl::Status s = Failed(); !s.ok()) return s;
    return store_->BeginCheckpoint(revision);
  }

  absl::Status WriteEncodedCheckpoint(uint64_t revision,
                                      std::string_view snapshot) override {
    {
      absl::MutexLock lock(&mu_);
      if (!failed_.ok()) return failed_;
      if (!next_checkpoint_write_.ok()) {
        return std::exchange(next_checkpoint_write_, absl::OkStatus());
      }
      ++checkpoint_writes_;
    }
    return store_->WriteEncodedCheckpoint(revision, snapshot);
  }

  absl::Status Health() const override {
    if (absl::Status s = Failed(); !s.ok()) return s;
    return store_->Health();
  }

 private:
  absl::Status Failed() const {
    absl::MutexLock lock(&mu_);
    return failed_;
  }

  Store* const store_;
  mutable absl::Mutex mu_;
  absl::Status next_append_ ABSL_GUARDED_BY(mu_);
  absl::Status next_sync_ ABSL_GUARDED_BY(mu_);
  absl::Status next_checkpoint_write_ ABSL_GUARDED_BY(mu_);
  int checkpoint_writes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_FAULTY_STORE_H_
