// Device choice on one node: whole IOMMU groups, NUMA, lowest address.
#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allocator/allocator_test_util.h"

namespace pdc::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class PlacementTest : public AllocatorFixture {};

struct PlacementCase {
  std::string name;
  std::vector<Device> devices;
  int want;
  std::vector<std::string> expect;  // Empty: does not fit.
  std::string reason;               // Substring of the failure.
};

TEST_F(PlacementTest, ChoosesDevicesByTheRules) {
  const PlacementCase cases[] = {
      {"lowest address first",
       {NvmeDevice("0000:5e:00.0", 2), NvmeDevice("0000:3b:00.0", 1), NvmeDevice("0000:86:00.0", 3)},
       2,
       {"0000:3b:00.0", "0000:5e:00.0"},
       ""},
      {"same NUMA node preferred over lower addresses",
       {NvmeDevice("0000:3b:00.0", 1, 0), NvmeDevice("0000:5e:00.0", 2, 1), NvmeDevice("0000:86:00.0", 3, 1)},
       2,
       {"0000:5e:00.0", "0000:86:00.0"},
       ""},
      {"lowest NUMA node that fits",
       {NvmeDevice("0000:3b:00.0", 1, 0), NvmeDevice("0000:3c:00.0", 2, 0), NvmeDevice("0000:86:00.0", 3, 1),
        NvmeDevice("0000:87:00.0", 4, 1)},
       2,
       {"0000:3b:00.0", "0000:3c:00.0"},
       ""},
      {"spans NUMA nodes when it must",
       {NvmeDevice("0000:3b:00.0", 1, 0), NvmeDevice("0000:86:00.0", 3, 1)},
       2,
       {"0000:3b:00.0", "0000:86:00.0"},
       ""},
      {"shared group is taken whole",
       {NvmeDevice("0000:3b:00.0", 7), NvmeDevice("0000:3b:00.1", 7)},
       2,
       {"0000:3b:00.0", "0000:3b:00.1"},
       ""},
      {"shared group is not split",
       {NvmeDevice("0000:3b:00.0", 7), NvmeDevice("0000:3b:00.1", 7)},
       1,
       {},
       "cannot be split along IOMMU groups: want 1, free groups of sizes [2]"},
      {"exact fit skips a group that would overshoot",
       {NvmeDevice("0000:01:00.0", 5), NvmeDevice("0000:01:00.1", 5), NvmeDevice("0000:3b:00.0", 1)},
       1,
       {"0000:3b:00.0"},
       ""},
      {"group with an unhealthy member is unusable",
       {NvmeDevice("0000:3b:00.0", 7), [] {
          Device d = NvmeDevice("0000:3b:00.1", 7);
          d.health = DeviceHealth::kUnhealthy;
          return d;
        }()},
       2,
       {},
       "insufficient free devices.kubevirt.io/nvme: want 2, free 0"},
      {"device without an IOMMU group is never allocated",
       {NvmeDevice("0000:3b:00.0", -1)},
       1,
       {},
       "want 1, free 0"},
      {"group mixing classes is unusable",
       {NvmeDevice("0000:3b:00.0", 7), Gpu("0000:3b:00.1", 7)},
       1,
       {},
       "want 1, free 0"},
  };
  int n = 0;
  for (const PlacementCase& c : cases) {
    const std::string node = "node-" + std::to_string(n++);
    Report(Inventory(node, c.devices));
    SchedulingRequest pod = VmPod("vm-" + node, "uid-" + node, c.want);
    FilterResult f = Filter(pod, {node});
    auto bound = allocator_->Bind(pod, node);
    if (c.expect.empty()) {
      EXPECT_EQ(f.nodes[0].verdict, Verdict::kUnresolvable) << c.name;
      EXPECT_THAT(f.MessageFor(0), HasSubstr(c.reason)) << c.name;
      EXPECT_THAT(bound, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.reason)))
          << c.name;
      continue;
    }
    EXPECT_EQ(f.nodes[0].verdict, Verdict::kFits) << c.name << ": " << f.MessageFor(0);
    ASSERT_TRUE(bound.ok()) << c.name << ": " << bound.status();
    std::vector<std::string> got;
    for (PciAddress a : bound->claims[0].devices) got.push_back(a.ToString());
    EXPECT_EQ(got, c.expect) << c.name;
  }
}

TEST_F(PlacementTest, SecondClaimOfAVmStaysOnItsNumaNode) {
  Report(Inventory("node-a", {NvmeDevice("0000:3b:00.0", 1, 0), NvmeDevice("0000:5e:00.0", 2, 1),
                              Gpu("0000:17:00.0", 3, 0), Gpu("0000:af:00.0", 4, 1)}));
  // The VM first gets its NVMe on NUMA 1 (pinned), then asks for a GPU too.
  ClaimSpec pinned = Spec(kNvme, 1);
  pinned.node = "node-a";
  pinned.address = Addr("0000:5e:00.0");
  ASSERT_OK(allocator_->CreateClaim({"default", "disk"}, pinned).status());
  ASSERT_OK(allocator_->Bind(VmPod("vm1", "u1", 1, {"disk"}), "node-a").status());
  SchedulingRequest with_gpu = VmPod("vm1", "u2", 1, {"disk"});
  with_gpu.resources.push_back({kGpu, 1});
  ASSERT_OK_AND_ASSIGN(BindOutcome b, allocator_->Bind(with_gpu, "node-a"));
  ASSERT_EQ(b.claims.size(), 2u);
  EXPECT_EQ(b.claims[1].key.name, "vm1-gpu");
  EXPECT_THAT(b.claims[1].devices, ElementsAre(Addr("0000:af:00.0")));
}

TEST_F(PlacementTest, NumaAlignedNodesScoreHigher) {
  Report(Inventory("split", {NvmeDevice("0000:3b:00.0", 1, 0), NvmeDevice("0000:86:00.0", 2, 1)}));
  Report(Inventory("aligned", {NvmeDevice("0000:3b:00.0", 1, 0), NvmeDevice("0000:3c:00.0", 2, 0)}));
  std::vector<std::string> nodes = {"split", "aligned"};
  std::vector<int> s = allocator_->Score(VmPod("vm1", "u1", 2), Names(nodes));
  EXPECT_EQ(s[1], s[0] + 2);
}

}  // namespace
}  // namespace pdc::testing
