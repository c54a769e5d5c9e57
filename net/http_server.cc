#include "net/http_server.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"
#include "common/clock.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "net/read_buffer.h"
#include "net/tls_reloader.h"
#include "spdlog/spdlog.h"

namespace pdc::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

// The body of the errors the server answers itself (413, 431, 400), in the
// shape of pdc's REST errors: {"error":"...","field":""}.
std::string ErrorBody(std::string_view message) {
  std::string out = R"({"error":")";
  for (const char c : message) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (const auto u = static_cast<unsigned char>(c); u < 0x20) {
          constexpr std::string_view kHex = "0123456789ABCDEF";
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
  out += R"(","field":""})";
  return out;
}

// State shared by the listener and every connection.
class ServerCore {
 public:
  ServerCore(HttpServerOptions options, HttpServer::Handler handler)
      : options(std::move(options)),
        handler(std::move(handler)),
        notifier(this->options.notifier) {}

  const HttpServerOptions options;
  const HttpServer::Handler handler;
  Notifier* const notifier;
  std::atomic<bool> stopping{false};

  // Connections register a callback that pokes them at shutdown.
  uint64_t Register(std::function<void()> poke) {
    absl::MutexLock lock(&mu_);
    const uint64_t id = ++next_id_;
    sessions_.emplace(id, std::move(poke));
    return id;
  }
  void Unregister(uint64_t id) {
    std::function<void()> resume;
    {
      absl::MutexLock lock(&mu_);
      sessions_.erase(id);
      if (accept_paused_ && sessions_.size() < max_connections_) {
        accept_paused_ = false;
        resume = resume_accept_;
      }
    }
    if (resume) resume();
  }
  size_t open() {
    absl::MutexLock lock(&mu_);
    return sessions_.size();
  }
  // The accept loop asks whether to go on: false (and `resume` is called
  // once a connection closes) when max_connections are open.
  bool MayAccept(std::function<void()> resume) {
    absl::MutexLock lock(&mu_);
    if (sessions_.size() < max_connections_) return true;
    accept_paused_ = true;
    resume_accept_ = std::move(resume);
    return false;
  }
  void SetMaxConnections(size_t n) {
    absl::MutexLock lock(&mu_);
    max_connections_ = std::max<size_t>(1, n);
  }
  void PokeAll() {
    std::vector<std::function<void()>> pokes;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, p] : sessions_) pokes.push_back(p);
    }
    for (auto& p : pokes) p();
  }
  // True when every connection finished before `deadline`.
  bool WaitDrained(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return sessions_.empty();
    };
    return mu_.AwaitWithDeadline(absl::Condition(&drained), deadline);
  }

 private:
  absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, std::function<void()>> sessions_ ABSL_GUARDED_BY(mu_);
  size_t max_connections_ ABSL_GUARDED_BY(mu_) = options.max_connections;
  bool accept_paused_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> resume_accept_ ABSL_GUARDED_BY(mu_);
};

// Raises the soft limit on open descriptors towards the hard limit so that
// `connections` fit beside `reserve` others; returns how many connections
// the limit allows.
size_t MakeDescriptorRoom(size_t connections, size_t reserve) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return connections;
  const rlim_t want = static_cast<rlim_t>(connections + reserve);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= want) return connections;
  return lim.rlim_cur > reserve ? static_cast<size_t>(lim.rlim_cur - reserve) : 1;
}

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(ServerCore* core, tcp::socket&& socket, std::shared_ptr<ssl::context> tls)
      : core_(core),
        tls_(std::move(tls)),
        stream_(MakeStream(std::move(socket), tls_.get())),
        timer_(stream_.get_executor()) {}

  ~Session() { core_->Unregister(id_); }

  void Run() {
    std::weak_ptr<Session> weak = this->shared_from_this();
    id_ = core_->Register([weak] {
      if (auto self = weak.lock()) {
        asio::post(self->stream_.get_executor(),
                   [self] { self->OnShutdown(); });
      }
    });
    asio::dispatch(stream_.get_executor(),
                   [self = this->shared_from_this()] { self->Begin(); });
  }

 private:
  enum class State { kIdle, kReading, kBusy, kParked, kClosed };

  static Stream MakeStream(tcp::socket&& socket, ssl::context* tls) {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      return Stream(std::move(socket), *tls);
    } else {
      return Stream(std::move(socket));
    }
  }

  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  void Begin() {
    // Shutdown may have poked this session before it began (it registers
    // first); the poke found nothing to cancel then.
    if (core_->stopping.load()) return Close();
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      state_ = State::kReading;
      Tcp().expires_after(ToChrono(core_->options.read_timeout));
      stream_.async_handshake(
          ssl::stream_base::server,
          [self = this->shared_from_this()](beast::error_code ec) {
            if (ec) return self->Close();
            self->client_verified_ = self->PeerVerified();
            self->WaitForRequest();
          });
    } else {
      WaitForRequest();
    }
  }

  bool PeerVerified() {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      SSL* ssl = stream_.native_handle();
      X509* cert = SSL_get1_peer_certificate(ssl);
      if (cert == nullptr) return false;
      X509_free(cert);
      return SSL_get_verify_result(ssl) == X509_V_OK;
    }
    return false;
  }

  bool HasBufferedInput() {
    if (buffer_.size() > 0) return true;
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      return SSL_pending(stream_.native_handle()) > 0;
    }
    return false;
  }

  // Between requests: wait for the first byte under the idle timeout, so a
  // kept-alive connection may stay quiet for idle_timeout, but once a
  // request starts it must arrive within read_timeout.
  void WaitForRequest() {
    if (core_->stopping.load()) return Close();
    if (HasBufferedInput()) return ReadHeader();
    state_ = State::kIdle;
    Tcp().expires_never();
    timer_.expires_after(ToChrono(core_->options.idle_timeout));
    timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (!ec && self->state_ == State::kIdle) self->Tcp().socket().cancel();
    });
    Tcp().socket().async_wait(
        tcp::socket::wait_read,
        [self = this->shared_from_this()](beast::error_code ec) {
          self->timer_.cancel();
          if (ec || self->state_ != State::kIdle) return self->Close();
          self->ReadHeader();
        });
  }

  void ReadHeader() {
    // Shutdown's poke may have found this connection idle with the wait
    // for its first byte already completed (too late to cancel): it must
    // not start reading a request that nothing would cut short.
    if (core_->stopping.load()) return Close();
    state_ = State::kReading;
    parser_.emplace();
    parser_->body_limit(core_->options.max_body_bytes);
    parser_->header_limit(64 * 1024);
    Tcp().expires_after(ToChrono(core_->options.read_timeout));
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) {
          self->OnHeader(ec);
        });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& h = parser_->get();
    if (beast::iequals(h[http::field::expect], "100-continue")) {
      if (h.has_content_length() &&
          *parser_->content_length() > core_->options.max_body_bytes) {
        return OnReadError(http::error::body_limit);
      }
      auto cont = std::make_shared<http::response<http::empty_body>>(
          http::status::continue_, 11);
      http::async_write(
          stream_, *cont,
          [self = this->shared_from_this(), cont](beast::error_code ec,
                                                  size_t) {
            if (ec) return self->Close();
            self->ReadBody();
          });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    ReserveForBody(buffer_, *parser_);
    // Room for the spare bytes the handler asked for (pdc-extender pads
    // bodies for in-situ JSON parses), so it does not reallocate the body.
    // A length over the limit is refused by the parser before any byte is
    // reserved for it.
    if (const auto length = parser_->content_length();
        length.has_value() && *length <= core_->options.max_body_bytes) {
      parser_->get().body().reserve(*length +
                                    core_->options.body_spare_bytes);
    }
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) {
          if (ec) return self->OnReadError(ec);
          self->OnRequest();
        });
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return Send(Error(413, absl::StrCat("request body larger than the limit "
                                          "of ",
                                          core_->options.max_body_bytes,
                                          " bytes")),
                  /*keep_alive=*/false);
    }
    if (ec == http::error::header_limit) {
      return Send(Error(431, "request headers too large"), false);
    }
    if (ec == beast::error::timeout || ec == http::error::end_of_stream ||
        ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec == ssl::error::stream_truncated) {
      return Close();
    }
    if (ec == http::error::partial_message) return Close();
    if (ec.category() == beast::error_code(http::error::bad_target).category()) {
      return Send(Error(400, absl::StrCat("malformed HTTP request: ",
                                          ec.message())),
                  false);
    }
    Close();
  }

  static HttpResponse Error(int status, std::string_view message) {
    HttpResponse r;
    r.status = status;
    r.body = ErrorBody(message);
    return r;
  }

  void OnRequest() {
    state_ = State::kBusy;
    Tcp().expires_never();
    http::request<http::string_body> msg = parser_->release();
    parser_.reset();
    keep_alive_ = msg.keep_alive();
    request_ = HttpRequest{};
    request_.method = std::string(msg.method_string());
    request_.target = std::string(msg.target());
    request_.authorization = std::string(msg[http::field::authorization]);
    request_.content_type = std::string(msg[http::field::content_type]);
    body_ = std::move(msg.body());
    request_.client_cert_verified = client_verified_;
    resume_token_ = 0;
    Dispatch(/*allow_wait=*/true);
  }

  // Runs the router; a long-poll answer parks the connection.
  void Dispatch(bool allow_wait) {
    // Handlers consume their request. The body is moved, not copied (it is
    // the whole NodeNames list of a filter call): it goes to the first run
    // only; the runs of a parked long-poll (a GET) get the request without.
    HttpRequest req = request_;
    req.body = std::move(body_);
    body_.clear();
    req.allow_wait = allow_wait && !core_->stopping.load();
    req.resume_token = resume_token_;
    const bool may_wait = req.allow_wait;
    HttpResponse r = core_->handler(std::move(req));
    if (r.long_poll && !may_wait && core_->notifier != nullptr) {
      // Parking now would outlive the deadline (or Shutdown's poke, which
      // has already passed): a handler bug, never a reason to hang.
      r = Error(500, "the handler asked to wait after its time was up");
    }
    if (r.long_poll && core_->notifier == nullptr) {
      // Nothing to wait on: answer with the current state.
      HttpRequest now = request_;
      now.allow_wait = false;
      now.resume_token = r.long_poll->resume_token;
      r = core_->handler(std::move(now));
      r.long_poll.reset();
    }
    if (r.long_poll) return Park(*r.long_poll);
    Unpark();
    Send(std::move(r), keep_alive_);
  }

  void Park(const LongPoll& lp) {
    resume_token_ = lp.resume_token;
    if (state_ != State::kParked) {
      state_ = State::kParked;
      ReportParked(+1);
      timer_.expires_after(ToChrono(lp.max_wait));
      timer_.async_wait(
          [self = this->shared_from_this()](beast::error_code ec) {
            if (ec || self->state_ != State::kParked) return;
            self->CancelSubscription();
            self->Dispatch(/*allow_wait=*/false);
          });
    }
    std::weak_ptr<Session> weak = this->shared_from_this();
    CancelSubscription();
    subscription_ = core_->notifier->Subscribe(lp.topic, lp.seen_version, [weak] {
      if (auto self = weak.lock()) {
        asio::post(self->stream_.get_executor(), [self] {
          if (self->state_ != State::kParked) return;
          self->subscription_ = 0;
          self->Dispatch(/*allow_wait=*/true);
        });
      }
    });
  }

  void Unpark() {
    if (state_ != State::kParked) return;
    state_ = State::kBusy;
    ReportParked(-1);
    timer_.cancel();
    CancelSubscription();
  }

  void ReportParked(int delta) {
    if (core_->options.observer.long_polls_waiting) {
      core_->options.observer.long_polls_waiting(delta);
    }
  }

  void CancelSubscription() {
    if (subscription_ != 0) core_->notifier->Cancel(subscription_);
    subscription_ = 0;
  }

  void Send(HttpResponse r, bool keep_alive) {
    state_ = State::kBusy;
    keep_alive = keep_alive && !core_->stopping.load();
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), 11);
    res->set(http::field::server, core_->options.server_name);
    res->set(http::field::content_type, r.content_type);
    res->body() = std::move(r.body);
    res->keep_alive(keep_alive);
    res->prepare_payload();
    Tcp().expires_after(ToChrono(core_->options.read_timeout));
    http::async_write(stream_, *res,
                      [self = this->shared_from_this(), res, keep_alive](
                          beast::error_code ec, size_t) {
                        if (ec || !keep_alive) return self->Close();
                        self->WaitForRequest();
                      });
  }

  void OnShutdown() {
    switch (state_) {
      case State::kIdle:
        Tcp().socket().cancel();
        timer_.cancel();
        break;
      case State::kParked:
        CancelSubscription();
        timer_.cancel();
        Dispatch(/*allow_wait=*/false);
        break;
      case State::kReading:
        // The request has not reached the handler, so nothing was done for
        // it; waiting for the rest would hold Shutdown for up to
        // read_timeout (longer than the grace by default) on a stalled
        // client. The client sees the connection close, as at the grace.
        Close();
        break;
      case State::kBusy:
        break;  // In flight: answered with Connection: close.
      case State::kClosed:
        break;
    }
  }

  void Close() {
    if (state_ == State::kParked) Unpark();
    state_ = State::kClosed;
    timer_.cancel();
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    Tcp().close();
  }

  ServerCore* const core_;
  // The context the connection was accepted with; a reload replaces the
  // server's, not this one.
  const std::shared_ptr<ssl::context> tls_;
  Stream stream_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;  // Without its body, which is in body_.
  std::string body_;
  bool keep_alive_ = true;
  bool client_verified_ = false;
  State state_ = State::kIdle;
  Notifier::SubscriptionId subscription_ = 0;
  // The token of the long-poll this connection is parked on (LongPoll).
  uint64_t resume_token_ = 0;
  uint64_t id_ = 0;
};

class BeastServer final : public HttpServer {
 public:
  explicit BeastServer(std::unique_ptr<ServerCore> core)
      : core_(std::move(core)),
        ioc_(std::max(1, core_->options.threads)),
        acceptor_(asio::make_strand(ioc_)) {}

  ~BeastServer() override { Shutdown(); }

  absl::Status Listen() {
    const HttpServerOptions& o = core_->options;
    if (!o.cert_file.empty() || !o.key_file.empty()) {
      tls_.emplace(TlsFiles{o.cert_file, o.key_file, o.client_ca_file,
                             o.tls_reload_interval});
      RETURN_IF_ERROR(tls_->Load());
    }
    beast::error_code ec;
    const asio::ip::address addr = asio::ip::make_address(o.address, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen address \"", o.address, "\": ", ec.message()));
    }
    const tcp::endpoint ep(addr, o.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat(
          "cannot listen on ", o.address, ":", o.port, ": ", ec.message()));
    }
    port_ = acceptor_.local_endpoint().port();
    const size_t room = MakeDescriptorRoom(o.max_connections, kReservedDescriptors);
    if (room < o.max_connections) {
      spdlog::warn("the descriptor limit allows {} connections, not the {} configured; "
                   "raise the hard limit (ulimit -Hn, LimitNOFILE) to serve more",
                   room, o.max_connections);
    }
    core_->SetMaxConnections(std::min(room, o.max_connections));
    Accept();
    const int n = std::max(1, o.threads);
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this] { ioc_.run(); });
    }
    return absl::OkStatus();
  }

  uint16_t port() const override { return port_; }

  void Shutdown() override {
    if (threads_.empty() || core_->stopping.exchange(true)) {
      JoinAll();
      return;
    }
    asio::post(acceptor_.get_executor(), [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      retry_.cancel();
    });
    core_->PokeAll();
    if (!core_->WaitDrained(RealClock()->Deadline(core_->options.shutdown_grace))) {
      spdlog::warn("shutdown: connections still open after the grace period; "
                   "cutting them");
      ioc_.stop();
    }
    JoinAll();
  }

 private:
  void JoinAll() {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  // Descriptors kept free for the rest of the program (files, the store,
  // outgoing connections) when the limit caps the connections.
  static constexpr size_t kReservedDescriptors = 128;

  void Accept() {
    acceptor_.async_accept(
        asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket s) {
          if (ec == asio::error::operation_aborted || !acceptor_.is_open()) {
            return;
          }
          if (ec) {
            // Out of descriptors (EMFILE, ENFILE), buffers or memory: the
            // pending connection stays in the backlog, so accepting again at
            // once would fail at once. Wait, doubling up to a second.
            backoff_ = std::min(absl::Seconds(1), backoff_ == absl::ZeroDuration()
                                                      ? absl::Milliseconds(10)
                                                      : backoff_ * 2);
            if (core_->options.observer.accept_failed) {
              core_->options.observer.accept_failed(ec.message(), backoff_);
            }
            if (backoff_ == absl::Seconds(1) || backoff_ == absl::Milliseconds(10)) {
              spdlog::warn("accept failed: {}; retrying in {}", ec.message(),
                           absl::FormatDuration(backoff_));
            }
            retry_.expires_after(absl::ToChronoNanoseconds(backoff_));
            retry_.async_wait([this](beast::error_code wait_ec) {
              if (!wait_ec && acceptor_.is_open()) Accept();
            });
            return;
          }
          backoff_ = absl::ZeroDuration();
          if (!core_->stopping.load()) {
            beast::error_code nd;
            s.set_option(tcp::no_delay(true), nd);
            if (tls_) {
              std::make_shared<Session<TlsStream>>(core_.get(), std::move(s),
                                                   tls_->Current())
                  ->Run();
            } else {
              std::make_shared<Session<PlainStream>>(core_.get(), std::move(s),
                                                     nullptr)
                  ->Run();
            }
          }
          AcceptIfRoom();
        });
  }

  // Accepts again, or pauses at max_connections until a connection closes.
  void AcceptIfRoom() {
    const bool room = core_->MayAccept([this] {
      if (core_->stopping.load()) return;  // The io_context may be going away.
      asio::post(acceptor_.get_executor(), [this] {
        if (core_->options.observer.accept_paused) core_->options.observer.accept_paused(false);
        if (acceptor_.is_open()) Accept();
      });
    });
    if (room) {
      Accept();
    } else if (core_->options.observer.accept_paused) {
      core_->options.observer.accept_paused(true);
    }
  }

  // Order matters for destruction: connections still queued in ioc_ refer
  // to core_ and tls_, so those outlive it.
  std::unique_ptr<ServerCore> core_;
  std::optional<TlsReloader> tls_;  // Used on the acceptor's strand only.
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_{acceptor_.get_executor()};
  absl::Duration backoff_ = absl::ZeroDuration();  // On the acceptor's strand.
  uint16_t port_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace

absl::Status SplitListenAddress(std::string_view listen, std::string_view field,
                                HttpServerOptions* options) {
  const size_t colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string_view::npos ||
      !absl::SimpleAtoi(Sv(listen.substr(colon + 1)), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(field), ": \"", Sv(listen), "\" is not host:port"));
  }
  std::string_view host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  options->address = host.empty() ? "0.0.0.0" : std::string(host);
  options->port = static_cast<uint16_t>(port);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    HttpServerOptions options, Handler handler) {
  auto server = std::make_unique<BeastServer>(
      std::make_unique<ServerCore>(std::move(options), std::move(handler)));
  if (absl::Status s = server->Listen(); !s.ok()) return s;
  return server;
}

}  // namespace pdc::net
