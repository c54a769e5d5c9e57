// StatusServer: a minimal HTTP/1.1 listener for pdc-node's /metrics and
// /healthz (the extender's server is built around its own router). One
// thread accepts and answers connections one at a time, one request each
// (Connection: close); reads time out after 5 s, so a stuck scraper cannot
// hold it for long. Tests also use it to stand in for pdc-extender.
// Thread-safety: Start/Stop from one controlling thread; the handler runs on
// the server thread.
#ifndef PDC_DRIVER_NODE_STATUS_SERVER_H_
#define PDC_DRIVER_NODE_STATUS_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pdc::driver {

struct StatusRequest {
  std::string method;
  std::string target;  // Path and query.
  std::string body;
};

struct StatusResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class StatusServer {
 public:
  using Handler = std::function<StatusResponse(const StatusRequest&)>;

  // Listens on `listen` ("host:port", port 0 picks one) and serves `handler`.
  static absl::StatusOr<std::unique_ptr<StatusServer>> Start(const std::string& listen,
                                                              Handler handler);
  virtual ~StatusServer() = default;
  virtual uint16_t port() const = 0;
  // Stops accepting and joins the thread. Idempotent; the destructor calls it.
  virtual void Stop() = 0;
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NODE_STATUS_SERVER_H_
