// The REST API for people and node drivers (docs/rest-api.md §3-§5):
// inventory, allocations long-poll, claims, nodes, devices. Each handler
// returns the complete answer; errors are {"error","field"} with the status
// docs/rest-api.md lists. Authentication is the Router's job.
// Thread-safety: thread-safe.
#ifndef PDC_EXTENDER_REST_HANDLERS_H_
#define PDC_EXTENDER_REST_HANDLERS_H_

#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "extender/extender_context.h"
#include "net/http_types.h"

namespace pdc::extender {

// The server's values (net/http_types.h); pdc::HttpResponse is the client's.
using net::HttpResponse;
using net::LongPoll;

// Decoded query string (?a=1&b=x); later keys win.
using Query = absl::flat_hash_map<std::string, std::string>;
Query ParseQuery(std::string_view query);

class RestHandlers {
 public:
  // `max_wait` caps ?wait= of the allocations long-poll.
  RestHandlers(const ExtenderContext* ctx, absl::Duration max_wait)
      : ctx_(ctx), max_wait_(max_wait) {}

  HttpResponse PutInventory(std::string_view node, std::string_view body) const;
  // allow_wait: false when the long-poll's time is up (see net/http_types.h).
  HttpResponse GetAllocations(std::string_view node, const Query& query,
                              bool allow_wait) const;
  HttpResponse CreateClaim(std::string_view ns, std::string_view body) const;
  HttpResponse ListClaims(std::string_view ns) const;  // "" = all
  HttpResponse GetClaim(std::string_view ns, std::string_view name) const;
  HttpResponse DeleteClaim(std::string_view ns, std::string_view name,
                           const Query& query) const;
  HttpResponse ReleaseClaim(std::string_view ns, std::string_view name,
                            const Query& query) const;
  // Hand-off (docs/rest-api.md §5): the node driver confirms, people or the
  // extender's own sweeper cancel, anyone lists. `node` "" lists all nodes.
  HttpResponse ConfirmHandoff(std::string_view node, std::string_view body) const;
  HttpResponse ListHandoffs(std::string_view node) const;
  HttpResponse CancelHandoff(std::string_view node, std::string_view pod_uid) const;
  HttpResponse ListNodes() const;
  HttpResponse GetNode(std::string_view node) const;
  HttpResponse ListDevices() const;
  // An administrator releases a Released device (docs/rest-api.md §4.6).
  HttpResponse ReleaseDevice(std::string_view node, std::string_view address) const;
  // A Released device handed over to the claim in `body` (a claim of that
  // namespace may pin it then); audited with an Event on the node.
  HttpResponse HandOverDevice(std::string_view node, std::string_view address,
                              std::string_view body) const;
  // The erase of a returning device ended by an administrator: the device
  // is held Released for no claim; audited with an Event on the node.
  HttpResponse AbandonErase(std::string_view node, std::string_view address) const;

 private:
  const ExtenderContext* const ctx_;
  const absl::Duration max_wait_;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_REST_HANDLERS_H_
