#include "driver/node_routes.h"

#include <string>
#include <utility>

namespace pdc::driver {
namespace {

net::HttpResponse Text(int status, std::string content_type, std::string body) {
  net::HttpResponse r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

}  // namespace

net::HttpServer::Handler NodeStatusRoutes(const MetricsRegistry* registry,
                                          std::function<bool()> healthy) {
  return [registry, healthy = std::move(healthy)](net::HttpRequest r) {
    const std::string path = r.target.substr(0, r.target.find('?'));
    if (path == "/metrics") {
      return Text(200, std::string(kMetricsContentType), registry->Render());
    }
    if (path == "/healthz") {
      return healthy() ? Text(200, "text/plain", "ok\n")
                       : Text(503, "text/plain", "reconcile loop stalled\n");
    }
    return Text(404, "text/plain", "not found\n");
  };
}

}  // namespace pdc::driver
