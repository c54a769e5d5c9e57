#include "extender/router_server.h"

#include <utility>

#include "api/json_util.h"

namespace pdc::extender {

absl::StatusOr<std::unique_ptr<HttpServer>> StartRouterServer(
    HttpServerOptions options, const Router* router, Notifier* notifier,
    ExtenderMetrics* metrics) {
  options.server_name = "pdc-extender";
  options.body_spare_bytes = api::json::kInsituPadding;
  options.notifier = notifier;
  options.observer = {};
  if (metrics != nullptr) {
    options.observer.long_polls_waiting = [metrics](int delta) {
      metrics->long_polls_waiting()->Add(delta);
    };
  }
  return HttpServer::Start(std::move(options), [router](HttpRequest r) {
    return router->Handle(std::move(r));
  });
}

}  // namespace pdc::extender
