// Boost.Beast behind a synchronous interface: each step is an asynchronous
// operation run to completion on the client's own io_context, because only
// Beast's asynchronous operations honour tcp_stream's expiry (our timeout).
#include "net/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "net/http_url.h"
#include "net/read_buffer.h"
#include "net/token_file.h"

namespace pdc {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using ErrorCode = boost::system::error_code;

namespace {

// Errors on a reused connection that mean the server closed it while idle,
// before reading our request: safe to send the request again once.
bool IsClosedByPeer(const ErrorCode& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == ssl::error::stream_truncated;
}

// RFC 9110 §9.2.2: the methods whose repetition has the effect of one
// request.
bool IdempotentMethod(http::verb verb) {
  switch (verb) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::options:
    case http::verb::trace:
    case http::verb::put:
    case http::verb::delete_:
      return true;
    default:
      return false;
  }
}

// True when the peer closed (or reset) an idle connection, or sent bytes
// nobody asked for: either way it must not carry the next request.
bool StaleWhileIdle(int fd) {
  pollfd p{};
  p.fd = fd;
  p.events = POLLIN | POLLRDHUP;
  return ::poll(&p, 1, 0) != 0;
}

// Request deadlines arm Asio timers, which run on real time: RealClock().
std::chrono::nanoseconds Remaining(absl::Time deadline) {
  return absl::ToChronoNanoseconds(
      std::max(deadline - RealClock()->Now(), absl::ZeroDuration()));
}

}  // namespace

std::string HttpResponse::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (absl::EqualsIgnoreCase(Sv(k), Sv(name))) return v;
  }
  return "";
}

class HttpClient::Impl {
 public:
  Impl(HttpClientOptions options, BaseUrl url)
      : options_(std::move(options)), url_(std::move(url)) {}

  absl::Status Init() {
    if (!options_.bearer_token_file.empty()) {
      token_file_ = std::make_unique<TokenFile>(options_.bearer_token_file);
      RETURN_IF_ERROR(token_file_->Get().status());
    }
    if (!url_.tls) return absl::OkStatus();
    ssl_ctx_.emplace(ssl::context::tls_client);
    ErrorCode ec;
    if (options_.ca_file.empty()) {
      ssl_ctx_->set_default_verify_paths(ec);
    } else {
      ssl_ctx_->load_verify_file(options_.ca_file, ec);
    }
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot load CA file \"", options_.ca_file, "\": ", ec.message()));
    }
    ssl_ctx_->set_verify_mode(ssl::verify_peer);
    if (options_.cert_file.empty() != options_.key_file.empty()) {
      return absl::InvalidArgumentError(
          "a client certificate needs both a cert file and a key file");
    }
    if (!options_.cert_file.empty()) {
      ssl_ctx_->use_certificate_chain_file(options_.cert_file, ec);
      if (ec) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot load client certificate \"",
                         options_.cert_file, "\": ", ec.message()));
      }
      ssl_ctx_->use_private_key_file(options_.key_file, ssl::context::pem, ec);
      if (ec) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot load client key \"", options_.key_file,
                         "\": ", ec.message()));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<http::request<http::string_body>> BuildRequest(std::string_view method,
                                                                std::string_view target,
                                                                std::string_view body,
                                                                const HttpRequestOptions& ro) {
    const http::verb verb =
        http::string_to_verb(beast::string_view(method.data(), method.size()));
    if (verb == http::verb::unknown) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown HTTP method \"", Sv(method), "\""));
    }
    http::request<http::string_body> req{
        verb, absl::StrCat(url_.path_prefix, Sv(target)), 11};
    req.set(http::field::host, url_.HostHeader());
    req.set(http::field::user_agent, options_.user_agent);
    if (token_file_ != nullptr) {
      ASSIGN_OR_RETURN(std::string token, token_file_->Get());
      req.set(http::field::authorization, absl::StrCat("Bearer ", token));
    } else if (!options_.bearer_token.empty()) {
      req.set(http::field::authorization,
              absl::StrCat("Bearer ", options_.bearer_token));
    }
    for (const auto& [name, value] : ro.headers) req.set(name, value);
    if (!body.empty() || verb == http::verb::post || verb == http::verb::put) {
      req.set(http::field::content_type, ro.content_type);
      req.body() = std::string(body);
    }
    req.keep_alive(true);
    req.prepare_payload();
    return req;
  }

  absl::StatusOr<HttpResponse> Do(std::string_view method,
                                  std::string_view target,
                                  std::string_view body,
                                  const HttpRequestOptions& ro) {
    if (cancelled_.load()) return Cancelled(method, target);
    ASSIGN_OR_RETURN(http::request<http::string_body> req, BuildRequest(method, target, body, ro));
    const http::verb verb = req.method();
    const absl::Duration timeout =
        ro.timeout > absl::ZeroDuration() ? ro.timeout : options_.timeout;
    const absl::Time deadline = RealClock()->Deadline(timeout);

    const std::string what =
        absl::StrCat(Sv(method), " ", Sv(target), " to ", options_.peer_name,
                     " at ", url_.ToString());
    const bool idempotent = ro.idempotent.value_or(IdempotentMethod(verb));
    for (int attempt = 0;; ++attempt) {
      if (connected_ && (buffer_.size() > 0 || StaleWhileIdle(NativeHandle()))) Close();
      const bool reused = connected_;
      if (!connected_) RETURN_IF_ERROR(Connect(deadline, timeout));
      Exchange x = tls_ ? RoundTrip(*tls_, req, deadline)
                        : RoundTrip(*tcp_, req, deadline);
      if (!x.ec) {
        if (!x.keep_alive) Close();
        return std::move(x.response);
      }
      Close();
      if (reused && attempt == 0 && !x.got_bytes && IsClosedByPeer(x.ec) &&
          (idempotent || x.bytes_written == 0)) {
        continue;  // The server dropped the idle connection: once more.
      }
      if (x.ec == beast::error::timeout) {
        return absl::DeadlineExceededError(absl::StrCat(
            what, " timed out after ", absl::FormatDuration(timeout)));
      }
      if (x.ec == http::error::body_limit) {
        return absl::ResourceExhaustedError(
            absl::StrCat("response to ", what, " is larger than ",
                         options_.max_response_bytes, " bytes"));
      }
      return absl::UnavailableError(
          absl::StrCat("connection lost during ", what, ": ", x.ec.message()));
    }
  }

  absl::Status Stream(std::string_view method, std::string_view target, std::string_view body,
                      const HttpRequestOptions& ro, absl::Duration idle_timeout,
                      const StreamCallbacks& cb) {
    if (cancelled_.load()) return Cancelled(method, target);
    ASSIGN_OR_RETURN(http::request<http::string_body> req, BuildRequest(method, target, body, ro));
    const absl::Duration timeout =
        ro.timeout > absl::ZeroDuration() ? ro.timeout : options_.timeout;
    if (connected_ && (buffer_.size() > 0 || StaleWhileIdle(NativeHandle()))) Close();
    if (!connected_) RETURN_IF_ERROR(Connect(RealClock()->Deadline(timeout), timeout));
    const std::string what = absl::StrCat(Sv(method), " ", Sv(target), " to ",
                                          options_.peer_name, " at ", url_.ToString());
    ErrorCode ec = tls_ ? StreamTrip(*tls_, req, idle_timeout, cb)
                        : StreamTrip(*tcp_, req, idle_timeout, cb);
    if (!ec) return absl::OkStatus();
    Close();
    if (cancelled_.load()) return Cancelled(method, target);
    if (ec == beast::error::timeout) {
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": nothing arrived for ", absl::FormatDuration(idle_timeout)));
    }
    return absl::UnavailableError(
        absl::StrCat("connection lost during ", what, ": ", ec.message()));
  }

  // Thread-safe: posting is, and the socket is closed by the thread inside
  // Run(), whose pending reads then end with operation_aborted (the stream
  // objects stay until that thread's own Close()).
  void Cancel() {
    cancelled_.store(true);
    net::post(ioc_, [this] {
      ErrorCode ignored;
      if (tls_) beast::get_lowest_layer(*tls_).socket().close(ignored);
      if (tcp_) tcp_->socket().close(ignored);
    });
  }

  void Close() {
    ErrorCode ignored;
    if (tls_) {
      beast::get_lowest_layer(*tls_).socket().shutdown(
          tcp::socket::shutdown_both, ignored);
      beast::get_lowest_layer(*tls_).socket().close(ignored);
      tls_.reset();
    }
    if (tcp_) {
      tcp_->socket().shutdown(tcp::socket::shutdown_both, ignored);
      tcp_->socket().close(ignored);
      tcp_.reset();
    }
    buffer_.consume(buffer_.size());
    connected_ = false;
  }

  uint64_t connections_opened() const { return connections_opened_; }

 private:
  int NativeHandle() {
    return tls_ ? beast::get_lowest_layer(*tls_).socket().native_handle()
                : tcp_->socket().native_handle();
  }

  struct Exchange {
    ErrorCode ec;
    bool got_bytes = false;  // Any part of a response arrived.
    size_t bytes_written = 0;  // Of the request.
    bool keep_alive = false;
    HttpResponse response;
  };

  void Run() {
    ioc_.restart();
    ioc_.run();
  }

  absl::Status Connect(absl::Time deadline, absl::Duration timeout) {
    const std::string where =
        absl::StrCat(options_.peer_name, " at ", url_.ToString());
    tcp::resolver resolver(ioc_);
    ErrorCode ec;
    const tcp::resolver::results_type endpoints =
        resolver.resolve(url_.host, std::to_string(url_.port), ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot reach ", where,
                                                 ": cannot resolve ", url_.host,
                                                 ": ", ec.message()));
    }
    beast::tcp_stream* lowest;
    if (url_.tls) {
      tls_.emplace(ioc_, *ssl_ctx_);
      // SNI and certificate name check against the URL's host.
      SSL_set_tlsext_host_name(tls_->native_handle(), url_.host.c_str());
      tls_->set_verify_callback(ssl::host_name_verification(url_.host));
      lowest = &beast::get_lowest_layer(*tls_);
    } else {
      tcp_.emplace(ioc_);
      lowest = &*tcp_;
    }
    lowest->expires_after(Remaining(deadline));
    lowest->async_connect(
        endpoints, [&](const ErrorCode& e, const tcp::endpoint&) { ec = e; });
    Run();
    if (!ec && url_.tls) {
      tls_->async_handshake(ssl::stream_base::client,
                            [&](const ErrorCode& e) { ec = e; });
      Run();
      if (ec && ec != beast::error::timeout) {
        Close();
        return absl::UnavailableError(absl::StrCat("TLS handshake with ", where,
                                                   " failed: ", ec.message()));
      }
    }
    if (ec) {
      Close();
      if (ec == beast::error::timeout) {
        return absl::DeadlineExceededError(
            absl::StrCat("cannot reach ", where, ": no connection within ",
                         absl::FormatDuration(timeout)));
      }
      return absl::UnavailableError(
          absl::StrCat("cannot reach ", where, ": ", ec.message()));
    }
    ++connections_opened_;
    connected_ = true;
    return absl::OkStatus();
  }

  absl::Status Cancelled(std::string_view method, std::string_view target) const {
    return absl::CancelledError(absl::StrCat(Sv(method), " ", Sv(target), " to ",
                                             options_.peer_name, ": cancelled"));
  }

  // One streamed exchange; an error code, or none when the body ended (the
  // connection kept if the server allows) or a callback said stop (the
  // connection closed: the rest of the body is not read).
  template <typename Stream>
  ErrorCode StreamTrip(Stream& stream, http::request<http::string_body>& req,
                       absl::Duration idle_timeout, const StreamCallbacks& cb) {
    const auto idle = absl::ToChronoNanoseconds(idle_timeout);
    ErrorCode ec;
    beast::get_lowest_layer(stream).expires_after(idle);
    http::async_write(stream, req, [&](const ErrorCode& e, size_t) { ec = e; });
    Run();
    if (ec) return ec;
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);  // Endless by design; handed on piece by piece.
    beast::get_lowest_layer(stream).expires_after(idle);
    http::async_read_header(stream, buffer_, parser, [&](const ErrorCode& e, size_t) { ec = e; });
    Run();
    if (ec) return ec;
    HttpResponse head;
    head.status = parser.get().result_int();
    for (const auto& field : parser.get()) {
      head.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    if (cb.on_head && !cb.on_head(head)) {
      Close();
      return {};
    }
    while (!parser.is_done()) {
      beast::get_lowest_layer(stream).expires_after(idle);
      http::async_read_some(stream, buffer_, parser, [&](const ErrorCode& e, size_t) { ec = e; });
      Run();
      if (ec) return ec;
      std::string& piece = parser.get().body();
      if (piece.empty()) continue;
      const bool go_on = !cb.on_data || cb.on_data(piece);
      piece.clear();
      if (!go_on) {
        Close();
        return {};
      }
    }
    beast::get_lowest_layer(stream).expires_never();
    if (!parser.get().keep_alive()) Close();
    return {};
  }

  template <typename Stream>
  Exchange RoundTrip(Stream& stream, http::request<http::string_body>& req,
                     absl::Time deadline) {
    Exchange x;
    beast::get_lowest_layer(stream).expires_after(Remaining(deadline));
    http::async_write(stream, req, [&](const ErrorCode& e, size_t n) {
      x.ec = e;
      x.bytes_written = n;
    });
    Run();
    if (x.ec) return x;
    http::response_parser<http::string_body> parser;
    parser.body_limit(options_.max_response_bytes);
    http::async_read_header(stream, buffer_, parser,
                            [&](const ErrorCode& e, size_t) { x.ec = e; });
    Run();
    if (!x.ec) {
      ReserveForBody(buffer_, parser);
      http::async_read(stream, buffer_, parser,
                       [&](const ErrorCode& e, size_t) { x.ec = e; });
      Run();
    }
    x.got_bytes = parser.got_some() || buffer_.size() > 0;
    if (x.ec) return x;
    beast::get_lowest_layer(stream).expires_never();
    http::response<http::string_body> res = parser.release();
    x.keep_alive = res.keep_alive();
    x.response.status = res.result_int();
    for (const auto& field : res) {
      x.response.headers.emplace_back(std::string(field.name_string()),
                                      std::string(field.value()));
    }
    x.response.body = std::move(res.body());
    return x;
  }

  const HttpClientOptions options_;
  std::unique_ptr<TokenFile> token_file_;  // options_.bearer_token_file, when set.
  const BaseUrl url_;
  net::io_context ioc_{1};
  std::optional<ssl::context> ssl_ctx_;
  std::optional<beast::tcp_stream> tcp_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
  uint64_t connections_opened_ = 0;
  std::atomic<bool> cancelled_{false};
};

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(
    HttpClientOptions options) {
  ASSIGN_OR_RETURN(BaseUrl url, ParseBaseUrl(options.base_url));
  if (!url.tls && (!options.ca_file.empty() || !options.cert_file.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS files given but ", options.base_url, " is not an https:// URL"));
  }
  const std::string normalised = url.ToString();
  auto impl = std::make_unique<Impl>(std::move(options), std::move(url));
  RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<HttpClient>(
      new HttpClient(std::move(impl), normalised));
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl, std::string url)
    : url_(std::move(url)), impl_(std::move(impl)) {}

HttpClient::~HttpClient() = default;

absl::StatusOr<HttpResponse> HttpClient::Do(std::string_view method,
                                            std::string_view target,
                                            std::string_view body,
                                            const HttpRequestOptions& options) {
  absl::MutexLock lock(&mu_);
  return impl_->Do(method, target, body, options);
}

absl::Status HttpClient::Stream(std::string_view method, std::string_view target,
                               std::string_view body, const HttpRequestOptions& options,
                               absl::Duration idle_timeout, const StreamCallbacks& callbacks) {
  absl::MutexLock lock(&mu_);
  return impl_->Stream(method, target, body, options, idle_timeout, callbacks);
}

// Without mu_, which the Stream being cancelled holds: Impl::Cancel is
// thread-safe.
void HttpClient::Cancel() { impl_->Cancel(); }

void HttpClient::Close() {
  absl::MutexLock lock(&mu_);
  impl_->Close();
}

uint64_t HttpClient::connections_opened() const {
  absl::MutexLock lock(&mu_);
  return impl_->connections_opened();
}

}  // namespace pdc
