#include "extender/client/pdcctl_format.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::pdcctl {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

// Two claims, out of order on purpose; the table sorts them.
constexpr char kClaims[] = R"({"items": [
 {"namespace": "vms", "name": "vm1-nvme", "uid": "u2",
  "resourceName": "devices.kubevirt.io/nvme", "count": 2, "node": "",
  "serial": "", "address": "", "reclaimPolicy": "Retain", "ownerVM": "vm1",
  "status": {"phase": "Bound", "node": "node-a",
             "devices": [{"address": "0000:3b:00.0", "serial": "SN1"},
                         {"address": "0000:5e:00.0", "serial": "SN2"}],
             "lostReason": "",
             "reservedFor": {"vm": "vm1", "podName": "virt-launcher-vm1-abc",
                             "podUid": "p1"}}},
 {"namespace": "default", "name": "scratch", "uid": "u1",
  "resourceName": "devices.kubevirt.io/nvme", "count": 1, "node": "node-b",
  "serial": "", "address": "", "reclaimPolicy": "Delete", "ownerVM": "",
  "status": {"phase": "Pending", "node": "", "devices": [], "lostReason": "",
             "reservedFor": null}}
]})";

TEST(PdcctlFormatTest, TableAlignsColumnsWithoutTrailingSpaces) {
  EXPECT_EQ(FormatTable({"NAME", "PHASE", "NODE"},
                        {{"a-long-name", "Bound", "n1"}, {"b", "Pending"}}),
            "NAME          PHASE     NODE\n"
            "a-long-name   Bound     n1\n"
            "b             Pending\n");
}

TEST(PdcctlFormatTest, ClaimsTable) {
  ASSERT_OK_AND_ASSIGN(std::string all, ClaimsTable(kClaims, true, kNow));
  EXPECT_EQ(all,
            "NAMESPACE   NAME       PHASE     RESOURCE                   NODE"
            "     DEVICES                     VM\n"
            "default     scratch    Pending   devices.kubevirt.io/nvme   <none>"
            "   <none>                      <none>\n"
            "vms         vm1-nvme   Bound     devices.kubevirt.io/nvme   node-a"
            "   0000:3b:00.0,0000:5e:00.0   vm1\n");
  ASSERT_OK_AND_ASSIGN(std::string one, ClaimsTable(kClaims, false, kNow));
  EXPECT_THAT(one, ::testing::StartsWith("NAME       PHASE     RESOURCE"));
  ASSERT_OK_AND_ASSIGN(std::string empty,
                       ClaimsTable(R"({"items": []})", false, kNow));
  EXPECT_EQ(empty, "");
}

TEST(PdcctlFormatTest, ClaimsTableShowsAgeWhenTheServerSendsIt) {
  ASSERT_OK_AND_ASSIGN(std::string t,
                       ClaimsTable(R"({"items": [{"namespace": "d", "name": "c",
          "resourceName": "r/x", "creationTimestamp": "2023-11-14T22:08:20Z",
          "status": {"phase": "Pending"}}]})",
                                   false, kNow));
  // kNow is 2023-11-14T22:13:20Z: 5 minutes later.
  EXPECT_EQ(t,
            "NAME   PHASE     RESOURCE   NODE     DEVICES   VM       AGE\n"
            "c      Pending   r/x        <none>   <none>    <none>   5m\n");
}

TEST(PdcctlFormatTest, NodesTable) {
  ASSERT_OK_AND_ASSIGN(std::string t, NodesTable(R"({"items": [
        {"name": "node-b", "reporting": false, "lastReport": null, "devices": 0},
        {"name": "node-a", "reporting": true,
         "lastReport": "2023-11-14T22:13:08Z", "devices": 4}]})",
                                                 kNow));
  EXPECT_EQ(t,
            "NAME     REPORTING   LAST REPORT   DEVICES\n"
            "node-a   True        12s ago       4\n"
            "node-b   False       <never>       0\n");
}

// Keys are read as every api/ codec reads them (docs/rest-api.md §1):
// exactly first, then ignoring ASCII case.
TEST(PdcctlFormatTest, KeysMatchExactlyThenIgnoringCase) {
  const std::string want =
      "NAME     REPORTING   LAST REPORT   DEVICES\n"
      "node-a   True        12s ago       4\n";
  for (const char* body : {
           R"({"items": [{"name": "node-a", "reporting": true, "lastReport": "2023-11-14T22:13:08Z", "devices": 4}]})",
           R"({"Items": [{"Name": "node-a", "REPORTING": true, "LastReport": "2023-11-14T22:13:08Z", "Devices": 4}]})",
           R"({"items": [{"NAME": "node-x", "name": "node-a", "reporting": true, "lastReport": "2023-11-14T22:13:08Z", "devices": 4}]})",
       }) {
    ASSERT_OK_AND_ASSIGN(std::string t, NodesTable(body, kNow));
    EXPECT_EQ(t, want) << body;
  }
}

TEST(PdcctlFormatTest, DevicesTableFiltersByNode) {
  constexpr char kDevices[] = R"({"items": [
    {"node": "node-b", "address": "0000:01:00.0", "vendor": "8086",
     "device": "5845", "class": "010802", "iommuGroup": -1, "numaNode": -1,
     "serial": "", "driver": "nvme", "healthy": false, "claim": null},
    {"node": "node-a", "address": "0000:3b:00.0", "vendor": "1b36",
     "device": "0010", "class": "010802", "iommuGroup": 12, "numaNode": 0,
     "serial": "SN1", "driver": "vfio-pci", "healthy": true,
     "claim": "vms/vm1-nvme"}]})";
  ASSERT_OK_AND_ASSIGN(std::string all, DevicesTable(kDevices, ""));
  EXPECT_EQ(all,
            "NODE     ADDRESS        ID          CLASS    IOMMU    NUMA     "
            "SERIAL   DRIVER     HEALTH      CLAIM\n"
            "node-a   0000:3b:00.0   1b36:0010   010802   12       0        "
            "SN1      vfio-pci   Healthy     vms/vm1-nvme\n"
            "node-b   0000:01:00.0   8086:5845   010802   <none>   <none>   "
            "<none>   nvme       Unhealthy   <none>\n");
  ASSERT_OK_AND_ASSIGN(std::string b, DevicesTable(kDevices, "node-b"));
  EXPECT_THAT(b, HasSubstr("node-b"));
  EXPECT_THAT(b, ::testing::Not(HasSubstr("node-a")));
  ASSERT_OK_AND_ASSIGN(std::string none, DevicesTable(kDevices, "node-z"));
  EXPECT_EQ(none, "");
}

TEST(PdcctlFormatTest, DescribeClaim) {
  constexpr char kClaim[] = R"(
 {"namespace": "vms", "name": "vm1-nvme", "uid": "u2",
  "resourceName": "devices.kubevirt.io/nvme", "count": 1, "node": "node-a",
  "serial": "SN1", "address": "", "reclaimPolicy": "Retain", "ownerVM": "vm1",
  "status": {"phase": "Bound", "node": "node-a",
             "devices": [{"address": "0000:3b:00.0", "serial": "SN1"}],
             "lostReason": "",
             "reservedFor": {"vm": "vm1", "podName": "virt-launcher-vm1-abc",
                             "podUid": "p1"}}})";
  ASSERT_OK_AND_ASSIGN(std::string d, DescribeClaim(kClaim, kNow));
  EXPECT_EQ(d,
            "Name:            vm1-nvme\n"
            "Namespace:       vms\n"
            "UID:             u2\n"
            "Resource:        devices.kubevirt.io/nvme\n"
            "Count:           1\n"
            "Reclaim Policy:  Retain\n"
            "Owner VM:        vm1\n"
            "Pinned To:       node=node-a, serial=SN1\n"
            "Phase:           Bound\n"
            "Node:            node-a\n"
            "Reserved For:    vm vm1 (pod virt-launcher-vm1-abc, uid p1)\n"
            "Devices:\n"
            "  ADDRESS        SERIAL\n"
            "  0000:3b:00.0   SN1\n");
}

TEST(PdcctlFormatTest, HumanAge) {
  struct Case {
    absl::Duration d;
    std::string want;
  };
  const Case cases[] = {
      {absl::Seconds(-3), "0s"},    {absl::Seconds(45), "45s"},
      {absl::Seconds(119), "119s"}, {absl::Seconds(192), "3m12s"},
      {absl::Minutes(5), "5m"},     {absl::Minutes(42), "42m"},
      {absl::Minutes(303), "5h3m"}, {absl::Hours(20), "20h"},
      {absl::Hours(76), "3d4h"},    {absl::Hours(24 * 12), "12d"},
  };
  for (const Case& c : cases) EXPECT_EQ(HumanAge(c.d), c.want) << c.d;
}

TEST(PdcctlFormatTest, ServerErrorMessage) {
  EXPECT_EQ(ServerErrorMessage(
                422, R"({"error": "count must be >= 1", "field": "count"})"),
            "count must be >= 1 (field count)");
  EXPECT_EQ(ServerErrorMessage(
                404, R"({"error": "claim default/x not found", "field": ""})"),
            "claim default/x not found");
  EXPECT_EQ(ServerErrorMessage(502, "Bad Gateway\nmore"),
            "HTTP 502: Bad Gateway");
  EXPECT_EQ(ServerErrorMessage(500, ""), "HTTP 500");
}

TEST(PdcctlFormatTest, InvalidJsonIsAnError) {
  EXPECT_THAT(ClaimsTable("{oops", false, kNow),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the server sent invalid JSON")));
  EXPECT_THAT(NodesTable("[1]", kNow),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace pdc::pdcctl
