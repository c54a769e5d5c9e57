// TimedStore: a Store decorator that forwards every call and observes how
// long Sync (the fsync of a group commit) takes, for
// pdc_store_sync_duration_seconds. The extender wraps whatever store it
// opened (file or memory) before handing it to Allocator::Open.
// Thread-safety: as thread-safe as the wrapped store.
#ifndef PDC_EXTENDER_TIMED_STORE_H_
#define PDC_EXTENDER_TIMED_STORE_H_

#include "allocator/store.h"
#include "common/clock.h"
#include "common/metrics.h"

namespace pdc::extender {

class TimedStore final : public Store {
 public:
  // `inner`, `clock` and `sync_seconds` (may be null) outlive this object.
  TimedStore(Store* inner, const Clock* clock, Histogram* sync_seconds)
      : inner_(inner), clock_(clock), sync_seconds_(sync_seconds) {}

  absl::StatusOr<RecoveryReport> Recover(const RecordVisitor& apply) override {
    return inner_->Recover(apply);
  }
  absl::StatusOr<Ticket> Append(const Record& record) override {
    return inner_->Append(record);
  }
  absl::Status Sync(Ticket ticket) override {
    ScopedHistogramTimer timer(sync_seconds_, clock_);
    return inner_->Sync(ticket);
  }
  uint64_t RecordsSinceCheckpoint() const override {
    return inner_->RecordsSinceCheckpoint();
  }
  uint64_t BytesSinceCheckpoint() const override { return inner_->BytesSinceCheckpoint(); }
  absl::Status BeginCheckpoint(uint64_t revision) override {
    return inner_->BeginCheckpoint(revision);
  }
  absl::Status WriteEncodedCheckpoint(uint64_t revision, std::string_view snapshot) override {
    return inner_->WriteEncodedCheckpoint(revision, snapshot);
  }
  absl::Status Health() const override { return inner_->Health(); }

 private:
  Store* const inner_;
  const Clock* const clock_;
  Histogram* const sync_seconds_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_TIMED_STORE_H_
