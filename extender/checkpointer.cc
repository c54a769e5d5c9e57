#include "extender/checkpointer.h"

#include "spdlog/spdlog.h"

namespace pdc::extender {

Checkpointer::Checkpointer(Options options, Allocator* allocator, const Clock* clock)
    : options_(options), allocator_(allocator), clock_(clock) {}

Checkpointer::~Checkpointer() { Stop(); }

absl::StatusOr<bool> Checkpointer::CheckpointIfDue() {
  if (!allocator_->CheckpointDue()) return false;
  if (absl::Status s = allocator_->Checkpoint(); !s.ok()) return s;
  return true;
}

void Checkpointer::Start() {
  thread_ = std::thread([this] {
    while (clock_->WaitFor(options_.interval, &stop_)) {
      if (absl::StatusOr<bool> done = CheckpointIfDue(); !done.ok()) {
        spdlog::error("checkpoint failed: {}", done.status().ToString());
      }
    }
  });
}

void Checkpointer::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

}  // namespace pdc::extender
