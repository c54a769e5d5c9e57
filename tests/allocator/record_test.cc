#include "allocator/record.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace pdc {
namespace {

using ::pdc::testing::StatusIs;

Record SampleRecord() {
  Record r;
  r.revision = 42;
  Claim c;
  c.key = {"default", "vm1-nvme"};
  c.uid = "uid-1";
  c.created_revision = 7;
  c.spec.resource_name = "devices.kubevirt.io/nvme";
  c.spec.count = 2;
  c.spec.node = "node-a";
  c.spec.address = *PciAddress::Parse("0000:3b:00.0");
  c.spec.reclaim_policy = ReclaimPolicy::kDelete;
  c.spec.owner_vm = "vm1";
  c.status.phase = ClaimPhase::kBound;
  c.status.node = "node-a";
  c.status.devices = {{*PciAddress::Parse("0000:3b:00.0"), "SN1"},
                      {*PciAddress::Parse("0000:5e:00.0"), ""}};
  c.status.reserved_for = Reservation{"vm1", "virt-launcher-vm1-abcde", "pod-uid"};
  c.status.handed_off_to = "older-pod-uid";
  r.mutations.push_back(PutClaim{c});
  r.mutations.push_back(DeleteClaim{{"ns2", "old"}});
  NodeRecord n;
  n.inventory.node = "node-a";
  Device d;
  d.address = *PciAddress::Parse("0000:3b:00.0");
  d.vendor_id = 0x1b36;
  d.device_id = 0x0010;
  d.class_code = 0x010802;
  d.iommu_group = 12;
  d.numa_node = -1;
  d.health = DeviceHealth::kUnhealthy;
  d.serial = "SN1";
  d.driver = "vfio-pci";
  n.inventory.devices.push_back(d);
  n.return_to_host = {*PciAddress::Parse("0000:5e:00.0")};
  r.mutations.push_back(PutNode{n});
  r.mutations.push_back(DeleteNode{"node-b"});
  return r;
}

TEST(RecordTest, RoundTrips) {
  Record r = SampleRecord();
  ASSERT_OK_AND_ASSIGN(Record back, DecodeRecord(EncodeRecord(r)));
  EXPECT_EQ(back, r);
}

TEST(RecordTest, EveryTruncationIsDataLossNotACrash) {
  std::string bytes = EncodeRecord(SampleRecord());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THAT(DecodeRecord(bytes.substr(0, n)), StatusIs(absl::StatusCode::kDataLoss))
        << "prefix of " << n << " bytes";
  }
}

TEST(RecordTest, TrailingGarbageIsDataLoss) {
  std::string bytes = EncodeRecord(SampleRecord()) + "x";
  EXPECT_THAT(DecodeRecord(bytes), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(RecordTest, HugeCountsAreRejectedWithoutAllocating) {
  std::string bytes;
  bytes.push_back(1);                       // version
  bytes.push_back(5);                       // revision
  bytes.append("\xff\xff\xff\xff\x0f", 5);  // mutation count ~4e9
  EXPECT_THAT(DecodeRecord(bytes), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(RecordTest, UnknownVersionIsDataLoss) {
  std::string bytes = EncodeRecord(SampleRecord());
  bytes[0] = 9;
  EXPECT_THAT(DecodeRecord(bytes), StatusIs(absl::StatusCode::kDataLoss));
}

// Version 1 records (before hand-offs) have no handed_off_to; their
// reservations count as handed off, so an upgrade blocks no node.
TEST(RecordTest, Version1ClaimsDecodeAsHandedOff) {
  Record r;
  r.revision = 3;
  Claim c;
  c.key = {"default", "vm1-nvme"};
  c.spec.resource_name = "devices.kubevirt.io/nvme";
  c.status.phase = ClaimPhase::kBound;
  c.status.node = "node-a";
  c.status.reserved_for = Reservation{"vm1", "virt-launcher-vm1-abcde", "pod-uid"};
  r.mutations.push_back(PutClaim{c});
  std::string bytes = EncodeRecord(r);
  // The claim is the last thing encoded; its handed_off_to ("") is the one
  // trailing length byte. Dropping it and the version gives a v1 record.
  ASSERT_EQ(bytes.back(), '\0');
  bytes.pop_back();
  bytes[0] = 1;
  ASSERT_OK_AND_ASSIGN(Record decoded, DecodeRecord(bytes));
  const auto& claim = std::get<PutClaim>(decoded.mutations.at(0)).claim;
  EXPECT_EQ(claim.status.handed_off_to, "pod-uid");
  EXPECT_FALSE(claim.status.HandoffPending());
}

}  // namespace
}  // namespace pdc
