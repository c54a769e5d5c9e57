#include "extender/router.h"

#include <array>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "extender/dra_claims_handler.h"
#include "extender/json_response.h"
#include "extender/node_token_dir.h"
#include "model/names.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {
namespace {

HttpResponse Error(int status, std::string_view message,
                   std::string_view field = "") {
  return JsonResponse(status, json::ErrorBody(message, field));
}

HttpResponse Text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

HttpResponse MethodNotAllowed(const HttpRequest& req, std::string_view path) {
  return Error(405, absl::StrCat("method ", req.method, " is not allowed on ",
                                 Sv(path)));
}

HttpResponse NoSuchEndpoint(const HttpRequest& req, std::string_view path) {
  return Error(404, absl::StrCat("no such endpoint: ", req.method, " ", Sv(path)));
}

// A create or delete of a claim when the claims are Kubernetes objects.
HttpResponse ClaimsAreObjects(const HttpRequest& req) {
  return Error(405, absl::StrCat("method ", req.method,
                                 " is not allowed on claims here: with extender.store kubernetes "
                                 "a claim is a PersistentDeviceClaim object; create and delete "
                                 "it with kubectl (kubectl apply -f claim.yaml, kubectl delete "
                                 "pdc NAME)"));
}

// Most of a request's method, path and error answer one debug line shows.
constexpr size_t kLoggedMethodBytes = 16;
constexpr size_t kLoggedPathBytes = 256;
constexpr size_t kLoggedBodyBytes = 1024;

// `s`, or its first `max` bytes and how long it was.
std::string Cut(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  return absl::StrCat(Sv(s.substr(0, max)), "... (", s.size(), " bytes)");
}

// The token of an `Authorization: Bearer <token>` header, "" when there is
// none. credentials = auth-scheme 1*SP token68 (RFC 7235 §2.1); the scheme is
// case-insensitive ("bearer", "BEARER"), the token is not.
std::string_view BearerOf(std::string_view h) {
  constexpr std::string_view kBearer = "bearer";
  if (h.size() <= kBearer.size() ||
      !json::EqualsIgnoreCase(h.substr(0, kBearer.size()), kBearer) ||
      h[kBearer.size()] != ' ') {
    return "";
  }
  h.remove_prefix(kBearer.size());
  while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
  return h;
}

// A refused node identity: 401 the token proves nothing, 403 it is someone
// pdc-node is not, 503 it could not be checked now.
HttpResponse Refused(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnauthenticated:
      return Error(401, StdSv(s.message()));
    case absl::StatusCode::kPermissionDenied:
      return Error(403, StdSv(s.message()));
    default:
      return Error(503, StdSv(s.message()));
  }
}

}  // namespace

Router::Router(RouterOptions options, const ExtenderContext* ctx)
    : options_(std::move(options)),
      ctx_(ctx),
      scheduler_(ctx),
      rest_(ctx, options_.max_long_poll) {}

Router::Authn Router::Authenticate(HttpRequest& req) const {
  NodeAuthenticator* const na = options_.node_auth;
  if (options_.bearer_token.empty() && na == nullptr) return {};
  auto refused = [](const absl::Status& s) { return Authn{Refused(s), std::nullopt}; };
  auto caller = [&](const absl::StatusOr<NodeCaller>& c) {
    return c.ok() ? Authn{std::nullopt, *c} : refused(c.status());
  };
  if (req.resume_token != 0 && na != nullptr) {
    // A request parked while its token was reviewed (the body is with the
    // job). The version is read first: a review ending after it wakes the
    // re-parked request at once.
    const std::string topic = NodeAuthenticator::Topic(req.resume_token);
    const uint64_t seen = ctx_->notifier->version(topic);
    NodeAuthenticator::Resumed r = na->Resume(req.resume_token);
    switch (r.state) {
      case NodeAuthenticator::Resumed::State::kDone:
        req.body = std::move(r.body);
        return caller(r.caller);
      case NodeAuthenticator::Resumed::State::kPending:
        if (req.allow_wait) {
          HttpResponse wait;
          wait.long_poll = LongPoll{seen, na->max_wait(), topic, req.resume_token};
          return {std::move(wait), std::nullopt};
        }
        na->Abandon(req.resume_token);
        return refused(absl::UnavailableError(absl::StrCat(
            "kube-apiserver did not answer the TokenReview of the bearer token within ",
            absl::FormatDuration(na->max_wait()), "; retry")));
      case NodeAuthenticator::Resumed::State::kGone:
        return refused(absl::UnavailableError(
            "the check of the bearer token was dropped (too many waiting); retry"));
    }
  }
  const std::string_view bearer = BearerOf(req.authorization);
  if (!options_.bearer_token.empty() && SameSecret(bearer, options_.bearer_token)) return {};
  if (na == nullptr || bearer.empty()) {
    return refused(absl::UnauthenticatedError(
        na == nullptr ? "this call needs 'Authorization: Bearer <token>' with the configured "
                        "API token"
                      : "this call needs 'Authorization: Bearer <token>': the admin token, or "
                        "a node driver's own token"));
  }
  if (std::optional<absl::StatusOr<NodeCaller>> now = na->Lookup(bearer)) return caller(*now);
  if (!req.allow_wait) {
    // The re-run of a long-poll whose time is up, and the token's answer
    // left the cache meanwhile: no time to ask again.
    return refused(absl::UnavailableError(
        "the bearer token must be checked again (TokenReview); retry"));
  }
  absl::StatusOr<NodeAuthenticator::Ticket> t = na->Start(bearer, std::move(req.body));
  if (!t.ok()) return refused(absl::UnavailableError(t.status().message()));
  HttpResponse wait;
  wait.long_poll = LongPoll{t->seen, na->max_wait(), t->topic, t->token};
  return {std::move(wait), std::nullopt};
}

HttpResponse NotLeader(std::string_view path, std::string_view leader, bool standby,
                       const MetricsRegistry* registry) {
  if (path == "/healthz") return Text(200, "ok");
  const std::string who =
      leader.empty() ? std::string("no leader is known yet")
                     : absl::StrCat("the leader is ", Cut(leader, 256));
  if (path == "/readyz" && standby) return Text(200, absl::StrCat("ok: standing by (", who, ")"));
  if (path == "/readyz" || path == "/readyz/leader") {
    return Text(503, absl::StrCat("not ready: this replica is not the leader (", who, ")"));
  }
  if (path == "/metrics" && registry != nullptr) {
    HttpResponse r = Text(200, registry->Render());
    r.content_type = std::string(kMetricsContentType);
    return r;
  }
  return Error(503, absl::StrCat("this pdc-extender replica is not the leader (", who,
                                 "); retry through the Service"));
}

HttpResponse Router::Handle(HttpRequest request) const {
  const absl::Time start = ctx_->clock->Now();
  std::string target = std::move(request.target);
  std::string_view path = target;
  std::string_view query;
  if (size_t q = path.find('?'); q != std::string_view::npos) {
    query = path.substr(q + 1);
    path = path.substr(0, q);
  }
  Route route = Route::kOther;
  HttpResponse r = Dispatch(request, path, query, &route);
  if (ctx_->metrics != nullptr && !r.long_poll) {
    ctx_->metrics->ObserveRequest(route, r.status, ctx_->clock->Now() - start);
  }
  if (r.status >= 400 && r.status != 404 && spdlog::should_log(spdlog::level::debug)) {
    // The path and the answer may carry what a client sent (a refused name
    // is quoted, cut short, in the answer): both are cut here as well.
    spdlog::debug("{} {} -> {} {}", Cut(request.method, kLoggedMethodBytes),
                  Cut(path, kLoggedPathBytes), r.status, Cut(r.body, kLoggedBodyBytes));
  }
  return r;
}

namespace {

// The segments of `path` after its leading '/': "/v1/nodes/a" is v1, nodes, a.
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  for (absl::string_view s : absl::StrSplit(Sv(path), '/')) out.push_back(StdSv(s));
  return out;
}

bool IsParam(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// Whether `segments` are `pattern`'s, a {param} standing for one non-empty
// segment; the parameters' values go to `params` in order.
bool MatchRoute(std::string_view pattern, const std::vector<std::string_view>& segments,
                RouteParams* params) {
  size_t i = 0;
  size_t n = 0;
  for (std::string_view want : Segments(pattern)) {
    if (i == segments.size()) return false;
    const std::string_view got = segments[i++];
    if (IsParam(want)) {
      if (got.empty() || n == params->size()) return false;
      (*params)[n++] = got;
    } else if (got != want) {
      return false;
    }
  }
  return i == segments.size();
}

// The value of parameter `name` ("{node}") of `pattern`, "" when it has none.
std::string_view ParamNamed(std::string_view pattern, std::string_view name,
                            const RouteParams& params) {
  size_t n = 0;
  for (std::string_view seg : Segments(pattern)) {
    if (!IsParam(seg)) continue;
    if (seg == name) return params[n];
    ++n;
  }
  return "";
}

}  // namespace

// One request on its way to a route's handler.
struct Router::Call {
  HttpRequest& req;
  std::string_view path;
  std::string_view query;
  RouteParams params{};
};

struct Router::RouteEntry {
  RouteInfo info;
  // A create or delete of a claim: refused (405, saying why) when claims
  // are Kubernetes objects.
  bool writes_claim_objects = false;
  HttpResponse (*handle)(const Router&, Call&) = nullptr;
};

// Every endpoint, once: method ("" = any), pattern (scheduler verbs are
// matched after the configured prefix, or bare), metrics label, who may call
// it, handler. docs/rest-api.md documents each /v1/ row (a test checks).
std::span<const Router::RouteEntry> Router::Table() {
  using A = RouteAccess;
  using C = Call;
  using R = Router;
  static constexpr RouteEntry kTable[] = {
      {{"POST", "/filter", Route::kFilter, A::kScheduler}, false,
       [](const R& r, C& c) { return r.scheduler_.Filter(c.req.body); }},
      {{"POST", "/prioritize", Route::kPrioritize, A::kScheduler}, false,
       [](const R& r, C& c) { return r.scheduler_.Prioritize(c.req.body); }},
      {{"POST", "/bind", Route::kBind, A::kScheduler}, false,
       [](const R& r, C& c) { return r.scheduler_.Bind(c.req); }},
      {{"POST", "/preempt", Route::kPreempt, A::kScheduler}, false,
       [](const R& r, C& c) { return r.scheduler_.Preempt(c.req.body); }},
      {{"", "/healthz", Route::kHealth, A::kOpen}, false,
       [](const R& r, C&) { return r.Healthz(); }},
      {{"", "/readyz", Route::kHealth, A::kOpen}, false,
       [](const R& r, C&) { return r.Readyz(); }},
      {{"", "/readyz/leader", Route::kHealth, A::kOpen}, false,
       [](const R& r, C& c) {
         // Only with leader election; it then answers as /readyz does
         // (NotLeader answers it on a replica that does not lead).
         return r.options_.leadership != nullptr ? r.Readyz() : NoSuchEndpoint(c.req, c.path);
       }},
      {{"", "/metrics", Route::kMetrics, A::kOpen}, false,
       [](const R& r, C&) { return r.Metrics(); }},
      // §4 nodes and devices
      {{"GET", "/v1/nodes", Route::kNodes, A::kAdmin}, false,
       [](const R& r, C&) { return r.rest_.ListNodes(); }},
      {{"GET", "/v1/nodes/{node}", Route::kNodes, A::kOwnNode}, false,
       [](const R& r, C& c) { return r.rest_.GetNode(c.params[0]); }},
      {{"PUT", "/v1/nodes/{node}/inventory", Route::kInventory, A::kOwnNode}, false,
       [](const R& r, C& c) { return r.rest_.PutInventory(c.params[0], c.req.body); }},
      {{"GET", "/v1/nodes/{node}/allocations", Route::kAllocations, A::kOwnNode}, false,
       [](const R& r, C& c) {
         return r.rest_.GetAllocations(c.params[0], ParseQuery(c.query), c.req.allow_wait);
       }},
      {{"GET", "/v1/devices", Route::kDevices, A::kAdmin}, false,
       [](const R& r, C&) { return r.rest_.ListDevices(); }},
      {{"POST", "/v1/nodes/{node}/devices/{address}/release", Route::kNodes, A::kAdmin}, false,
       [](const R& r, C& c) { return r.rest_.ReleaseDevice(c.params[0], c.params[1]); }},
      {{"POST", "/v1/nodes/{node}/devices/{address}/handover", Route::kNodes, A::kAdmin}, false,
       [](const R& r, C& c) {
         return r.rest_.HandOverDevice(c.params[0], c.params[1], c.req.body);
       }},
      {{"POST", "/v1/nodes/{node}/devices/{address}/abandon-erase", Route::kNodes, A::kAdmin},
       false, [](const R& r, C& c) { return r.rest_.AbandonErase(c.params[0], c.params[1]); }},
      // §5 hand-off
      {{"POST", "/v1/nodes/{node}/handoffs", Route::kNodes, A::kOwnNode}, false,
       [](const R& r, C& c) { return r.rest_.ConfirmHandoff(c.params[0], c.req.body); }},
      {{"GET", "/v1/nodes/{node}/handoffs", Route::kNodes, A::kOwnNode}, false,
       [](const R& r, C& c) { return r.rest_.ListHandoffs(c.params[0]); }},
      {{"GET", "/v1/handoffs", Route::kNodes, A::kAdmin}, false,
       [](const R& r, C&) { return r.rest_.ListHandoffs(""); }},
      {{"DELETE", "/v1/nodes/{node}/handoffs/{podUid}", Route::kNodes, A::kAdmin}, false,
       [](const R& r, C& c) { return r.rest_.CancelHandoff(c.params[0], c.params[1]); }},
      // §3 claims
      {{"GET", "/v1/claims", Route::kClaims, A::kAdmin}, false,
       [](const R& r, C&) { return r.rest_.ListClaims(""); }},
      {{"GET", "/v1/namespaces/{ns}/claims", Route::kClaims, A::kAdmin}, false,
       [](const R& r, C& c) { return r.rest_.ListClaims(c.params[0]); }},
      {{"POST", "/v1/namespaces/{ns}/claims", Route::kClaims, A::kAdmin}, true,
       [](const R& r, C& c) { return r.rest_.CreateClaim(c.params[0], c.req.body); }},
      {{"GET", "/v1/namespaces/{ns}/claims/{name}", Route::kClaims, A::kAdmin}, false,
       [](const R& r, C& c) { return r.rest_.GetClaim(c.params[0], c.params[1]); }},
      {{"DELETE", "/v1/namespaces/{ns}/claims/{name}", Route::kClaims, A::kAdmin}, true,
       [](const R& r, C& c) {
         return r.rest_.DeleteClaim(c.params[0], c.params[1], ParseQuery(c.query));
       }},
      {{"POST", "/v1/namespaces/{ns}/claims/{name}/release", Route::kClaims, A::kAdmin}, false,
       [](const R& r, C& c) {
         return r.rest_.ReleaseClaim(c.params[0], c.params[1], ParseQuery(c.query));
       }},
      // §3.7 DRA claims
      {{"GET", "/v1/dra/claims", Route::kClaims, A::kAdmin}, false,
       [](const R& r, C&) { return ListDraClaims(*r.ctx_); }},
  };
  return kTable;
}

std::vector<RouteInfo> Router::Routes() {
  std::vector<RouteInfo> out;
  for (const RouteEntry& e : Table()) out.push_back(e.info);
  return out;
}

HttpResponse Router::Healthz() const {
  absl::Status h = ctx_->allocator->Health();
  if (h.ok()) return Text(200, "ok");
  return Text(503, absl::StrCat("unhealthy: ", h.message()));
}

HttpResponse Router::Readyz() const {
  return ready_.load() ? Text(200, "ok")
                       : Text(503, "not ready: the store is recovering, or the Kubernetes "
                                   "watch caches have not synced yet");
}

HttpResponse Router::Metrics() const {
  if (ctx_->registry == nullptr) return Error(404, "metrics are disabled");
  HttpResponse r = Text(200, ctx_->registry->Render());
  r.content_type = std::string(kMetricsContentType);
  return r;
}

std::optional<HttpResponse> Router::NodeMayNot(const NodeCaller& caller, const HttpRequest& req,
                                               std::string_view path,
                                               const RouteEntry* route,
                                               const RouteParams& params) const {
  const std::string who = absl::StrCat("node ", model::QuoteForMessage(caller.node),
                                       " (authenticated by ", caller.source, ")");
  const std::string call =
      absl::StrCat(Cut(req.method, kLoggedMethodBytes), " ", Cut(path, kLoggedPathBytes));
  if (route != nullptr) {
    const std::string_view node = ParamNamed(route->info.pattern, "{node}", params);
    if (!node.empty() && node != caller.node) {
      return Error(403, absl::StrCat(who, " may not call ", call, ": that is node ",
                                     model::QuoteForMessage(node),
                                     "'s; a node driver may touch only its own node"));
    }
    if (route->info.access == RouteAccess::kOwnNode && route->info.method == req.method) {
      return std::nullopt;
    }
  }
  return Error(403, absl::StrCat(who, " may not call ", call,
                                 ": a node driver may only report its own node's inventory, "
                                 "read its allocations and its hand-offs, and confirm them; "
                                 "this call needs the admin token (extender.tokenFile)"));
}

HttpResponse Router::Dispatch(HttpRequest& req, std::string_view path,
                              std::string_view query, Route* route) const {
  if (options_.leadership != nullptr && path != "/healthz" && path != "/metrics" &&
      !options_.leadership->Leading()) {
    return NotLeader(path, options_.leadership->Leader(), false, nullptr);
  }
  std::string_view verb_path = path;
  if (!options_.scheduler_prefix.empty() &&
      path.substr(0, options_.scheduler_prefix.size()) == options_.scheduler_prefix) {
    verb_path = path.substr(options_.scheduler_prefix.size());
  }
  const std::vector<std::string_view> segments = Segments(path);
  const std::vector<std::string_view> verb_segments = Segments(verb_path);
  // With a token configured every /v1/ call needs it, reads too (claims,
  // pods and serial numbers are not for anyone who can reach the port), and
  // before anything else: a 404 or 405 would tell a stranger what exists.
  std::optional<NodeCaller> node;
  if (path.substr(0, 4) == "/v1/") {
    Authn who = Authenticate(req);
    if (who.answer.has_value()) return *std::move(who.answer);
    node = std::move(who.node);
  }
  Call call{req, path, query};
  const RouteEntry* path_match = nullptr;  // This path, another method.
  RouteParams path_params{};
  for (const RouteEntry& e : Table()) {
    RouteParams params{};
    const bool verb = e.info.access == RouteAccess::kScheduler;
    if (!MatchRoute(e.info.pattern, verb ? verb_segments : segments, &params)) continue;
    if (!e.info.method.empty() && e.info.method != req.method) {
      if (path_match == nullptr) {
        path_match = &e;
        path_params = params;
      }
      continue;
    }
    *route = e.info.label;
    call.params = params;
    if (node.has_value()) {
      if (std::optional<HttpResponse> no = NodeMayNot(*node, req, path, &e, params)) return *no;
    }
    if (verb && options_.scheduler_requires_client_cert && !req.client_cert_verified) {
      return Error(401, "scheduler verbs need a verified client certificate");
    }
    if (e.writes_claim_objects && options_.claims_are_objects) return ClaimsAreObjects(req);
    return e.handle(*this, call);
  }
  if (node.has_value()) return *NodeMayNot(*node, req, path, path_match, path_params);
  if (path_match != nullptr) {
    *route = path_match->info.label;
    return MethodNotAllowed(req, path);
  }
  return NoSuchEndpoint(req, path);
}

}  // namespace pdc::extender
