// The refusals kube-apiserver makes before a request reaches storage, as a
// test sets them up on the kube-apiserver double (kube_apiserver_double.h):
//  - authorization (RBAC): a verb on a resource[/subresource] the caller may
//    not use is 403 Forbidden, with the message of
//    k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go
//    (Forbidden) and plugin/pkg/auth/authorizer/rbac/rbac.go;
//  - OwnerReferencesPermissionEnforcement
//    (plugin/pkg/admission/gc/gc_admission.go): a create or update that
//    sets blockOwnerDeletion on an ownerReference needs `update` on the
//    owner's `finalizers` subresource, else 403 "cannot set
//    blockOwnerDeletion if an ownerReference refers to a resource you can't
//    set finalizers on";
//  - NamespaceLifecycle (plugin/pkg/admission/namespace/lifecycle/
//    admission.go): a create in a namespace being deleted is 403 with the
//    cause NamespaceTerminating;
//  - ResourceQuota (plugin/pkg/admission/resourcequota/controller.go): a
//    create beyond a quota is 403 "exceeded quota: ...".
// The errors are those of admission.NewForbidden / errors.NewForbidden
// (k8s.io/apimachinery/pkg/api/errors/errors.go): reason Forbidden,
// details {name, group, kind = the resource}.
// What the double does not do: PATCH is not checked by the owner-reference
// rule (the merged object is not built here; pdc sets owners only at
// create), and a forbidden verb is checked on the request only, not on
// what a request implies (kube-apiserver does the same).
// Thread-safety: thread-safe.
#ifndef PDC_TESTS_TESTING_KUBE_ADMISSION_H_
#define PDC_TESTS_TESTING_KUBE_ADMISSION_H_

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tests/testing/kube_resources.h"

namespace pdc::testing::kube {

// A verb on a resource of a group the caller may not use: "" for `ns`
// means every namespace.
struct AccessRule {
  std::string group;     // "" is the core group.
  std::string resource;  // "pods", "persistentdeviceclaims/status".
  std::string verb;      // get list watch create update patch delete
  std::string ns;

  auto operator<=>(const AccessRule&) const = default;
};

class KubeAdmission {
 public:
  // The user the authorizer's messages name.
  explicit KubeAdmission(std::string user = "system:serviceaccount:pdc-system:pdc-extender")
      : user_(std::move(user)) {}

  void Forbid(AccessRule rule);
  void EnforceOwnerReferencesPermission(bool on);
  // The namespace is being deleted: creates in it are refused.
  void TerminateNamespace(std::string ns);
  // Creates of `resource` (plural) of `group` in `ns` exceed a quota.
  void ExceedQuota(std::string ns, std::string group, std::string resource);
  // Forgets every rule.
  void Clear();

  // OK when the request is admitted, else the refusal (an ApiError).
  // `verb` is the authorizer's verb for the request; `old_object` the stored
  // object for an update ("" when none or a create), `body` the request's.
  absl::Status Check(std::string_view verb, const ResourcePath& p, std::string_view body,
                     std::string_view old_object) const;

  // The authorizer's verb of an HTTP request.
  static std::string VerbOf(std::string_view method, const ResourcePath& p, bool watch);

 private:
  bool Allowed(const AccessRule& want) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string user_;
  mutable absl::Mutex mu_;
  std::set<AccessRule> forbidden_ ABSL_GUARDED_BY(mu_);
  bool owner_references_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> terminating_ ABSL_GUARDED_BY(mu_);
  std::set<std::tuple<std::string, std::string, std::string>> quota_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::testing::kube

#endif  // PDC_TESTS_TESTING_KUBE_ADMISSION_H_
