// Router: the whole of pdc-extender's HTTP behaviour as a pure function
// HttpRequest -> HttpResponse (plus the long-poll hand-off described in
// net/http_types.h). Dispatches paths to the scheduler verbs and the REST API,
// enforces authentication, serves /healthz, /readyz and /metrics, and counts
// every request. Knows nothing about sockets; tested without a network.
//
// Paths (one table in router.cc, listed by Router::Routes):
//   POST <scheduler_prefix>/{filter,prioritize,bind,preempt}; the bare
//        /{verb} is accepted too, so a urlPrefix without a path works.
//   /v1/...   the REST API (docs/rest-api.md §3-§5)
//   GET /healthz /readyz /metrics; /readyz/leader with leader election
// Auth: when a bearer token or node identities are configured, every REST
// call under /v1/, reads included, needs `Authorization: Bearer <token>`
// (the scheme in any case; 401 otherwise). The admin token may call
// everything. Any other token is a node identity's (node_auth.h: a
// TokenReview, or extender.nodeAuth.tokenDir), which may call only its own
// node's driver endpoints - PUT inventory, GET allocations, GET and POST
// handoffs, GET the node - and gets 403 naming both nodes on another
// node's, and 403 elsewhere (claims, devices, the lists of every node,
// cancelling a hand-off, releasing a device: people's calls). A token that
// needs a TokenReview parks the request (LongPoll) until it is answered; the
// review never runs on a server thread. /healthz, /readyz and /metrics stay open (probes and
// Prometheus; /metrics holds counters and node names only). Scheduler verbs
// are open on their listener, or need a verified client certificate when
// scheduler_requires_client_cert. Whether a listener beyond loopback may be
// open at all is decided at start-up (config: extender.allowUnauthenticated).
// Thread-safety: Handle is thread-safe and runs on server worker threads.
#ifndef PDC_EXTENDER_ROUTER_H_
#define PDC_EXTENDER_ROUTER_H_

#include <array>
#include <atomic>
#include <span>
#include <vector>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/metrics.h"
#include "extender/extender_context.h"
#include "kube/leader_elector.h"
#include "extender/node_auth.h"
#include "extender/rest_handlers.h"
#include "extender/scheduler_handlers.h"
#include "net/http_types.h"

namespace pdc::extender {

// The server's values (net/http_types.h); pdc::HttpResponse is the client's.
using net::HttpRequest;
using net::HttpResponse;
using net::LongPoll;

struct RouterOptions {
  std::string scheduler_prefix = "/scheduler";
  std::string bearer_token;  // The admin token; "" = none.
  // Node identities (extender.nodeAuth); outlives the router. Null = none.
  NodeAuthenticator* node_auth = nullptr;
  bool scheduler_requires_client_cert = false;
  absl::Duration max_long_poll = absl::Seconds(60);
  // store: kubernetes - claims are PersistentDeviceClaim objects: the REST
  // API does not create or delete them (405 saying so); it still shows them.
  bool claims_are_objects = false;
  // extender.leaderElection: everything but /healthz and /metrics is
  // answered by NotLeader() while this replica does not lead. Outlives the
  // router; null = the only replica.
  const kube::LeaderElector* leadership = nullptr;
};

// The answer of a replica that is not the leader: /healthz 200 (it is
// alive); /readyz 200 on a follower standing by (`standby`: a Deployment's
// rollout and a PodDisruptionBudget count it), 503 on a leader that could
// not renew; /readyz/leader 503; /metrics from `registry` (may be null);
// everything else 503 naming the leader, which kube-scheduler and pdc-node
// retry.
// Who may call a route.
enum class RouteAccess : uint8_t {
  kOpen,       // Anyone: probes and Prometheus.
  kScheduler,  // kube-scheduler: open, or a verified client certificate.
  kAdmin,      // The admin token, when authentication is configured.
  kOwnNode,    // The admin token, or the node identity of the route's {node}.
};

// One endpoint, as Router::Routes lists it.
struct RouteInfo {
  std::string_view method;   // "" = any method.
  std::string_view pattern;  // "/v1/nodes/{node}/inventory"; a {param} is one segment.
  Route label;               // The metrics `verb` label.
  RouteAccess access;
};

// The values of a matched route's {params}, in order.
using RouteParams = std::array<std::string_view, 3>;

HttpResponse NotLeader(std::string_view path, std::string_view leader, bool standby,
                       const MetricsRegistry* registry);

class Router {
 public:
  // `ctx` outlives the router.
  Router(RouterOptions options, const ExtenderContext* ctx);

  // Consumes the request (bodies are parsed in place).
  HttpResponse Handle(HttpRequest request) const;

  // Every endpoint, in the order a request is matched against them.
  static std::vector<RouteInfo> Routes();

  // /readyz answers 200 only after SetReady(true) (main: once the store has
  // recovered and the allocator is open).
  void SetReady(bool ready) { ready_.store(ready); }

 private:
  struct Call;
  struct RouteEntry;
  // The route table (router.cc): method, pattern, label, access, handler.
  static std::span<const RouteEntry> Table();

  HttpResponse Dispatch(HttpRequest& request, std::string_view path,
                        std::string_view query, Route* route) const;
  HttpResponse Healthz() const;
  HttpResponse Readyz() const;
  HttpResponse Metrics() const;
  // Who calls a REST endpoint: `answer` set = refused, or parked while its
  // token is reviewed; else `node` set = a node identity, unset = the
  // admin (or no authentication configured).
  struct Authn {
    std::optional<HttpResponse> answer;
    std::optional<NodeCaller> node;
  };
  Authn Authenticate(HttpRequest& request) const;
  // 403 unless the node identity `caller` may call `route` (null: no route
  // of this path and method) with these params: only a kOwnNode route of its
  // own node.
  std::optional<HttpResponse> NodeMayNot(const NodeCaller& caller, const HttpRequest& req,
                                         std::string_view path, const RouteEntry* route,
                                         const RouteParams& params) const;

  const RouterOptions options_;
  const ExtenderContext* const ctx_;
  const SchedulerHandlers scheduler_;
  const RestHandlers rest_;
  std::atomic<bool> ready_{false};
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_ROUTER_H_
