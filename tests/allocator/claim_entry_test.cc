// ClaimEntry: every kind of claim comes back from ToClaim() exactly as it
// went in; the common claim keeps nothing out of line; names are pooled and
// given back. PackUuid accepts exactly the canonical UUID form.
#include "allocator/claim_entry.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pdc {
namespace {

constexpr char kUuid[] = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0ff";

// A template claim bound and reserved, as a bind leaves it.
Claim BoundClaim() {
  Claim c;
  c.key = {"default", "vm-7-nvme"};
  c.uid = kUuid;
  c.spec.resource_name = "devices.kubevirt.io/nvme";
  c.spec.count = 1;
  c.spec.reclaim_policy = ReclaimPolicy::kDelete;
  c.spec.owner_vm = "vm-7";
  c.spec.owner_vm_uid = "3b0f6c1e-8a52-4d4e-9f3a-2c1d0e9b8a76";
  c.status.phase = ClaimPhase::kBound;
  c.status.node = "worker-12";
  c.status.devices = {BoundDevice{PciAddress(0, 0x11, 0, 0), "S1207XYZW"}};
  c.status.reserved_for =
      Reservation{"vm-7", "virt-launcher-vm-7-x2k9p", "uid-pod-7", "3b0f6c1e", 2};
  c.status.handed_off_to = "uid-pod-6";
  c.created_revision = 41;
  return c;
}

struct RoundTripCase {
  const char* name;
  Claim claim;
  bool rare;  // Whether the entry needs its out-of-line block.
};

std::vector<RoundTripCase> RoundTripCases() {
  std::vector<RoundTripCase> cases;
  cases.push_back({"bound and reserved", BoundClaim(), false});
  {
    Claim c;
    c.key = {"ns", "pending"};
    c.uid = kUuid;
    c.spec.resource_name = "devices.kubevirt.io/nvme";
    cases.push_back({"pending, nothing set", c, false});
  }
  for (const char* uid : {"", "uid-1", "0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0FF"}) {
    Claim c = BoundClaim();
    c.uid = uid;
    cases.push_back({"uid that is no canonical UUID", c, true});
  }
  {
    Claim c = BoundClaim();
    c.spec.node = "worker-12";
    cases.push_back({"pinned to a node", c, true});
  }
  {
    Claim c = BoundClaim();
    c.spec.serial = "S1207XYZW";
    cases.push_back({"pinned to a serial", c, true});
  }
  {
    Claim c = BoundClaim();
    c.spec.address = PciAddress(0, 0x11, 0, 0);
    cases.push_back({"pinned to an address", c, true});
  }
  {
    Claim c = BoundClaim();
    c.status.phase = ClaimPhase::kLost;
    c.status.lost_reason = "device 0000:11:00.0 is gone from node worker-12";
    cases.push_back({"lost", c, true});
  }
  {
    Claim c = BoundClaim();
    c.spec.count = 3;
    c.status.devices = {BoundDevice{PciAddress(0, 0x10, 0, 0), "A"},
                        BoundDevice{PciAddress(0, 0x11, 0, 0), ""},
                        BoundDevice{PciAddress(1, 0x12, 3, 1), "C"}};
    c.status.reserved_for.reset();
    c.status.handed_off_to.clear();
    cases.push_back({"several devices, not reserved", c, false});
  }
  return cases;
}

TEST(ClaimEntryTest, ToClaimGivesBackTheClaim) {
  for (const RoundTripCase& tc : RoundTripCases()) {
    SCOPED_TRACE(tc.name);
    NamePool names;
    ClaimEntry entry(tc.claim, names);
    EXPECT_TRUE(entry.ToClaim() == tc.claim);
    EXPECT_EQ(entry.has_rare_fields(), tc.rare);
    EXPECT_EQ(entry.uid(), tc.claim.uid);
    EXPECT_EQ(entry.lost_reason(), tc.claim.status.lost_reason);
    EXPECT_EQ(entry.spec.resource_name(), tc.claim.spec.resource_name);
    EXPECT_EQ(entry.status.node(), tc.claim.status.node);
    EXPECT_EQ(entry.status.HandoffPending(), tc.claim.status.HandoffPending());
    EXPECT_EQ(entry.phase, tc.claim.status.phase);
    EXPECT_EQ(entry.count, tc.claim.spec.count);
    entry.ReleaseNames(names);
    EXPECT_EQ(names.size(), 0u);
  }
}

TEST(ClaimEntryTest, ClaimsShareTheirResourceAndNodeNames) {
  NamePool names;
  Claim a = BoundClaim();
  Claim b = BoundClaim();
  b.key.name = "vm-8-nvme";
  Claim c = BoundClaim();
  c.status.node = "worker-13";
  ClaimEntry ea(a, names), eb(b, names), ec(c, names);
  EXPECT_EQ(ea.spec.resource, eb.spec.resource);
  EXPECT_EQ(ea.spec.resource, ec.spec.resource);
  EXPECT_EQ(ea.status.node_name, eb.status.node_name);
  EXPECT_NE(ea.status.node_name, ec.status.node_name);
  EXPECT_EQ(names.size(), 3u);  // One resource name, two node names.
  ec.ReleaseNames(names);
  EXPECT_EQ(names.size(), 2u);
  ea.ReleaseNames(names);
  eb.ReleaseNames(names);
  EXPECT_EQ(names.size(), 0u);
}

TEST(ClaimEntryTest, APendingClaimPoolsNoNode) {
  NamePool names;
  Claim c;
  c.key = {"ns", "pending"};
  c.uid = kUuid;
  c.spec.resource_name = "devices.kubevirt.io/nvme";
  ClaimEntry entry(c, names);
  EXPECT_EQ(entry.status.node_name, nullptr);
  EXPECT_EQ(entry.status.node(), "");
  EXPECT_EQ(names.size(), 1u);
  entry.ReleaseNames(names);
}

struct UuidCase {
  const char* text;
  bool packs;
};

TEST(PackUuidTest, OnlyTheCanonicalFormPacks) {
  const UuidCase cases[] = {
      {"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0ff", true},
      {"00000000-0000-0000-0000-000000000000", true},
      {"ffffffff-ffff-ffff-ffff-ffffffffffff", true},
      {"0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0FF", false},  // Upper case.
      {"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f", false},   // 35 characters.
      {"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0ff0", false},  // 37.
      {"0f1e2d3c4-b5a-4978-8695-a4b3c2d1e0ff", false},  // Dash misplaced.
      {"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0fg", false},  // Not hex.
      {"0f1e2d3c-4b5a-4978-8695_a4b3c2d1e0ff", false},  // Not a dash.
      {"", false},
  };
  for (const UuidCase& tc : cases) {
    SCOPED_TRACE(tc.text);
    const std::optional<PackedUuid> packed = PackUuid(tc.text);
    ASSERT_EQ(packed.has_value(), tc.packs);
    if (packed) {
      EXPECT_EQ(UnpackUuid(*packed), tc.text);
    }
  }
}

TEST(PackUuidTest, DistinctUuidsPackDistinctly) {
  EXPECT_NE(*PackUuid("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0ff"),
            *PackUuid("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0fe"));
  EXPECT_NE(*PackUuid("1f1e2d3c-4b5a-4978-8695-a4b3c2d1e0ff"),
            *PackUuid("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0ff"));
}

}  // namespace
}  // namespace pdc
