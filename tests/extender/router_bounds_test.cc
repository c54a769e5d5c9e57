// Hostile values through the Router: a quantity no node can hold, a pod UID
// of a megabyte, names and serials beyond Kubernetes' bounds. Each is refused
// with an error naming the field, before anything is allocated, written to
// the store or logged in full (the default logger is captured at debug
// level, the level that logs every refused request).
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/spdlog.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/captured_log.h"

namespace pdc::extender::testing {
namespace {

using pdc::testing::CapturedLog;
using ::testing::HasSubstr;
using ::testing::Not;

class RouterBoundsTest : public ExtenderFixture {
 protected:
  void SetUp() override {
    ExtenderFixture::SetUp();
    TwoNodes();
  }
  size_t Records() const { return store_.LogForTest().size(); }

  // A virt-launcher pod asking for `quantity` NVMe drives.
  static std::string PodAsking(const std::string& quantity) {
    return absl::StrReplaceAll(VirtLauncherPod("vm1", "uid-1"),
                               {{R"("devices.kubevirt.io/nvme":"1")",
                                 absl::StrCat(R"("devices.kubevirt.io/nvme":")", quantity,
                                              "\"")}});
  }
};

TEST_F(RouterBoundsTest, FilterReadsKubernetesQuantities) {
  for (const auto& [quantity, passes] :
       std::vector<std::pair<std::string, bool>>{{"1", true}, {"2e0", true},
                                                 {"1000m", true}, {"2000m", true},
                                                 {"3", false}}) {
    HttpResponse r = Post("/scheduler/filter", NamesArgs(PodAsking(quantity), {"node-a"}));
    ASSERT_EQ(r.status, 200) << quantity;
    EXPECT_THAT(r.body, HasSubstr(passes ? R"("NodeNames":["node-a"])" : R"("NodeNames":[])"))
        << quantity << ": " << r.body;
    EXPECT_THAT(r.body, HasSubstr(R"("Error":"")")) << quantity;
  }
}

TEST_F(RouterBoundsTest, QuantitiesNoNodeCanHoldAreAnErrorAndAllocateNothing) {
  const size_t records = Records();
  for (const std::string quantity :
       {"9223372036854775807", "1E", "1Ei", "4097", "5k", "4294967297", "-1", "0.5", "1 "}) {
    HttpResponse f = Post("/scheduler/filter", NamesArgs(PodAsking(quantity), {"node-a"}));
    ASSERT_EQ(f.status, 200) << quantity;
    EXPECT_THAT(f.body, HasSubstr(R"("NodeNames":null)")) << quantity;
    EXPECT_THAT(f.body,
                HasSubstr(R"(Pod.spec.containers[0].resources.limits[\"devices.kubevirt.io/nvme\"])"))
        << quantity << ": " << f.body;
    // Bind finds no pod from the filter call and no Kubernetes API to read it.
    HttpResponse b = Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-a"));
    ASSERT_EQ(b.status, 200);
    EXPECT_THAT(b.body, Not(HasSubstr(R"("Error":"")"))) << quantity;
  }
  EXPECT_EQ(Records(), records);
  EXPECT_EQ(Call("GET", "/v1/claims").body, R"({"items":[]})");
}

TEST_F(RouterBoundsTest, AMegabytePodUidIsRefusedUnloggedAndUnrecorded) {
  ASSERT_EQ(Post("/scheduler/filter", NamesArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a"}))
                .status,
            200);
  const std::string huge(1 << 20, 'u');
  const size_t records = Records();
  CapturedLog log;
  struct Row {
    std::string method, target, body, field;
  };
  for (const Row& r : {
           Row{"POST", "/scheduler/bind", BindArgs("vm1", huge, "node-a"), "PodUID"},
           Row{"POST", "/scheduler/filter", NamesArgs(VirtLauncherPod("vm1", huge), {"node-a"}),
               ""},
           Row{"POST", "/scheduler/filter", NamesArgs(VirtLauncherPod("vm1", "uid-1"), {huge}),
               "NodeNames[0]"},
           Row{"POST", "/scheduler/prioritize",
               ListArgs(VirtLauncherPod("vm1", "uid-1"), {"node-a", huge}),
               "Nodes.items[1].metadata.name"},
           Row{"POST", "/v1/nodes/node-a/handoffs",
               absl::StrCat(R"({"podUid":")", huge,
                            R"(","resourceName":"devices.kubevirt.io/nvme","devices":["0000:3b:00.0"]})"),
               "podUid"},
           Row{"DELETE", absl::StrCat("/v1/nodes/node-a/handoffs/", huge), "", "podUid"},
           Row{"POST", absl::StrCat("/v1/namespaces/default/claims/c/release?podUid=", huge), "",
               "podUid"},
           Row{"POST", "/v1/namespaces/default/claims",
               absl::StrCat(R"({"name":"c","resourceName":"devices.kubevirt.io/nvme","serial":")",
                            huge, "\"}"),
               "serial"},
           Row{"PUT", "/v1/nodes/node-a/inventory",
               absl::StrCat(R"({"node":"node-a","devices":[{"address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":"010802","driver":")",
                            huge, R"("}]})"),
               "devices[0].driver"},
           Row{"PUT", "/v1/nodes/node-a/inventory", absl::StrCat(R"({"node":")", huge, "\"}"),
               "node"},
       }) {
    HttpResponse resp = Call(r.method, r.target, r.body);
    if (r.field.empty()) {
      // A pod problem: filter answers 200 with Error naming the field.
      ASSERT_EQ(resp.status, 200) << r.target;
      EXPECT_THAT(resp.body, HasSubstr("Pod.metadata.uid"));
    } else {
      EXPECT_EQ(resp.status, 422) << r.method << " " << r.target.substr(0, 80);
      EXPECT_THAT(resp.body, HasSubstr(absl::StrCat(R"("field":")", r.field, "\"")))
          << r.target.substr(0, 80);
    }
    EXPECT_LT(resp.body.size(), 1024u) << r.target.substr(0, 80);
  }
  EXPECT_EQ(Records(), records);
  const std::string logged = log.text();
  EXPECT_THAT(logged, Not(HasSubstr(std::string(300, 'u'))));
  EXPECT_LT(logged.size(), 64u * 1024);
  // Debug level logs refused requests: the refusals were seen, cut short.
  EXPECT_THAT(logged, HasSubstr("-> 422"));
}

TEST_F(RouterBoundsTest, BindArgumentsAreValidatedBeforeTheBinderSeesThem) {
  struct Row {
    std::string body, field;
  };
  for (const Row& r : {
           Row{R"({"PodName":"Bad_Name","PodNamespace":"default","PodUID":"u","Node":"node-a"})",
               "PodName"},
           Row{R"({"PodName":"p","PodNamespace":"no.dots","PodUID":"u","Node":"node-a"})",
               "PodNamespace"},
           Row{R"({"PodName":"p","PodNamespace":"default","PodUID":"has space","Node":"node-a"})",
               "PodUID"},
           Row{R"({"PodName":"p","PodNamespace":"default","PodUID":"u","Node":"NODE"})", "Node"},
           Row{R"({"PodName":"p","PodNamespace":"default","PodUID":"","Node":"node-a"})",
               "PodUID"},
       }) {
    HttpResponse resp = Post("/scheduler/bind", r.body);
    EXPECT_EQ(resp.status, 422) << r.body;
    EXPECT_THAT(resp.body, HasSubstr(absl::StrCat(R"("field":")", r.field, "\""))) << r.body;
  }
}

}  // namespace
}  // namespace pdc::extender::testing
