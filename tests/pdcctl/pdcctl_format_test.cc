#include "pdcctl/pdcctl_format.h"

#include <string>

#include "api/handoff_json.h"
#include "api/rest_json.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc::pdcctl {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

// The tables format what api/ decodes from the server's JSON.
std::vector<Claim> Claims(std::string_view json) { return api::ParseClaimList(json).value(); }

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
  const std::string all = ClaimsTable(Claims(kClaims), true);
  EXPECT_EQ(all,
            "NAMESPACE   NAME       PHASE     RESOURCE                   NODE"
            "     DEVICES                     VM\n"
            "default     scratch    Pending   devices.kubevirt.io/nvme   <none>"
            "   <none>                      <none>\n"
            "vms         vm1-nvme   Bound     devices.kubevirt.io/nvme   node-a"
            "   0000:3b:00.0,0000:5e:00.0   vm1\n");
  const std::string one = ClaimsTable(Claims(kClaims), false);
  EXPECT_THAT(one, ::testing::StartsWith("NAME       PHASE     RESOURCE"));
  EXPECT_EQ(ClaimsTable(Claims(R"({"items": []})"), false), "");
}

TEST(PdcctlFormatTest, NodesTable) {
  ASSERT_OK_AND_ASSIGN(std::vector<api::NodeSummary> nodes, api::ParseNodeList(R"({"items": [
        {"name": "node-b", "reporting": false, "lastReport": null, "devices": 0},
        {"name": "node-a", "reporting": true,
         "lastReport": "2023-11-14T22:13:08Z", "devices": 4}]})"));
  const std::string t = NodesTable(nodes, kNow);
  EXPECT_EQ(t,
            "NAME     REPORTING   LAST REPORT   DEVICES\n"
            "node-a   True        12s ago       4\n"
            "node-b   False       <never>       0\n");
}

TEST(PdcctlFormatTest, DevicesTableFiltersByNode) {
  constexpr char kDevices[] = R"({"items": [
    {"node": "node-b", "address": "0000:01:00.0", "vendor": "8086",
     "device": "5845", "class": "010802", "iommuGroup": -1, "numaNode": -1,
     "serial": "", "driver": "nvme", "healthy": false, "unhealthyReason": "NoIommuGroup",
     "claim": null},
    {"node": "node-a", "address": "0000:3b:00.0", "vendor": "1b36",
     "device": "0010", "class": "010802", "iommuGroup": 12, "numaNode": 0,
     "serial": "SN1", "driver": "vfio-pci", "healthy": true,
     "claim": "vms/vm1-nvme", "state": "Allocated"},
    {"node": "node-a", "address": "0000:5e:00.0", "vendor": "1b36",
     "device": "0010", "class": "010802", "iommuGroup": 13, "numaNode": 0,
     "serial": "SN2", "driver": "vfio-pci", "healthy": true,
     "claim": null, "state": "Released", "releasedFrom": "vms/old"}]})";
  ASSERT_OK_AND_ASSIGN(std::vector<api::DeviceListing> devices, api::ParseDeviceList(kDevices));
  const std::string all = DevicesTable(devices, "");
  EXPECT_EQ(all,
            "NODE     ADDRESS        ID          CLASS    IOMMU    NUMA     "
            "SERIAL   DRIVER     HEALTH                   STATE       CLAIM\n"
            "node-a   0000:3b:00.0   1b36:0010   010802   12       0        "
            "SN1      vfio-pci   Healthy                  Allocated   vms/vm1-nvme\n"
            "node-a   0000:5e:00.0   1b36:0010   010802   13       0        "
            "SN2      vfio-pci   Healthy                  Released    (vms/old)\n"
            "node-b   0000:01:00.0   8086:5845   010802   <none>   <none>   "
            "<none>   nvme       Unhealthy:NoIommuGroup   Unhealthy   <none>\n");
  const std::string b = DevicesTable(devices, "node-b");
  EXPECT_THAT(b, HasSubstr("node-b"));
  EXPECT_THAT(b, ::testing::Not(HasSubstr("node-a")));
  EXPECT_EQ(DevicesTable(devices, "node-z"), "");
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
  ASSERT_OK_AND_ASSIGN(Claim claim, api::ParseClaim(std::string_view(kClaim)));
  const std::string d = DescribeClaim(claim);
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
  // In Kubernetes mode the VM's UID is known and shown.
  claim.spec.owner_vm_uid = "vm-uid-1";
  claim.status.reserved_for->vm_uid = "vm-uid-1";
  const std::string k = DescribeClaim(claim);
  EXPECT_THAT(k, HasSubstr("Owner VM:        vm1 (uid vm-uid-1)\n"));
  EXPECT_THAT(k, HasSubstr(
                     "Reserved For:    vm vm1 (uid vm-uid-1), pod virt-launcher-vm1-abc, uid p1\n"));
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

TEST(PdcctlFormatTest, HandoffsTable) {
  ASSERT_OK_AND_ASSIGN(std::vector<PendingHandoff> handoffs, api::ParseHandoffList(R"({"items": [
      {"node": "node-b", "resourceName": "r/x", "namespace": "d", "vm": "vm2",
       "podName": "p2", "podUid": "u2", "claims": ["d/c2"], "devices": ["0000:3b:00.0"]},
      {"node": "node-a", "resourceName": "r/x", "namespace": "d", "vm": "vm1",
       "podName": "p1", "podUid": "u1", "claims": ["d/c1"],
       "devices": ["0000:3b:00.0", "0000:5e:00.0"]}]})"));
  EXPECT_EQ(HandoffsTable(handoffs),
            "NODE     RESOURCE   VM      POD   POD UID   DEVICES\n"
            "node-a   r/x        d/vm1   p1    u1        0000:3b:00.0,0000:5e:00.0\n"
            "node-b   r/x        d/vm2   p2    u2        0000:3b:00.0\n");
  EXPECT_EQ(HandoffsTable({}), "");
}

TEST(PdcctlFormatTest, PrettyJsonReindents) {
  ASSERT_OK_AND_ASSIGN(std::string p, PrettyJson(R"({"a":[1,{"b":null}]})"));
  EXPECT_EQ(p, "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ]\n}\n");
  EXPECT_THAT(PrettyJson("{oops"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace pdc::pdcctl
