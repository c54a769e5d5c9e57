// PdcClient: the pdc REST API (docs/rest-api.md §3-§5) as typed calls over
// one HttpClient, for pdc-node, pdcctl and pdc-sim. Requests are encoded and
// answers decoded with the api/ codecs, so every client reads the wire as the
// server writes it.
//
// Path segments and query values are percent-encoded.
//
// Errors: transport problems come from HttpClient as they are (Unavailable,
// DeadlineExceeded, ...). A non-2xx answer is an error carrying the server's
// {"error"} message with its "field" (or the start of the body), a code by
// status — 401 and 403 PermissionDenied, 404 NotFound, 409
// FailedPrecondition, 5xx Unavailable, any other InvalidArgument — and the
// answer itself (RefusalOf), so a caller can tell "the server said no" from
// "no server answered".
// A 2xx answer that does not decode is InvalidArgument naming the field.
// Thread-safety: as HttpClient (requests are serialised on its connection).
#ifndef PDC_NET_PDC_CLIENT_H_
#define PDC_NET_PDC_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/dra_claims_json.h"
#include "api/handoff_json.h"
#include "api/rest_json.h"
#include "model/allocations.h"
#include "model/types.h"
#include "net/http_client.h"

namespace pdc {

// The error for a non-2xx answer to `what` ("allocations"), as described
// above: "<what>: HTTP <status>: <server's message>".
absl::Status ServerError(std::string_view what, const HttpResponse& response);
// A non-2xx answer behind an error of ServerError: its HTTP status and the
// server's message ("<error> (field <field>)", or the body's first line).
struct Refusal {
  int http_status = 0;
  std::string message;
};
// nullopt when no answer came (a transport error) or `s` is not ServerError's.
std::optional<Refusal> RefusalOf(const absl::Status& s);

class PdcClient {
 public:
  // The longest long-poll wait the server honours (docs/rest-api.md §4.5).
  static constexpr absl::Duration kMaxWait = absl::Seconds(60);

  explicit PdcClient(std::unique_ptr<HttpClient> http) : http_(std::move(http)) {}

  // PUT /v1/nodes/{node}/inventory: the node's report, also its heartbeat.
  // Returns how many devices the server accepted and the node's allocations
  // version.
  absl::StatusOr<api::InventoryAccepted> PutInventory(const NodeInventory& inventory);
  // GET /v1/nodes/{node}/allocations?since=&wait=: at once when the version
  // is above `since`, else after at most `wait` (whole seconds, 0..60). The
  // request's timeout is wait + 10 s.
  absl::StatusOr<NodeAllocations> GetNodeAllocations(std::string_view node, uint64_t since,
                                                     absl::Duration wait);

  // POST /v1/nodes/{node}/handoffs: kubelet's Allocate was answered with
  // `confirm.devices` for pod `confirm.pod_uid`. Returns the claims handed
  // off. NotFound: that pod waits for nothing there; FailedPrecondition: other
  // devices than its claimed ones.
  absl::StatusOr<std::vector<ClaimKey>> ConfirmHandoff(std::string_view node,
                                                       const api::HandoffConfirm& confirm);
  // GET /v1/nodes/{node}/handoffs, or /v1/handoffs when `node` is "".
  absl::StatusOr<std::vector<PendingHandoff>> ListHandoffs(std::string_view node);
  // DELETE /v1/nodes/{node}/handoffs/{podUid}: returns the released claims.
  absl::StatusOr<std::vector<ClaimKey>> CancelHandoff(std::string_view node,
                                                      std::string_view pod_uid);

  // GET /v1/nodes: every node that reported or is known.
  absl::StatusOr<std::vector<api::NodeSummary>> ListNodes();
  // GET /v1/nodes/{node}: the node and its devices with their claims.
  absl::StatusOr<api::NodeDetail> GetNode(std::string_view node);
  // GET /v1/devices: every reported device with its claim.
  absl::StatusOr<std::vector<api::DeviceListing>> ListDevices();
  // GET /v1/dra/claims: the ResourceClaims the DRA claim keeper follows.
  absl::StatusOr<api::DraClaimList> ListDraClaims();
  // POST /v1/nodes/{node}/devices/{address}/release: an administrator
  // releases a Released device; returns the node after.
  absl::StatusOr<api::NodeDetail> ReleaseDevice(std::string_view node, PciAddress address);
  absl::StatusOr<api::NodeDetail> HandOverDevice(std::string_view node, PciAddress address,
                                                 const ClaimKey& to);
  absl::StatusOr<api::NodeDetail> AbandonErase(std::string_view node, PciAddress address);

  // POST /v1/namespaces/{ns}/claims.
  absl::StatusOr<Claim> CreateClaim(const api::ClaimCreate& create);
  // GET /v1/namespaces/{ns}/claims/{name}.
  absl::StatusOr<Claim> GetClaim(const ClaimKey& key);
  // GET /v1/namespaces/{ns}/claims, or /v1/claims when `ns` is "".
  absl::StatusOr<std::vector<Claim>> ListClaims(std::string_view ns);
  // DELETE /v1/namespaces/{ns}/claims/{name}[?force=true]: returns the claim
  // as it was.
  absl::StatusOr<Claim> DeleteClaim(const ClaimKey& key, bool force);
  // POST /v1/namespaces/{ns}/claims/{name}/release[?podUid=]: returns the
  // claim after. `pod_uid` "": whoever holds it.
  absl::StatusOr<Claim> ReleaseClaim(const ClaimKey& key, std::string_view pod_uid);

  HttpClient& http() { return *http_; }

 private:
  // Sends the request; a non-2xx answer is ServerError(what, ...).
  absl::StatusOr<HttpResponse> Call(std::string_view what, std::string_view method,
                                    std::string_view target, std::string_view body = {},
                                    const HttpRequestOptions& options = {});

  std::unique_ptr<HttpClient> http_;
};

}  // namespace pdc

#endif  // PDC_NET_PDC_CLIENT_H_
