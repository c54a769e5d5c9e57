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

// `decoded`, or BadAnswer(what) when the answer did not decode.
template <typename T>
absl::StatusOr<T> Decoded(std::string_view what, absl::StatusOr<T> decoded) {
  if (!decoded.ok()) return BadAnswer(what, decoded.status());
  return decoded;
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
  return Decoded("inventory", api::ParseInventoryAccepted(r.body));
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
  return Decoded("hand-off confirmation", api::ParseClaimKeys(r.body, "claims"));
}

absl::StatusOr<std::vector<PendingHandoff>> PdcClient::ListHandoffs(std::string_view node) {
  const std::string target =
      node.empty() ? "/v1/handoffs" : absl::StrCat(NodePath(node), "/handoffs");
  ASSIGN_OR_RETURN(HttpResponse r, Call("hand-offs", "GET", target));
  return Decoded("hand-offs", api::ParseHandoffList(r.body));
}

absl::StatusOr<std::vector<ClaimKey>> PdcClient::CancelHandoff(std::string_view node,
                                                               std::string_view pod_uid) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("hand-off cancellation", "DELETE",
                        absl::StrCat(NodePath(node), "/handoffs/", PercentEncode(pod_uid))));
  return Decoded("hand-off cancellation", api::ParseClaimKeys(r.body, "released"));
}

absl::StatusOr<std::vector<api::NodeSummary>> PdcClient::ListNodes() {
  ASSIGN_OR_RETURN(HttpResponse r, Call("list nodes", "GET", "/v1/nodes"));
  return Decoded("list nodes", api::ParseNodeList(r.body));
}

absl::StatusOr<api::NodeDetail> PdcClient::GetNode(std::string_view node) {
  ASSIGN_OR_RETURN(HttpResponse r, Call("get node", "GET", NodePath(node)));
  return Decoded("get node", api::ParseNodeDetail(r.body));
}

absl::StatusOr<std::vector<api::DeviceListing>> PdcClient::ListDevices() {
  ASSIGN_OR_RETURN(HttpResponse r, Call("list devices", "GET", "/v1/devices"));
  return Decoded("list devices", api::ParseDeviceList(r.body));
}

absl::StatusOr<api::DraClaimList> PdcClient::ListDraClaims() {
  ASSIGN_OR_RETURN(HttpResponse r, Call("list DRA claims", "GET", "/v1/dra/claims"));
  return Decoded("list DRA claims", api::ParseDraClaimList(r.body));
}

absl::StatusOr<api::NodeDetail> PdcClient::ReleaseDevice(std::string_view node,
                                                          PciAddress address) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("release device", "POST",
                        absl::StrCat(NodePath(node), "/devices/", address.ToString(),
                                     "/release")));
  return Decoded("release device", api::ParseNodeDetail(r.body));
}

absl::StatusOr<api::NodeDetail> PdcClient::HandOverDevice(std::string_view node,
                                                           PciAddress address,
                                                           const ClaimKey& to) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("hand over device", "POST",
                        absl::StrCat(NodePath(node), "/devices/", address.ToString(),
                                     "/handover"),
                        api::WriteDeviceHandOver(to)));
  return Decoded("hand over device", api::ParseNodeDetail(r.body));
}

absl::StatusOr<api::NodeDetail> PdcClient::AbandonErase(std::string_view node,
                                                         PciAddress address) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("abandon erase", "POST",
                        absl::StrCat(NodePath(node), "/devices/", address.ToString(),
                                     "/abandon-erase")));
  return Decoded("abandon erase", api::ParseNodeDetail(r.body));
}

absl::StatusOr<Claim> PdcClient::CreateClaim(const api::ClaimCreate& create) {
  ASSIGN_OR_RETURN(HttpResponse r,
                   Call("create claim", "POST",
                        ClaimsPath(create.key.ns),
                        api::WriteClaimCreate(create)));
  return Decoded("create claim", api::ParseClaim(std::string_view(r.body)));
}

absl::StatusOr<Claim> PdcClient::GetClaim(const ClaimKey& key) {
  ASSIGN_OR_RETURN(HttpResponse r, Call("get claim", "GET", ClaimPath(key)));
  return Decoded("get claim", api::ParseClaim(std::string_view(r.body)));
}

absl::StatusOr<std::vector<Claim>> PdcClient::ListClaims(std::string_view ns) {
  const std::string target =
      ns.empty() ? "/v1/claims" : ClaimsPath(ns);
  ASSIGN_OR_RETURN(HttpResponse r, Call("list claims", "GET", target));
  return Decoded("list claims", api::ParseClaimList(r.body));
}

absl::StatusOr<Claim> PdcClient::DeleteClaim(const ClaimKey& key, bool force) {
  ASSIGN_OR_RETURN(HttpResponse r, Call("delete claim", "DELETE",
                                        force ? ClaimPath(key) + "?force=true" : ClaimPath(key)));
  return Decoded("delete claim", api::ParseClaim(std::string_view(r.body)));
}

absl::StatusOr<Claim> PdcClient::ReleaseClaim(const ClaimKey& key, std::string_view pod_uid) {
  std::string target = ClaimPath(key) + "/release";
  if (!pod_uid.empty()) absl::StrAppend(&target, "?podUid=", PercentEncode(pod_uid));
  ASSIGN_OR_RETURN(HttpResponse r, Call("release claim", "POST", target));
  return Decoded("release claim", api::ParseClaim(std::string_view(r.body)));
}

}  // namespace pdc
