// pdc-extender's HTTP front: the shared server (net/http_server.h) with the
// Router as its handler, the Notifier its long-polls park on, the body
// padding the Router's in-situ JSON parses need, and pdc_long_polls_waiting
// kept in ExtenderMetrics.
// Thread-safety: as net::HttpServer.
#ifndef PDC_EXTENDER_ROUTER_SERVER_H_
#define PDC_EXTENDER_ROUTER_SERVER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/notifier.h"
#include "extender/extender_metrics.h"
#include "extender/router.h"
#include "net/http_server.h"

namespace pdc::extender {

using net::HttpServer;
using net::HttpServerOptions;

// Starts `options` serving `router`. `router` and `notifier` (and `metrics`,
// may be null) must outlive the server. options.notifier, observer,
// body_spare_bytes and server_name are set here.
absl::StatusOr<std::unique_ptr<HttpServer>> StartRouterServer(
    HttpServerOptions options, const Router* router, Notifier* notifier,
    ExtenderMetrics* metrics);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_ROUTER_SERVER_H_
