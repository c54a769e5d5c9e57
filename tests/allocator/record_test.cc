#include "allocator/record.h"

#include <string>
#include <utility>

#include "allocator/cluster_state.h"
#include "allocator/snapshot_builder.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/inventory_builders.h"
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
  c.spec.owner_vm_uid = "vm-uid-1";
  c.status.phase = ClaimPhase::kBound;
  c.status.node = "node-a";
  c.status.devices = {{*PciAddress::Parse("0000:3b:00.0"), "SN1"},
                      {*PciAddress::Parse("0000:5e:00.0"), ""}};
  c.status.reserved_for =
      Reservation{"vm1", "virt-launcher-vm1-abcde", "pod-uid", "vm-uid-1", 3, "vmi-uid-1"};
  c.status.handed_off_to = "older-pod-uid";
  r.mutations.push_back(PutClaim{c});
  r.mutations.push_back(DeleteClaim{{"ns2", "old"}});
  NodeRecord n;
  n.inventory.node = "node-a";
  Device d = testing::NvmeDevice("0000:3b:00.0", 12, -1, "SN1");
  d.health = DeviceHealth::kUnhealthy;
  d.unhealthy_reason = UnhealthyReason::kHostInUse;
  d.driver = "vfio-pci";
  n.inventory.devices.push_back(d);
  n.return_to_host = {*PciAddress::Parse("0000:5e:00.0")};
  n.released = {{*PciAddress::Parse("0000:3b:00.0"), "SN1", {"default", "old-claim"}, "c-uid"},
                {*PciAddress::Parse("0000:af:00.0"), "", {"ns2", "gone"}}};
  r.mutations.push_back(PutNode{n});
  r.mutations.push_back(DeleteNode{"node-b"});
  return r;
}

TEST(RecordTest, RoundTrips) {
  Record r = SampleRecord();
  ASSERT_OK_AND_ASSIGN(Record back, DecodeRecord(EncodeRecord(r)));
  EXPECT_EQ(back, r);
}

// The checkpoint's direct encoding is EncodeRecord of the same puts.
TEST(RecordTest, PutsEncoderMatchesEncodeRecord) {
  const Record sample = SampleRecord();
  Record puts;
  puts.revision = 9;
  PutsEncoder e(9, 4);
  for (int i = 0; i < 2; ++i) {
    for (const Mutation& m : sample.mutations) {
      if (const auto* c = std::get_if<PutClaim>(&m)) {
        puts.mutations.push_back(*c);
        e.Put(c->claim);
      } else if (const auto* n = std::get_if<PutNode>(&m)) {
        puts.mutations.push_back(*n);
        e.Put(n->node);
      }
    }
  }
  EXPECT_EQ(std::move(e).Finish(), EncodeRecord(puts));
}

TEST(RecordTest, EncodedSnapshotIsTheEncodedSnapshotRecord) {
  ClusterState state({DeviceClass{testing::kNvme, {testing::QemuNvmeSelector()}}});
  Record sample = SampleRecord();
  // Node, then its claim, then a second claim on an unknown node.
  Record r1;
  r1.revision = 1;
  r1.mutations.push_back(sample.mutations[2]);
  ASSERT_OK(state.Apply(r1));
  Record r2;
  r2.revision = 2;
  Claim c = std::get<PutClaim>(sample.mutations[0]).claim;
  c.status.devices.resize(1);
  c.spec.count = 1;
  r2.mutations.push_back(PutClaim{c});
  c.key.name = "another";
  c.status.node = "node-z";
  r2.mutations.push_back(PutClaim{c});
  ASSERT_OK(state.Apply(r2));
  // Whatever the chunks, the pieces join into the snapshot record's bytes.
  for (size_t chunk : {1, 2, 100}) {
    SnapshotBuilder builder(state.BeginCut());
    while (!builder.Done()) builder.EncodeSome(state, chunk);
    state.EndCut();
    const std::string encoded = std::move(builder).Finish();
    EXPECT_EQ(encoded, EncodeRecord(state.Snapshot())) << chunk << " per chunk";
    ASSERT_OK_AND_ASSIGN(Record back, DecodeRecord(encoded));
    EXPECT_EQ(back.revision, 2u);
    EXPECT_EQ(back.mutations.size(), 3u);
  }
}

TEST(RecordTest, EncodedClaimPutStartsWithItsKey) {
  Claim c = std::get<PutClaim>(SampleRecord().mutations[0]).claim;
  std::string put;
  PutsEncoder::EncodePut(c, &put);
  EXPECT_EQ(PutsEncoder::EncodedClaimKey(put), std::make_pair(std::string_view(c.key.ns),
                                                              std::string_view(c.key.name)));
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
  // The claim is the last thing encoded; its handed_off_to, owner_vm_uid
  // and reservation's vm_uid ("" each), claim_rank (0) and vmi_uid ("") are
  // the five trailing bytes. Dropping them and the version gives a v1 record.
  ASSERT_EQ(bytes.substr(bytes.size() - 5), std::string(5, '\0'));
  bytes.resize(bytes.size() - 5);
  bytes[0] = 1;
  ASSERT_OK_AND_ASSIGN(Record decoded, DecodeRecord(bytes));
  const auto& claim = std::get<PutClaim>(decoded.mutations.at(0)).claim;
  EXPECT_EQ(claim.status.handed_off_to, "pod-uid");
  EXPECT_FALSE(claim.status.HandoffPending());
}

// Version 2 node records (before Released) end with the return list; they
// decode with no Released devices, and the rest of the record is intact.
TEST(RecordTest, Version2NodeRecordsDecodeWithNothingReleased) {
  Record r;
  r.revision = 5;
  NodeRecord n;
  n.inventory.node = "node-a";
  n.return_to_host = {*PciAddress::Parse("0000:5e:00.0")};
  r.mutations.push_back(PutNode{n});
  std::string bytes = EncodeRecord(r);
  // The node is the last thing encoded; its Released count (0) is the one
  // trailing byte. Dropping it and the version gives a v2 record.
  ASSERT_EQ(bytes.back(), '\0');
  bytes.pop_back();
  bytes[0] = 2;
  ASSERT_OK_AND_ASSIGN(Record decoded, DecodeRecord(bytes));
  EXPECT_EQ(decoded, r);
  // The same bytes as version 3 are one byte short: the count is missing.
  bytes[0] = 3;
  EXPECT_THAT(DecodeRecord(bytes), StatusIs(absl::StatusCode::kDataLoss));
}

// Version 3 claims (before VM UIDs) end with handed_off_to; they decode
// with the UIDs unknown (""), the rest intact.
TEST(RecordTest, Version3ClaimsDecodeWithoutVmUids) {
  struct Case {
    std::string name;
    bool reserved;
    size_t uid_bytes;  // Trailing bytes a v8 encoding adds for the UIDs and rank.
  };
  for (const Case& tc : {Case{"reserved", true, 4}, Case{"not reserved", false, 1}}) {
    Record r;
    r.revision = 8;
    Claim c;
    c.key = {"default", "vm1-nvme"};
    c.spec.resource_name = "devices.kubevirt.io/nvme";
    c.spec.owner_vm = "vm1";
    c.status.phase = ClaimPhase::kBound;
    c.status.node = "node-a";
    if (tc.reserved) {
      c.status.reserved_for = Reservation{"vm1", "virt-launcher-vm1-abcde", "pod-uid"};
      c.status.handed_off_to = "pod-uid";
    }
    r.mutations.push_back(PutClaim{c});
    std::string bytes = EncodeRecord(r);
    ASSERT_EQ(bytes.substr(bytes.size() - tc.uid_bytes), std::string(tc.uid_bytes, '\0'))
        << tc.name;
    bytes.resize(bytes.size() - tc.uid_bytes);
    bytes[0] = 3;
    ASSERT_OK_AND_ASSIGN(Record decoded, DecodeRecord(bytes));
    EXPECT_EQ(decoded, r) << tc.name;
    // The same bytes as version 4 are short: the UIDs are missing.
    bytes[0] = 4;
    EXPECT_THAT(DecodeRecord(bytes), StatusIs(absl::StatusCode::kDataLoss)) << tc.name;
  }
}

// Version 4 reservations (before claim_rank) decode with rank 0; the same
// bytes as version 5 are short.
TEST(RecordTest, Version4ReservationsDecodeWithoutARank) {
  Record r;
  r.revision = 9;
  Claim c;
  c.key = {"default", "data"};
  c.spec.resource_name = "devices.kubevirt.io/nvme";
  c.status.phase = ClaimPhase::kBound;
  c.status.node = "node-a";
  c.status.reserved_for = Reservation{"vm1", "virt-launcher-vm1-abcde", "pod-uid", "vm-uid", 0};
  r.mutations.push_back(PutClaim{c});
  std::string bytes = EncodeRecord(r);
  // The rank (0) and the VMI's UID ("").
  ASSERT_EQ(bytes.substr(bytes.size() - 2), std::string(2, '\0'));
  bytes.resize(bytes.size() - 2);
  bytes[0] = 4;
  ASSERT_OK_AND_ASSIGN(Record decoded, DecodeRecord(bytes));
  EXPECT_EQ(decoded, r);
  bytes[0] = 5;
  EXPECT_THAT(DecodeRecord(bytes), StatusIs(absl::StatusCode::kDataLoss));
}

// Version 5 devices (before the unhealthy reason) decode with an
// unhealthy device's reason Unspecified and a healthy one's none.
TEST(RecordTest, Version5DevicesDecodeWithAnUnspecifiedReason) {
  Record r;
  r.revision = 5;
  NodeRecord n;
  n.inventory.node = "node-a";
  Device d = testing::NvmeDevice("0000:3b:00.0", 12, 0, "SN1");
  d.health = DeviceHealth::kUnhealthy;
  d.unhealthy_reason = UnhealthyReason::kHostInUse;
  n.inventory.devices.push_back(d);
  n.inventory.devices.push_back(testing::NvmeDevice("0000:5e:00.0", 13, 0, "SN2"));
  r.mutations.push_back(PutNode{n});
  std::string bytes = EncodeRecord(r);
  // The reason is the byte before each device's serial (length, then text).
  for (std::string_view serial : {"\x03SN2", "\x03SN1"}) {
    const size_t at = bytes.find(serial);
    ASSERT_NE(at, std::string::npos);
    bytes.erase(at - 1, 1);
  }
  bytes[0] = 5;
  ASSERT_OK_AND_ASSIGN(Record decoded, DecodeRecord(bytes));
  const NodeRecord& back = std::get<PutNode>(decoded.mutations.at(0)).node;
  ASSERT_EQ(back.inventory.devices.size(), 2u);
  EXPECT_EQ(back.inventory.devices[0].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(back.inventory.devices[0].unhealthy_reason, UnhealthyReason::kUnspecified);
  EXPECT_EQ(back.inventory.devices[1].health, DeviceHealth::kHealthy);
  EXPECT_EQ(back.inventory.devices[1].unhealthy_reason, UnhealthyReason::kNone);
}

// A healthy device with a reason, or a reason pdc does not know, is data
// loss, not a device that is both.
TEST(RecordTest, AReasonOnAHealthyDeviceOrAnUnknownOneIsDataLoss) {
  for (auto [health, reason] : {std::pair{DeviceHealth::kHealthy, uint8_t{6}},
                                std::pair{DeviceHealth::kUnhealthy, uint8_t{200}}}) {
    Record r;
    NodeRecord n;
    n.inventory.node = "node-a";
    Device d = testing::NvmeDevice("0000:3b:00.0", 12, 0, "SN1");
    d.health = health;
    d.unhealthy_reason = UnhealthyReason::kHostInUse;
    n.inventory.devices.push_back(d);
    r.mutations.push_back(PutNode{n});
    std::string bytes = EncodeRecord(r);
    const size_t at = bytes.find("\x03SN1");
    ASSERT_NE(at, std::string::npos);
    bytes[at - 1] = static_cast<char>(reason);
    EXPECT_THAT(DecodeRecord(bytes), StatusIs(absl::StatusCode::kDataLoss)) << int(reason);
  }
}

// Version 7 reservations (before the VMI's UID) decode with it unknown;
// the same bytes as version 8 are short.
TEST(RecordTest, Version7ReservationsDecodeWithoutAVmiUid) {
  Record r;
  r.revision = 9;
  Claim c;
  c.key = {"default", "data"};
  c.spec.resource_name = "devices.kubevirt.io/nvme";
  c.status.phase = ClaimPhase::kBound;
  c.status.node = "node-a";
  c.status.reserved_for = Reservation{"vm1", "virt-launcher-vm1-abcde", "pod-uid", "vm-uid", 2};
  r.mutations.push_back(PutClaim{c});
  std::string bytes = EncodeRecord(r);
  ASSERT_EQ(bytes.back(), '\0');  // The VMI's UID, "".
  bytes.pop_back();
  bytes[0] = 7;
  ASSERT_OK_AND_ASSIGN(Record decoded, DecodeRecord(bytes));
  EXPECT_EQ(decoded, r);
  bytes[0] = 8;
  EXPECT_THAT(DecodeRecord(bytes), StatusIs(absl::StatusCode::kDataLoss));
}

// Records are written as version 8, which keeps both VM UIDs, the claim's
// rank in its reserving pod and its VMI's UID, the reason a device is
// unhealthy and the UID of a Released device's claim.
TEST(RecordTest, WritesVersion8WithVmUidsClaimRankVmiUidAndReleasedClaimUid) {
  const Record sample = SampleRecord();
  ASSERT_OK_AND_ASSIGN(Record back, DecodeRecord(EncodeRecord(sample)));
  const Claim& c = std::get<PutClaim>(back.mutations.at(0)).claim;
  EXPECT_EQ(c.spec.owner_vm_uid, "vm-uid-1");
  ASSERT_TRUE(c.status.reserved_for.has_value());
  EXPECT_EQ(c.status.reserved_for->vm_uid, "vm-uid-1");
  EXPECT_EQ(c.status.reserved_for->claim_rank, 3u);
  EXPECT_EQ(c.status.reserved_for->vmi_uid, "vmi-uid-1");
  EXPECT_EQ(EncodeRecord(sample)[0], 8);
  const NodeRecord& n = std::get<PutNode>(back.mutations.at(2)).node;
  ASSERT_EQ(n.released.size(), 2u);
  EXPECT_EQ(n.released[0].claim_uid, "c-uid");
}

// Version 6 Released marks (before the claim's UID) decode with the UID
// unknown; the claim key, which decides who may pin the device, is kept.
TEST(RecordTest, Version6ReleasedMarksDecodeWithoutAClaimUid) {
  Record r;
  r.revision = 5;
  NodeRecord n;
  n.inventory.node = "node-a";
  n.released = {{*PciAddress::Parse("0000:3b:00.0"), "SN1", {"default", "old"}, ""}};
  r.mutations.push_back(PutNode{n});
  std::string bytes = EncodeRecord(r);
  // The mark's UID ("": one zero length byte) is the last byte.
  ASSERT_EQ(bytes.back(), '\0');
  bytes.pop_back();
  bytes[0] = 6;
  ASSERT_OK_AND_ASSIGN(Record decoded, DecodeRecord(bytes));
  EXPECT_EQ(decoded, r);
  // The same bytes as version 7 are one byte short.
  bytes[0] = 7;
  EXPECT_THAT(DecodeRecord(bytes), StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace pdc
