// The REST API (docs/rest-api.md) through the Router, no sockets.
#include <string>

#include "common/metrics.h"
#include "extender/extender_metrics.h"
#include "tests/extender/extender_fixture.h"

namespace pdc::extender::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kInventoryA[] =
    R"({"node":"node-a","devices":[{"address":"0000:5e:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":13,"numaNode":0,"serial":"SNA1","driver":"nvme","healthy":true},)"
    R"({"address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":12,"numaNode":0,"serial":"SNA0","driver":"vfio-pci","healthy":true},)"
    R"({"address":"0000:00:1f.2","vendor":"8086","device":"2922","class":"010601","iommuGroup":3,"numaNode":-1,"serial":"","driver":"ahci","healthy":true}]})";

class RouterRestTest : public ExtenderFixture {
 protected:
  HttpResponse Put(std::string target, std::string body, std::string auth = "") {
    return Call("PUT", std::move(target), std::move(body), std::move(auth));
  }
  void PutInventoryA() {
    HttpResponse r = Put("/v1/nodes/node-a/inventory", kInventoryA);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  void BindVm1() {
    const std::string pod = VirtLauncherPod("vm1", "uid-1");
    ASSERT_EQ(Post("/scheduler/filter", NamesArgs(pod, {"node-a"})).status, 200);
    ASSERT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
              R"({"Error":""})");
  }
};

TEST_F(RouterRestTest, InventoryIsAcceptedAndUnmanagedDevicesDropped) {
  HttpResponse r = Put("/v1/nodes/node-a/inventory", kInventoryA);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"node":"node-a","devices":2,"version":1})");
  HttpResponse n = Call("GET", "/v1/nodes/node-a");
  EXPECT_EQ(n.body,
            R"({"name":"node-a","reporting":true,"lastReport":"2023-11-14T22:13:20Z","devices":[)"
            R"({"address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":12,"numaNode":0,"serial":"SNA0","driver":"vfio-pci","healthy":true,"claim":null,"state":"Free","releasedFrom":null},)"
            R"({"address":"0000:5e:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":13,"numaNode":0,"serial":"SNA1","driver":"nvme","healthy":true,"claim":null,"state":"Free","releasedFrom":null}]})");
  EXPECT_EQ(Call("GET", "/v1/nodes").body,
            R"({"items":[{"name":"node-a","reporting":true,"lastReport":"2023-11-14T22:13:20Z","devices":2}]})");
}

struct BadRest {
  std::string name;
  std::string method;
  std::string target;
  std::string body;
  int status;
  std::string field;
  std::string message;
};

class RouterRestBadInputTest : public RouterRestTest,
                               public ::testing::WithParamInterface<BadRest> {};

TEST_P(RouterRestBadInputTest, AnsweredWithFieldAndStatus) {
  const BadRest& t = GetParam();
  HttpResponse r = Call(t.method, t.target, t.body);
  EXPECT_EQ(r.status, t.status) << r.body;
  EXPECT_THAT(r.body, HasSubstr(absl::StrCat(R"("field":")", t.field, "\"")));
  EXPECT_THAT(r.body, HasSubstr(t.message));
}

constexpr char kDev[] =
    R"("vendor":"1b36","device":"0010","class":"010802")";

INSTANTIATE_TEST_SUITE_P(
    Cases, RouterRestBadInputTest,
    ::testing::Values(
        BadRest{"InventoryNodeMismatch", "PUT", "/v1/nodes/node-a/inventory",
                R"({"node":"node-b","devices":[]})", 422, "node",
                "does not match the node"},
        BadRest{"InventoryBadAddress", "PUT", "/v1/nodes/node-a/inventory",
                absl::StrCat(R"({"node":"node-a","devices":[{"address":"3b:00.0",)", kDev, "}]}"),
                422, "devices[0].address", "3b:00.0"},
        BadRest{"InventoryBadVendor", "PUT", "/v1/nodes/node-a/inventory",
                R"({"node":"node-a","devices":[{"address":"0000:3b:00.0","vendor":"1b3","device":"0010","class":"010802"}]})",
                422, "devices[0].vendor", "must be 4 hex digits"},
        BadRest{"InventoryGroupString", "PUT", "/v1/nodes/node-a/inventory",
                absl::StrCat(R"({"node":"node-a","devices":[{"address":"0000:3b:00.0",)", kDev,
                             R"(,"iommuGroup":"12"}]})"),
                400, "devices[0].iommuGroup", "must be an integer"},
        BadRest{"InventoryDuplicate", "PUT", "/v1/nodes/node-a/inventory",
                absl::StrCat(R"({"node":"node-a","devices":[{"address":"0000:3b:00.0",)", kDev,
                             R"(},{"address":"0000:3B:00.0",)", kDev, "}]}"),
                422, "devices", "listed twice"},
        BadRest{"InventoryMalformed", "PUT", "/v1/nodes/node-a/inventory",
                R"({"node":"node-a",)", 400, "", "malformed JSON"},
        BadRest{"InventoryBadNodeName", "PUT", "/v1/nodes/Node_A/inventory",
                R"({"node":"Node_A"})", 422, "node", "is not a valid name"},
        BadRest{"ClaimBadName", "POST", "/v1/namespaces/default/claims",
                R"({"name":"Nvme_Data","resourceName":"devices.kubevirt.io/nvme"})",
                422, "name", "is not a valid name"},
        BadRest{"ClaimCountString", "POST", "/v1/namespaces/default/claims",
                R"({"name":"d","resourceName":"devices.kubevirt.io/nvme","count":"5"})",
                400, "count", "must be an integer"},
        BadRest{"ClaimCountZero", "POST", "/v1/namespaces/default/claims",
                R"({"name":"d","resourceName":"devices.kubevirt.io/nvme","count":0})",
                422, "count", "between 1 and 256"},
        BadRest{"ClaimBadAddress", "POST", "/v1/namespaces/default/claims",
                R"({"name":"d","resourceName":"devices.kubevirt.io/nvme","address":"0000:zz:00.0"})",
                422, "address", "0000:zz:00.0"},
        BadRest{"ClaimBadPolicy", "POST", "/v1/namespaces/default/claims",
                R"({"name":"d","resourceName":"devices.kubevirt.io/nvme","reclaimPolicy":"Recycle"})",
                422, "reclaimPolicy", "must be Retain or Delete"},
        BadRest{"ClaimMissingResource", "POST", "/v1/namespaces/default/claims",
                R"({"name":"d"})", 400, "resourceName", "is required"},
        BadRest{"ClaimBadNamespace", "POST", "/v1/namespaces/Default/claims",
                R"({"name":"d","resourceName":"devices.kubevirt.io/nvme"})", 422,
                "namespace", "is not a valid namespace"},
        BadRest{"ClaimUnknown", "GET", "/v1/namespaces/default/claims/nope", "",
                404, "", "nope"},
        BadRest{"DeleteForceBad", "DELETE", "/v1/namespaces/default/claims/x?force=yes",
                "", 400, "force", "must be true or false"},
        BadRest{"AllocationsBadSince", "GET", "/v1/nodes/node-a/allocations?since=-1",
                "", 400, "since", "non-negative integer"},
        BadRest{"AllocationsBadWait", "GET", "/v1/nodes/node-a/allocations?wait=soon",
                "", 400, "wait", "number of seconds"},
        BadRest{"UnknownPath", "GET", "/v1/widgets", "", 404, "",
                "no such endpoint: GET /v1/widgets"},
        BadRest{"WrongMethod", "DELETE", "/v1/nodes", "", 405, "",
                "method DELETE is not allowed"}),
    [](const ::testing::TestParamInfo<BadRest>& i) { return i.param.name; });

TEST_F(RouterRestTest, ClaimLifecycle) {
  PutInventoryA();
  HttpResponse created = Post(
      "/v1/namespaces/default/claims",
      R"({"name":"nvme-data","resourceName":"devices.kubevirt.io/nvme","count":1,"node":"","serial":"","address":"","reclaimPolicy":"Retain"})");
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_THAT(created.body, HasSubstr(R"("namespace":"default","name":"nvme-data","uid":")"));
  EXPECT_THAT(created.body,
              HasSubstr(R"("resourceName":"devices.kubevirt.io/nvme","count":1,"node":"","serial":"","address":"","reclaimPolicy":"Retain","ownerVM":"","status":{"phase":"Pending","node":"","devices":[],"lostReason":"","reservedFor":null,"handedOffTo":""}})"));
  HttpResponse dup = Post("/v1/namespaces/default/claims",
                          R"({"name":"nvme-data","resourceName":"devices.kubevirt.io/nvme"})");
  EXPECT_EQ(dup.status, 409);
  ASSERT_EQ(Post("/v1/namespaces/other/claims",
                 R"({"name":"a","resourceName":"devices.kubevirt.io/nvme"})").status,
            201);

  // Lists are sorted by namespace/name.
  HttpResponse all = Call("GET", "/v1/claims");
  EXPECT_EQ(all.status, 200);
  const size_t d = all.body.find(R"("name":"nvme-data")");
  const size_t o = all.body.find(R"("name":"a")");
  ASSERT_NE(d, std::string::npos);
  ASSERT_NE(o, std::string::npos);
  EXPECT_LT(d, o);
  HttpResponse ns = Call("GET", "/v1/namespaces/other/claims");
  EXPECT_THAT(ns.body, HasSubstr(R"("name":"a")"));
  EXPECT_THAT(ns.body, ::testing::Not(HasSubstr("nvme-data")));

  // A VM uses it: deleting needs force while reserved.
  const std::string pod =
      VirtLauncherPod("vm1", "uid-1", 1, R"(,"pdc.kubevirt.io/claims":"nvme-data")");
  ASSERT_EQ(Post("/scheduler/filter", NamesArgs(pod, {"node-a"})).status, 200);
  ASSERT_EQ(Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a")).body,
            R"({"Error":""})");
  HttpResponse got = Call("GET", "/v1/namespaces/default/claims/nvme-data");
  EXPECT_THAT(got.body,
              HasSubstr(R"("status":{"phase":"Bound","node":"node-a","devices":[{"address":"0000:3b:00.0","serial":"SNA0"}],"lostReason":"","reservedFor":{"vm":"vm1","podName":"virt-launcher-vm1-x7k2p","podUid":"uid-1"},"handedOffTo":""})"));
  HttpResponse busy = Call("DELETE", "/v1/namespaces/default/claims/nvme-data");
  EXPECT_EQ(busy.status, 409);
  EXPECT_THAT(busy.body, HasSubstr("?force=true"));
  // Releasing for another pod leaves the reservation alone.
  HttpResponse wrong_pod =
      Post("/v1/namespaces/default/claims/nvme-data/release?podUid=other", "");
  EXPECT_THAT(Call("GET", "/v1/namespaces/default/claims/nvme-data").body,
              HasSubstr(R"("podUid":"uid-1")"));
  EXPECT_NE(wrong_pod.status, 500);
  HttpResponse released =
      Post("/v1/namespaces/default/claims/nvme-data/release?podUid=uid-1", "");
  EXPECT_EQ(released.status, 200) << released.body;
  EXPECT_THAT(released.body, HasSubstr(R"("reservedFor":null)"));
  EXPECT_THAT(released.body, HasSubstr(R"("phase":"Bound")"));
  HttpResponse del = Call("DELETE", "/v1/namespaces/default/claims/nvme-data");
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(Call("GET", "/v1/namespaces/default/claims/nvme-data").status, 404);
}

TEST_F(RouterRestTest, ForceDeleteOfReservedClaim) {
  PutInventoryA();
  BindVm1();
  HttpResponse del = Call("DELETE", "/v1/namespaces/default/claims/vm1-nvme?force=true");
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_THAT(del.body, HasSubstr(R"("name":"vm1-nvme")"));
}

// Retain: the deleted claim's device is Released, listed as such, counted,
// not offered, and released by an administrator through the REST API.
TEST_F(RouterRestTest, ReleasedDevicesAreListedAndAnAdministratorReleasesThem) {
  options_.bearer_token = "s3cret";
  Open();
  MetricsRegistry registry;
  ExtenderMetrics metrics(&registry, allocator_.get(), &clock_, "1.2.3");
  ctx_.metrics = &metrics;
  ctx_.registry = &registry;
  const std::string auth = "Bearer s3cret";
  ASSERT_EQ(Put("/v1/nodes/node-a/inventory", kInventoryA, auth).status, 200);
  ASSERT_OK(allocator_->Bind(SchedulingRequest{"default", "vm1", "p1", "uid-1", {},
                                               {{"devices.kubevirt.io/nvme", 2}}},
                             "node-a")
                .status());
  ASSERT_EQ(
      Call("DELETE", "/v1/namespaces/default/claims/vm1-nvme?force=true", "", auth).status,
      200);

  HttpResponse devices = Call("GET", "/v1/devices", "", auth);
  ASSERT_EQ(devices.status, 200);
  EXPECT_THAT(devices.body,
              HasSubstr(R"("serial":"SNA0","driver":"vfio-pci","healthy":true,"claim":null,)"
                        R"("state":"Released","releasedFrom":"default/vm1-nvme"})"));
  EXPECT_THAT(Call("GET", "/v1/nodes/node-a", "", auth).body,
              HasSubstr(R"("state":"Released","releasedFrom":"default/vm1-nvme")"));
  EXPECT_THAT(Call("GET", "/metrics").body, HasSubstr(R"(pdc_devices{state="released"} 2)"));
  HttpResponse filter =
      Post("/scheduler/filter", NamesArgs(VirtLauncherPod("vm2", "uid-2"), {"node-a"}));
  EXPECT_THAT(filter.body, HasSubstr(R"("FailedAndUnresolvableNodes":{"node-a":"insufficient )"
                                     R"(free devices.kubevirt.io/nvme: want 1, free 0; 2 devices )"
                                     R"(released by deleted claims (Retain): only a claim of )"
                                     R"(the deleted claim's namespace may pin one back; an )"
                                     R"(administrator may release them or hand them over with )"
                                     R"(pdcctl"})"));

  struct Case {
    std::string method;
    std::string target;
    std::string auth;
    int status;
    std::string error;
  };
  const Case cases[] = {
      {"POST", "/v1/nodes/node-a/devices/0000:3b:00.0/release", "", 401, "Authorization"},
      {"GET", "/v1/nodes/node-a/devices/0000:3b:00.0/release", auth, 405, "method GET"},
      {"POST", "/v1/nodes/node-z/devices/0000:3b:00.0/release", auth, 404,
       "node node-z is not known"},
      {"POST", "/v1/nodes/node-a/devices/0000:99:00.0/release", auth, 404,
       "node node-a has no device 0000:99:00.0 and no Released mark for it"},
      {"POST", "/v1/nodes/node-a/devices/3b:00/release", auth, 422, "address"},
      {"POST", "/v1/nodes/Node_A/devices/0000:3b:00.0/release", auth, 422, "node"},
      {"POST", "/v1/nodes/node-a/devices/0000:3b:00.0/release", auth, 200,
       ""},  // Released: now free.
      {"POST", "/v1/nodes/node-a/devices/0000:3b:00.0/release", auth, 409,
       "device 0000:3b:00.0 on node node-a is not Released (it is free)"},
  };
  for (const Case& c : cases) {
    HttpResponse r = Call(c.method, c.target, "", c.auth);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.target << ": " << r.body;
    if (!c.error.empty()) {
      EXPECT_THAT(r.body, HasSubstr(c.error)) << c.target;
    }
    if (c.status == 200) {
      EXPECT_THAT(r.body, HasSubstr(R"("address":"0000:3b:00.0","vendor":"1b36")"));
      EXPECT_THAT(r.body, HasSubstr(R"("serial":"SNA0","driver":"vfio-pci","healthy":true,)"
                                    R"("claim":null,"state":"Free","releasedFrom":null})"));
    }
  }
  EXPECT_THAT(Call("GET", "/metrics").body, HasSubstr(R"(pdc_devices{state="released"} 1)"));
  ctx_.metrics = nullptr;
  ctx_.registry = nullptr;
}

TEST_F(RouterRestTest, AllocationsAnswerAtOnceWhenNewerElseAskToWait) {
  PutInventoryA();
  BindVm1();
  HttpResponse a = Call("GET", "/v1/nodes/node-a/allocations");
  ASSERT_EQ(a.status, 200);
  EXPECT_FALSE(a.long_poll.has_value());
  EXPECT_THAT(a.body,
              HasSubstr(R"("claimed":[{"address":"0000:3b:00.0","claim":"default/vm1-nvme","resourceName":"devices.kubevirt.io/nvme","reclaimPolicy":"Retain","reservedFor":{"vm":"vm1","podName":"virt-launcher-vm1-x7k2p","podUid":"uid-1"},"handedOff":false,"handoffIndex":0}],"returnToHost":[]})"));
  ASSERT_OK_AND_ASSIGN(NodeAllocations now, allocator_->GetNodeAllocations("node-a"));
  EXPECT_THAT(a.body, HasSubstr(absl::StrCat(R"({"node":"node-a","version":)", now.version, ",")));

  const std::string since = absl::StrCat("/v1/nodes/node-a/allocations?since=", now.version);
  HttpResponse poll = Call("GET", absl::StrCat(since, "&wait=120"));
  ASSERT_TRUE(poll.long_poll.has_value());
  EXPECT_EQ(poll.long_poll->seen_version, notifier_.version());
  EXPECT_EQ(poll.long_poll->max_wait, absl::Seconds(60));  // Capped.
  // No wait asked: the current state at once.
  EXPECT_FALSE(Call("GET", since).long_poll.has_value());
  // The server re-runs with allow_wait=false when the time is up.
  HttpRequest expired;
  expired.method = "GET";
  expired.target = absl::StrCat(since, "&wait=5");
  expired.allow_wait = false;
  HttpResponse late = router_->Handle(expired);
  EXPECT_FALSE(late.long_poll.has_value());
  EXPECT_EQ(late.status, 200);
  // A claim deleted with reclaimPolicy Retain keeps the device off the host.
  const uint64_t before = notifier_.version();
  ASSERT_EQ(Call("DELETE", "/v1/namespaces/default/claims/vm1-nvme?force=true").status, 200);
  EXPECT_GT(notifier_.version(), before);
  HttpResponse after = Call("GET", absl::StrCat(since, "&wait=5"));
  EXPECT_FALSE(after.long_poll.has_value());
  EXPECT_THAT(after.body, HasSubstr(R"("claimed":[])"));
}

TEST_F(RouterRestTest, DevicesListShowsClaims) {
  PutInventoryA();
  BindVm1();
  HttpResponse r = Call("GET", "/v1/devices");
  EXPECT_EQ(r.body,
            R"({"items":[{"node":"node-a","address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":12,"numaNode":0,"serial":"SNA0","driver":"vfio-pci","healthy":true,"claim":"default/vm1-nvme","state":"Allocated","releasedFrom":null},)"
            R"({"node":"node-a","address":"0000:5e:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":13,"numaNode":0,"serial":"SNA1","driver":"nvme","healthy":true,"claim":null,"state":"Free","releasedFrom":null}]})");
}

TEST_F(RouterRestTest, EveryV1CallNeedsTheBearerTokenWhenConfigured) {
  options_.bearer_token = "s3cret";
  Open();
  EXPECT_EQ(Put("/v1/nodes/node-a/inventory", kInventoryA).status, 401);
  EXPECT_EQ(Put("/v1/nodes/node-a/inventory", kInventoryA, "Bearer wrong").status, 401);
  EXPECT_EQ(Put("/v1/nodes/node-a/inventory", kInventoryA, "Basic s3cret").status, 401);
  HttpResponse denied = Call("DELETE", "/v1/namespaces/default/claims/x");
  EXPECT_EQ(denied.status, 401);
  EXPECT_THAT(denied.body, HasSubstr("Authorization: Bearer"));
  EXPECT_EQ(Put("/v1/nodes/node-a/inventory", kInventoryA, "Bearer s3cret").status, 200);
  // Reads too, whatever the path (an unknown one is not revealed either).
  for (const char* path : {"/v1/claims", "/v1/nodes", "/v1/nodes/node-a", "/v1/devices",
                           "/v1/handoffs", "/v1/nodes/node-a/allocations", "/v1/nowhere"}) {
    EXPECT_EQ(Call("GET", path).status, 401) << path;
    EXPECT_NE(Call("GET", path, "", "Bearer s3cret").status, 401) << path;
  }
  // Probes, metrics and the scheduler verbs stay open.
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) {
    EXPECT_NE(Call("GET", path).status, 401) << path;
  }
  EXPECT_EQ(Post("/scheduler/filter",
                 NamesArgs(VirtLauncherPod("vm1", "u"), {"node-a"})).status,
            200);
}

TEST_F(RouterRestTest, TheBearerSchemeIsCaseInsensitiveTheTokenIsNot) {
  options_.bearer_token = "s3cret";
  Open();
  struct Row {
    std::string authorization;
    int status;
  };
  for (const Row& r : {
           Row{"Bearer s3cret", 200}, Row{"bearer s3cret", 200}, Row{"BEARER s3cret", 200},
           Row{"bEaReR s3cret", 200}, Row{"Bearer   s3cret", 200},
           Row{"Bearer S3CRET", 401}, Row{"Bearers3cret", 401}, Row{"Bearer", 401},
           Row{"Bearer ", 401}, Row{"Bearer s3cret ", 401}, Row{"Bearer\ts3cret", 401},
           Row{"Basic s3cret", 401}, Row{"Bearer s3cre", 401}, Row{"", 401},
       }) {
    EXPECT_EQ(Call("GET", "/v1/claims", "", r.authorization).status, r.status)
        << "'" << r.authorization << "'";
  }
}

TEST_F(RouterRestTest, SchedulerVerbsCanRequireAClientCertificate) {
  options_.scheduler_requires_client_cert = true;
  Open();
  const std::string args = NamesArgs(VirtLauncherPod("vm1", "u"), {"node-a"});
  EXPECT_EQ(Post("/scheduler/filter", args).status, 401);
  HttpRequest r;
  r.method = "POST";
  r.target = "/scheduler/filter";
  r.body = args;
  r.client_cert_verified = true;
  EXPECT_EQ(router_->Handle(r).status, 200);
}

TEST_F(RouterRestTest, HealthReadinessAndMetrics) {
  EXPECT_EQ(Call("GET", "/healthz").body, "ok");
  EXPECT_EQ(Call("GET", "/readyz").status, 200);
  router_->SetReady(false);
  EXPECT_EQ(Call("GET", "/readyz").status, 503);
  EXPECT_EQ(Call("GET", "/metrics").status, 404);  // No registry.

  MetricsRegistry registry;
  ExtenderMetrics metrics(&registry, allocator_.get(), &clock_, "1.2.3");
  ctx_.metrics = &metrics;
  ctx_.registry = &registry;
  PutInventoryA();
  BindVm1();
  EXPECT_EQ(Post("/scheduler/filter",
                 NamesArgs(VirtLauncherPod("vm1", "uid-2"), {"node-a", "node-z"})).status,
            200);
  clock_.Advance(absl::Seconds(7));
  HttpResponse m = Call("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type, "text/plain; version=0.0.4; charset=utf-8");
  for (const char* line : {
           R"(pdc_http_requests_total{verb="filter",code="200"} 2)",
           R"(pdc_http_requests_total{verb="bind",code="200"} 1)",
           R"(pdc_http_requests_total{verb="inventory",code="200"} 1)",
           R"(pdc_binds_total{result="ok"} 1)",
           R"(pdc_filter_nodes_total{reason="sticky_hit"} 1)",
           R"(pdc_claims{phase="Bound"} 1)",
           R"(pdc_devices{state="allocated"} 1)",
           R"(pdc_devices{state="free"} 1)",
           R"(pdc_node_inventory_age_seconds{node="node-a"} 7)",
           R"(pdc_build_info{version="1.2.3"} 1)",
           R"(pdc_http_request_duration_seconds_count{verb="filter"} 2)",
       }) {
    EXPECT_THAT(m.body, HasSubstr(line));
  }
  ctx_.metrics = nullptr;
  ctx_.registry = nullptr;
}

}  // namespace
}  // namespace pdc::extender::testing
