// The kube-apiserver double's tokenreviews.authentication.k8s.io/v1 (POST
// /apis/authentication.k8s.io/v1/tokenreviews): a test registers tokens and
// who they are; the answer follows kube-apiserver's TokenReview REST
// storage (kubernetes/kubernetes, pkg/registry/authentication/tokenreview/
// storage.go, Create):
//  - spec.token empty: 400 BadRequest "token is required for TokenReview in
//    authentication";
//  - spec.audiences empty: the apiserver's own audiences are asked for
//    (--api-audiences; here `api_audiences`);
//  - a known token valid for at least one audience asked for: 201 with
//    status.authenticated true, status.user (username, uid, groups, extra)
//    and status.audiences = the audiences asked for that it is valid for
//    (the service-account token authenticator's intersection,
//    pkg/serviceaccount/jwt.go);
//  - an unknown token, or one valid for none of those audiences: 201 with
//    status.authenticated false and status.error (the JWT authenticator's
//    "token audiences ... is invalid for the target audiences ...");
//  - the object comes back with its spec, kind and apiVersion, code 201
//    (a create).
// Thread-safety: thread-safe.
#ifndef PDC_TESTS_TESTING_KUBE_TOKEN_REVIEW_H_
#define PDC_TESTS_TESTING_KUBE_TOKEN_REVIEW_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tests/testing/kube_resources.h"

namespace pdc::testing::kube {

// Who a token is, as a service-account token of a pod says it.
struct TokenIdentity {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
  std::vector<std::string> audiences;  // The token's `aud`.
};

// A pod-bound service-account token of `ns`/`sa` on `node` for `audiences`,
// with the extras kube-apiserver 1.30 and later adds
// (k8s.io/apiserver/pkg/authentication/serviceaccount/util.go: pod-name,
// pod-uid, node-name, node-uid, credential-id).
TokenIdentity PodBoundToken(std::string_view ns, std::string_view sa, std::string_view node,
                            std::vector<std::string> audiences);

class TokenReviews {
 public:
  static constexpr std::string_view kPath = "/apis/authentication.k8s.io/v1/tokenreviews";

  void Register(std::string token, TokenIdentity who) ABSL_LOCKS_EXCLUDED(mu_);
  void Forget(const std::string& token) ABSL_LOCKS_EXCLUDED(mu_);
  // The answer to a POST of `body`.
  Answer Review(std::string_view body) const ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<std::string> api_audiences = {"https://kubernetes.default.svc.cluster.local"};

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, TokenIdentity> tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::testing::kube

#endif  // PDC_TESTS_TESTING_KUBE_TOKEN_REVIEW_H_
