// HttpServer: the Boost.Beast HTTP/1.1 server of every pdc program
// (pdc-extender's API, pdc-node's /metrics and probes). It only moves bytes
// between sockets and a handler (HttpRequest -> HttpResponse, http_types.h)
// that knows nothing about sockets:
//  - keep-alive, a pool of `threads` worker threads running one io_context;
//  - per connection: `read_timeout` for one whole request (headers and body;
//    a client that trickles its headers is cut off), `idle_timeout` between
//    requests, `max_body_bytes` (413 beyond it, answered before the body is
//    read), `Expect: 100-continue`;
//  - optional TLS with a server certificate and optional client
//    certificates: a client that presents one must pass verification against
//    `client_ca_file`; whether it did is passed to the handler
//    (HttpRequest::client_cert_verified). The certificate and key are read
//    again when either file changes (a rotated Secret), looked at on accept
//    at most once per `tls_reload_interval`; a pair that does not load is
//    logged and the previous one served;
//  - long-polls (HttpResponse::long_poll) are parked without a thread: an
//    Asio timer for the deadline plus a subscription to `notifier` (for the
//    poll's topic) whose callback only posts to the connection's strand, so
//    parked polls never exhaust the worker pool. A server without a notifier never parks: it
//    runs the handler again at once with allow_wait = false;
//  - Shutdown(): stop accepting, close idle connections and connections
//    still waiting for the rest of a request, answer parked long-polls at
//    once, let requests in flight finish (answered with `Connection:
//    close`), then join the threads; after `shutdown_grace` whatever is left
//    is cut.
// Thread-safety: Start/Shutdown from one controlling thread; port() from any.
// The handler and the observer's callbacks run on worker threads,
// concurrently.
#ifndef PDC_NET_HTTP_SERVER_H_
#define PDC_NET_HTTP_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/notifier.h"
#include "net/http_types.h"

namespace pdc::net {

// What the server reports about itself, for the program's metrics. Every
// callback may be empty.
struct HttpServerObserver {
  // A long-poll parked (+1) or left its parking, answered or closed (-1).
  std::function<void(int delta)> long_polls_waiting;
  // accept() failed (out of descriptors, memory...): the server waits
  // `backoff` before it accepts again, so it never spins.
  std::function<void(const std::string& error, absl::Duration backoff)> accept_failed;
  // Accepting paused (true) at max_connections, or resumed (false).
  std::function<void(bool paused)> accept_paused;
};

struct HttpServerOptions {
  std::string address = "127.0.0.1";  // Numeric IPv4/IPv6 address.
  uint16_t port = 0;                  // 0 picks a free port.
  int threads = 4;
  uint64_t max_body_bytes = uint64_t{64} << 20;
  // Open connections at most. At the cap the server stops accepting until
  // one closes: new clients wait in the kernel's listen backlog (and time
  // out there) instead of taking descriptors and memory. Start raises the
  // process's soft descriptor limit towards its hard limit to make room, and
  // lowers the cap to what the limit allows (128 descriptors kept for the
  // rest of the program), saying so in the log.
  size_t max_connections = 1024;
  absl::Duration read_timeout = absl::Seconds(30);
  absl::Duration idle_timeout = absl::Seconds(120);
  absl::Duration shutdown_grace = absl::Seconds(25);
  // TLS: all empty = plain HTTP. cert_file and key_file are PEM.
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // Verifies client certificates when set.
  // How often, at most, accepting a connection looks whether cert_file or
  // key_file changed (their inode, mtime or size). Zero: on every accept.
  absl::Duration tls_reload_interval = absl::Seconds(1);
  // The Server header of every answer.
  std::string server_name = "pdc";
  // Spare capacity reserved after each request body, so that a handler can
  // pad the body in place without reallocating it (pdc-extender's in-situ
  // JSON parses need json::kInsituPadding).
  size_t body_spare_bytes = 0;
  // Where long-polls wait for a change; may be null (see above). Must
  // outlive the server.
  Notifier* notifier = nullptr;
  HttpServerObserver observer;
};

// "host:port" (IPv6 as "[::1]:8080"; an empty host is 0.0.0.0) into
// options->address and options->port. `field` names the setting in errors.
absl::Status SplitListenAddress(std::string_view listen, std::string_view field,
                                HttpServerOptions* options);

class HttpServer {
 public:
  // What answers requests; runs on worker threads, concurrently.
  using Handler = std::function<HttpResponse(HttpRequest)>;

  // Binds, listens and starts the worker threads.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      HttpServerOptions options, Handler handler);

  virtual ~HttpServer() = default;
  virtual uint16_t port() const = 0;
  // Graceful stop, described above. Idempotent; the destructor calls it.
  virtual void Shutdown() = 0;
};

}  // namespace pdc::net

#endif  // PDC_NET_HTTP_SERVER_H_
