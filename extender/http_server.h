// HttpServer: the Boost.Beast HTTP/1.1 front of pdc-extender. It only moves
// bytes between sockets and the Router (router.h):
//  - keep-alive, a pool of `threads` worker threads running one io_context;
//  - per connection: `read_timeout` for one whole request (headers and body;
//    a client that trickles its headers is cut off), `idle_timeout` between
//    requests, `max_body_bytes` (413 beyond it, answered before the body is
//    read), `Expect: 100-continue`;
//  - optional TLS with a server certificate and optional client
//    certificates: a client that presents one must pass verification against
//    `client_ca_file`; whether it did is passed to the Router
//    (HttpRequest::client_cert_verified), which requires it for the
//    scheduler verbs when configured;
//  - long-polls (HttpResponse::long_poll) are parked without a thread: an
//    Asio timer for the deadline plus a Notifier subscription whose callback
//    only posts to the connection's strand, so parked polls never exhaust
//    the worker pool;
//  - Shutdown(): stop accepting, close idle connections, answer parked
//    long-polls at once, let requests in flight finish (answered with
//    `Connection: close`), then join the threads; after `shutdown_grace`
//    whatever is left is cut.
// Thread-safety: Start/Shutdown from one controlling thread; port() from any.
#ifndef PDC_EXTENDER_HTTP_SERVER_H_
#define PDC_EXTENDER_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "extender/extender_metrics.h"
#include "extender/notifier.h"
#include "extender/router.h"

namespace pdc::extender {

struct HttpServerOptions {
  std::string address = "127.0.0.1";  // Numeric IPv4/IPv6 address.
  uint16_t port = 0;                  // 0 picks a free port.
  int threads = 4;
  uint64_t max_body_bytes = uint64_t{64} << 20;
  absl::Duration read_timeout = absl::Seconds(30);
  absl::Duration idle_timeout = absl::Seconds(120);
  absl::Duration shutdown_grace = absl::Seconds(25);
  // TLS: all empty = plain HTTP. cert_file and key_file are PEM.
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // Verifies client certificates when set.
};

class HttpServer {
 public:
  // What answers requests; runs on worker threads, concurrently.
  using Handler = std::function<HttpResponse(HttpRequest)>;

  // Binds, listens and starts the worker threads. `router` and `notifier`
  // (and `metrics`, may be null) must outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      HttpServerOptions options, const Router* router, Notifier* notifier,
      ExtenderMetrics* metrics);
  // Same with any handler (tests use it for a fake kube-apiserver).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      HttpServerOptions options, Handler handler, Notifier* notifier,
      ExtenderMetrics* metrics);

  virtual ~HttpServer() = default;
  virtual uint16_t port() const = 0;
  // Graceful stop, described above. Idempotent; the destructor calls it.
  virtual void Shutdown() = 0;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_HTTP_SERVER_H_
