// HttpExtenderApi (over PdcClient) against a fake pdc-extender; the codecs it
// uses are tested in tests/api.
#include "driver/node_extender_api.h"

#include <memory>
#include <string>
#include <vector>

#include "api/handoff_json.h"
#include "api/rest_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/test_util.h"
#include "net/http_server.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using net::HttpRequest;
using pdc::testing::StatusIs;
using testing::Addr;
using ::testing::HasSubstr;

NodeInventory OneDevice() {
  return pdc::testing::Inventory(
      "node-a", {pdc::testing::NvmeDevice("0000:3b:00.0", 12, -1, "SN1")});
}

// A fake pdc-extender: the shared server on 127.0.0.1, port 0, one worker
// (the handlers below record requests without a lock).
absl::StatusOr<std::unique_ptr<net::HttpServer>> StartFakeExtender(
    net::HttpServer::Handler handler) {
  net::HttpServerOptions o;
  o.threads = 1;
  return net::HttpServer::Start(o, std::move(handler));
}

net::HttpResponse Json(int status, std::string body) {
  net::HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// The real HTTP client against a fake pdc-extender on a real socket.
TEST(HttpExtenderApiTest, TalksToAnExtenderOverHttp) {
  std::vector<HttpRequest> seen;
  ASSERT_OK_AND_ASSIGN(
      auto server, StartFakeExtender([&](HttpRequest r) {
        seen.push_back(r);
        if (r.method == "PUT" && r.target == "/v1/nodes/node-a/inventory") {
          return Json(200, R"({"node":"node-a","devices":1,"version":4})");
        }
        if (r.method == "GET" && r.target.starts_with("/v1/nodes/node-a/allocations")) {
          return Json(200, R"({"node":"node-a","version":4,"claimed":[{"address":"0000:3b:00.0","claim":"default/a"}],"returnToHost":[]})");
        }
        return Json(404, R"({"error":"no such node","field":""})");
      }));
  HttpClientOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(server->port());
  ASSERT_OK_AND_ASSIGN(auto client, HttpClient::Create(o));
  HttpExtenderApi api(std::move(client));
  ASSERT_OK_AND_ASSIGN(uint64_t version, api.PutInventory(OneDevice()));
  EXPECT_EQ(version, 4u);
  ASSERT_OK_AND_ASSIGN(NodeAllocations a, api.GetAllocations("node-a", 3, absl::Seconds(5)));
  EXPECT_EQ(a.version, 4u);
  ASSERT_EQ(a.claimed.size(), 1u);
  EXPECT_THAT(api.GetAllocations("node-b", 0, absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no such node")));
  server->Shutdown();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].body, api::WriteInventory(OneDevice()));
  EXPECT_EQ(seen[1].target, "/v1/nodes/node-a/allocations?since=3&wait=5");
}

TEST(HttpExtenderApiTest, ConfirmsHandoffsOverHttp) {
  std::vector<HttpRequest> seen;
  ASSERT_OK_AND_ASSIGN(
      auto server, StartFakeExtender([&](HttpRequest r) {
        seen.push_back(r);
        if (r.body.find("\"u1\"") != std::string::npos) {
          return Json(200, R"({"node":"node-a","podUid":"u1","claims":["default/a"]})");
        }
        if (r.body.find("\"u2\"") != std::string::npos) {
          return Json(409, R"({"error":"devices differ"})");
        }
        return Json(404, R"({"error":"nothing pending"})");
      }));
  HttpClientOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(server->port());
  ASSERT_OK_AND_ASSIGN(auto client, HttpClient::Create(o));
  HttpExtenderApi api(std::move(client));
  const std::vector<PciAddress> devices = {Addr("0000:3b:00.0")};
  EXPECT_OK(api.ConfirmHandoff("node-a", "u1", "r", devices));
  EXPECT_THAT(api.ConfirmHandoff("node-a", "u2", "r", devices),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("devices differ")));
  EXPECT_THAT(api.ConfirmHandoff("node-a", "u3", "r", devices),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nothing pending")));
  server->Shutdown();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].target, "/v1/nodes/node-a/handoffs");
  EXPECT_EQ(seen[0].body, api::WriteHandoffConfirm({"u1", "r", devices}));
}

TEST(HttpExtenderApiTest, ExtenderDownIsUnavailable) {
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartFakeExtender([](HttpRequest) { return net::HttpResponse{}; }));
  const uint16_t port = server->port();
  server->Shutdown();
  server.reset();
  HttpClientOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(port);
  ASSERT_OK_AND_ASSIGN(auto client, HttpClient::Create(o));
  HttpExtenderApi api(std::move(client));
  EXPECT_THAT(api.PutInventory(OneDevice()), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace pdc::driver
