// pdc-node's status routes (driver/node_routes.h) as a plain handler, and
// served by the shared HTTP server as pdc-node starts it.
#include "driver/node_routes.h"

#include <atomic>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using ::testing::HasSubstr;

net::HttpRequest Get(std::string target) {
  net::HttpRequest r;
  r.method = "GET";
  r.target = std::move(target);
  return r;
}

TEST(NodeRoutesTest, MetricsHealthAndNotFound) {
  MetricsRegistry registry;
  registry.AddCounter("pdc_node_test_total", "A counter for the test.")->Increment();
  bool healthy = true;
  const net::HttpServer::Handler routes = NodeStatusRoutes(&registry, [&] { return healthy; });

  const net::HttpResponse metrics = routes(Get("/metrics?x=1"));
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type, kMetricsContentType);
  EXPECT_EQ(metrics.body, registry.Render());
  EXPECT_THAT(metrics.body, HasSubstr("pdc_node_test_total 1"));

  net::HttpResponse health = routes(Get("/healthz"));
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.content_type, "text/plain");
  EXPECT_EQ(health.body, "ok\n");
  healthy = false;
  health = routes(Get("/healthz"));
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.body, "reconcile loop stalled\n");

  const net::HttpResponse other = routes(Get("/readyz"));
  EXPECT_EQ(other.status, 404);
  EXPECT_EQ(other.body, "not found\n");
}

// Over a socket, as main starts it: node.metricsListen's host:port, two
// workers; answers keep the route's status, type and body.
TEST(NodeRoutesTest, ServedOverHttp) {
  MetricsRegistry registry;
  std::atomic<bool> healthy{false};
  net::HttpServerOptions so;
  ASSERT_OK(net::SplitListenAddress("127.0.0.1:0", "node.metricsListen", &so));
  so.threads = 2;
  ASSERT_OK_AND_ASSIGN(auto server,
                       net::HttpServer::Start(so, NodeStatusRoutes(&registry, [&] {
                                                return healthy.load();
                                              })));
  HttpClientOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(server->port());
  ASSERT_OK_AND_ASSIGN(auto client, HttpClient::Create(o));
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse stalled, client->Get("/healthz"));
  EXPECT_EQ(stalled.status, 503);
  EXPECT_EQ(stalled.body, "reconcile loop stalled\n");
  healthy = true;
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse ok, client->Get("/healthz"));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "ok\n");
  ASSERT_OK_AND_ASSIGN(pdc::HttpResponse metrics, client->Get("/metrics"));
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.Header("Content-Type"), kMetricsContentType);
  server->Shutdown();
}

TEST(NodeRoutesTest, ListenAddressIsHostPort) {
  net::HttpServerOptions so;
  ASSERT_OK(net::SplitListenAddress(":9102", "node.metricsListen", &so));
  EXPECT_EQ(so.address, "0.0.0.0");
  EXPECT_EQ(so.port, 9102);
  ASSERT_OK(net::SplitListenAddress("[::1]:8080", "node.metricsListen", &so));
  EXPECT_EQ(so.address, "::1");
  EXPECT_EQ(so.port, 8080);
  EXPECT_THAT(net::SplitListenAddress("localhost", "node.metricsListen", &so),
              pdc::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("node.metricsListen")));
  EXPECT_THAT(net::SplitListenAddress("h:70000", "node.metricsListen", &so),
              pdc::testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace pdc::driver
