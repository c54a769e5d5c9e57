// Pod -> SchedulingRequest and the small parts of the wire format that the
// router tests do not pin down.
#include "extender/scheduler_wire.h"

#include <string>

#include "extender/json_util.h"
#include "tests/extender/extender_fixture.h"

namespace pdc::extender::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

absl::StatusOr<PodRequest> FromText(std::string text) {
  rapidjson::Document doc;
  if (absl::Status s = json::Parse(text, &doc); !s.ok()) return s;
  return PodToRequest(doc, ManagedResources{kNvme, "example.com/fpga"});
}

TEST(PodToRequestTest, VirtLauncherPod) {
  ASSERT_OK_AND_ASSIGN(PodRequest p, FromText(VirtLauncherPod("vm1", "uid-1", 2)));
  EXPECT_FALSE(p.pass_through);
  EXPECT_EQ(p.request.ns, "default");
  EXPECT_EQ(p.request.vm, "vm1");
  EXPECT_EQ(p.request.pod_name, "virt-launcher-vm1-x7k2p");
  EXPECT_EQ(p.request.pod_uid, "uid-1");
  EXPECT_TRUE(p.request.claim_names.empty());
  // devices.kubevirt.io/kvm is not managed; cpu and memory never are.
  EXPECT_THAT(p.request.resources, ElementsAre(Pair(kNvme, 2)));
}

TEST(PodToRequestTest, VmIdentityFallsBackToDomainThenPodName) {
  ASSERT_OK_AND_ASSIGN(
      PodRequest d,
      FromText(R"({"metadata":{"name":"p1","annotations":{"kubevirt.io/domain":"vmd"}}})"));
  EXPECT_EQ(d.request.vm, "vmd");
  EXPECT_TRUE(d.pass_through);
  ASSERT_OK_AND_ASSIGN(PodRequest n, FromText(R"({"metadata":{"name":"p1"}})"));
  EXPECT_EQ(n.request.vm, "p1");
  EXPECT_EQ(n.request.ns, "default");
}

TEST(PodToRequestTest, ClaimsAnnotationIsTrimmedAndDeduplicated) {
  ASSERT_OK_AND_ASSIGN(
      PodRequest p,
      FromText(R"({"metadata":{"name":"p","namespace":"ns1","annotations":{"pdc.kubevirt.io/claims":" data , fpga0,,data"}}})"));
  EXPECT_THAT(p.request.claim_names, ElementsAre("data", "fpga0"));
  EXPECT_EQ(p.request.ns, "ns1");
  EXPECT_FALSE(p.pass_through);
}

TEST(PodToRequestTest, InitContainersCountAsTheirMaximum) {
  // Effective request = max(sum of containers, max of init containers).
  ASSERT_OK_AND_ASSIGN(
      PodRequest p,
      FromText(R"({"metadata":{"name":"p"},"spec":{
        "initContainers":[
          {"resources":{"limits":{"example.com/fpga":"3"}}},
          {"resources":{"requests":{"example.com/fpga":"1"}}}],
        "containers":[
          {"resources":{"requests":{"devices.kubevirt.io/nvme":1,"example.com/fpga":"1"}}},
          {"resources":{"limits":{"devices.kubevirt.io/nvme":"2"}}}]}})"));
  EXPECT_THAT(p.request.resources,
              ElementsAre(Pair(kNvme, 3), Pair("example.com/fpga", 3)));
}

TEST(PodToRequestTest, UnmanagedQuantitiesAreNotParsed) {
  ASSERT_OK_AND_ASSIGN(
      PodRequest p,
      FromText(R"({"metadata":{"name":"p"},"spec":{"containers":[
        {"resources":{"requests":{"cpu":"250m","hugepages-1Gi":"2Gi","other.io/x":"1k"}}}]}})"));
  EXPECT_TRUE(p.pass_through);
}

TEST(PodToRequestTest, FractionalDeviceQuantityIsRejected) {
  auto p = FromText(R"({"metadata":{"name":"p"},"spec":{"containers":[
        {"resources":{"requests":{"devices.kubevirt.io/nvme":"500m"}}}]}})");
  EXPECT_THAT(p, pdc::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("must be a whole number")));
  EXPECT_EQ(json::HttpStatusFor(p.status()), 422);
}

TEST(PodToRequestTest, WrongTypesNameTheField) {
  auto p = FromText(R"({"metadata":{"name":"p","annotations":{"pdc.kubevirt.io/claims":5}}})");
  EXPECT_EQ(json::FieldOf(p.status()),
            R"(Pod.metadata.annotations["pdc.kubevirt.io/claims"])");
  EXPECT_EQ(json::HttpStatusFor(p.status()), 400);
  auto c = FromText(R"({"metadata":{"name":"p"},"spec":{"containers":{}}})");
  EXPECT_EQ(json::FieldOf(c.status()), "Pod.spec.containers");
}

TEST(JsonTest, FindPrefersExactMatch) {
  rapidjson::Document doc;
  ASSERT_OK(json::Parse(R"({"node":"lower","Node":"exact"})", &doc));
  EXPECT_EQ(json::StringOf(*json::Find(doc, "Node")), "exact");
  EXPECT_EQ(json::StringOf(*json::Find(doc, "NODE")), "lower");
  EXPECT_EQ(json::Find(doc, "missing"), nullptr);
}

TEST(JsonTest, ErrorResponseCarriesFieldAndStatus) {
  HttpResponse r = json::ErrorResponse(json::FieldError("spec.count", "must be >= 1"));
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(r.body, R"({"error":"spec.count: must be >= 1","field":"spec.count"})");
  EXPECT_EQ(json::ErrorResponse(absl::NotFoundError("x")).status, 404);
  EXPECT_EQ(json::ErrorResponse(absl::AlreadyExistsError("x")).status, 409);
  EXPECT_EQ(json::ErrorResponse(absl::UnavailableError("x")).status, 503);
}

}  // namespace
}  // namespace pdc::extender::testing
