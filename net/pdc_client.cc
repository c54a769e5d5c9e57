#include "net/pdc_client.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "net/http_url.h"
#include "rapidjson/document.h"

namespace pdc {
namespace {

namespace json = api::json;

// ServerError's payload: "<status> <message>".
constexpr char kRefusalPayload[] = "pdc.kubevirt.io/refusal";

// The server's {"error": "...", "field": "..."} as "<error> (field <field>)",
// else the first line of the body (at most 200 bytes).
std::string ErrorText(const HttpResponse& r) {
  rapidjson::Document doc;
  if (json::Parse(r.body, &doc).ok() && doc.IsObject()) {
    const json::Value* e = json::Find(doc, "error");
    if (e != nullptr && e->IsString() && e->GetStringLength() > 0) {
      const json::Value* f = json::Find(doc, "field");
      if (f != nullptr && f->IsString() && f->GetStringLength() > 0) {
        return absl::StrCat(Sv(json::StringOf(*e)), " (field ", Sv(json::StringOf(*f)), ")");
      }
      return std::string(json::StringOf(*e));
    }
  }
  std::string_view first = std::string_view(r.body).substr(0, r.body.find('\n'));
  return std::string(first.substr(0, 200));
}

// A 2xx answer that does not decode.
absl::Status BadAnswer(std::string_view what, const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(what), " answer: ", s.message()));
}

std::string ClaimsPath(std::string_view ns) {
  return absl::StrCat("/v1/namespaces/", PercentEncode(ns), "/claims");
}

std::string ClaimPath(const ClaimKey& key) {
  return absl::StrCat(ClaimsPath(key.ns), "/", PercentEncode(key.name));
}

std::string NodePath(std::string_view node) {
  return absl::StrCat("/v1/nodes/", PercentEncode(node));
}

}  // namespace

absl::Status ServerError(std::string_view what, const HttpResponse& r) {
  const std::string text = ErrorText(r);
  std::string msg = absl::StrCat(Sv(what), ": HTTP ", r.status);
  if (!text.empty()) absl::StrAppend(&msg, ": ", text);
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  if (r.status >= 500) {
    code = absl::StatusCode::kUnavailable;
  } else if (r.status == 401 || r.status == 403) {
    code = absl::StatusCode::kPermissionDenied;
  } else if (r.status == 404) {
    code = absl::StatusCode::kNotFound;
  } else if (r.status == 409) {
    code = absl::StatusCode::kFailedPrecondition;
  }
  absl::Status s(code, msg);
  s.SetPayload(kRefusalPayload, absl::Cord(absl::StrCat(r.status, " ", text)));
  return s;
}

std::optional<Refusal> RefusalOf(const absl::Status& s) {
  const auto payload = s.GetPayload(kRefusalPayload);
  if (!payload.has_value()) return std::nullopt;
  const std::string p(*payload);
  const size_t space = p.find(' ');
  Refusal r;
  if (space == std::string::npos || !absl::SimpleAtoi(p.substr(0, space), &r.http_status)) {
    return std::nullopt;
  }
  r.message = p.substr(space + 1);
  return r;
}

absl::StatusOr<HttpResponse> PdcClient::Call(std::string_view what, std::string_view method,
                                             std::string_view target, std::string_view body,
                                             const HttpRequestOptions& options) {
  ASSIGN_OR_RETURN(HttpResponse r, http_->Do(method, target, body, options));
  if (r.status < 200 || r.status > 299) return ServerError(what, r);
  return r;
}

absl::StatusOr<api::InventoryAccepted> PdcClient::PutInventory(const NodeInventory& inventory) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("inventory report", "PUT",
                        absl::StrCat(NodePath(inventory.node), "/inventory"),
                        api::WriteInventory(inventory)));
  absl::StatusOr<api::InventoryAccepted> accepted = api::ParseInventoryAccepted(r.body);
  if (!accepted.ok()) return BadAnswer("inventory", accepted.status());
  return accepted;
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
           absl::StrCat(NodePath(node), "/allocations?since=", since, "&wait=", wait_s),
           {}, options));
  absl::StatusOr<api::NodeAllocationsReply> reply = api::ParseNodeAllocations(r.body);
  if (!reply.ok()) return BadAnswer("allocations", reply.status());
  return std::move(reply->allocations);
}

absl::StatusOr<std::vector<ClaimKey>> PdcClient::ConfirmHandoff(
    std::string_view node, const api::HandoffConfirm& confirm) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("hand-off confirmation", "POST",
                        absl::StrCat(NodePath(node), "/handoffs"),
                        api::WriteHandoffConfirm(confirm)));
  absl::StatusOr<std::vector<ClaimKey>> claims = api::ParseClaimKeys(r.body, "claims");
  if (!claims.ok()) return BadAnswer("hand-off confirmation", claims.status());
  return claims;
}

absl::StatusOr<std::vector<PendingHandoff>> PdcClient::ListHandoffs(std::string_view node) {
  const std::string target =
      node.empty() ? "/v1/handoffs" : absl::StrCat(NodePath(node), "/handoffs");
  ASSIGN_OR_RETURN(HttpResponse r, Call("hand-offs", "GET", target));
  absl::StatusOr<std::vector<PendingHandoff>> items = api::ParseHandoffList(r.body);
  if (!items.ok()) return BadAnswer("hand-offs", items.status());
  return items;
}

absl::StatusOr<std::vector<ClaimKey>> PdcClient::CancelHandoff(std::string_view node,
                                                               std::string_view pod_uid) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("hand-off cancellation", "DELETE",
                        absl::StrCat(NodePath(node), "/handoffs/", PercentEncode(pod_uid))));
  absl::StatusOr<std::vector<ClaimKey>> released = api::ParseClaimKeys(r.body, "released");
  if (!released.ok()) return BadAnswer("hand-off cancellation", released.status());
  return released;
}

absl::StatusOr<std::vector<api::NodeSummary>> PdcClient::ListNodes() {
  ASSIGN_OR_RETURN(HttpResponse r, Call("list nodes", "GET", "/v1/nodes"));
  absl::StatusOr<std::vector<api::NodeSummary>> nodes = api::ParseNodeList(r.body);
  if (!nodes.ok()) return BadAnswer("list nodes", nodes.status());
  return nodes;
}

absl::StatusOr<api::NodeDetail> PdcClient::GetNode(std::string_view node) {
  ASSIGN_OR_RETURN(HttpResponse r, Call("get node", "GET", NodePath(node)));
  absl::StatusOr<api::NodeDetail> detail = api::ParseNodeDetail(r.body);
  if (!detail.ok()) return BadAnswer("get node", detail.status());
  return detail;
}

absl::StatusOr<std::vector<api::DeviceListing>> PdcClient::ListDevices() {
  ASSIGN_OR_RETURN(HttpResponse r, Call("list devices", "GET", "/v1/devices"));
  absl::StatusOr<std::vector<api::DeviceListing>> devices = api::ParseDeviceList(r.body);
  if (!devices.ok()) return BadAnswer("list devices", devices.status());
  return devices;
}

absl::StatusOr<Claim> PdcClient::CreateClaim(const api::ClaimCreate& create) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("create claim", "POST",
                        ClaimsPath(create.key.ns),
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
      ns.empty() ? "/v1/claims" : ClaimsPath(ns);
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
  if (!pod_uid.empty()) absl::StrAppend(&target, "?podUid=", PercentEncode(pod_uid));
  ASSIGN_OR_RETURN(HttpResponse r, Call("release claim", "POST", target));
  absl::StatusOr<Claim> c = api::ParseClaim(std::string_view(r.body));
  if (!c.ok()) return BadAnswer("release claim", c.status());
  return c;
}

}  // namespace pdc
