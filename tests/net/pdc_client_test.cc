// PdcClient against a canned pdc-extender on port 0: each call's method,
// target and body, the decoded answer, and the error a non-2xx answer becomes.
#include "net/pdc_client.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/rest_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_http_server.h"

namespace pdc {
namespace {

using ::pdc::testing::Addr;
using ::pdc::testing::StatusIs;
using ::pdc::testing::TestHttpServer;
using ::pdc::testing::TestReply;
using ::pdc::testing::TestRequest;
using ::testing::HasSubstr;

Claim BoundClaim() {
  Claim c;
  c.key = {"default", "data"};
  c.uid = "uid-c";
  c.spec.resource_name = "devices.kubevirt.io/nvme";
  c.status.phase = ClaimPhase::kBound;
  c.status.node = "node-a";
  c.status.devices = {BoundDevice{Addr("0000:3b:00.0"), "SN1"}};
  return c;
}

PdcClient ClientFor(const TestHttpServer& server) {
  HttpClientOptions o;
  o.base_url = server.url();
  absl::StatusOr<std::unique_ptr<HttpClient>> http = HttpClient::Create(o);
  EXPECT_TRUE(http.ok()) << http.status();
  return PdcClient(*std::move(http));
}

TEST(PdcClientTest, ClaimCallsSendTheDocumentedRequestsAndDecodeTheAnswers) {
  const Claim claim = BoundClaim();
  TestHttpServer server([&](const TestRequest& r) -> TestReply {
    if (r.method == "POST" && r.target == "/v1/namespaces/default/claims") {
      return {201, api::WriteClaim(claim)};
    }
    if (r.target == "/v1/namespaces/default/claims") return {200, api::WriteClaimList({claim})};
    if (r.target == "/v1/claims") return {200, R"({"items":[]})"};
    if (r.method == "GET" && r.target == "/v1/namespaces/default/claims/data") {
      return {200, api::WriteClaim(claim)};
    }
    if (r.method == "DELETE" && r.target == "/v1/namespaces/default/claims/data?force=true") {
      return {200, api::WriteClaim(claim)};
    }
    if (r.method == "POST" && r.target == "/v1/namespaces/default/claims/data/release?podUid=u1") {
      return {200, api::WriteClaim(claim)};
    }
    return {404, R"({"error":"claim default/nope not found","field":""})"};
  });
  PdcClient client = ClientFor(server);
  api::ClaimCreate create{claim.key, claim.spec};
  ASSERT_OK_AND_ASSIGN(Claim created, client.CreateClaim(create));
  EXPECT_EQ(created, claim);
  ASSERT_OK_AND_ASSIGN(std::vector<Claim> in_ns, client.ListClaims("default"));
  EXPECT_EQ(in_ns, std::vector<Claim>{claim});
  ASSERT_OK_AND_ASSIGN(std::vector<Claim> all, client.ListClaims(""));
  EXPECT_TRUE(all.empty());
  ASSERT_OK_AND_ASSIGN(Claim got, client.GetClaim(claim.key));
  EXPECT_EQ(got, claim);
  EXPECT_OK(client.DeleteClaim(claim.key, true).status());
  EXPECT_OK(client.ReleaseClaim(claim.key, "u1").status());
  EXPECT_THAT(client.GetClaim({"default", "nope"}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("claim default/nope not found")));
  const std::vector<TestRequest> seen = server.requests();
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(seen[0].body, api::WriteClaimCreate(create));
}

TEST(PdcClientTest, ServerErrorsCarryTheServerMessageAndAMatchingCode) {
  struct Case {
    int status;
    std::string body;
    absl::StatusCode code;
    std::string message;
  } cases[] = {
      {400, R"({"error":"count: must be an integer","field":"count"})",
       absl::StatusCode::kInvalidArgument, "count: must be an integer"},
      {422, R"({"error":"count: must be between 1 and 256","field":"count"})",
       absl::StatusCode::kInvalidArgument, "count: must be between 1 and 256"},
      {401, R"({"error":"missing bearer token"})", absl::StatusCode::kPermissionDenied,
       "missing bearer token"},
      {404, R"({"error":"no such node"})", absl::StatusCode::kNotFound, "no such node"},
      {409, R"({"error":"claim default/data is reserved"})",
       absl::StatusCode::kFailedPrecondition, "is reserved"},
      {503, "store failed\nsecond line", absl::StatusCode::kUnavailable,
       "HTTP 503: store failed"},
  };
  for (const Case& c : cases) {
    TestHttpServer server([&](const TestRequest&) { return TestReply{c.status, c.body}; });
    PdcClient client = ClientFor(server);
    absl::StatusOr<std::vector<PendingHandoff>> r = client.ListHandoffs("node-a");
    EXPECT_THAT(r, StatusIs(c.code, HasSubstr(c.message))) << c.status;
    EXPECT_THAT(r.status().message(), ::testing::Not(HasSubstr("second line")));
    std::optional<Refusal> refusal = RefusalOf(r.status());
    ASSERT_TRUE(refusal.has_value()) << c.status;
    EXPECT_EQ(refusal->http_status, c.status);
  }
}

// The refusal is the server's own words: its message and the field it names.
TEST(PdcClientTest, RefusalIsTheServersMessageWithItsField) {
  struct Case {
    int status;
    std::string body;
    std::string message;
  } cases[] = {
      {422, R"({"error": "count must be >= 1", "field": "count"})",
       "count must be >= 1 (field count)"},
      {404, R"({"error": "claim default/x not found", "field": ""})", "claim default/x not found"},
      {502, "Bad Gateway\nmore", "Bad Gateway"},
      {500, "", ""},
  };
  for (const Case& c : cases) {
    TestHttpServer server([&](const TestRequest&) { return TestReply{c.status, c.body}; });
    PdcClient client = ClientFor(server);
    std::optional<Refusal> refusal = RefusalOf(client.ListNodes().status());
    ASSERT_TRUE(refusal.has_value()) << c.status;
    EXPECT_EQ(refusal->http_status, c.status);
    EXPECT_EQ(refusal->message, c.message);
  }
}

TEST(PdcClientTest, TransportErrorsAreNoRefusal) {
  EXPECT_FALSE(RefusalOf(absl::UnavailableError("connection refused")).has_value());
  EXPECT_FALSE(RefusalOf(absl::OkStatus()).has_value());
}

TEST(PdcClientTest, NodeAndDeviceListsDecodeWhatTheServerWrites) {
  NodeView view;
  view.name = "node-a";
  view.reporting = true;
  view.last_report = absl::FromUnixSeconds(1'700'000'000);
  const Device d = testing::NvmeDevice("0000:3b:00.0", 12, 0, "SN1");
  view.inventory = testing::Inventory("node-a", {d});
  const std::vector<api::DeviceListing> listed = api::ListDevices({view}, {BoundClaim()});
  TestHttpServer server([&](const TestRequest& r) -> TestReply {
    if (r.target == "/v1/nodes") return {200, api::WriteNodeList({api::SummaryOf(view)})};
    if (r.target == "/v1/nodes/node-a") {
      return {200, api::WriteNodeDetail({api::SummaryOf(view), listed})};
    }
    if (r.target == "/v1/devices") return {200, api::WriteDeviceList(listed)};
    return {404, R"({"error":"no such node"})"};
  });
  PdcClient client = ClientFor(server);
  ASSERT_OK_AND_ASSIGN(std::vector<api::NodeSummary> nodes, client.ListNodes());
  EXPECT_EQ(nodes, std::vector<api::NodeSummary>{api::SummaryOf(view)});
  ASSERT_OK_AND_ASSIGN(api::NodeDetail detail, client.GetNode("node-a"));
  EXPECT_EQ(detail.node, api::SummaryOf(view));
  EXPECT_EQ(detail.devices, listed);
  ASSERT_OK_AND_ASSIGN(std::vector<api::DeviceListing> devices, client.ListDevices());
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].claim, (ClaimKey{"default", "data"}));
  EXPECT_EQ(devices[0].device, d);
  EXPECT_THAT(client.GetNode("node b/../x"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(server.requests().back().target, "/v1/nodes/node%20b%2F..%2Fx");
}

TEST(PdcClientTest, HandoffCallsAndAMalformedAnswer) {
  TestHttpServer server([](const TestRequest& r) -> TestReply {
    if (r.method == "DELETE" && r.target == "/v1/nodes/node-a/handoffs/u1") {
      return {200, R"({"released":["default/a","default/b"]})"};
    }
    if (r.target == "/v1/handoffs") return {200, R"({"items":[]})"};
    return {200, R"({"version":"seven"})"};
  });
  PdcClient client = ClientFor(server);
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimKey> released, client.CancelHandoff("node-a", "u1"));
  EXPECT_EQ(released, (std::vector<ClaimKey>{{"default", "a"}, {"default", "b"}}));
  ASSERT_OK_AND_ASSIGN(std::vector<PendingHandoff> pending, client.ListHandoffs(""));
  EXPECT_TRUE(pending.empty());
  EXPECT_THAT(client.GetNodeAllocations("node-a", 0, absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("allocations answer: version")));
}

}  // namespace
}  // namespace pdc
