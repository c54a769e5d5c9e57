// FakeDraKubelet: the parts of kubelet a DRA driver talks to, over the real
// gRPC protocol on unix sockets, following upstream kubelet:
//  - the plugin watcher (pkg/kubelet/pluginmanager/pluginwatcher/
//    plugin_watcher.go, operationexecutor/operation_generator.go): a socket
//    that appears in the registry directory is dialled, GetInfo asked (1 s),
//    the type's handler picked ("DRAPlugin" only here), the plugin validated
//    and registered, and NotifyRegistrationStatus sent with the verdict.
//    Validation follows pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go
//    (validateSupportedServices): the first service of the plugin's list
//    that this kubelet knows is chosen; none known is a refusal.
//  - the DRA manager (pkg/kubelet/cm/dra/manager.go): PreparePod adds the
//    pod to each claim's references and calls NodePrepareResources once per
//    driver for the claims not prepared yet (a claim a second pod shares is
//    prepared already); a claim error or a missing answer fails the pod.
//    UnpreparePod drops the pod's references and calls
//    NodeUnprepareResources for the claims no pod references any more.
//  - Restart(): registrations are gone (the driver re-registers through a
//    new socket or the watcher's rescan); the claim cache keeps its pod
//    references but, as in the case this double exercises, forgets which
//    claims were prepared, so the next PreparePod calls prepare again.
// For tests only. Thread-safety: one thread at a time.
#ifndef PDC_TESTS_DRIVER_FAKE_DRA_KUBELET_H_
#define PDC_TESTS_DRIVER_FAKE_DRA_KUBELET_H_

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pdc::driver::testing {

struct FakeClaimRef {
  std::string ns;
  std::string name;
  std::string uid;
  std::string driver;
};

struct RegisteredDraPlugin {
  std::string name;
  std::string endpoint;
  std::string chosen_service;
};

class FakeDraKubelet {
 public:
  // `registry_dir` is watched; `services` are those this kubelet knows,
  // most recent first (1.34+: v1.DRAPlugin, v1beta1.DRAPlugin).
  FakeDraKubelet(std::string registry_dir, std::vector<std::string> services);

  // One pass of the plugin watcher over the registry directory: every
  // socket not seen before (by inode), or whose GetInfo failed last time,
  // goes through registration. Returns the number of sockets it handled.
  int WatchOnce();
  const std::map<std::string, RegisteredDraPlugin>& plugins() const { return plugins_; }
  // Verdicts sent, in order ("" for success, else the error sent).
  const std::vector<std::string>& verdicts() const { return verdicts_; }

  // The CDI device IDs kubelet would hand the runtime for the pod, sorted;
  // an error as kubelet's PrepareResources would return it.
  absl::StatusOr<std::vector<std::string>> PreparePod(const std::string& pod_uid,
                                                      const std::vector<FakeClaimRef>& claims);
  absl::Status UnpreparePod(const std::string& pod_uid);
  void Restart();

  // NodePrepareResources calls made so far.
  int prepare_calls() const { return prepare_calls_; }
  int unprepare_calls() const { return unprepare_calls_; }

 private:
  struct ClaimInfo {
    FakeClaimRef ref;
    std::set<std::string> pods;
    bool prepared = false;
    std::vector<std::string> cdi_ids;
  };

  const std::string registry_dir_;
  const std::vector<std::string> services_;
  std::set<std::pair<std::string, ino_t>> seen_;
  std::map<std::string, RegisteredDraPlugin> plugins_;
  std::vector<std::string> verdicts_;
  std::map<std::string, ClaimInfo> claims_;  // By ns/name.
  int prepare_calls_ = 0;
  int unprepare_calls_ = 0;
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_FAKE_DRA_KUBELET_H_
