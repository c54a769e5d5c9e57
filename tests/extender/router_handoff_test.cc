// The hand-off endpoints (docs/rest-api.md §5, docs/design.md §6) through the
// Router: a second VM pod waits with a retryable FailedNodes reason until the
// node driver confirms the first; confirm, list and cancel.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/extender/extender_fixture.h"

namespace pdc::extender::testing {
namespace {

using ::testing::HasSubstr;

class RouterHandoffTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    allocator_options_.serialize_handoffs = true;
    Open();
    Report("node-a", {NvmeDevice("0000:3b:00.0", 12, 0, "SNA0"),
                      NvmeDevice("0000:5e:00.0", 13, 0, "SNA1")});
  }

  HttpResponse Filter(const std::string& vm, const std::string& uid) {
    return Post("/scheduler/filter", NamesArgs(VirtLauncherPod(vm, uid), {"node-a"}));
  }
  HttpResponse Bind(const std::string& vm, const std::string& uid) {
    EXPECT_EQ(Filter(vm, uid).status, 200);
    return Post("/scheduler/bind", BindArgs(vm, uid, "node-a"));
  }
};

TEST_F(RouterHandoffTest, SecondPodWaitsUntilTheNodeDriverConfirms) {
  ASSERT_EQ(Bind("vm1", "uid-1").body, R"({"Error":""})");
  HttpResponse f = Filter("vm2", "uid-2");
  ASSERT_EQ(f.status, 200);
  EXPECT_EQ(f.body,
            R"({"Nodes":null,"NodeNames":[],"FailedNodes":{"node-a":"another VM is starting on this node: default/vm1 (pod virt-launcher-vm1-x7k2p) has not received its devices.kubevirt.io/nvme devices yet"},"FailedAndUnresolvableNodes":{},"Error":""})");

  HttpResponse list = Call("GET", "/v1/nodes/node-a/handoffs");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.body,
            R"({"items":[{"node":"node-a","resourceName":"devices.kubevirt.io/nvme","namespace":"default","vm":"vm1","podName":"virt-launcher-vm1-x7k2p","podUid":"uid-1","claims":["default/vm1-nvme"],"devices":["0000:3b:00.0"]}]})");
  EXPECT_EQ(Call("GET", "/v1/handoffs").body, list.body);
  EXPECT_THAT(Call("GET", "/v1/nodes/node-a/allocations").body, HasSubstr(R"("handedOff":false)"));

  const uint64_t before = notifier_.version();
  HttpResponse c = Post("/v1/nodes/node-a/handoffs",
                        R"({"podUid":"uid-1","resourceName":"devices.kubevirt.io/nvme","devices":["0000:3b:00.0"]})");
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.body,
            R"({"node":"node-a","podUid":"uid-1","resourceName":"devices.kubevirt.io/nvme","claims":["default/vm1-nvme"]})");
  EXPECT_GT(notifier_.version(), before);
  EXPECT_EQ(Call("GET", "/v1/handoffs").body, R"({"items":[]})");
  EXPECT_THAT(Call("GET", "/v1/nodes/node-a/allocations").body, HasSubstr(R"("handedOff":true)"));
  EXPECT_THAT(Call("GET", "/v1/namespaces/default/claims/vm1-nvme").body,
              HasSubstr(R"("handedOffTo":"uid-1")"));
  ASSERT_EQ(Bind("vm2", "uid-2").body, R"({"Error":""})");
}

TEST_F(RouterHandoffTest, CancelLetsTheNextPodIn) {
  ASSERT_EQ(Bind("vm1", "uid-1").body, R"({"Error":""})");
  HttpResponse c = Call("DELETE", "/v1/nodes/node-a/handoffs/uid-1");
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.body, R"({"released":["default/vm1-nvme"]})");
  EXPECT_EQ(Call("DELETE", "/v1/nodes/node-a/handoffs/uid-1").status, 404);
  ASSERT_EQ(Bind("vm2", "uid-2").body, R"({"Error":""})");
}

struct BadConfirm {
  std::string name;
  std::string target;
  std::string body;
  int status;
  std::string error;  // Substring of the error message.
  std::string field;
};

class RouterHandoffBadInputTest : public RouterHandoffTest,
                                  public ::testing::WithParamInterface<BadConfirm> {};

TEST_P(RouterHandoffBadInputTest, AnsweredWithAClearError) {
  ASSERT_EQ(Bind("vm1", "uid-1").body, R"({"Error":""})");
  const BadConfirm& t = GetParam();
  HttpResponse r = Post(t.target, t.body);
  EXPECT_EQ(r.status, t.status) << r.body;
  EXPECT_THAT(r.body, HasSubstr(t.error));
  EXPECT_THAT(r.body, HasSubstr(absl::StrCat(R"("field":")", t.field, R"(")")));
  // Nothing was confirmed.
  EXPECT_THAT(Call("GET", "/v1/handoffs").body, HasSubstr(R"("podUid":"uid-1")"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RouterHandoffBadInputTest,
    ::testing::Values(
        BadConfirm{"MalformedJson", "/v1/nodes/node-a/handoffs", "{", 400, "", ""},
        BadConfirm{"DevicesNotAnArray", "/v1/nodes/node-a/handoffs",
                   R"({"podUid":"uid-1","resourceName":"devices.kubevirt.io/nvme","devices":"0000:3b:00.0"})",
                   400, "must be an array", "devices"},
        BadConfirm{"BadAddress", "/v1/nodes/node-a/handoffs",
                   R"({"podUid":"uid-1","resourceName":"devices.kubevirt.io/nvme","devices":["0000:3b:00"]})",
                   422, "", "devices[0]"},
        BadConfirm{"NoDevices", "/v1/nodes/node-a/handoffs",
                   R"({"podUid":"uid-1","resourceName":"devices.kubevirt.io/nvme","devices":[]})",
                   422, "at least one", "devices"},
        BadConfirm{"MissingPodUid", "/v1/nodes/node-a/handoffs",
                   R"({"resourceName":"devices.kubevirt.io/nvme","devices":["0000:3b:00.0"]})",
                   400, "", "podUid"},
        BadConfirm{"WrongDevice", "/v1/nodes/node-a/handoffs",
                   R"({"podUid":"uid-1","resourceName":"devices.kubevirt.io/nvme","devices":["0000:5e:00.0"]})",
                   409, "but the node driver handed over 0000:5e:00.0", ""},
        BadConfirm{"UnknownPod", "/v1/nodes/node-a/handoffs",
                   R"({"podUid":"uid-9","resourceName":"devices.kubevirt.io/nvme","devices":["0000:3b:00.0"]})",
                   404, "no pod with UID uid-9", ""},
        BadConfirm{"InvalidNodeName", "/v1/nodes/Node_A/handoffs",
                   R"({"podUid":"uid-1","resourceName":"devices.kubevirt.io/nvme","devices":["0000:3b:00.0"]})",
                   422, "", "node"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pdc::extender::testing
