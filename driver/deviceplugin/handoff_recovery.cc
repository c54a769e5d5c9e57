#include "driver/deviceplugin/handoff_recovery.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/backoff.h"
#include "spdlog/spdlog.h"

namespace pdc::driver::deviceplugin {

std::vector<PendingPod> MatchHeld(const std::vector<PendingPod>& pending,
                                  const std::vector<PodDevices>& held) {
  std::vector<PendingPod> out;
  for (const PendingPod& p : pending) {
    std::vector<PciAddress> claimed = p.devices;
    std::sort(claimed.begin(), claimed.end());
    for (const PodDevices& h : held) {
      if (h.ns != p.ns || h.name != p.pod_name || h.resource_name != p.resource_name) continue;
      // pdc's device IDs are PCI addresses; an ID that is not one is no
      // device of pdc's, and then the pod holds something else.
      std::vector<PciAddress> ids;
      bool all_pci = true;
      for (const std::string& id : h.device_ids) {
        auto a = PciAddress::Parse(id);
        if (!a.ok()) {
          all_pci = false;
          break;
        }
        ids.push_back(*a);
      }
      std::sort(ids.begin(), ids.end());
      if (all_pci && ids == claimed) out.push_back(p);
    }
  }
  return out;
}

HandoffRecovery::HandoffRecovery(ExtenderApi* api, HandoffBook* book, HandoffConfirmer* confirmer,
                                 std::set<std::string> resources, RecoveryOptions options)
    : api_(api),
      book_(book),
      confirmer_(confirmer),
      resources_(std::move(resources)),
      options_(std::move(options)),
      client_(options_.socket_path, options_.list_timeout) {}

HandoffRecovery::~HandoffRecovery() { Stop(); }

void HandoffRecovery::Start() {
  if (thread_.joinable()) return;
  if (options_.socket_path.empty()) {
    done_.Notify();
    return;
  }
  thread_ = std::thread([this] { Loop(); });
}

void HandoffRecovery::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

bool HandoffRecovery::WaitUntilDone(absl::Duration timeout) const {
  return done_.WaitForNotificationWithTimeout(timeout);
}

absl::StatusOr<int> HandoffRecovery::RunOnce() {
  if (!book_->has_answer()) {
    auto fresh = api_->GetAllocations(book_->node(), 0, absl::ZeroDuration());
    if (!fresh.ok()) {
      return absl::UnavailableError(absl::StrCat("asking pdc-extender what is pending: ",
                                                 fresh.status().message()));
    }
    book_->Update(*fresh, /*fresh=*/true);
  }
  // Asked even when nothing is pending: a missing socket is then reported
  // at start, not at the first restart that would have needed it.
  absl::StatusOr<std::vector<PodDevices>> held = client_.List(resources_);
  if (!held.ok()) return held.status();
  // The book leaves out what was answered since the start, and what the
  // journal held (the manager marked those answered).
  std::vector<PendingPod> pending = book_->AllPending();
  int confirmed = 0;
  for (PendingPod& p : MatchHeld(pending, *held)) {
    book_->MarkHandedOff(p.resource_name, p.pod_uid);
    spdlog::info("kubelet shows pod {}/{} holding {} devices of VM {}: confirming the hand-off "
                 "pdc-node answered before it restarted",
                 p.ns, p.pod_name, p.resource_name, p.Describe());
    absl::Status s = confirmer_->Enqueue(
        HandoffRecord{p.resource_name, p.pod_uid, p.ns, p.pod_name, std::move(p.devices)});
    if (!s.ok()) spdlog::warn("recovered hand-off not journaled: {}", s.ToString());
    if (options_.metrics != nullptr) {
      options_.metrics->handoffs_recovered->WithLabels({"pod_resources"})->Increment();
    }
    ++confirmed;
  }
  return confirmed;
}

void HandoffRecovery::Loop() {
  absl::Duration backoff;
  int failures = 0;
  while (!stop_.HasBeenNotified()) {
    absl::StatusOr<int> n = RunOnce();
    if (n.ok()) {
      if (*n > 0) spdlog::info("{} hand-off(s) recovered from kubelet's pod resources", *n);
      break;
    }
    if (absl::IsNotFound(n.status())) {
      spdlog::info("{}: hand-offs answered before a restart are recovered from the hand-off "
                   "journal alone (kubelet older than 1.20, or its pod resources endpoint is "
                   "off, or the directory is not mounted)",
                   std::string(n.status().message()));
      break;
    }
    ++failures;
    backoff = NextBackoff(backoff, options_.backoff_initial, options_.backoff_max);
    // The first failure and then every power of two.
    if ((failures & (failures - 1)) == 0) {
      spdlog::warn("recovering hand-offs from kubelet's pod resources failed (attempt {}), "
                   "retrying in {}: {}",
                   failures, absl::FormatDuration(backoff), n.status().ToString());
    }
    if (stop_.WaitForNotificationWithTimeout(backoff)) break;
  }
  done_.Notify();
}

}  // namespace pdc::driver::deviceplugin
