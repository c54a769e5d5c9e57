// KubeApiServerDouble: a kube-apiserver for tests, storing objects in a REAL
// etcd (EtcdProcess), speaking plain HTTP/1.1 JSON on 127.0.0.1:<port 0>.
// It behaves like kube-apiserver where a client's correctness depends on it
// (each rule cites the Kubernetes source or API convention it follows, in
// kube_resources.cc, kube_list.cc and kube_apiserver_double.cc):
//  - resources (kube_resources.h, StandardResources): pods (+status,
//    +binding), events, persistentdeviceclaims.pdc.kubevirt.io/v1alpha1
//    (+status; the CRD's CEL rules when enabled: kube_crd_rules.h),
//    virtualmachines / virtualmachineinstances.kubevirt.io/v1
//    (+status), leases.coordination.k8s.io/v1,
//    endpointslices.discovery.k8s.io/v1, resourceclaims (+status, with
//    kube-apiserver's validation: kube_resource_claims.h),
//    resourceclaimtemplates and the cluster-scoped resourceslices and
//    deviceclasses (validated: kube_resource_slices.h)
//    .resource.k8s.io/v1; tokenreviews.authentication.k8s.io/v1
//    (kube_token_review.h: tokens the test registers); namespaced paths and the
//    all-namespaces collection for list and watch;
//  - resourceVersion = the etcd mod_revision of the object's key; updates
//    with a stale one are 409 Conflict (an etcd transaction on mod_revision);
//  - create (uid, creationTimestamp, generation, generateName, 409
//    AlreadyExists), get, list (resourceVersion / resourceVersionMatch,
//    limit + continue, 410 Expired after compaction, label and field
//    selectors), PUT, PATCH (application/merge-patch+json), DELETE
//    (preconditions, finalizers, graceful pod deletion), the status
//    subresource, generation bumps on spec changes, pods/binding;
//  - watch (?watch=1): ADDED/MODIFIED/DELETED from an etcd watch at
//    resourceVersion+1, BOOKMARKs every `bookmark_interval` when asked for,
//    an ERROR 410 Expired event when the resourceVersion was compacted,
//    timeoutSeconds;
//  - background garbage collection of dependents whose owners are all gone
//    (the garbage collector of kube-controller-manager);
//  - authorization and admission refusals a test sets up (403 Forbidden as
//    kube-apiserver answers them: kube_admission.h);
//  - errors are v1 Status objects.
// Fault injection from the test: delay, fail (5xx) or drop (after the write
// was committed) the next requests matching a method and a target
// substring, cut every open watch, compact etcd.
//
//   ASSIGN_OR_RETURN(auto etcd, EtcdProcess::Start());
//   ASSIGN_OR_RETURN(auto api,
//   KubeApiServerDouble::Start(etcd->client_ports())); HttpClient to
//   api->url(): POST /api/v1/namespaces/ns1/pods ...
//
// Thread-safety: every public method is thread-safe. One thread per
// connection (a test double; watches block their thread).
#ifndef PDC_TESTS_TESTING_KUBE_APISERVER_DOUBLE_H_
#define PDC_TESTS_TESTING_KUBE_APISERVER_DOUBLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "tests/testing/etcd_client.h"
#include "tests/testing/kube_admission.h"
#include "tests/testing/kube_resources.h"
#include "tests/testing/kube_token_review.h"

namespace pdc::testing {

struct KubeApiServerOptions {
  // Non-empty: every request needs "Authorization: Bearer <token>" (else
  // 401 Unauthorized).
  std::string bearer_token;
  // How often a watch with allowWatchBookmarks=true gets a BOOKMARK.
  // (kube-apiserver sends one about every minute; tests want it fast.)
  absl::Duration bookmark_interval = absl::Seconds(1);
  // The served resources; adding one is one line in StandardResources().
  std::vector<kube::KubeResource> resources = kube::StandardResources();
  // creationTimestamp and deletionTimestamp; RealClock() when null. Must
  // outlive the double.
  const Clock* clock = nullptr;
  // Run the garbage collector of ownerReferences.
  bool garbage_collector = true;
};

// Which requests a fault applies to: `method` ("" any) and a substring of
// the request target, path and query ("" any).
struct RequestMatcher {
  std::string method;
  std::string target_substring;
};

class KubeApiServerDouble {
 public:
  // `etcd_client_ports`: EtcdProcess::client_ports().
  static absl::StatusOr<std::unique_ptr<KubeApiServerDouble>> Start(
      std::vector<uint16_t> etcd_client_ports,
      KubeApiServerOptions options = {});
  ~KubeApiServerDouble();
  KubeApiServerDouble(const KubeApiServerDouble&) = delete;
  KubeApiServerDouble& operator=(const KubeApiServerDouble&) = delete;

  uint16_t port() const;
  std::string url() const;  // "http://127.0.0.1:<port>"
  // The etcd client the double uses (tests may read etcd directly).
  EtcdClient& etcd();

  // The tokens TokenReviews know (register them before use).
  kube::TokenReviews& token_reviews();
  // Authorization and admission refusals (RBAC, OwnerReferencesPermission-
  // Enforcement, a namespace being deleted, a quota): kube_admission.h.
  // Tests sharing a double clear them when done.
  kube::KubeAdmission& admission();

  // --- Fault injection (each applies to the next matching requests) -----
  // Waits `delay` before handling each of the next `count` matching requests.
  void DelayRequests(const RequestMatcher& match, int count,
                     absl::Duration delay);
  // Answers the next `count` matching requests with `http_status` (a v1
  // Status, reason InternalError / ServiceUnavailable...) without doing them.
  void FailRequests(const RequestMatcher& match, int count,
                    int http_status = 500);
  // Does the next `count` matching requests (the write is committed to
  // etcd), then closes the connection without answering: the client cannot
  // know whether it happened.
  void DropAfterCommit(const RequestMatcher& match, int count = 1);
  // Forgets every fault not used up yet (a cut-off apiserver is back).
  void ClearFaults();
  // Closes every open watch stream abruptly (no final chunk), as when the
  // apiserver dies; returns how many were cut.
  int CutWatches();
  // Compacts etcd's history at the current revision; returns the revision.
  // Lists and watches from older resourceVersions then get 410 Expired.
  absl::StatusOr<int64_t> CompactEtcd();

  // --- Observation --------------------------------------------------------
  // "METHOD target" of every request received, in arrival order.
  std::vector<std::string> requests() const;
  int open_watches() const;
  // Waits until at least `n` watches are streaming (their etcd watch is
  // established, so no later write is missed). False on timeout.
  bool WaitForWatches(int n, absl::Duration timeout) const;
  // Waits until the garbage collector has nothing left to do. False on
  // timeout.
  bool WaitGarbageCollectorIdle(absl::Duration timeout) const;

 private:
  class Impl;
  explicit KubeApiServerDouble(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_KUBE_APISERVER_DOUBLE_H_
