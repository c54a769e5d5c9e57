// TokenReviewer: asks kube-apiserver who a bearer token belongs to, with a
// TokenReview (POST /apis/authentication.k8s.io/v1/tokenreviews; the
// authentication.k8s.io/v1 types in kubernetes/kubernetes,
// staging/src/k8s.io/api/authentication/v1/types.go). pdc-extender uses it
// to check pdc-node's projected service-account tokens (node_auth.h).
// HttpTokenReviewer sends it through KubeApi (kube_http_client.h); tests use
// fakes.
// Thread-safety: implementations are thread-safe; Review blocks for at most
// its timeout.
#ifndef PDC_KUBE_TOKEN_REVIEWER_H_
#define PDC_KUBE_TOKEN_REVIEWER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/token_review.h"
#include "kube/kube_http_client.h"

namespace pdc::kube {

class TokenReviewer {
 public:
  virtual ~TokenReviewer() = default;
  // The review of `token` for `audience`. An answer that says "not
  // authenticated" is a status, not an error; errors are the apiserver's
  // (FromApiserver: 403 when pdc-extender may not create tokenreviews,
  // Unavailable when it is down or overloaded) or the transport's.
  virtual absl::StatusOr<api::TokenReviewStatus> Review(std::string_view token,
                                                        std::string_view audience,
                                                        absl::Duration timeout) = 0;
};

// TokenReviews through `api` (outlives the reviewer).
class HttpTokenReviewer final : public TokenReviewer {
 public:
  explicit HttpTokenReviewer(KubeApi* api) : api_(api) {}
  absl::StatusOr<api::TokenReviewStatus> Review(std::string_view token,
                                                std::string_view audience,
                                                absl::Duration timeout) override;

 private:
  KubeApi* const api_;
};

}  // namespace pdc::kube

#endif  // PDC_KUBE_TOKEN_REVIEWER_H_
