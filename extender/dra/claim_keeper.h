// ClaimKeeper: the DRA claim keeper of pdc-extender (docs/design.md "The DRA
// claim keeper"). A resource.k8s.io ResourceClaim survives its pods, but
// kube-controller-manager deallocates it when its own pruning of pod entries
// empties status.reservedFor, and the VM's next start may then get another
// device. The keeper adds the KubeVirt VirtualMachine of a virt-launcher pod
// in reservedFor to that list once the claim is allocated, so that the
// allocation lives as long as the VM; it removes the VM's entry when the
// VirtualMachine (that UID) is gone, and prunes the pod entries of gone pods
// on the claims it keeps. What it decides is keeper_plan.h's.
//
// Level-triggered, on the kube/ layer: the ResourceClaim watch (claim_sink)
// feeds a TypedCache that queues each changed claim; a claim whose pod or VM
// went away is queued again (ConsumerGone); a kept claim is looked at again
// every `resync`. Reconcile(key) plans from the watch's copy, asking the
// ConsumerDirectory about its pods and VMs; when something is to change it
// reads the claim from the apiserver, plans again on it, and writes the new
// list with
// one PUT of the status subresource carrying the resourceVersion it read
// (never a merge patch: kube-scheduler writes the same list); a 409 is
// counted and the key tried again with backoff, from a fresh read.
// Runs on the leader only (ExtenderApp makes it once it leads), so a
// restart or a new leader converges from what the API holds.
// Thread-safety: thread-safe; the sink on the reflector's thread, Reconcile
// on the controller's workers (one key at a time per key).
#ifndef PDC_EXTENDER_DRA_CLAIM_KEEPER_H_
#define PDC_EXTENDER_DRA_CLAIM_KEEPER_H_

#include <atomic>
#include <optional>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "extender/dra/keeper_plan.h"
#include "extender/dra/resource_claim.h"
#include "kube/event_recorder.h"
#include "kube/kube_http_client.h"
#include "kube/typed_cache.h"
#include "kube/work_queue.h"

namespace pdc::extender::dra {

// What the keeper asks about the pods and VMs a claim names; pdc-extender
// answers from its watches (VmDirectory, PodDirectory: dra_consumers.h).
class ConsumerDirectory {
 public:
  virtual ~ConsumerDirectory() = default;
  // The watches answered from hold a whole list (before that, a VM not
  // seen yet would look deleted).
  virtual bool Synced() const = 0;
  // The fate of pod `ns`/`name` with `uid`, and its VM when alive.
  virtual PodLook LookAtPod(std::string_view ns, std::string_view name,
                            std::string_view uid) = 0;
  // The subset of `uids` that are VirtualMachines that exist.
  virtual std::set<std::string> LiveVms(const std::vector<std::string>& uids) const = 0;
  // Whether the spec of VirtualMachine `vm_uid` in `ns` names claim
  // `claim`; nullopt when not known.
  virtual std::optional<bool> VmNamesClaim(std::string_view ns, std::string_view vm_uid,
                                           std::string_view claim) const {
    return std::nullopt;
  }
  // The VirtualMachines of `ns` whose spec names `claim`.
  virtual std::vector<VmIdentity> VmsNamingClaim(std::string_view ns,
                                                 std::string_view claim) const {
    return {};
  }
};

class ClaimKeeper final : public kube::Reconciler {
 public:
  struct Options {
    const Clock* clock = RealClock();
    kube::EventRecorder* events = nullptr;  // Null: no Events.
    MetricsRegistry* registry = nullptr;    // Null: no metrics.
    absl::Duration resync = absl::Minutes(5);
    absl::Duration call_timeout = absl::Seconds(10);
    int workers = 1;
  };
  struct Counts {
    uint64_t added = 0;        // VM entries added.
    uint64_t pruned_pods = 0;  // Pod entries removed.
    uint64_t pruned_vms = 0;   // VM entries removed.
    uint64_t conflicts = 0;    // Status updates answered 409.
    uint64_t refused = 0;      // VMs that could not be added.
  };

  // `api` and `consumers` must outlive the keeper.
  ClaimKeeper(kube::KubeApi* api, ConsumerDirectory* consumers, Options options);
  ~ClaimKeeper() override;  // Stop().

  kube::ReflectorSink* claim_sink() { return &index_sink_; }
  // A pod or VM with `uid` in `ns` is gone: the claims naming it are queued.
  void ConsumerGone(std::string_view ns, std::string_view uid);
  // Claim `ns`/`name` is to be looked at (a VM started or stopped naming it).
  void Look(std::string_view ns, std::string_view name);

  // The workers: call once the claim watch and the ConsumerDirectory's
  // watches listed; every claim listed meanwhile is queued once.
  void Start();
  void Stop();   // Idempotent.

  absl::Status Reconcile(const std::string& key) override;

  Counts counts() const;
  // Claims in the watch cache holding a VM entry.
  size_t kept() const;
  // Start() was called: the watches listed and the keeper reconciles.
  bool started() const { return started_.load(); }

  // One claim of the watch cache as the keeper sees it (GET /v1/dra/claims).
  struct ClaimView {
    std::string ns;
    std::string name;
    std::string uid;
    DraClaim claim;
    // The VM it is kept for: the VM entry of status.reservedFor (persisted),
    // else, for a claim no pod owns, the first VM (by name) whose spec names
    // it (the keeper adds it once the claim is allocated and reserved for
    // that VM's pod); none otherwise.
    std::optional<VmIdentity> vm;
    bool persisted = false;
  };
  // Every claim of the watch cache, sorted by namespace and name; a copy,
  // read under the cache's lock (any thread).
  std::vector<ClaimView> Claims() const;

 private:
  absl::Status Keep(const std::string& ns, const std::string& name);
  PlanInputs Gather(const std::string& ns, const std::string& name, const DraClaim& claim,
                    bool deleting);
  void Tell(const kube::ObjectRef& claim, const Plan& plan, const PlanInputs& in);
  // Unavailable, naming them, when the fate of a pod of `claim` is unknown
  // (its read failed, or its VMI or VM is not in the watches): the work
  // queue then tries again with backoff. OK when every pod was judged.
  absl::Status Unjudged(const kube::ObjectRef& ref, const DraClaim& claim, const PlanInputs& in);
  void RegisterMetrics(MetricsRegistry* registry);

  // The claim watch's sink: the cache, then the consumer index from what
  // the cache decoded.
  class IndexSink final : public kube::ReflectorSink {
   public:
    explicit IndexSink(ClaimKeeper* keeper) : keeper_(keeper) {}
    void Replace(const std::vector<const api::json::Value*>& items) override;
    void Upsert(const api::json::Value& object) override;
    void Remove(const api::json::Value& object) override;

   private:
    ClaimKeeper* const keeper_;
  };
  // Files claim `key` under the UIDs of its consumers (none: the claim is
  // gone or unreadable).
  void IndexClaim(const std::string& key);
  // The claims of `ns` with a consumer of `uid`, from the index.
  std::vector<std::string> ClaimsOfConsumer(std::string_view ns, std::string_view uid) const;
  // Tells the VM of each entry too (an Event on the VirtualMachine).
  void TellVm(const kube::ObjectRef& claim, const VmIdentity& vm, kube::EventType type,
              std::string_view reason, std::string_view message);

  kube::KubeApi* const api_;
  ConsumerDirectory* const consumers_;
  const Options options_;
  kube::WorkQueue queue_;
  kube::TypedCache<DraClaim> cache_;
  IndexSink index_sink_{this};
  // Consumer UID -> keys of the claims naming it, and each claim's
  // consumer UIDs (a pod or VM gone queues its claims without a copy of
  // the whole cache); the keys of claims holding a VM entry.
  mutable absl::Mutex index_mu_;
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> by_consumer_
      ABSL_GUARDED_BY(index_mu_);
  absl::flat_hash_map<std::string, std::vector<std::string>> consumers_of_
      ABSL_GUARDED_BY(index_mu_);
  absl::flat_hash_set<std::string> kept_keys_ ABSL_GUARDED_BY(index_mu_);
  kube::Controller controller_;
  std::atomic<uint64_t> added_{0}, pruned_pods_{0}, pruned_vms_{0}, conflicts_{0}, refused_{0};
  std::atomic<bool> started_{false};
};

}  // namespace pdc::extender::dra

#endif  // PDC_EXTENDER_DRA_CLAIM_KEEPER_H_
