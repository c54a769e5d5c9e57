#include "kube/token_reviewer.h"

#include <string>

#include "common/status_macros.h"

namespace pdc::kube {

absl::StatusOr<api::TokenReviewStatus> HttpTokenReviewer::Review(std::string_view token,
                                                                 std::string_view audience,
                                                                 absl::Duration timeout) {
  constexpr std::string_view kWhat = "TokenReview of a node driver's token";
  const std::string audiences[] = {std::string(audience)};
  ASSIGN_OR_RETURN(pdc::HttpResponse r,
                   api_->Call("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                              api::TokenReviewJson(token, audiences), "application/json",
                              kWhat, timeout));
  // kube-apiserver answers a created TokenReview with 201; 200 is accepted
  // as well (an aggregated or proxied apiserver may say so).
  if (r.status != 201 && r.status != 200) return FromApiserver(r.status, r.body, kWhat);
  return api::ParseTokenReviewStatus(r.body);
}

}  // namespace pdc::kube
