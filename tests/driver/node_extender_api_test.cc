#include "driver/node_extender_api.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/test_util.h"
#include "net/http_server.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using net::HttpRequest;
using net::HttpResponse;
using pdc::testing::StatusIs;
using testing::Addr;
using ::testing::HasSubstr;

NodeInventory OneDevice() {
  return pdc::testing::Inventory(
      "node-a", {pdc::testing::NvmeDevice("0000:3b:00.0", 12, -1, "SN1")});
}

TEST(ExtenderJsonTest, EncodesInventoryAsTheRestApiSays) {
  EXPECT_EQ(EncodeInventory(OneDevice()),
            R"({"node":"node-a","devices":[{"address":"0000:3b:00.0","vendor":"1b36",)"
            R"("device":"0010","class":"010802","iommuGroup":12,"numaNode":-1,"serial":"SN1",)"
            R"("driver":"nvme","healthy":true}]})");
}

TEST(ExtenderJsonTest, DecodesAllocations) {
  ASSERT_OK_AND_ASSIGN(
      NodeAllocations a,
      DecodeAllocations(R"({"node":"node-a","version":17,"claimed":[
        {"address":"0000:5e:00.0","claim":"default/b","resourceName":"r","reclaimPolicy":"Retain","reservedFor":null},
        {"address":"0000:3b:00.0","claim":"default/a","resourceName":"r","reclaimPolicy":"Delete",
         "reservedFor":{"vm":"vm1","podName":"p","podUid":"u"}}],
        "returnToHost":["0000:af:00.0"]})"));
  EXPECT_EQ(a.version, 17u);
  ASSERT_EQ(a.claimed.size(), 2u);
  EXPECT_EQ(a.claimed[0], (ClaimedDevice{Addr("0000:3b:00.0"), "default/a", "r",
                                         ReclaimPolicy::kDelete, true,
                                         PodReservation{"vm1", "p", "u"}, false}));
  EXPECT_EQ(a.claimed[1].reclaim_policy, ReclaimPolicy::kRetain);
  EXPECT_FALSE(a.claimed[1].reserved);
  EXPECT_FALSE(a.claimed[1].reserved_for.has_value());
  EXPECT_TRUE(a.claimed[1].handed_off);
  EXPECT_EQ(a.return_to_host, std::vector<PciAddress>{Addr("0000:af:00.0")});
}

// docs/rest-api.md §4.5: `handedOff` per claimed entry; a reserved entry
// without it counts as waiting (pdc-node's reading, docs/rest-api.md §7).
TEST(ExtenderJsonTest, DecodesHandedOff) {
  ASSERT_OK_AND_ASSIGN(
      NodeAllocations a,
      DecodeAllocations(R"({"version":3,"claimed":[
        {"address":"0000:3b:00.0","claim":"ns/a","resourceName":"r",
         "reservedFor":{"vm":"vm1","podName":"p1","podUid":"u1"},"handedOff":true},
        {"address":"0000:5e:00.0","claim":"ns/b","resourceName":"r",
         "reservedFor":{"vm":"vm2","podName":"p2","podUid":"u2"},"handedOff":false},
        {"address":"0000:af:00.0","claim":"ns/c","resourceName":"r",
         "reservedFor":{"vm":"vm3","podName":"p3","podUid":"u3"}},
        {"address":"0000:d8:00.0","claim":"ns/d","resourceName":"r","reservedFor":null,
         "handedOff":true}]})"));
  ASSERT_EQ(a.claimed.size(), 4u);
  EXPECT_TRUE(a.claimed[0].handed_off);
  EXPECT_EQ(a.claimed[0].reserved_for, (PodReservation{"vm1", "p1", "u1"}));
  EXPECT_FALSE(a.claimed[1].handed_off);
  EXPECT_EQ(a.claimed[1].reserved_for->pod_uid, "u2");
  EXPECT_FALSE(a.claimed[2].handed_off);
  EXPECT_TRUE(a.claimed[3].handed_off);
  EXPECT_FALSE(a.claimed[3].reserved_for.has_value());
}

TEST(ExtenderJsonTest, EncodesHandoffAsHandoffApiSays) {
  const std::vector<PciAddress> devices = {Addr("0000:3b:00.0"), Addr("0000:5e:00.0")};
  EXPECT_EQ(EncodeHandoff("u1", "devices.kubevirt.io/nvme", devices),
            R"({"podUid":"u1","resourceName":"devices.kubevirt.io/nvme",)"
            R"("devices":["0000:3b:00.0","0000:5e:00.0"]})");
}

TEST(ExtenderJsonTest, MalformedAllocationsNameTheField) {
  struct Case {
    std::string json;
    std::string field;
  } cases[] = {
      {"[]", "not a JSON object"},
      {R"({"claimed":[]})", "version"},
      {R"({"version":1,"claimed":{}})", "claimed"},
      {R"({"version":1,"claimed":[{"address":7}]})", "claimed[0].address"},
      {R"({"version":1,"claimed":[{"address":"../../x"}]})", "claimed[0].address"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","reclaimPolicy":"Keep"}]})",
       "claimed[0].reclaimPolicy"},
      {R"({"version":1,"returnToHost":["0000:3b:00.0",3]})", "returnToHost[1]"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","reservedFor":"u"}]})",
       "claimed[0].reservedFor"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","reservedFor":{"podUid":1}}]})",
       "claimed[0].reservedFor.podUid"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","handedOff":"yes"}]})",
       "claimed[0].handedOff"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(DecodeAllocations(c.json),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.field)))
        << c.json;
  }
}

// A fake pdc-extender: the shared server on 127.0.0.1, port 0, one worker
// (the handlers below record requests without a lock).
absl::StatusOr<std::unique_ptr<net::HttpServer>> StartFakeExtender(
    net::HttpServer::Handler handler) {
  net::HttpServerOptions o;
  o.threads = 1;
  return net::HttpServer::Start(o, std::move(handler));
}

HttpResponse Json(int status, std::string body) {
  HttpResponse r;
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
          return Json(200, R"({"node":"node-a","version":4,"claimed":[{"address":"0000:3b:00.0"}],"returnToHost":[]})");
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
  EXPECT_EQ(seen[0].body, EncodeInventory(OneDevice()));
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
  EXPECT_EQ(seen[0].body, EncodeHandoff("u1", "r", devices));
}

TEST(HttpExtenderApiTest, ExtenderDownIsUnavailable) {
  ASSERT_OK_AND_ASSIGN(auto server,
                       StartFakeExtender([](HttpRequest) { return HttpResponse{}; }));
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
