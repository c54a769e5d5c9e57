// PodDirectory: the pods of pdc's scheduler (spec.schedulerName), from a
// watch, in Kubernetes mode. It keeps, per pod UID, only what decides
// whether a pod still holds what pdc gave it: namespace, name, node and
// phase. Two things use it:
//  - the answer to "does this pod still run?" (AskPodFate) comes from the
//    watch when the watch knows the pod, and from one GET otherwise;
//  - the watch tells at once when a pod ended (Failed, Succeeded) or was
//    deleted, so the hand-off sweeper and the claim controller act on it
//    now instead of at their next pass.
// The watch never decides alone that a pod is gone because it does not have
// it: a pod the watch has not shown yet, or one deleted, is asked of the
// apiserver (never act on a guess).
// Thread-safety: thread-safe; the sink is called by the reflector's thread.
#ifndef PDC_EXTENDER_POD_DIRECTORY_H_
#define PDC_EXTENDER_POD_DIRECTORY_H_

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/json_util.h"
#include "kube/kube_client.h"
#include "kube/kube_reflector.h"

namespace pdc::extender {

// The pods collection (all namespaces); the watch narrows it with
// PodsOfScheduler's selector.
inline constexpr std::string_view kPodsPath = kube::Reflected("/api/v1/pods");
// The selector of the pods `scheduler` places: "fieldSelector=spec.schedulerName%3D<name>",
// a field selector kube-apiserver supports on pods (pkg/registry/core/pod
// strategy.go, ToSelectableFields).
std::string PodsOfScheduler(std::string_view scheduler);

// A pod, as the API names it.
struct PodRef {
  std::string ns;
  std::string name;
  std::string uid;
};

// Whether pod `ns`/`pod_name` with `pod_uid` still runs: gone when it is
// deleted, replaced by another UID, or ended (Failed/Succeeded); unknown
// when nobody can tell (`why` says).
enum class PodFate { kAlive, kGone, kUnknown };
// Which pods count as gone beside deleted and replaced ones: kEnded, those
// that ended (PodPlacement::Ended); kDone, also those being deleted that
// were never scheduled (PodPlacement::Done: the DRA claim keeper judges
// as the resourceclaim controller does).
enum class PodEnd { kEnded, kDone };

class PodDirectory final : public kube::ReflectorSink {
 public:
  // Told, on the reflector's thread and outside the directory's lock, once
  // of each pod that ended (Failed, Succeeded) or left the watch before it
  // ended (deleted; not in a relist; its name taken by another pod).
  using GoneFn = std::function<void(const PodRef& pod)>;
  explicit PodDirectory(GoneFn on_gone = nullptr, PodEnd end = PodEnd::kEnded)
      : on_gone_(std::move(on_gone)), end_(end) {}

  void Replace(const std::vector<const api::json::Value*>& items) override;
  void Upsert(const api::json::Value& object) override;
  void Remove(const api::json::Value& object) override;

  // What the watch says of the pod with `uid`: kAlive (held and not ended),
  // kGone (ended, or held under that name with another UID), kUnknown (not
  // held, or no list yet).
  PodFate Fate(std::string_view ns, std::string_view name, std::string_view uid,
               std::string* why) const;
  size_t size() const;

 private:
  struct Pod {
    std::string ns;
    std::string name;
    std::string node;
    bool ended = false;  // Over, by end_ (Ended or Done).
  };
  void Report(const std::vector<PodRef>& gone) const;

  const GoneFn on_gone_;
  const PodEnd end_;
  std::atomic<bool> listed_{false};
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pod> pods_ ABSL_GUARDED_BY(mu_);  // By UID.
  // "<ns>/<name>" -> UID, for a name whose pod was replaced.
  absl::flat_hash_map<std::string, std::string> names_ ABSL_GUARDED_BY(mu_);
};

// The fate of a pod: the watch's answer when it has one (`pods` may be
// null), else kube-apiserver's, read with `timeout`.
// `end` must be the one `pods` was made with.
PodFate AskPodFate(const PodDirectory* pods, kube::KubeClient* kube, std::string_view ns,
                   std::string_view pod_name, std::string_view pod_uid, absl::Duration timeout,
                   std::string* why, PodEnd end = PodEnd::kEnded);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_POD_DIRECTORY_H_
