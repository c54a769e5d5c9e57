// Plain HTTP request/response values exchanged between the Beast server
// (http_server.h), which only moves bytes, and a program's handler
// (pdc-extender's Router, pdc-node's status routes), which decides what to
// answer. Keeping them socket-free lets every handler be tested without a
// network. (The HTTP client has its own response type, pdc::HttpResponse in
// http_client.h.)
// Thread-safety: value types.
#ifndef PDC_NET_HTTP_TYPES_H_
#define PDC_NET_HTTP_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace pdc::net {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // Path and query, e.g. "/v1/claims?x=1".
  std::string body;
  std::string authorization;  // The Authorization header, "" when absent.
  std::string content_type;   // The Content-Type header, "" when absent.
  // True when the connection is TLS and the client presented a certificate
  // that verified against the configured client CA.
  bool client_cert_verified = false;
  // False when the server re-runs a long-poll whose time is up: the handler
  // must answer with the current state instead of asking to wait again.
  bool allow_wait = true;
  // 0 on a request's first run; on the runs of a parked long-poll, the
  // LongPoll::resume_token it parked with (the body is gone by then).
  uint64_t resume_token = 0;
};

// A handler that wants to wait for a change (long-poll) returns this instead
// of a final answer; the server parks the connection without holding a
// thread, and calls the handler again with the same request once the
// server's Notifier (common/notifier.h) is past `seen_version` for `topic`
// (allow_wait = true) or when `max_wait` has passed (allow_wait = false).
struct LongPoll {
  uint64_t seen_version = 0;
  absl::Duration max_wait = absl::ZeroDuration();
  // Only bumps of this topic (or of every topic) wake the poll; "" = any
  // bump.
  std::string topic;
  // Handed back in HttpRequest::resume_token on the runs that follow, so a
  // handler can find the work it started (0 = none).
  uint64_t resume_token = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::optional<LongPoll> long_poll;  // Set only by waiting handlers.
};

}  // namespace pdc::net

#endif  // PDC_NET_HTTP_TYPES_H_
