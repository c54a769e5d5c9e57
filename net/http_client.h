// A synchronous HTTP/1.1 client for talking to pdc-extender: used by
// pdcctl, the node driver (pdc-node) and the simulator's load generator.
//
//   HttpClientOptions o;
//   o.base_url = "http://127.0.0.1:8888";
//   ASSIGN_OR_RETURN(std::unique_ptr<HttpClient> c, HttpClient::Create(o));
//   ASSIGN_OR_RETURN(HttpResponse r, c->Get("/v1/claims"));
//   if (r.status != 200) ...
//
// One kept-alive connection per client object, opened on first use and
// reused. Before reusing it the client checks whether the server closed it
// while idle, and opens a fresh one if so. When a reused connection still
// turns out to be closed before any answer arrived, the request is sent
// again once on a fresh connection only if that cannot repeat its effect:
// its method is idempotent (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE; HttpRequestOptions::idempotent overrides), or not one byte of it
// was written. A POST or PATCH the server may have read is never sent
// twice: the caller gets Unavailable and decides (the rule of Go's
// net/http Transport, which client-go uses). Any HTTP status is a
// successful exchange; the Status reports transport problems only:
//   Unavailable       cannot connect / resolve / TLS handshake / connection
//                     lost ("cannot reach pdc-extender at
//                     http://127.0.0.1:8888: Connection refused")
//   DeadlineExceeded  the per-request timeout passed
//   InvalidArgument   bad URL, unreadable TLS files (from Create), bad method
//   ResourceExhausted response body larger than max_response_bytes
//
// Thread-safety: a client serialises its requests under a mutex, so sharing
// one is safe but sequential; for parallel requests use one client per
// thread (each has its own connection).
#ifndef PDC_NET_HTTP_CLIENT_H_
#define PDC_NET_HTTP_CLIENT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pdc {

struct HttpClientOptions {
  // http://host[:port][/prefix] or https://…; request targets are appended.
  std::string base_url = "http://127.0.0.1:8888";
  // https only: CA bundle to verify the server ("" = system store), and an
  // optional client certificate + key (PEM) for mutual TLS.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // Sent as "Authorization: Bearer <token>" when non-empty.
  std::string bearer_token;
  // Or: a file holding the token, read again when it changes (token_file.h;
  // kubelet rotates projected service-account tokens). Wins over
  // bearer_token; Create fails when it cannot be read.
  std::string bearer_token_file;
  // Whole-request limit (connect + send + receive) unless a request says
  // otherwise. Long-polls must pass a timeout above their wait.
  absl::Duration timeout = absl::Seconds(30);
  uint64_t max_response_bytes = uint64_t{256} << 20;
  std::string user_agent = "pdc-client";
  // Named in error messages ("cannot reach <peer_name> at <url>: ...").
  std::string peer_name = "pdc-extender";
};

struct HttpResponse {
  int status = 0;
  // In the order received; names as the server spelled them.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // First header with this name (case-insensitive), or "".
  std::string Header(std::string_view name) const;
};

struct HttpRequestOptions {
  // Zero: HttpClientOptions::timeout.
  absl::Duration timeout = absl::ZeroDuration();
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type = "application/json";  // When there is a body.
  // Whether sending the request twice has the effect of sending it once;
  // unset = by method (see the top of this file).
  std::optional<bool> idempotent;
};

// What a streamed answer (HttpClient::Stream) delivers as it arrives. Either
// callback may be empty; returning false stops the stream (the connection is
// closed, the rest unread).
struct StreamCallbacks {
  // The status and headers, once, before any of the body.
  std::function<bool(const HttpResponse& head)> on_head;
  // Each piece of the body as it is decoded (chunked transfer undone); the
  // pieces are cut wherever reads happen to end.
  std::function<bool(std::string_view piece)> on_data;
};

class HttpClient {
 public:
  // Parses the URL and loads TLS material; connects lazily.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(
      HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `target` is the path and query, e.g. "/v1/claims?x=1".
  absl::StatusOr<HttpResponse> Do(std::string_view method,
                                  std::string_view target,
                                  std::string_view body = {},
                                  const HttpRequestOptions& options = {});
  absl::StatusOr<HttpResponse> Get(std::string_view target,
                                   const HttpRequestOptions& options = {}) {
    return Do("GET", target, {}, options);
  }
  absl::StatusOr<HttpResponse> Post(std::string_view target,
                                    std::string_view body,
                                    const HttpRequestOptions& options = {}) {
    return Do("POST", target, body, options);
  }
  absl::StatusOr<HttpResponse> Put(std::string_view target,
                                   std::string_view body,
                                   const HttpRequestOptions& options = {}) {
    return Do("PUT", target, body, options);
  }
  absl::StatusOr<HttpResponse> Delete(std::string_view target,
                                      const HttpRequestOptions& options = {}) {
    return Do("DELETE", target, {}, options);
  }

  // Sends a request and hands its answer to `callbacks` piece by piece, for
  // answers that do not end on their own (a Kubernetes watch). OK when the
  // body ended or a callback said stop; DeadlineExceeded when nothing
  // arrived for `idle_timeout` (connecting is bounded by the request's
  // timeout); Cancelled after Cancel(); Unavailable when the connection was
  // lost. Never sent twice.
  absl::Status Stream(std::string_view method, std::string_view target, std::string_view body,
                      const HttpRequestOptions& options, absl::Duration idle_timeout,
                      const StreamCallbacks& callbacks);
  // From any thread, without waiting: the Stream or request in progress, and
  // every later one on this client, end with Cancelled. A cancelled client
  // is done; a watcher makes a new one for its next watch.
  void Cancel() ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // Drops the kept-alive connection (the next request opens a new one).
  void Close();

  // Normalised base URL, e.g. "http://127.0.0.1:8888".
  const std::string& url() const { return url_; }
  // Connections opened so far (for tests and metrics).
  uint64_t connections_opened() const;

 private:
  class Impl;
  HttpClient(std::unique_ptr<Impl> impl, std::string url);

  const std::string url_;
  mutable absl::Mutex mu_;
  const std::unique_ptr<Impl> impl_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace pdc

#endif  // PDC_NET_HTTP_CLIENT_H_
