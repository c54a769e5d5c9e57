#include "extender/rest_handlers.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/handoff_json.h"
#include "api/rest_json.h"
#include "api/validation.h"
#include "common/strings.h"
#include "extender/json_response.h"
#include "kube/event_recorder.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

using api::ClaimCreate;
using api::HandoffConfirm;
using api::ParseClaimCreate;
using api::ParseHandoffConfirm;
using api::ParseInventory;
using api::ValidateNamespace;
using api::ValidateObjectName;
using api::ValidateUid;
using api::WriteClaim;
using api::WriteClaimList;
using api::WriteDeviceList;
using api::WriteHandoffConfirmed;
using api::WriteHandoffList;
using api::WriteInventoryAccepted;
using api::WriteNodeAllocations;
using api::WriteNodeDetail;
using api::WriteNodeList;
using api::WriteReleased;
namespace {

std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigitValue(s[i + 1]) >= 0 &&
               HexDigitValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigitValue(s[i + 1]) * 16 + HexDigitValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

HttpResponse Ok(std::string body) { return JsonResponse(200, std::move(body)); }

// Validates the path parameters before they reach the allocator, so that a
// bad name is a 422 naming the parameter rather than a confusing 404.
absl::Status CheckClaimPath(std::string_view ns, std::string_view name) {
  if (absl::Status s = ValidateNamespace("namespace", ns); !s.ok()) return s;
  if (name.empty()) return absl::OkStatus();
  return ValidateObjectName("name", name);
}

absl::StatusOr<bool> BoolParam(const Query& q, std::string_view key) {
  auto it = q.find(Sv(key));
  if (it == q.end() || it->second.empty() || it->second == "false") return false;
  if (it->second == "true") return true;
  return json::TypeError(key, "must be true or false");
}

// A Released mark the allocator dropped because the node now reports
// another serial at the address (docs/design.md §4.7): worth a line, since
// an administrator may be looking for that data.
void LogSwappedDrives(std::string_view node, const std::vector<ReleasedDevice>& before,
                      const std::vector<Device>& reported) {
  for (const ReleasedDevice& r : before) {
    auto d = std::find_if(reported.begin(), reported.end(),
                          [&](const Device& x) { return x.address == r.address; });
    if (d == reported.end() || r.serial.empty() || d->serial.empty() || d->serial == r.serial) {
      continue;
    }
    // The Released drive reported elsewhere on the node: the mark moved with
    // it (the allocator follows serials; the move is logged on commit).
    if (std::any_of(reported.begin(), reported.end(),
                    [&](const Device& x) { return x.serial == r.serial; })) {
      continue;
    }
    spdlog::warn("node {} reports serial {} at {}, where Released serial {} (of deleted claim "
                 "{}) was: another drive, so the Released mark is dropped",
                 node, d->serial, r.address.ToString(), r.serial, r.claim.ToString());
  }
}

}  // namespace

Query ParseQuery(std::string_view query) {
  Query q;
  for (absl::string_view part : absl::StrSplit(Sv(query), '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    q[PercentDecode(StdSv(kv.first))] = PercentDecode(StdSv(kv.second));
  }
  return q;
}

HttpResponse RestHandlers::PutInventory(std::string_view node,
                                        std::string_view body) const {
  if (absl::Status s = ValidateObjectName("node", node); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<NodeInventory> inv = ParseInventory(body, node);
  if (!inv.ok()) return ErrorResponse(inv.status());
  std::vector<ReleasedDevice> released_before;
  if (absl::StatusOr<NodeView> v = ctx_->allocator->GetNode(node); v.ok()) {
    released_before = std::move(v->released);
  }
  std::vector<Device> reported;
  if (!released_before.empty()) reported = inv->devices;
  if (absl::Status s = ctx_->allocator->ReplaceInventory(*std::move(inv));
      !s.ok()) {
    return ErrorResponse(s);
  }
  if (!released_before.empty()) LogSwappedDrives(node, released_before, reported);
  size_t accepted = 0;
  if (absl::StatusOr<NodeView> v = ctx_->allocator->GetNode(node); v.ok()) {
    accepted = v->inventory.devices.size();
  }
  uint64_t version = 0;
  if (absl::StatusOr<NodeAllocations> a =
          ctx_->allocator->GetNodeAllocations(node);
      a.ok()) {
    version = a->version;
  }
  return Ok(WriteInventoryAccepted({std::string(node), accepted, version}));
}

HttpResponse RestHandlers::GetAllocations(std::string_view node,
                                          const Query& query,
                                          bool allow_wait) const {
  if (absl::Status s = ValidateObjectName("node", node); !s.ok()) {
    return ErrorResponse(s);
  }
  uint64_t since = 0;
  if (auto it = query.find("since"); it != query.end() && !it->second.empty()) {
    if (!absl::SimpleAtoi(it->second, &since)) {
      return ErrorResponse(
          json::TypeError("since", "must be a non-negative integer version"));
    }
  }
  absl::Duration wait = absl::ZeroDuration();
  if (auto it = query.find("wait"); it != query.end() && !it->second.empty()) {
    double seconds = 0;
    if (!absl::SimpleAtod(it->second, &seconds) || !(seconds >= 0)) {
      return ErrorResponse(
          json::TypeError("wait", "must be a number of seconds"));
    }
    wait = std::min(absl::Seconds(seconds), max_wait_);
  }
  // Read the notifier before the state: a change to this node committed
  // after this point reaches the notifier through the allocator's change
  // listener, raises the node's topic past `seen` and wakes the poll, so
  // none is missed. Changes to other nodes do not wake it.
  const uint64_t seen = ctx_->notifier->version();
  absl::StatusOr<NodeAllocations> a = ctx_->allocator->GetNodeAllocations(node);
  if (!a.ok()) return ErrorResponse(a.status());
  if (a->version > since || !allow_wait || wait <= absl::ZeroDuration()) {
    // pdc-node acts on this answer (hands devices over, erases returned
    // ones): only once what it says is durable, never a bind or a claim's
    // deletion still on its way to the store.
    if (absl::Status s = ctx_->allocator->AwaitReadsDurable(); !s.ok()) {
      return ErrorResponse(absl::UnavailableError(absl::StrCat(
          "the allocations of node ", Sv(node), " are not durable yet: ", s.message())));
    }
    return Ok(WriteNodeAllocations(node, *a));
  }
  HttpResponse r;
  r.long_poll = LongPoll{seen, wait, std::string(node)};
  return r;
}

HttpResponse RestHandlers::CreateClaim(std::string_view ns,
                                       std::string_view body) const {
  absl::StatusOr<ClaimCreate> c = ParseClaimCreate(body, ns);
  if (!c.ok()) return ErrorResponse(c.status());
  absl::StatusOr<Claim> claim = ctx_->allocator->CreateClaim(c->key, c->spec);
  if (!claim.ok()) return ErrorResponse(claim.status());
  return JsonResponse(201, WriteClaim(*claim));
}

HttpResponse RestHandlers::ListClaims(std::string_view ns) const {
  if (!ns.empty()) {
    if (absl::Status s = CheckClaimPath(ns, ""); !s.ok()) {
      return ErrorResponse(s);
    }
  }
  return Ok(WriteClaimList(ctx_->allocator->ListClaims(ns)));
}

HttpResponse RestHandlers::GetClaim(std::string_view ns,
                                    std::string_view name) const {
  if (absl::Status s = CheckClaimPath(ns, name); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<Claim> c =
      ctx_->allocator->GetClaim(ClaimKey{std::string(ns), std::string(name)});
  if (!c.ok()) return ErrorResponse(c.status());
  return Ok(WriteClaim(*c));
}

HttpResponse RestHandlers::DeleteClaim(std::string_view ns,
                                       std::string_view name,
                                       const Query& query) const {
  if (absl::Status s = CheckClaimPath(ns, name); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<bool> force = BoolParam(query, "force");
  if (!force.ok()) return ErrorResponse(force.status());
  const ClaimKey key{std::string(ns), std::string(name)};
  absl::StatusOr<Claim> before = ctx_->allocator->GetClaim(key);
  if (!before.ok()) return ErrorResponse(before.status());
  if (absl::Status s = ctx_->allocator->DeleteClaim(key, *force); !s.ok()) {
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      return ErrorResponse(json::WithField(
          absl::FailedPreconditionError(absl::StrCat(
              s.message(), " (delete with ?force=true to take it anyway)")),
          "", 409));
    }
    return ErrorResponse(s);
  }
  return Ok(WriteClaim(*before));
}

HttpResponse RestHandlers::ReleaseClaim(std::string_view ns,
                                        std::string_view name,
                                        const Query& query) const {
  if (absl::Status s = CheckClaimPath(ns, name); !s.ok()) {
    return ErrorResponse(s);
  }
  const ClaimKey key{std::string(ns), std::string(name)};
  std::string pod_uid;
  if (auto it = query.find("podUid"); it != query.end() && !it->second.empty()) {
    if (absl::Status s = ValidateUid("podUid", it->second); !s.ok()) {
      return ErrorResponse(s);
    }
    pod_uid = it->second;
  }
  if (absl::Status s = ctx_->allocator->Release(key, pod_uid); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<Claim> c = ctx_->allocator->GetClaim(key);
  if (!c.ok()) return ErrorResponse(c.status());
  return Ok(WriteClaim(*c));
}

HttpResponse RestHandlers::ConfirmHandoff(std::string_view node,
                                          std::string_view body) const {
  if (absl::Status s = ValidateObjectName("node", node); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<HandoffConfirm> c = ParseHandoffConfirm(body);
  if (!c.ok()) return ErrorResponse(c.status());
  absl::StatusOr<std::vector<ClaimKey>> claims = ctx_->allocator->ConfirmHandoff(
      node, c->pod_uid, c->resource_name, c->devices);
  if (!claims.ok()) return ErrorResponse(claims.status());
  return Ok(WriteHandoffConfirmed(node, *c, *claims));
}

HttpResponse RestHandlers::ListHandoffs(std::string_view node) const {
  if (!node.empty()) {
    if (absl::Status s = ValidateObjectName("node", node); !s.ok()) {
      return ErrorResponse(s);
    }
  }
  return Ok(WriteHandoffList(ctx_->allocator->PendingHandoffs(node)));
}

HttpResponse RestHandlers::CancelHandoff(std::string_view node,
                                         std::string_view pod_uid) const {
  if (absl::Status s = ValidateObjectName("node", node); !s.ok()) {
    return ErrorResponse(s);
  }
  if (absl::Status s = ValidateUid("podUid", pod_uid); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<std::vector<ClaimKey>> released =
      ctx_->allocator->CancelHandoff(node, pod_uid);
  if (!released.ok()) return ErrorResponse(released.status());
  return Ok(WriteReleased(*released));
}

HttpResponse RestHandlers::ListNodes() const {
  std::vector<api::NodeSummary> nodes;
  for (const NodeView& n : ctx_->allocator->ListNodes()) nodes.push_back(api::SummaryOf(n));
  return Ok(WriteNodeList(nodes));
}

HttpResponse RestHandlers::GetNode(std::string_view node) const {
  if (absl::Status s = ValidateObjectName("node", node); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<NodeView> v = ctx_->allocator->GetNode(node);
  if (!v.ok()) return ErrorResponse(v.status());
  return Ok(WriteNodeDetail(api::NodeDetail{
      api::SummaryOf(*v), api::ListDevices({*v}, ctx_->allocator->ListClaims(""))}));
}

HttpResponse RestHandlers::ReleaseDevice(std::string_view node,
                                         std::string_view address) const {
  if (absl::Status s = ValidateObjectName("node", node); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<PciAddress> a = api::ParseAddress(address, "address");
  if (!a.ok()) return ErrorResponse(a.status());
  if (absl::Status s = ctx_->allocator->ReleaseDevice(node, *a); !s.ok()) {
    return ErrorResponse(s);
  }
  spdlog::info("device {} on node {} released by an administrator: offered to any claim",
               a->ToString(), node);
  return GetNode(node);
}

namespace {

// An administrator's decision about a device, on the record: the log and,
// in Kubernetes mode, an Event on the Node.
void AuditDeviceDecision(const ExtenderContext* ctx, std::string_view node, std::string_view reason,
                         const std::string& message) {
  spdlog::warn("node {}: {}", node, message);
  if (ctx->events != nullptr) {
    ctx->events->Record({"v1", "Node", "", std::string(node), ""}, kube::EventType::kWarning,
                        reason, message);
  }
}

}  // namespace

HttpResponse RestHandlers::HandOverDevice(std::string_view node, std::string_view address,
                                          std::string_view body) const {
  if (absl::Status s = ValidateObjectName("node", node); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<PciAddress> a = api::ParseAddress(address, "address");
  if (!a.ok()) return ErrorResponse(a.status());
  absl::StatusOr<ClaimKey> to = api::ParseDeviceHandOver(body);
  if (!to.ok()) return ErrorResponse(to.status());
  if (absl::Status s = ctx_->allocator->HandOverDevice(node, *a, *to); !s.ok()) {
    return ErrorResponse(s);
  }
  AuditDeviceDecision(ctx_, node, "DeviceHandedOver",
                      absl::StrCat("Released device ", a->ToString(),
                                   " handed over by an administrator to claim ", to->ToString(),
                                   ": claims of namespace ", to->ns, " may pin it"));
  return GetNode(node);
}

HttpResponse RestHandlers::AbandonErase(std::string_view node, std::string_view address) const {
  if (absl::Status s = ValidateObjectName("node", node); !s.ok()) {
    return ErrorResponse(s);
  }
  absl::StatusOr<PciAddress> a = api::ParseAddress(address, "address");
  if (!a.ok()) return ErrorResponse(a.status());
  if (absl::Status s = ctx_->allocator->AbandonErase(node, *a); !s.ok()) {
    return ErrorResponse(s);
  }
  AuditDeviceDecision(ctx_, node, "EraseAbandoned",
                      absl::StrCat("the erase of device ", a->ToString(),
                                   " was ended by an administrator before it finished: the "
                                   "device may still hold a deleted claim's data and is held "
                                   "Released for no claim until an administrator releases it or "
                                   "hands it over"));
  return GetNode(node);
}

HttpResponse RestHandlers::ListDevices() const {
  return Ok(WriteDeviceList(
      api::ListDevices(ctx_->allocator->ListNodes(), ctx_->allocator->ListClaims(""))));
}

}  // namespace pdc::extender
