// Builders shared by the allocator tests: device classes, GPUs, claims,
// scheduling requests, and a fixture holding an allocator on a MemoryStore
// with a fake clock. NVMe devices and inventories come from
// tests/testing/inventory_builders.h.
#ifndef PDC_TESTS_ALLOCATOR_ALLOCATOR_TEST_UTIL_H_
#define PDC_TESTS_ALLOCATOR_ALLOCATOR_TEST_UTIL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/memory_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"

namespace pdc::testing {

inline constexpr char kGpu[] = "nvidia.com/gpu";

inline AllocatorOptions TestOptions() {
  AllocatorOptions o;
  o.device_classes = {
      NvmeClass(),
      DeviceClass{kGpu, {PciSelector{0x10de, 0x20b0, std::nullopt}}},
  };
  o.node_stale_after = absl::Seconds(60);
  // These tests bind without a node driver that confirms hand-offs; the
  // gate's own tests turn it back on.
  o.serialize_handoffs = false;
  return o;
}

// A GPU (10de:20b0) on the `nvidia` driver, without a serial.
inline Device Gpu(std::string_view address, int group, int numa = -1) {
  Device d = NvmeDevice(address, group, numa);
  d.vendor_id = 0x10de;
  d.device_id = 0x20b0;
  d.class_code = 0x030200;
  d.serial = "";
  d.driver = "nvidia";
  return d;
}

inline ClaimSpec Spec(std::string resource, int count) {
  ClaimSpec s;
  s.resource_name = std::move(resource);
  s.count = count;
  return s;
}

// A virt-launcher pod of VM `vm` in `ns` requesting `nvme` NVMe devices.
inline SchedulingRequest VmPod(std::string vm, std::string pod_uid, int64_t nvme = 1,
                               std::vector<std::string> claims = {}, std::string ns = "default") {
  SchedulingRequest r;
  r.ns = std::move(ns);
  r.vm = vm;
  r.pod_name = "virt-launcher-" + vm + "-" + pod_uid.substr(0, std::min<size_t>(5, pod_uid.size()));
  r.pod_uid = std::move(pod_uid);
  r.claim_names = std::move(claims);
  if (nvme > 0) r.resources.push_back({kNvme, nvme});
  r.resources.push_back({"cpu", 4});
  return r;
}

inline std::vector<std::string_view> Names(const std::vector<std::string>& v) {
  return std::vector<std::string_view>(v.begin(), v.end());
}

class AllocatorFixture : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen(AllocatorOptions options = TestOptions()) {
    allocator_.reset();
    auto a = Allocator::Open(std::move(options), &store_, &clock_);
    ASSERT_TRUE(a.ok()) << a.status();
    allocator_ = *std::move(a);
  }

  // Reports the inventory (a heartbeat too); fails the test on error.
  void Report(NodeInventory inv) { ASSERT_OK(allocator_->ReplaceInventory(std::move(inv))); }

  FilterResult Filter(const SchedulingRequest& r, const std::vector<std::string>& nodes) {
    auto names = Names(nodes);
    return allocator_->Filter(r, names);
  }

  // Names of the nodes that fit.
  std::vector<std::string> Fitting(const SchedulingRequest& r,
                                   const std::vector<std::string>& nodes) {
    FilterResult f = Filter(r, nodes);
    std::vector<std::string> out;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (f.pass_through || f.nodes[i].verdict == Verdict::kFits) out.push_back(nodes[i]);
    }
    return out;
  }

  std::vector<PciAddress> DevicesOf(const ClaimKey& key) {
    auto c = allocator_->GetClaim(key);
    EXPECT_TRUE(c.ok()) << c.status();
    std::vector<PciAddress> out;
    if (c.ok()) {
      for (const BoundDevice& b : c->status.devices) out.push_back(b.address);
    }
    return out;
  }

  FakeClock clock_;
  MemoryStore store_;
  std::unique_ptr<Allocator> allocator_;
};

// A Released mark at `address` with `serial` of the deleted claim `claim`,
// with its UID (a mark the allocator makes always has one).
MATCHER_P3(IsReleasedMark, address, serial, claim, "") {
  return arg.address == address && arg.serial == serial && arg.claim == claim &&
         !arg.claim_uid.empty();
}

}  // namespace pdc::testing

#endif  // PDC_TESTS_ALLOCATOR_ALLOCATOR_TEST_UTIL_H_
