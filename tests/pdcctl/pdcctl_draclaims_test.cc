// pdcctl get draclaims end to end against a fake pdc-extender answering
// GET /v1/dra/claims: the table, the namespace filter, -o json, and the
// keeper's note on stderr.
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pdcctl/pdcctl_run.h"
#include "tests/testing/test_http_server.h"

namespace pdc::pdcctl {
namespace {

using ::pdc::testing::TestHttpServer;
using ::pdc::testing::TestReply;
using ::pdc::testing::TestRequest;
using ::testing::HasSubstr;

constexpr char kDraClaimsJson[] =
    R"({"keeper": true, "synced": true, "items": [
        {"namespace": "default", "name": "vm2-nvme", "uid": "u2", "allocated": true,
         "devices": [{"request": "nvme", "driver": "nvme.pdc.kubevirt.io", "pool": "node-b",
                      "device": "snb0-0a0b0c0d", "serial": "SNB0", "address": "0000:3b:00.0"},
                     {"request": "nvme", "driver": "nvme.pdc.kubevirt.io", "pool": "node-b",
                      "device": "x-00000000", "serial": "", "address": null}],
         "vm": {"name": "vm2", "uid": "u-vm2"}, "persisted": false,
         "pods": [{"name": "virt-launcher-vm2-abcde", "uid": "u-p2"}]},
        {"namespace": "default", "name": "vm1-nvme", "uid": "u1", "allocated": true,
         "devices": [{"request": "nvme", "driver": "nvme.pdc.kubevirt.io", "pool": "node-a",
                      "device": "sna0-01020304", "serial": "SNA0", "address": "0000:3b:00.0"}],
         "vm": {"name": "vm1", "uid": "u-vm1"}, "persisted": true, "pods": []},
        {"namespace": "other", "name": "pending", "uid": "u3", "allocated": false,
         "devices": [], "vm": null, "persisted": false, "pods": []}]})";

constexpr char kDraKeeperOffJson[] =
    R"({"keeper": false, "synced": false, "note": "the DRA claim keeper is off", "items": []})";

struct DraCase {
  std::string name;
  std::vector<std::string> args;
  bool keeper_off;
  int code;
  std::string out;  // Exact, unless `out_has` is set.
  std::string out_has;
  std::string err;
};

TEST(PdcctlDraClaimsTest, GetDraClaims) {
  const std::vector<DraCase> cases = {
      {"table of the default namespace", {"get", "draclaims"}, false, kExitOk,
       "NAMESPACE   NAME       VM    NODE     DEVICE                     SERIAL           PERSISTED\n"
       "default     vm1-nvme   vm1   node-a   sna0-01020304              SNA0             yes\n"
       "default     vm2-nvme   vm2   node-b   snb0-0a0b0c0d,x-00000000   SNB0,<unknown>   no\n",
       "", ""},
      {"all namespaces", {"get", "resourceclaims", "-A"}, false, kExitOk, "",
       "other       pending    <none>   <none>   <none>", ""},
      {"a namespace without any", {"get", "draclaims", "-n", "empty"}, false, kExitOk, "", "",
       "No resources found in empty namespace.\n"},
      {"json", {"get", "draclaims", "-n", "other", "-o", "json"}, false, kExitOk, "",
       "\"name\": \"pending\"", ""},
      {"keeper off", {"get", "draclaims", "-A"}, true, kExitOk, "", "",
       "note: the DRA claim keeper is off\nNo resources found\n"},
      {"a name is refused", {"get", "draclaims", "x"}, false, kExitUsage, "", "",
       "error: get draclaims takes no name; use -n NAMESPACE or -A to filter\n"
       "Run 'pdcctl --help' for usage.\n"},
      {"delete is refused", {"delete", "draclaim", "x"}, false, kExitUsage, "", "",
       "error: delete works on claims only\nRun 'pdcctl --help' for usage.\n"},
  };
  for (const DraCase& c : cases) {
    SCOPED_TRACE(c.name);
    TestHttpServer server([&](const TestRequest& r) {
      TestReply reply;
      if (r.method == "GET" && r.target == "/v1/dra/claims") {
        reply.body = c.keeper_off ? kDraKeeperOffJson : kDraClaimsJson;
      } else {
        reply.status = 404;
        reply.body = R"({"error": "not found", "field": ""})";
      }
      return reply;
    });
    std::vector<std::string> args = c.args;
    args.push_back("--server");
    args.push_back(server.url());
    std::ostringstream out, err;
    Environment env;
    env.now = absl::FromUnixSeconds(1'700'000'000);
    env.out = &out;
    env.err = &err;
    EXPECT_EQ(pdcctl::Run(args, env), c.code) << err.str();
    if (c.out_has.empty()) {
      EXPECT_EQ(out.str(), c.out);
    } else {
      EXPECT_THAT(out.str(), HasSubstr(c.out_has));
    }
    EXPECT_EQ(err.str(), c.err);
  }
}

}  // namespace
}  // namespace pdc::pdcctl
