#include "tests/testing/kube_apiserver_double.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <map>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tests/testing/kube_json.h"
#include "tests/testing/kube_list.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace asio = boost::asio;
using tcp = boost::asio::ip::tcp;
using kube::Answer;
using kube::Document;
using kube::ResourcePath;

namespace {

struct FaultRule {
  enum class Kind { kDelay, kFail, kDrop };
  Kind kind;
  RequestMatcher match;
  int remaining = 0;
  absl::Duration delay;
  int http_status = 500;
};

bool Matches(const RequestMatcher& m, std::string_view method,
             std::string_view target) {
  return (m.method.empty() || m.method == method) &&
         (m.target_substring.empty() || Contains(target, m.target_substring));
}

std::string ReasonFor(int code) {
  switch (code) {
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    case 429:
      return "TooManyRequests";
    case 422:
      return "Invalid";  // A validating admission policy or webhook's refusal.
    default:
      return "InternalError";
  }
}

// One open watch, for CutWatches and shutdown.
struct WatchHandle {
  int client_fd = -1;
  EtcdWatch* etcd = nullptr;
  std::atomic<bool> cut{false};
};

bool TrueParam(const kube::Query& q, const char* k) {
  auto it = q.find(k);
  return it != q.end() && (it->second == "1" || it->second == "true");
}

}  // namespace

class KubeApiServerDouble::Impl {
 public:
  Impl(std::vector<uint16_t> ports, KubeApiServerOptions options)
      : options_(std::move(options)),
        clock_(options_.clock != nullptr ? options_.clock : RealClock()),
        etcd_(std::move(ports)),
        store_(&etcd_, options_.resources, clock_) {}

  absl::Status Start() {
    boost::system::error_code ec;
    const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return absl::InternalError(Cat("listen on 127.0.0.1:0: ", ec.message()));
    port_ = acceptor_.local_endpoint().port();
    // Fail early and clearly when etcd is not there.
    absl::StatusOr<int64_t> rev = etcd_.CurrentRevision();
    if (!rev.ok()) return rev.status();
    if (options_.garbage_collector) {
      store_.set_on_removed([this](const std::string& uid) { EnqueueGc(uid); });
      gc_thread_ = std::thread([this] { GcLoop(); });
    }
    acceptor_thread_ = std::thread([this] { AcceptLoop(); });
    return absl::OkStatus();
  }

  ~Impl() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
      for (WatchHandle* w : watches_) {
        if (w->etcd != nullptr) w->etcd->Cancel();
      }
    }
    {
      asio::io_context ioc;
      tcp::socket s(ioc);
      boost::system::error_code ec;
      s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
    }
    if (acceptor_thread_.joinable()) acceptor_thread_.join();
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
    if (gc_thread_.joinable()) gc_thread_.join();
  }

  uint16_t port() const { return port_; }
  EtcdClient& etcd() { return etcd_; }
  kube::TokenReviews& token_reviews() { return token_reviews_; }
  kube::KubeAdmission& admission() { return admission_; }

  void AddFault(FaultRule rule) {
    absl::MutexLock lock(&mu_);
    faults_.push_back(std::move(rule));
  }
  void ClearFaults() {
    absl::MutexLock lock(&mu_);
    faults_.clear();
  }

  int CutWatches() {
    absl::MutexLock lock(&mu_);
    for (WatchHandle* w : watches_) {
      w->cut = true;
      ::shutdown(w->client_fd, SHUT_RDWR);
      if (w->etcd != nullptr) w->etcd->Cancel();
    }
    return static_cast<int>(watches_.size());
  }

  absl::StatusOr<int64_t> CompactEtcd() {
    absl::StatusOr<int64_t> rev = etcd_.CurrentRevision();
    if (!rev.ok()) return rev.status();
    if (absl::Status s = etcd_.Compact(*rev); !s.ok()) return s;
    return *rev;
  }

  std::vector<std::string> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  int open_watches() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(watches_.size());
  }
  bool WaitForWatches(int n, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(watches_.size()) >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
  bool WaitGarbageCollectorIdle(absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto idle = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return gc_queue_.empty() && !gc_busy_;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
  }

 private:
  void AcceptLoop() {
    for (;;) {
      boost::system::error_code ec;
      tcp::socket socket(ioc_);
      acceptor_.accept(socket, ec);
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      if (ec) continue;
      const int fd = socket.release();
      open_fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    asio::io_context ioc;
    tcp::socket socket(ioc, tcp::v4(), fd);
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      boost::system::error_code ec;
      http::read(socket, buffer, req, ec);
      if (ec) break;
      if (!Handle(socket, req)) break;
    }
    // Forgets fd while the socket still owns it (no shutdown() of a reused
    // descriptor number).
    absl::MutexLock lock(&mu_);
    open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd),
                    open_fds_.end());
  }

  // False: close the connection.
  bool Handle(tcp::socket& socket,
              const http::request<http::string_body>& req) {
    const std::string method(req.method_string());
    const std::string target(req.target());
    std::optional<FaultRule> fail;
    bool drop = false;
    absl::Duration delay;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(Cat(method, " ", target));
      for (FaultRule& f : faults_) {
        if (f.remaining <= 0 || !Matches(f.match, method, target)) continue;
        switch (f.kind) {
          case FaultRule::Kind::kDelay:
            delay += f.delay;
            --f.remaining;
            break;
          case FaultRule::Kind::kFail:
            if (!fail.has_value()) {
              fail = f;
              --f.remaining;
            }
            break;
          case FaultRule::Kind::kDrop:
            if (!drop) {
              drop = true;
              --f.remaining;
            }
            break;
        }
      }
      faults_.erase(
          std::remove_if(faults_.begin(), faults_.end(),
                         [](const FaultRule& f) { return f.remaining <= 0; }),
          faults_.end());
    }
    // An injected delay is the one place the double sleeps: the client
    // under test must see a slow answer.
    if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
    if (fail.has_value()) {
      return Reply(
          socket, req,
          Answer{fail->http_status,
                 kube::StatusJson(kube::ApiError(
                     {fail->http_status, ReasonFor(fail->http_status)},
                     Cat("injected failure of ", method, " ", target)))});
    }
    if (!options_.bearer_token.empty() &&
        req[http::field::authorization] !=
            Cat("Bearer ", options_.bearer_token)) {
      return Reply(socket, req,
                   Answer{401, kube::StatusJson(kube::ApiError(
                                   {401, "Unauthorized"}, "Unauthorized"))});
    }
    const size_t q = target.find('?');
    const std::string path = target.substr(0, q);
    if (path == kube::TokenReviews::kPath) {
      if (method != "POST") {
        return Reply(socket, req,
                     Answer{405, kube::StatusJson(kube::ApiError(
                                     {405, "MethodNotAllowed"},
                                     Cat("the server does not allow this method on the "
                                         "requested resource (",
                                         method, ")")))});
      }
      return Reply(socket, req, token_reviews_.Review(req.body()));
    }
    const kube::Query query = kube::ParseQuery(
        q == std::string::npos ? "" : std::string_view(target).substr(q + 1));
    absl::StatusOr<ResourcePath> p = store_.ParsePath(path);
    if (p.ok()) {
      // Authorization and admission come before storage (kube_admission.h).
      const std::string verb =
          kube::KubeAdmission::VerbOf(method, *p, TrueParam(query, "watch"));
      std::string old_object;
      if (verb == "update" && p->subresource.empty()) {
        absl::StatusOr<Answer> cur = store_.Get(*p);
        if (cur.ok()) old_object = cur->body;
      }
      if (absl::Status refused = admission_.Check(verb, *p, req.body(), old_object);
          !refused.ok()) {
        return Reply(socket, req,
                     Answer{kube::ApiErrorOf(refused).code, kube::StatusJson(refused)});
      }
    }
    if (p.ok() && method == "GET" && p->name.empty() &&
        TrueParam(query, "watch")) {
      ServeWatch(socket, *p, query);
      return false;
    }
    absl::StatusOr<Answer> answer =
        p.ok() ? Route(method, *p, query,
                       std::string(req[http::field::content_type]), req.body())
               : absl::StatusOr<Answer>(p.status());
    if (drop) return false;  // Committed, never answered.
    if (!answer.ok()) {
      return Reply(socket, req,
                   Answer{kube::ApiErrorOf(answer.status()).code,
                          kube::StatusJson(answer.status())});
    }
    return Reply(socket, req, *answer);
  }

  absl::StatusOr<Answer> Route(const std::string& method, const ResourcePath& p,
                               const kube::Query& q,
                               const std::string& content_type,
                               const std::string& body) {
    if (p.name.empty()) {
      if (method == "GET") return store_.List(p, q);
      if (method == "POST") return store_.Create(p, body);
    } else if (p.subresource == "binding") {
      if (method == "POST") return store_.Bind(p, body);
    } else {
      if (method == "GET") return store_.Get(p);
      if (method == "PUT") return store_.Update(p, body);
      if (method == "PATCH") return store_.Patch(p, content_type, body);
      if (method == "DELETE" && p.subresource.empty())
        return store_.Delete(p, body, q);
    }
    return kube::ApiError(
        {405, "MethodNotAllowed"},
        Cat("the server does not allow this method on the requested "
            "resource (",
            method, ")"));
  }

  bool Reply(tcp::socket& socket, const http::request<http::string_body>& req,
             const Answer& a) {
    http::response<http::string_body> res{static_cast<http::status>(a.code),
                                          req.version()};
    res.set(http::field::content_type, "application/json");
    res.keep_alive(req.keep_alive());
    res.body() = a.body;
    res.prepare_payload();
    boost::system::error_code ec;
    http::write(socket, res, ec);
    return !ec && req.keep_alive();
  }

  // --- Watch ---------------------------------------------------------------
  // k8s.io/apiserver/pkg/endpoints/handlers/watch.go streams the events as
  // JSON objects {"type":..., "object":...}, one per line, in a chunked
  // body; the events come from k8s.io/apiserver/pkg/storage/etcd3/watcher.go.
  void ServeWatch(tcp::socket& socket, const ResourcePath& p,
                  const kube::Query& q) {
    const kube::KubeResource& r = *p.resource;
    auto fail = [&](const absl::Status& s) {
      http::response<http::string_body> res{
          static_cast<http::status>(kube::ApiErrorOf(s).code), 11};
      res.set(http::field::content_type, "application/json");
      res.keep_alive(false);
      res.body() = kube::StatusJson(s);
      res.prepare_payload();
      boost::system::error_code ec;
      http::write(socket, res, ec);
    };
    absl::StatusOr<kube::Selectors> sel = kube::Selectors::FromQuery(q);
    if (!sel.ok()) return fail(sel.status());
    auto param = [&](const char* k) {
      auto it = q.find(k);
      return it == q.end() ? std::string() : it->second;
    };
    const bool bookmarks = TrueParam(q, "allowWatchBookmarks");
    absl::Time end = absl::InfiniteFuture();
    if (const std::string t = param("timeoutSeconds"); !t.empty()) {
      int64_t secs = 0;
      if (!Atoi(t, &secs) || secs < 0) {
        return fail(
            kube::BadRequest(Cat("timeoutSeconds: invalid value \"", t, "\"")));
      }
      if (secs > 0) end = absl::Now() + absl::Seconds(secs);
    }
    const std::string rv_text = param("resourceVersion");
    int64_t rv = 0;
    if (!rv_text.empty() && (!Atoi(rv_text, &rv) || rv < 0)) {
      return fail(
          kube::BadRequest(Cat("resourceVersion: invalid value \"", rv_text,
                               "\": must be a non-negative integer")));
    }
    const std::string prefix = kube::KubeStore::CollectionPrefix(r, p.ns);
    const std::string range_end = EtcdClient::PrefixEnd(prefix);
    // resourceVersion "" or "0": "Get State and Start at Most Recent" (api
    // conventions; etcd3 watcher.go sync()): ADDED for every object, then
    // the changes after that list.
    std::vector<std::string> initial;
    if (rv == 0) {
      absl::StatusOr<EtcdRangeResult> got = etcd_.Range(prefix, range_end);
      if (!got.ok()) return fail(got.status());
      rv = got->revision;
      for (const EtcdKeyValue& kv : got->kvs) {
        absl::StatusOr<Document> obj = kube::KubeStore::Decode(kv);
        if (obj.ok() && sel->Matches(*obj))
          initial.push_back(EventJson("ADDED", *obj));
      }
    }
    EtcdWatchResponse first;
    absl::StatusOr<std::unique_ptr<EtcdWatch>> watch =
        etcd_.Watch(prefix, range_end, rv + 1, /*prev_kv=*/true,
                    /*progress_notify=*/true, &first);
    if (!watch.ok()) return fail(watch.status());
    WatchHandle handle;
    handle.client_fd = socket.native_handle();
    handle.etcd = watch->get();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      watches_.insert(&handle);
    }
    StreamWatch(socket, r, **watch, *sel, rv, bookmarks, end, initial, first,
                handle);
    absl::MutexLock lock(&mu_);
    watches_.erase(&handle);
  }

  static std::string EventJson(std::string_view type, const kube::Value& obj) {
    return Cat("{\"type\":\"", type, "\",\"object\":", kube::ToJson(obj),
               "}\n");
  }

  void StreamWatch(tcp::socket& socket, const kube::KubeResource& r,
                   EtcdWatch& watch, const kube::Selectors& sel, int64_t rv,
                   bool bookmarks, absl::Time end,
                   const std::vector<std::string>& initial,
                   const EtcdWatchResponse& first, WatchHandle& handle) {
    boost::system::error_code ec;
    http::response<http::empty_body> res{http::status::ok, 11};
    res.set(http::field::content_type, "application/json");
    res.chunked(true);
    res.keep_alive(false);
    http::response_serializer<http::empty_body> sr{res};
    http::write_header(socket, sr, ec);
    if (ec) return;
    auto send = [&](const std::string& text) {
      asio::write(socket, http::make_chunk(asio::buffer(text)), ec);
      return !ec;
    };
    auto finish = [&] {
      if (!handle.cut) asio::write(socket, http::make_chunk_last(), ec);
    };
    for (const std::string& e : initial) {
      if (!send(e)) return;
    }
    int64_t seen = rv;  // Every event up to here was sent.
    auto error_event = [&](const absl::Status& s) {
      send(Cat("{\"type\":\"ERROR\",\"object\":", kube::StatusJson(s), "}\n"));
    };
    auto handle_response = [&](const EtcdWatchResponse& w) -> bool {
      if (w.canceled) {
        if (w.compact_revision > 0) {
          // k8s.io/apiserver/pkg/storage/etcd3/errors.go interpretWatchError:
          // ErrCompacted is 410 Expired.
          error_event(kube::Expired(
              "The resourceVersion for the provided watch is too old."));
        } else {
          error_event(kube::ApiError(
              {500, "InternalError"},
              Cat("etcd cancelled the watch: ", w.cancel_reason)));
        }
        return false;
      }
      for (const EtcdEvent& e : w.events) {
        std::optional<std::string> line = Translate(e, sel);
        if (line.has_value() && !send(*line)) return false;
        seen = std::max(seen, e.kv.mod_revision);
      }
      // A progress notification: etcd has sent every event up to its
      // header revision (what kube-apiserver's bookmarks rest on).
      if (w.progress_notify()) seen = std::max(seen, w.revision);
      return true;
    };
    if (!handle_response(first)) return finish();
    absl::Time next_bookmark = absl::Now() + options_.bookmark_interval;
    for (;;) {
      const absl::Time now = absl::Now();
      if (now >= end) return finish();
      if (bookmarks && now >= next_bookmark) {
        // BOOKMARK: only kind, apiVersion and metadata.resourceVersion
        // (k8s.io/apimachinery/pkg/watch/watch.go, Bookmark).
        if (!send(Cat("{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"", r.kind,
                      "\",\"apiVersion\":\"", r.api_version(),
                      "\",\"metadata\":{\"resourceVersion\":\"", seen,
                      "\"}}}\n"))) {
          return;
        }
        next_bookmark = now + options_.bookmark_interval;
      }
      const absl::Time wake =
          std::min(end, bookmarks ? next_bookmark : absl::InfiniteFuture());
      if (!watch.HasBufferedData()) {
        pollfd fds[2] = {{watch.fd(), POLLIN, 0},
                         {handle.client_fd, POLLIN, 0}};
        const absl::Duration left = wake - absl::Now();
        const int ms = wake == absl::InfiniteFuture()
                           ? 1000
                           : static_cast<int>(std::clamp<int64_t>(
                                 absl::ToInt64Milliseconds(left) + 1, 0, 1000));
        const int n = ::poll(fds, 2, ms);
        if (handle.cut) return;
        if (n < 0) return;
        if (fds[1].revents != 0) {
          char c;
          // The client closed (or sent something a watch does not expect).
          if (::recv(handle.client_fd, &c, 1, MSG_DONTWAIT) <= 0) return;
        }
        if (fds[0].revents == 0) continue;
      }
      absl::StatusOr<EtcdWatchResponse> w =
          watch.Next(absl::Now() + absl::Seconds(5));
      if (handle.cut) return;
      if (!w.ok()) {
        if (absl::IsDeadlineExceeded(w.status())) continue;
        // etcd went away: end the watch; the client lists / watches again.
        error_event(
            kube::ApiError({500, "InternalError"},
                           Cat("etcd watch ended: ", w.status().message())));
        return finish();
      }
      if (!handle_response(*w)) return finish();
    }
  }

  // k8s.io/apiserver/pkg/storage/etcd3/watcher.go transform(): a put is ADDED
  // when it created the key, else MODIFIED; a delete is DELETED carrying the
  // last state at the deletion's revision. With a selector, an object that
  // starts (stops) matching is ADDED (DELETED).
  std::optional<std::string> Translate(const EtcdEvent& e,
                                       const kube::Selectors& sel) {
    std::optional<Document> prev;
    if (e.prev_kv.has_value()) {
      absl::StatusOr<Document> d =
          kube::KubeStore::Decode(*e.prev_kv, e.kv.mod_revision);
      if (d.ok()) prev = std::move(*d);
    }
    const bool prev_match = prev.has_value() && sel.Matches(*prev);
    if (e.type == EtcdEvent::Type::kDelete) {
      if (!prev_match) return std::nullopt;
      return EventJson("DELETED", *prev);
    }
    absl::StatusOr<Document> cur = kube::KubeStore::Decode(e.kv);
    if (!cur.ok()) return std::nullopt;
    const bool cur_match = sel.Matches(*cur);
    const bool created = e.kv.create_revision == e.kv.mod_revision;
    if (created || !prev.has_value())
      return cur_match ? std::optional(EventJson("ADDED", *cur)) : std::nullopt;
    if (cur_match && prev_match) return EventJson("MODIFIED", *cur);
    if (cur_match) return EventJson("ADDED", *cur);
    if (prev_match) return EventJson("DELETED", *prev);
    return std::nullopt;
  }

  // --- Garbage collector -----------------------------------------------------
  // kube-controller-manager's garbage collector, background propagation
  // (pkg/controller/garbagecollector/garbagecollector.go attemptToDeleteItem):
  // a dependent none of whose owners exists any more is deleted; one with
  // some owners left loses the references to the missing ones.
  void EnqueueGc(const std::string& uid) {
    absl::MutexLock lock(&mu_);
    gc_queue_.push_back(uid);
  }

  void GcLoop() {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !gc_queue_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (stopping_) return;
        gc_queue_.clear();  // One pass looks at every object.
        gc_busy_ = true;
      }
      CollectOnce();
      absl::MutexLock lock(&mu_);
      gc_busy_ = false;
    }
  }

  void CollectOnce() {
    absl::StatusOr<std::vector<kube::KubeStore::Stored>> all =
        store_.ListEverything();
    if (!all.ok()) return;
    std::set<std::string> live;
    for (const auto& s : *all)
      live.insert(kube::GetString(s.object, {"metadata", "uid"}));
    for (const auto& s : *all) {
      const kube::Value* refs =
          kube::Find(s.object, {"metadata", "ownerReferences"});
      if (refs == nullptr || !refs->IsArray() || refs->Empty()) continue;
      std::vector<std::string> dead;
      for (const kube::Value& ref : refs->GetArray()) {
        const std::string uid = kube::GetString(ref, {"uid"});
        if (!live.count(uid)) dead.push_back(uid);
      }
      if (dead.empty()) continue;
      const std::string ns =
          kube::GetString(s.object, {"metadata", "namespace"});
      const std::string name = kube::GetString(s.object, {"metadata", "name"});
      if (dead.size() == refs->Size()) {
        if (kube::Find(s.object, {"metadata", "deletionTimestamp"}) != nullptr)
          continue;
        // Its removal (if it happens now) queues another pass.
        store_
            .DeleteIfUid(*s.resource, ns, name,
                         kube::GetString(s.object, {"metadata", "uid"}))
            .IgnoreError();
      } else {
        store_.DropOwnerReferences(*s.resource, ns, name, dead).IgnoreError();
      }
    }
  }

  const KubeApiServerOptions options_;
  const Clock* const clock_;
  EtcdClient etcd_;
  kube::KubeStore store_;
  kube::TokenReviews token_reviews_;
  kube::KubeAdmission admission_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_{ioc_};
  uint16_t port_ = 0;
  std::thread acceptor_thread_;
  std::thread gc_thread_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<FaultRule> faults_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> requests_ ABSL_GUARDED_BY(mu_);
  std::set<WatchHandle*> watches_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> gc_queue_ ABSL_GUARDED_BY(mu_);
  bool gc_busy_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<KubeApiServerDouble>> KubeApiServerDouble::Start(
    std::vector<uint16_t> etcd_client_ports, KubeApiServerOptions options) {
  auto impl =
      std::make_unique<Impl>(std::move(etcd_client_ports), std::move(options));
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  return std::unique_ptr<KubeApiServerDouble>(
      new KubeApiServerDouble(std::move(impl)));
}

KubeApiServerDouble::KubeApiServerDouble(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
KubeApiServerDouble::~KubeApiServerDouble() = default;

uint16_t KubeApiServerDouble::port() const { return impl_->port(); }
std::string KubeApiServerDouble::url() const {
  return Cat("http://127.0.0.1:", impl_->port());
}
EtcdClient& KubeApiServerDouble::etcd() { return impl_->etcd(); }
kube::TokenReviews& KubeApiServerDouble::token_reviews() { return impl_->token_reviews(); }
kube::KubeAdmission& KubeApiServerDouble::admission() { return impl_->admission(); }

void KubeApiServerDouble::DelayRequests(const RequestMatcher& match, int count,
                                        absl::Duration delay) {
  impl_->AddFault({FaultRule::Kind::kDelay, match, count, delay, 0});
}
void KubeApiServerDouble::FailRequests(const RequestMatcher& match, int count,
                                       int http_status) {
  impl_->AddFault({FaultRule::Kind::kFail, match, count, absl::ZeroDuration(),
                   http_status});
}
void KubeApiServerDouble::DropAfterCommit(const RequestMatcher& match,
                                          int count) {
  impl_->AddFault(
      {FaultRule::Kind::kDrop, match, count, absl::ZeroDuration(), 0});
}
void KubeApiServerDouble::ClearFaults() { impl_->ClearFaults(); }
int KubeApiServerDouble::CutWatches() { return impl_->CutWatches(); }
absl::StatusOr<int64_t> KubeApiServerDouble::CompactEtcd() {
  return impl_->CompactEtcd();
}
std::vector<std::string> KubeApiServerDouble::requests() const {
  return impl_->requests();
}
int KubeApiServerDouble::open_watches() const { return impl_->open_watches(); }
bool KubeApiServerDouble::WaitForWatches(int n, absl::Duration timeout) const {
  return impl_->WaitForWatches(n, timeout);
}
bool KubeApiServerDouble::WaitGarbageCollectorIdle(
    absl::Duration timeout) const {
  return impl_->WaitGarbageCollectorIdle(timeout);
}

}  // namespace pdc::testing
