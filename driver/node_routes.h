// pdc-node's status endpoint (node.metricsListen), as a handler for the
// shared HTTP server (net/http_server.h):
//   /metrics       the registry in the Prometheus text format
//   /healthz       200 "ok" while the reconcile loop makes progress, 503
//                  once it has stalled (the liveness probe)
//   anything else  404
// Any method; the query string is ignored. Handler building only; main
// starts the server.
// Thread-safety: the handler runs on server worker threads, concurrently;
// `registry` and `healthy` must be thread-safe and outlive the server.
#ifndef PDC_DRIVER_NODE_ROUTES_H_
#define PDC_DRIVER_NODE_ROUTES_H_

#include <functional>

#include "common/metrics.h"
#include "net/http_server.h"

namespace pdc::driver {

net::HttpServer::Handler NodeStatusRoutes(const MetricsRegistry* registry,
                                          std::function<bool()> healthy);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_NODE_ROUTES_H_
