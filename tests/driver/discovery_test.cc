#include "driver/discovery.h"

#include <filesystem>

#include "driver/device_kind.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/test_util.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using testing::Addr;
using testing::FakeHost;
using testing::NvmeClass;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DiscoveryTest, ReportsMatchedDevicesWithAllTheirFacts) {
  FakeHost host;
  host.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .numa = 0, .driver = "nvme",
                         .serial = "disk-a"});
  host.kernel.AddDevice({.address = "0000:00:02.0", .vendor = 0x8086, .device = 0x5845,
                         .group = 2, .driver = "nvme", .serial = "disk-b"});
  // A NIC: not matched by the NVMe class.
  host.kernel.AddDevice({.address = "0000:00:01.0", .vendor = 0x8086, .device = 0x10d3,
                         .class_code = 0x020000, .group = 1});
  DiscoveryOptions options{.classes = {NvmeClass()}};
  ASSERT_OK_AND_ASSIGN(DiscoveryResult r, Discover(host.kernel, "node-a", options));
  EXPECT_EQ(r.inventory.node, "node-a");
  ASSERT_EQ(r.inventory.devices.size(), 2u);
  const Device& b = r.inventory.devices[0];
  EXPECT_EQ(b.address, Addr("0000:00:02.0"));
  EXPECT_EQ(b.vendor_id, 0x8086);
  EXPECT_EQ(b.device_id, 0x5845);
  EXPECT_EQ(b.serial, "disk-b");
  const Device& a = r.inventory.devices[1];
  EXPECT_EQ(a.address, Addr("0000:00:03.0"));
  EXPECT_EQ(a.vendor_id, 0x1b36);
  EXPECT_EQ(a.device_id, 0x0010);
  EXPECT_EQ(a.class_code, 0x010802u);
  EXPECT_EQ(a.iommu_group, 3);
  EXPECT_EQ(a.numa_node, 0);
  EXPECT_EQ(a.serial, "disk-a");  // Padding trimmed.
  EXPECT_EQ(a.driver, "nvme");
  EXPECT_EQ(a.health, DeviceHealth::kHealthy);
  EXPECT_TRUE(r.problems.empty());
}

TEST(DiscoveryTest, ClassCodeNarrowsASelector) {
  FakeHost host;
  host.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
  DeviceClass c = NvmeClass();
  for (PciSelector& s : c.selectors) s.class_code = 0x010801;
  ASSERT_OK_AND_ASSIGN(DiscoveryResult r, Discover(host.kernel, "n", {.classes = {c}}));
  EXPECT_TRUE(r.inventory.devices.empty());
}

TEST(DiscoveryTest, HealthNeedsAGroupAndTheExpectedDriver) {
  FakeHost host;
  host.kernel.AddDevice({.address = "0000:00:03.0", .group = -1, .driver = "nvme"});
  host.kernel.AddDevice({.address = "0000:00:04.0", .group = 4, .driver = "nvme", .serial = "x"});
  host.kernel.AddDevice({.address = "0000:00:05.0", .group = 5, .driver = "nvme", .serial = "y"});
  DiscoveryOptions options{.classes = {NvmeClass()},
                           .expected_driver = {{Addr("0000:00:04.0"), "vfio-pci"},
                                               {Addr("0000:00:05.0"), "nvme"}}};
  ASSERT_OK_AND_ASSIGN(DiscoveryResult r, Discover(host.kernel, "n", options));
  ASSERT_EQ(r.inventory.devices.size(), 3u);
  EXPECT_EQ(r.inventory.devices[0].iommu_group, -1);
  EXPECT_EQ(r.inventory.devices[0].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(r.inventory.devices[0].unhealthy_reason, UnhealthyReason::kNoIommuGroup);
  EXPECT_EQ(r.inventory.devices[1].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(r.inventory.devices[1].unhealthy_reason, UnhealthyReason::kUnexpectedDriver);
  EXPECT_EQ(r.inventory.devices[2].health, DeviceHealth::kHealthy);
  EXPECT_EQ(r.inventory.devices[2].unhealthy_reason, UnhealthyReason::kNone);
}

// Two functions with one serial (a dual-port drive, or firmware that does
// not tell drives apart): neither is offered, and the problem names both.
TEST(DiscoveryTest, FunctionsSharingASerialAreRefused) {
  FakeHost host;
  host.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme", .serial = "same"});
  host.kernel.AddDevice({.address = "0000:00:04.0", .group = 4, .driver = "nvme", .serial = "own"});
  host.kernel.AddDevice({.address = "0000:00:05.0", .group = 5, .driver = "nvme", .serial = "same"});
  // No serial (on vfio-pci): nothing to compare.
  host.kernel.AddDevice({.address = "0000:00:06.0", .group = 6, .driver = "vfio-pci"});
  host.kernel.AddDevice({.address = "0000:00:07.0", .group = 7, .driver = "vfio-pci"});
  ASSERT_OK_AND_ASSIGN(DiscoveryResult r, Discover(host.kernel, "n", {.classes = {NvmeClass()}}));
  RefuseSharedSerials(&r);
  ASSERT_EQ(r.inventory.devices.size(), 5u);
  EXPECT_EQ(r.inventory.devices[0].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(r.inventory.devices[0].unhealthy_reason, UnhealthyReason::kAmbiguousIdentity);
  EXPECT_EQ(r.inventory.devices[1].health, DeviceHealth::kHealthy);
  EXPECT_EQ(r.inventory.devices[2].health, DeviceHealth::kUnhealthy);
  EXPECT_EQ(r.inventory.devices[2].unhealthy_reason, UnhealthyReason::kAmbiguousIdentity);
  EXPECT_EQ(r.inventory.devices[3].health, DeviceHealth::kHealthy);
  EXPECT_EQ(r.inventory.devices[4].health, DeviceHealth::kHealthy);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_THAT(r.problems[0], ::testing::HasSubstr(
                                 "0000:00:03.0, 0000:00:05.0 report the same serial \"same\""));
}

TEST(DiscoveryTest, DeviceOnVfioHasNoSerialInSysfs) {
  FakeHost host;
  host.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "vfio-pci"});
  ASSERT_OK_AND_ASSIGN(DiscoveryResult r, Discover(host.kernel, "n", {.classes = {NvmeClass()}}));
  ASSERT_EQ(r.inventory.devices.size(), 1u);
  EXPECT_EQ(r.inventory.devices[0].driver, "vfio-pci");
  EXPECT_EQ(r.inventory.devices[0].serial, "");
}

TEST(DiscoveryTest, NamesThatAreNotPciAddressesAreRefusedAndReported) {
  FakeHost host;
  host.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
  std::filesystem::create_directories(host.kernel.sys_root() + "/bus/pci/devices/..evil");
  std::filesystem::create_directories(host.kernel.sys_root() + "/bus/pci/devices/0000:00:99.0");
  ASSERT_OK_AND_ASSIGN(DiscoveryResult r, Discover(host.kernel, "n", {.classes = {NvmeClass()}}));
  EXPECT_EQ(r.inventory.devices.size(), 1u);
  EXPECT_THAT(r.problems, ElementsAre(HasSubstr("..evil"), HasSubstr("0000:00:99.0")));
}

TEST(DiscoveryTest, DriverLinkOutsideTheRootIsAProblemNotATrustedName) {
  FakeHost host;
  host.kernel.AddDevice({.address = "0000:00:03.0", .group = 3});
  std::filesystem::create_symlink(host.tmp.path(),
                                  host.kernel.sys_root() + "/devices/pci0000:00/0000:00:03.0/driver");
  ASSERT_OK_AND_ASSIGN(DiscoveryResult r, Discover(host.kernel, "n", {.classes = {NvmeClass()}}));
  EXPECT_TRUE(r.inventory.devices.empty());
  EXPECT_THAT(r.problems, ElementsAre(HasSubstr("outside")));
}

// A controller that reports no serial is known by its first namespace's
// NGUID, else its EUI-64 (as the kernel prints them); with neither, by
// nothing (its address, in the allocator).
TEST(DiscoveryTest, ASerialLessControllerIsKnownByItsNamespaceIdentifier) {
  struct Case {
    const char* name;
    std::string serial, nguid, eui;
    std::string want;
  } cases[] = {
      {"serial wins", "S1", "01234567-89ab-cdef-0123-456789abcdef", "", "S1"},
      {"nguid", "", "01234567-89AB-cdef-0123-456789abcdef", "00 11 22 33 44 55 66 77",
       "nguid:0123456789abcdef0123456789abcdef"},
      {"eui", "", "", "00 11 22 33 44 55 66 77", "eui64:0011223344556677"},
      {"zero eui", "", "", "00 00 00 00 00 00 00 00", ""},
      {"short nguid, then eui", "", "0123", "00 11 22 33 44 55 66 77", "eui64:0011223344556677"},
      {"not hex", "", "", "00 11 22 33 44 55 66 zz", ""},
      {"nothing", "", "", "", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeHost host;
    host.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                           .serial = c.serial, .nguid = c.nguid, .eui = c.eui});
    ASSERT_OK_AND_ASSIGN(PciFunctionInfo i, ReadPciFunction(host.kernel, Addr("0000:00:03.0")));
    EXPECT_EQ(i.serial, c.want);
  }
}

TEST(DiscoveryTest, PciFunctionReadsOverrideAndController) {
  FakeHost host;
  host.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme", .serial = "s1"});
  ASSERT_OK_AND_ASSIGN(PciFunctionInfo i, ReadPciFunction(host.kernel, Addr("0000:00:03.0")));
  EXPECT_EQ(i.driver_override, "");
  EXPECT_EQ(i.nvme_controller, "nvme0");
  EXPECT_EQ(i.model, "QEMU NVMe Ctrl");
  EXPECT_EQ(i.capacity_bytes, uint64_t{1} << 30);  // One 1 GiB namespace.
  EXPECT_EQ(KindOf(i).name(), "nvme");
  EXPECT_FALSE(i.IsPciBridge());
  EXPECT_THAT(ReadPciFunction(host.kernel, Addr("0000:00:09.0")),
              pdc::testing::StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace pdc::driver
