#include "extender/router.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
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

// 403 unless a node identity of `node` may make this call: only its own
// node's driver endpoints (see router.h).
std::optional<HttpResponse> NodeMayNot(const NodeCaller& caller, std::string_view method,
                                       std::string_view path,
                                       const std::vector<std::string_view>& p) {
  const std::string who = absl::StrCat("node ", model::QuoteForMessage(caller.node),
                                       " (authenticated by ", caller.source, ")");
  if (p.size() >= 2 && p[0] == "nodes" && p[1] != caller.node) {
    return Error(403, absl::StrCat(who, " may not call ", Cut(method, kLoggedMethodBytes), " ",
                                   Cut(path, kLoggedPathBytes), ": that is node ",
                                   model::QuoteForMessage(p[1]),
                                   "'s; a node driver may touch only its own node"));
  }
  const bool own = p.size() >= 2 && p[0] == "nodes";
  const std::string_view sub = p.size() == 3 ? p[2] : "";
  if (own && ((p.size() == 2 && method == "GET") || (sub == "inventory" && method == "PUT") ||
              (sub == "allocations" && method == "GET") ||
              (sub == "handoffs" && (method == "GET" || method == "POST")))) {
    return std::nullopt;
  }
  return Error(403, absl::StrCat(who, " may not call ", Cut(method, kLoggedMethodBytes), " ",
                                 Cut(path, kLoggedPathBytes),
                                 ": a node driver may only report its own node's inventory, "
                                 "read its allocations and its hand-offs, and confirm them; "
                                 "this call needs the admin token (extender.tokenFile)"));
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

HttpResponse Router::Dispatch(HttpRequest& req, std::string_view path,
                              std::string_view query, Route* route) const {
  if (options_.leadership != nullptr && path != "/healthz" && path != "/metrics" &&
      !options_.leadership->Leading()) {
    return NotLeader(path, options_.leadership->Leader(), false, nullptr);
  }
  // Scheduler verbs.
  std::string_view verb_path = path;
  if (!options_.scheduler_prefix.empty() &&
      path.substr(0, options_.scheduler_prefix.size()) ==
          options_.scheduler_prefix) {
    verb_path = path.substr(options_.scheduler_prefix.size());
  }
  struct Verb {
    std::string_view path;
    Route route;
    HttpResponse (*fn)(const SchedulerHandlers&, HttpRequest&);
  };
  static constexpr Verb kVerbs[] = {
      {"/filter", Route::kFilter,
       [](const SchedulerHandlers& h, HttpRequest& r) { return h.Filter(r.body); }},
      {"/prioritize", Route::kPrioritize,
       [](const SchedulerHandlers& h, HttpRequest& r) { return h.Prioritize(r.body); }},
      {"/bind", Route::kBind,
       [](const SchedulerHandlers& h, HttpRequest& r) { return h.Bind(r); }},
      {"/preempt", Route::kPreempt,
       [](const SchedulerHandlers& h, HttpRequest& r) { return h.Preempt(r.body); }},
  };
  for (const Verb& v : kVerbs) {
    if (verb_path != v.path) continue;
    *route = v.route;
    if (req.method != "POST") return MethodNotAllowed(req, path);
    if (options_.scheduler_requires_client_cert && !req.client_cert_verified) {
      return Error(401, "scheduler verbs need a verified client certificate");
    }
    return v.fn(scheduler_, req);
  }

  if (path == "/healthz") {
    *route = Route::kHealth;
    absl::Status h = ctx_->allocator->Health();
    if (h.ok()) return Text(200, "ok");
    return Text(503, absl::StrCat("unhealthy: ", h.message()));
  }
  if (path == "/readyz" || (path == "/readyz/leader" && options_.leadership != nullptr)) {
    *route = Route::kHealth;
    return ready_.load() ? Text(200, "ok")
                         : Text(503, "not ready: the store is recovering, or the Kubernetes "
                                     "watch caches have not synced yet");
  }
  if (path == "/metrics") {
    *route = Route::kMetrics;
    if (ctx_->registry == nullptr) return Error(404, "metrics are disabled");
    HttpResponse r = Text(200, ctx_->registry->Render());
    r.content_type = std::string(kMetricsContentType);
    return r;
  }
  if (path.substr(0, 4) == "/v1/") return Rest(req, path, query, route);
  return Error(404, absl::StrCat("no such endpoint: ", req.method, " ", Sv(path)));
}

HttpResponse Router::Rest(HttpRequest& req, std::string_view path,
                          std::string_view query, Route* route) const {
  std::vector<std::string_view> p;
  for (absl::string_view s : absl::StrSplit(Sv(path.substr(4)), '/')) {
    p.push_back(StdSv(s));
  }
  const std::string& m = req.method;
  auto not_found = [&] {
    return Error(404, absl::StrCat("no such endpoint: ", m, " ", Sv(path)));
  };
  auto allow = [&](std::string_view method) { return m == method; };
  // With a token configured every /v1/ call needs it, reads too: claims,
  // pods and serial numbers are not for anyone who can reach the port.
  Authn who = Authenticate(req);
  if (who.answer.has_value()) return *std::move(who.answer);
  if (who.node.has_value()) {
    if (std::optional<HttpResponse> no = NodeMayNot(*who.node, m, path, p)) return *no;
  }
  const Query q = ParseQuery(query);
  // nodes
  if (!p.empty() && p[0] == "nodes") {
    *route = Route::kNodes;
    if (p.size() == 1) {
      return allow("GET") ? rest_.ListNodes() : MethodNotAllowed(req, path);
    }
    if (p.size() == 2) {
      return allow("GET") ? rest_.GetNode(p[1]) : MethodNotAllowed(req, path);
    }
    if (p.size() == 3 && p[2] == "inventory") {
      *route = Route::kInventory;
      return allow("PUT") ? rest_.PutInventory(p[1], req.body)
                          : MethodNotAllowed(req, path);
    }
    if (p.size() == 3 && p[2] == "handoffs") {
      if (allow("GET")) return rest_.ListHandoffs(p[1]);
      if (allow("POST")) return rest_.ConfirmHandoff(p[1], req.body);
      return MethodNotAllowed(req, path);
    }
    if (p.size() == 4 && p[2] == "handoffs") {
      return allow("DELETE") ? rest_.CancelHandoff(p[1], p[3]) : MethodNotAllowed(req, path);
    }
    if (p.size() == 5 && p[2] == "devices" && p[4] == "release") {
      return allow("POST") ? rest_.ReleaseDevice(p[1], p[3]) : MethodNotAllowed(req, path);
    }
    if (p.size() == 5 && p[2] == "devices" && p[4] == "handover") {
      return allow("POST") ? rest_.HandOverDevice(p[1], p[3], req.body)
                           : MethodNotAllowed(req, path);
    }
    if (p.size() == 5 && p[2] == "devices" && p[4] == "abandon-erase") {
      return allow("POST") ? rest_.AbandonErase(p[1], p[3]) : MethodNotAllowed(req, path);
    }
    if (p.size() == 3 && p[2] == "allocations") {
      *route = Route::kAllocations;
      return allow("GET") ? rest_.GetAllocations(p[1], q, req.allow_wait)
                          : MethodNotAllowed(req, path);
    }
    return not_found();
  }
  if (p.size() == 1 && p[0] == "handoffs") {
    *route = Route::kNodes;
    return allow("GET") ? rest_.ListHandoffs("") : MethodNotAllowed(req, path);
  }
  if (p.size() == 1 && p[0] == "devices") {
    *route = Route::kDevices;
    return allow("GET") ? rest_.ListDevices() : MethodNotAllowed(req, path);
  }
  if (p.size() == 1 && p[0] == "claims") {
    *route = Route::kClaims;
    return allow("GET") ? rest_.ListClaims("") : MethodNotAllowed(req, path);
  }
  if (p.size() >= 3 && p[0] == "namespaces" && p[2] == "claims") {
    *route = Route::kClaims;
    const std::string_view ns = p[1];
    if (p.size() == 3) {
      if (allow("GET")) return rest_.ListClaims(ns);
      if (req.method == "POST" && options_.claims_are_objects) return ClaimsAreObjects(req);
      if (allow("POST")) return rest_.CreateClaim(ns, req.body);
      return MethodNotAllowed(req, path);
    }
    if (p.size() == 4) {
      if (allow("GET")) return rest_.GetClaim(ns, p[3]);
      if (req.method == "DELETE" && options_.claims_are_objects) return ClaimsAreObjects(req);
      if (allow("DELETE")) return rest_.DeleteClaim(ns, p[3], q);
      return MethodNotAllowed(req, path);
    }
    if (p.size() == 5 && p[4] == "release") {
      return allow("POST") ? rest_.ReleaseClaim(ns, p[3], q)
                           : MethodNotAllowed(req, path);
    }
  }
  return not_found();
}

}  // namespace pdc::extender
