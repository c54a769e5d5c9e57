// pdcctl end to end: whole commands against a fake extender that returns
// canned REST API JSON.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pdcctl/pdcctl_run.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_http_server.h"
#include "tests/testing/temp_dir.h"

namespace pdc::pdcctl {
namespace {

using ::pdc::testing::TestHttpServer;
using ::pdc::testing::TestReply;
using ::pdc::testing::TestRequest;
using ::testing::HasSubstr;

constexpr char kClaimJson[] =
    R"({"namespace": "default", "name": "nvme-data", "uid": "u1",
        "resourceName": "devices.kubevirt.io/nvme", "count": 1, "node": "",
        "serial": "", "address": "", "reclaimPolicy": "Retain", "ownerVM": "",
        "status": {"phase": "Bound", "node": "node-a",
                   "devices": [{"address": "0000:3b:00.0", "serial": "SN1"}],
                   "lostReason": "", "reservedFor": null}})";

constexpr char kHandoffsJson[] =
    R"({"items": [{"node": "node-b", "resourceName": "devices.kubevirt.io/nvme",
                   "namespace": "default", "vm": "vm2", "podName": "virt-launcher-vm2-abcde",
                   "podUid": "uid-2", "claims": ["default/vm2-nvme"],
                   "devices": ["0000:3b:00.0", "0000:5e:00.0"]},
                  {"node": "node-a", "resourceName": "devices.kubevirt.io/nvme",
                   "namespace": "default", "vm": "vm1", "podName": "virt-launcher-vm1-x7k2p",
                   "podUid": "uid-1", "claims": ["default/vm1-nvme"],
                   "devices": ["0000:3b:00.0"]}]})";

constexpr char kNodeAfterReleaseJson[] =
    R"({"name": "node-a", "reporting": true, "lastReport": "2023-11-14T22:13:20Z",
        "devices": [{"address": "0000:3b:00.0", "vendor": "1b36", "device": "0010",
                     "class": "010802", "iommuGroup": 12, "numaNode": 0, "serial": "SN1",
                     "driver": "vfio-pci", "healthy": true, "claim": null, "state": "Free",
                     "releasedFrom": null}]})";

// A fake pdc-extender with canned answers.
TestReply FakeExtender(const TestRequest& r) {
  TestReply reply;
  if (r.method == "GET" && r.target == "/v1/namespaces/default/claims") {
    reply.body = std::string(R"({"items": [)") + kClaimJson + "]}";
  } else if (r.method == "GET" && r.target == "/v1/namespaces/empty/claims") {
    reply.body = R"({"items": []})";
  } else if (r.method == "GET" &&
             r.target == "/v1/namespaces/default/claims/nvme-data") {
    reply.body = kClaimJson;
  } else if (r.method == "POST" &&
             r.target == "/v1/namespaces/default/claims") {
    reply.status = 201;
    reply.body = kClaimJson;
  } else if (r.method == "DELETE" &&
             r.target == "/v1/namespaces/default/claims/nvme-data") {
    reply.status = 409;
    reply.body =
        R"({"error": "claim default/nvme-data is reserved by VM vm1; use force", "field": "name"})";
  } else if (r.method == "GET" && (r.target == "/v1/handoffs" ||
                                    r.target == "/v1/nodes/node-a/handoffs")) {
    reply.body = kHandoffsJson;
  } else if (r.method == "POST" &&
             r.target == "/v1/nodes/node-a/devices/0000:3b:00.0/release") {
    reply.body = kNodeAfterReleaseJson;
  } else if (r.method == "POST" &&
             r.target == "/v1/nodes/node-a/devices/0000:5e:00.0/release") {
    reply.status = 409;
    reply.body =
        R"j({"error": "device 0000:5e:00.0 on node node-a is not Released (it is free)", "field": ""})j";
  } else if (r.method == "DELETE" && r.target == "/v1/nodes/node-a/handoffs/uid-1") {
    reply.body = R"({"released": ["default/vm1-nvme"]})";
  } else {
    reply.status = 404;
    reply.body = R"({"error": "not found", "field": ""})";
  }
  return reply;
}

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result RunPdcctl(std::vector<std::string> args,
                 std::optional<std::string> env_server = std::nullopt) {
  std::ostringstream out, err;
  Environment env;
  env.pdc_server = std::move(env_server);
  env.now = absl::FromUnixSeconds(1'700'000'000);
  env.out = &out;
  env.err = &err;
  const int code = Run(args, env);
  return {code, out.str(), err.str()};
}

TEST(PdcctlTest, GetClaimsPrintsATable) {
  TestHttpServer server(FakeExtender);
  Result r = RunPdcctl({"get", "claims"}, server.url());  // via $PDC_SERVER
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "NAME        PHASE   RESOURCE                   NODE     DEVICES"
            "        VM\n"
            "nvme-data   Bound   devices.kubevirt.io/nvme   node-a   "
            "0000:3b:00.0   <none>\n");
  EXPECT_EQ(server.requests().at(0).target, "/v1/namespaces/default/claims");
}

TEST(PdcctlTest, EmptyListSaysNoResourcesFound) {
  TestHttpServer server(FakeExtender);
  Result r =
      RunPdcctl({"get", "claims", "-n", "empty", "--server", server.url()});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "No resources found in empty namespace.\n");
}

TEST(PdcctlTest, DescribeAndJsonOutput) {
  TestHttpServer server(FakeExtender);
  Result d =
      RunPdcctl({"describe", "claim", "nvme-data", "--server", server.url()});
  EXPECT_EQ(d.code, kExitOk) << d.err;
  EXPECT_THAT(d.out, HasSubstr("Phase:           Bound\n"));
  Result j = RunPdcctl(
      {"get", "claim", "nvme-data", "-o", "json", "--server", server.url()});
  EXPECT_EQ(j.code, kExitOk) << j.err;
  EXPECT_THAT(j.out, HasSubstr("\n  \"name\": \"nvme-data\",\n"));
}

TEST(PdcctlTest, CreateSendsTheClaimWithTheToken) {
  TestHttpServer server(FakeExtender);
  pdc::testing::TempDir dir;
  const std::string token = dir.Join("token");
  std::ofstream(token) << "s3cret\n";
  Result r = RunPdcctl({"create", "claim", "nvme-data", "--resource",
                        "devices.kubevirt.io/nvme", "--count", "2",
                        "--reclaim-policy=Delete", "--address", "0000:3b:00.0",
                        "--token-file", token, "--server", server.url()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "claim/nvme-data created\n");
  const TestRequest req = server.requests().at(0);
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/v1/namespaces/default/claims");
  EXPECT_EQ(req.authorization, "Bearer s3cret");
  EXPECT_EQ(req.body,
            R"({"name":"nvme-data","resourceName":"devices.kubevirt.io/nvme",)"
            R"("count":2,"node":"","serial":"","address":"0000:3b:00.0",)"
            R"("reclaimPolicy":"Delete"})");
}

TEST(PdcctlTest, GetAndCancelHandoffs) {
  TestHttpServer server(FakeExtender);
  Result r = RunPdcctl({"get", "handoffs", "--server", server.url()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "NODE     RESOURCE                   VM            POD                       POD UID"
            "   DEVICES\n"
            "node-a   devices.kubevirt.io/nvme   default/vm1   virt-launcher-vm1-x7k2p   uid-1  "
            "   0000:3b:00.0\n"
            "node-b   devices.kubevirt.io/nvme   default/vm2   virt-launcher-vm2-abcde   uid-2  "
            "   0000:3b:00.0,0000:5e:00.0\n");
  EXPECT_EQ(RunPdcctl({"get", "handoffs", "--node", "node-a", "--server", server.url()}).code,
            kExitOk);
  EXPECT_EQ(server.requests().at(1).target, "/v1/nodes/node-a/handoffs");
  Result d = RunPdcctl(
      {"delete", "handoff", "uid-1", "--node", "node-a", "--server", server.url()});
  EXPECT_EQ(d.code, kExitOk) << d.err;
  EXPECT_THAT(d.out, HasSubstr("handoff/uid-1 on node node-a cancelled"));
  EXPECT_EQ(server.requests().at(2).method, "DELETE");
  EXPECT_EQ(server.requests().at(2).target, "/v1/nodes/node-a/handoffs/uid-1");
}

TEST(PdcctlTest, ReleaseDevice) {
  TestHttpServer server(FakeExtender);
  Result r = RunPdcctl({"release", "device", "node-a", "0000:3b:00.0", "--server", server.url()});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "device/0000:3b:00.0 on node node-a released; any claim may get it now\n");
  EXPECT_EQ(server.requests().at(0).method, "POST");
  EXPECT_EQ(server.requests().at(0).target, "/v1/nodes/node-a/devices/0000:3b:00.0/release");
  Result j = RunPdcctl(
      {"release", "device", "node-a", "0000:3b:00.0", "-o", "json", "--server", server.url()});
  EXPECT_EQ(j.code, kExitOk) << j.err;
  EXPECT_THAT(j.out, HasSubstr("\"state\": \"Free\""));
  Result refused =
      RunPdcctl({"release", "device", "node-a", "0000:5e:00.0", "--server", server.url()});
  EXPECT_EQ(refused.code, kExitServerError);
  EXPECT_EQ(refused.err,
            "error: device 0000:5e:00.0 on node node-a is not Released (it is free)\n");
}

TEST(PdcctlTest, ServerErrorIsShownWithItsField) {
  TestHttpServer server(FakeExtender);
  Result r =
      RunPdcctl({"delete", "claim", "nvme-data", "--server", server.url()});
  EXPECT_EQ(r.code, kExitServerError);
  EXPECT_EQ(r.err,
            "error: claim default/nvme-data is reserved by VM vm1; use force "
            "(field name)\n");
  Result forced = RunPdcctl(
      {"delete", "claim", "nvme-data", "--force", "--server", server.url()});
  EXPECT_EQ(server.requests().back().target,
            "/v1/namespaces/default/claims/nvme-data?force=true");
  EXPECT_EQ(forced.code, kExitServerError);  // The fake only knows non-force.
  EXPECT_EQ(forced.err, "error: not found\n");
}

TEST(PdcctlTest, UnreachableExtenderIsAClearError) {
  uint16_t port;
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::acceptor a(
        ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
    port = a.local_endpoint().port();
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  Result r = RunPdcctl({"get", "nodes", "--server", url});
  EXPECT_EQ(r.code, kExitUnreachable);
  EXPECT_THAT(r.err, HasSubstr("error: cannot reach pdc-extender at " + url +
                               ": Connection refused\n"));
}

TEST(PdcctlTest, UsageErrorsExitWithTwo) {
  Result r = RunPdcctl({"get", "pods"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("error: unknown resource type \"pods\""));
  Result bad_token =
      RunPdcctl({"get", "claims", "--token-file", "/nonexistent/t"});
  EXPECT_EQ(bad_token.code, kExitUsage);
  EXPECT_THAT(bad_token.err, HasSubstr("cannot read token file"));
  Result help = RunPdcctl({"--help"});
  EXPECT_EQ(help.code, kExitOk);
  EXPECT_THAT(help.out, HasSubstr("pdcctl get claims"));
}

}  // namespace
}  // namespace pdc::pdcctl
