// GatedExtender: an in-memory pdc-extender for the device plugin tests that
// models the hand-off protocol (docs/design.md §6, docs/rest-api.md §5) for
// one node and one resource name: claims bound to devices, VM pods reserving
// them, the gate (a pod is refused while another pod on the node waits for
// its hand-off), the allocations answer with `reservedFor` and `handedOff`,
// and ConfirmHandoff with its NotFound / FailedPrecondition answers.
// Thread-safety: thread-safe. Test-only.
#ifndef PDC_TESTS_DRIVER_FAKE_HANDOFF_EXTENDER_H_
#define PDC_TESTS_DRIVER_FAKE_HANDOFF_EXTENDER_H_

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "driver/node_extender_api.h"

namespace pdc::driver::testing {

class GatedExtender : public ExtenderApi {
 public:
  explicit GatedExtender(std::string resource) : resource_(std::move(resource)) {}

  struct Confirmation {
    std::string pod_uid;
    std::vector<PciAddress> devices;
  };

  void AddClaim(const std::string& claim, PciAddress address) {
    absl::MutexLock lock(&mu_);
    claims_.push_back({claim, address, std::nullopt, ""});
    ++version_;
  }

  // Filter + Bind of VM pod `pod_uid` using `claim` on this node. With the
  // gate on, Unavailable while another pod waits for its hand-off here.
  absl::Status StartPod(const std::string& claim, const std::string& vm,
                        const std::string& pod_uid) {
    absl::MutexLock lock(&mu_);
    if (gate) {
      for (const Claim& c : claims_) {
        if (c.reserved_for && c.reserved_for->pod_uid != c.handed_off_uid &&
            c.reserved_for->pod_uid != pod_uid) {
          return absl::UnavailableError(absl::StrCat(
              "another VM is starting on this node: default/", c.reserved_for->vm,
              " has not received its ", resource_, " devices yet"));
        }
      }
    }
    for (Claim& c : claims_) {
      if (c.claim == claim) {
        c.reserved_for = Reservation{vm, "virt-launcher-" + vm + "-" + pod_uid, pod_uid};
        ++version_;
        return absl::OkStatus();
      }
    }
    return absl::NotFoundError("no claim " + claim);
  }

  NodeAllocations Answer() const {
    absl::MutexLock lock(&mu_);
    return AnswerLocked();
  }

  absl::StatusOr<uint64_t> PutInventory(const NodeInventory&) override {
    absl::MutexLock lock(&mu_);
    return version_;
  }
  absl::StatusOr<NodeAllocations> GetAllocations(std::string_view, uint64_t,
                                                 absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++polls_;
    return AnswerLocked();
  }
  absl::Status ConfirmHandoff(std::string_view node, std::string_view pod_uid,
                              std::string_view resource_name,
                              absl::Span<const PciAddress> devices) override {
    absl::MutexLock lock(&mu_);
    ++confirm_calls_;
    if (failing_confirms_ > 0) {
      --failing_confirms_;
      return absl::UnavailableError("cannot reach pdc-extender: Connection refused");
    }
    std::vector<PciAddress> pending;
    for (const Claim& c : claims_) {
      if (resource_name == resource_ && c.reserved_for && c.reserved_for->pod_uid == pod_uid &&
          c.handed_off_uid != pod_uid) {
        pending.push_back(c.address);
      }
    }
    std::sort(pending.begin(), pending.end());
    if (pending.empty()) {
      // Idempotent: an already confirmed hand-off is confirmed again.
      for (const Confirmation& c : confirmations_) {
        if (c.pod_uid == pod_uid) return absl::OkStatus();
      }
      return absl::NotFoundError(absl::StrCat("pod ", std::string(pod_uid), " has nothing pending"));
    }
    if (pending != std::vector<PciAddress>(devices.begin(), devices.end())) {
      return absl::FailedPreconditionError("devices differ from the pod's claims");
    }
    for (Claim& c : claims_) {
      if (c.reserved_for && c.reserved_for->pod_uid == pod_uid) c.handed_off_uid = pod_uid;
    }
    confirmations_.push_back({std::string(pod_uid), pending});
    ++version_;
    return absl::OkStatus();
  }

  std::vector<Confirmation> confirmations() const {
    absl::MutexLock lock(&mu_);
    return confirmations_;
  }
  bool WaitForConfirmations(size_t n, absl::Duration timeout = absl::Seconds(20)) const {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return confirmations_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  }
  bool WaitForConfirmCalls(int n, absl::Duration timeout = absl::Seconds(20)) const {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return confirm_calls_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  }
  int polls() const {
    absl::MutexLock lock(&mu_);
    return polls_;
  }
  int confirm_calls() const {
    absl::MutexLock lock(&mu_);
    return confirm_calls_;
  }
  void FailConfirms(int n) {
    absl::MutexLock lock(&mu_);
    failing_confirms_ = n;
  }
  // The pod is gone before it started (CancelHandoff).
  void CancelPod(const std::string& pod_uid) {
    absl::MutexLock lock(&mu_);
    for (Claim& c : claims_) {
      if (c.reserved_for && c.reserved_for->pod_uid == pod_uid) c.reserved_for.reset();
    }
    ++version_;
  }

  bool gate = true;  // Set before use.

 private:
  struct Claim {
    std::string claim;
    PciAddress address;
    std::optional<Reservation> reserved_for;
    std::string handed_off_uid;
  };

  NodeAllocations AnswerLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    NodeAllocations a;
    a.version = version_;
    for (const Claim& c : claims_) {
      NodeAllocation d;
      d.address = c.address;
      const size_t slash = c.claim.find('/');
      d.claim = ClaimKey{c.claim.substr(0, slash), c.claim.substr(slash + 1)};
      d.resource_name = resource_;
      d.reserved_for = c.reserved_for;
      d.handoff_pending = c.reserved_for && c.reserved_for->pod_uid != c.handed_off_uid;
      a.claimed.push_back(d);
    }
    std::sort(a.claimed.begin(), a.claimed.end(),
              [](const auto& x, const auto& y) { return x.address < y.address; });
    return a;
  }

  const std::string resource_;
  mutable absl::Mutex mu_;
  std::vector<Claim> claims_ ABSL_GUARDED_BY(mu_);
  std::vector<Confirmation> confirmations_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 1;
  int polls_ ABSL_GUARDED_BY(mu_) = 0;
  int confirm_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int failing_confirms_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_FAKE_HANDOFF_EXTENDER_H_
