#include "net/pdc_client.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "rapidjson/document.h"

namespace pdc {
namespace {

namespace json = api::json;

// The server's {"error": "..."}, else the start of the body.
std::string ErrorText(const HttpResponse& r) {
  rapidjson::Document doc;
  if (json::Parse(r.body, &doc).ok()) {
    if (const json::Value* e = json::Find(doc, "error"); e != nullptr && e->IsString()) {
      return std::string(json::StringOf(*e));
    }
  }
  return r.body.substr(0, 200);
}

// A 2xx answer that does not decode.
absl::Status BadAnswer(std::string_view what, const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(what), " answer: ", s.message()));
}

std::string ClaimPath(const ClaimKey& key) {
  return absl::StrCat("/v1/namespaces/", key.ns, "/claims/", key.name);
}

}  // namespace

absl::Status ServerError(std::string_view what, const HttpResponse& r) {
  std::string msg = absl::StrCat(Sv(what), ": HTTP ", r.status, ": ", ErrorText(r));
  if (r.status >= 500) return absl::UnavailableError(msg);
  if (r.status == 401 || r.status == 403) return absl::PermissionDeniedError(msg);
  if (r.status == 404) return absl::NotFoundError(msg);
  if (r.status == 409) return absl::FailedPreconditionError(msg);
  return absl::InvalidArgumentError(msg);
}

absl::StatusOr<HttpResponse> PdcClient::Call(std::string_view what, std::string_view method,
                                             std::string_view target, std::string_view body,
                                             const HttpRequestOptions& options) {
  ASSIGN_OR_RETURN(HttpResponse r, http_->Do(method, target, body, options));
  if (r.status < 200 || r.status > 299) return ServerError(what, r);
  return r;
}

absl::StatusOr<uint64_t> PdcClient::PutInventory(const NodeInventory& inventory) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("inventory report", "PUT",
                        absl::StrCat("/v1/nodes/", inventory.node, "/inventory"),
                        api::WriteInventory(inventory)));
  rapidjson::Document doc;
  if (!json::Parse(r.body, &doc).ok() || !doc.IsObject()) {
    return absl::InvalidArgumentError("inventory answer is not a JSON object");
  }
  // An answer without a version (none is promised to old servers) is 0.
  absl::StatusOr<int64_t> version = json::OptInt(doc, "version", "version", 0);
  if (!version.ok()) return BadAnswer("inventory", version.status());
  return static_cast<uint64_t>(std::max<int64_t>(*version, 0));
}

absl::StatusOr<NodeAllocations> PdcClient::GetNodeAllocations(std::string_view node,
                                                              uint64_t since,
                                                              absl::Duration wait) {
  const int64_t wait_s =
      std::clamp<int64_t>(absl::ToInt64Seconds(wait), 0, absl::ToInt64Seconds(kMaxWait));
  HttpRequestOptions options;
  options.timeout = absl::Seconds(wait_s + 10);
  ASSIGN_OR_RETURN(
      HttpResponse r,
      Call("allocations", "GET",
           absl::StrCat("/v1/nodes/", Sv(node), "/allocations?since=", since, "&wait=", wait_s),
           {}, options));
  absl::StatusOr<api::NodeAllocationsReply> reply = api::ParseNodeAllocations(r.body);
  if (!reply.ok()) return BadAnswer("allocations", reply.status());
  return std::move(reply->allocations);
}

absl::StatusOr<std::vector<ClaimKey>> PdcClient::ConfirmHandoff(
    std::string_view node, const api::HandoffConfirm& confirm) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("hand-off confirmation", "POST",
                        absl::StrCat("/v1/nodes/", Sv(node), "/handoffs"),
                        api::WriteHandoffConfirm(confirm)));
  absl::StatusOr<std::vector<ClaimKey>> claims = api::ParseClaimKeys(r.body, "claims");
  if (!claims.ok()) return BadAnswer("hand-off confirmation", claims.status());
  return claims;
}

absl::StatusOr<std::vector<PendingHandoff>> PdcClient::ListHandoffs(std::string_view node) {
  const std::string target =
      node.empty() ? "/v1/handoffs" : absl::StrCat("/v1/nodes/", Sv(node), "/handoffs");
  ASSIGN_OR_RETURN(HttpResponse r, Call("hand-offs", "GET", target));
  absl::StatusOr<std::vector<PendingHandoff>> items = api::ParseHandoffList(r.body);
  if (!items.ok()) return BadAnswer("hand-offs", items.status());
  return items;
}

absl::StatusOr<std::vector<ClaimKey>> PdcClient::CancelHandoff(std::string_view node,
                                                               std::string_view pod_uid) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("hand-off cancellation", "DELETE",
                        absl::StrCat("/v1/nodes/", Sv(node), "/handoffs/", Sv(pod_uid))));
  absl::StatusOr<std::vector<ClaimKey>> released = api::ParseClaimKeys(r.body, "released");
  if (!released.ok()) return BadAnswer("hand-off cancellation", released.status());
  return released;
}

absl::StatusOr<Claim> PdcClient::CreateClaim(const api::ClaimCreate& create) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("create claim", "POST",
                        absl::StrCat("/v1/namespaces/", create.key.ns, "/claims"),
                        api::WriteClaimCreate(create)));
  absl::StatusOr<Claim> c = api::ParseClaim(std::string_view(r.body));
  if (!c.ok()) return BadAnswer("create claim", c.status());
  return c;
}

absl::StatusOr<Claim> PdcClient::GetClaim(const ClaimKey& key) {
  ASSIGN_OR_RETURN(HttpResponse r, Call("get claim", "GET", ClaimPath(key)));
  absl::StatusOr<Claim> c = api::ParseClaim(std::string_view(r.body));
  if (!c.ok()) return BadAnswer("get claim", c.status());
  return c;
}

absl::StatusOr<std::vector<Claim>> PdcClient::ListClaims(std::string_view ns) {
  const std::string target =
      ns.empty() ? "/v1/claims" : absl::StrCat("/v1/namespaces/", Sv(ns), "/claims");
  ASSIGN_OR_RETURN(HttpResponse r, Call("list claims", "GET", target));
  absl::StatusOr<std::vector<Claim>> claims = api::ParseClaimList(r.body);
  if (!claims.ok()) return BadAnswer("list claims", claims.status());
  return claims;
}

absl::StatusOr<Claim> PdcClient::DeleteClaim(const ClaimKey& key, bool force) {
  ASSIGN_OR_RETURN(HttpResponse r, Call("delete claim", "DELETE",
                                        force ? ClaimPath(key) + "?force=true" : ClaimPath(key)));
  absl::StatusOr<Claim> c = api::ParseClaim(std::string_view(r.body));
  if (!c.ok()) return BadAnswer("delete claim", c.status());
  return c;
}

absl::StatusOr<Claim> PdcClient::ReleaseClaim(const ClaimKey& key, std::string_view pod_uid) {
  std::string target = ClaimPath(key) + "/release";
  if (!pod_uid.empty()) absl::StrAppend(&target, "?podUid=", Sv(pod_uid));
  ASSIGN_OR_RETURN(HttpResponse r, Call("release claim", "POST", target));
  absl::StatusOr<Claim> c = api::ParseClaim(std::string_view(r.body));
  if (!c.ok()) return BadAnswer("release claim", c.status());
  return c;
}

}  // namespace pdc
