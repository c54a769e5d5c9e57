// The authentication.k8s.io/v1 TokenReview as pdc-extender sends and reads
// it (kubernetes/kubernetes, staging/src/k8s.io/api/authentication/v1/
// types.go): spec.token and spec.audiences out; status.authenticated,
// status.user (username, uid, groups, extra), status.audiences and
// status.error back.
// Thread-safety: pure functions.
#ifndef PDC_API_TOKEN_REVIEW_H_
#define PDC_API_TOKEN_REVIEW_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pdc::api {

// The extra key kube-apiserver (1.30 and later) adds to a token bound to a
// pod: the name of the node the pod runs on (k8s.io/apiserver/pkg/
// authentication/serviceaccount/util.go, NodeNameKey).
inline constexpr std::string_view kNodeNameExtra = "authentication.kubernetes.io/node-name";

// TokenReviewStatus and its UserInfo.
struct TokenReviewStatus {
  bool authenticated = false;
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  // UserInfo.extra: key -> values, ordered.
  std::map<std::string, std::vector<std::string>> extra;
  // The audiences the token is valid for among those asked for.
  std::vector<std::string> audiences;
  std::string error;
};

// The longest token sent or read; a hostile answer or request must not make
// pdc keep megabytes.
inline constexpr size_t kMaxReviewedTokenBytes = 16 * 1024;

// POST body of a TokenReview of `token` for `audiences`.
std::string TokenReviewJson(std::string_view token, absl::Span<const std::string> audiences);

// The status of a TokenReview the API answered; every field checked, the
// error names it ("TokenReview.status.user.extra").
absl::StatusOr<TokenReviewStatus> ParseTokenReviewStatus(std::string_view body);

}  // namespace pdc::api

#endif  // PDC_API_TOKEN_REVIEW_H_
