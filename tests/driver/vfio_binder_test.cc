#include "driver/vfio_binder.h"

#include <filesystem>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

using pdc::testing::IsOk;
using pdc::testing::StatusIs;
using testing::Addr;
using testing::FakeHost;
using testing::AhciClass;
using testing::NvmeClass;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Device classes beside NVMe, each checked by the rule of its PCI class.
DeviceClass NicClass() { return {"example.com/nic", {{0x8086, 0x1521, std::nullopt}}, {}}; }
DeviceClass GpuClass() { return {"example.com/gpu", {{0x10de, 0x1eb8, std::nullopt}}, {"nvidia"}}; }

void AddAhci(testing::FakeKernel& k) {
  k.AddDriver({"ahci", {{0x8086, 0x2922}}, std::nullopt});
  k.AddDevice({.address = "0000:00:1f.2", .vendor = 0x8086, .device = 0x2922,
               .class_code = 0x010601, .group = 9, .driver = "ahci"});
  k.AddDisk("0000:00:1f.2", "sda", 2);
}
void AddNic(testing::FakeKernel& k) {
  k.AddDriver({"igb", {{0x8086, 0x1521}}, std::nullopt});
  k.AddDevice({.address = "0000:02:00.0", .vendor = 0x8086, .device = 0x1521,
               .class_code = 0x020000, .group = 10, .driver = "igb"});
}
void AddGpu(testing::FakeKernel& k, const std::string& driver) {
  k.AddDriver({driver, {{0x10de, 0x1eb8}}, std::nullopt});
  k.AddDevice({.address = "0000:03:00.0", .vendor = 0x10de, .device = 0x1eb8,
               .class_code = 0x030200, .group = 11, .driver = driver});
}

class VfioBinderTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  // A fresh journal object and binder over the same files: a restart.
  void Reopen() {
    binder_.reset();
    auto j = BindJournal::Open(host_.tmp.Join("vfio-journal"));
    ASSERT_TRUE(j.ok()) << j.status();
    journal_ = std::move(*j);
    BinderOptions options;
    DeviceClass nvme = NvmeClass();
    nvme.host_drivers = nvme_host_drivers_;
    options.classes = {nvme, AhciClass(), NicClass(), GpuClass()};
    options.verify_attempts = 3;
    options.clock = &clock_;
    binder_ = std::make_unique<VfioBinder>(&host_.kernel, &host_.dev, &host_.proc,
                                           journal_.get(), options);
  }

  std::string Driver(const std::string& a) {
    auto d = LinkName(host_.kernel, "bus/pci/devices/" + a + "/driver");
    return d.ok() ? *d : "";
  }
  std::string Override(const std::string& a) {
    auto o = ReadTrimmed(host_.kernel, "bus/pci/devices/" + a + "/driver_override");
    return o.ok() ? *o : "?";
  }
  bool VfioNode(int group) { return host_.dev.Exists("vfio/" + std::to_string(group)); }

  // Drivers other than nvme the NVMe class may take a device from.
  std::vector<std::string> nvme_host_drivers_;
  FakeHost host_;
  std::unique_ptr<BindJournal> journal_;
  std::unique_ptr<VfioBinder> binder_;
  pdc::testing::FakeClock clock_;
};

TEST_F(VfioBinderTest, BindsAndRestoresWithTheKernelsSequenceOfWrites) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 7, .driver = "nvme", .serial = "sn-a"});
  ASSERT_OK_AND_ASSIGN(BindOutcome out, binder_->Bind({Addr("0000:00:03.0")}));
  EXPECT_EQ(out, BindOutcome::kBound);
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  EXPECT_EQ(Override("0000:00:03.0"), "vfio-pci");
  EXPECT_TRUE(VfioNode(7));
  EXPECT_THAT(host_.kernel.writes(),
              ElementsAre("devices/pci0000:00/0000:00:03.0/driver_override <- vfio-pci",
                          "bus/pci/drivers/nvme/unbind <- 0000:00:03.0",
                          "bus/pci/drivers_probe <- 0000:00:03.0"));
  EXPECT_THAT(journal_->Entries(),
              ElementsAre(JournalEntry{Addr("0000:00:03.0"), JournalState::kBound, "nvme", "sn-a",
                                       "", "fr=1.0", ""}));

  ASSERT_OK_AND_ASSIGN(RestoreOutcome back, binder_->Restore(Addr("0000:00:03.0")));
  EXPECT_EQ(back, RestoreOutcome::kRestored);
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_EQ(Override("0000:00:03.0"), "(null)");
  EXPECT_FALSE(VfioNode(7));
  EXPECT_THAT(journal_->Entries(), IsEmpty());
  EXPECT_EQ(host_.kernel.writes().size(), 6u);
  EXPECT_EQ(host_.kernel.writes()[3], "devices/pci0000:00/0000:00:03.0/driver_override <- \\n");
  EXPECT_EQ(host_.kernel.writes()[4], "bus/pci/drivers/vfio-pci/unbind <- 0000:00:03.0");
  EXPECT_EQ(host_.kernel.writes()[5], "bus/pci/drivers_probe <- 0000:00:03.0");
}

TEST_F(VfioBinderTest, SecondBindAndSecondRestoreWriteNothing) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 7, .driver = "nvme"});
  ASSERT_OK(binder_->Bind({Addr("0000:00:03.0")}));
  const size_t writes = host_.kernel.writes().size();
  ASSERT_OK_AND_ASSIGN(BindOutcome again, binder_->Bind({Addr("0000:00:03.0")}));
  EXPECT_EQ(again, BindOutcome::kAlreadyBound);
  EXPECT_EQ(host_.kernel.writes().size(), writes);
  ASSERT_OK(binder_->Restore(Addr("0000:00:03.0")));
  const size_t after_restore = host_.kernel.writes().size();
  ASSERT_OK_AND_ASSIGN(RestoreOutcome again2, binder_->Restore(Addr("0000:00:03.0")));
  EXPECT_EQ(again2, RestoreOutcome::kAlreadyRestored);
  EXPECT_EQ(host_.kernel.writes().size(), after_restore);
}

TEST_F(VfioBinderTest, BindsADeviceWithNoDriverWithoutUnbinding) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 7});
  ASSERT_OK(binder_->Bind({Addr("0000:00:03.0")}));
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
  EXPECT_EQ(host_.kernel.writes().size(), 2u);  // override + probe
  ASSERT_OK(binder_->Restore(Addr("0000:00:03.0")));
  // Originally on no driver; the kernel's own choice (nvme) is fine.
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
}

struct RefusalCase {
  std::string name;
  std::function<void(testing::FakeKernel&)> setup;
  std::vector<std::string> bind;
  std::string reason;
  std::string message;
};

void PrintTo(const RefusalCase& c, std::ostream* os) { *os << c.name; }

class VfioBinderRefusalTest : public VfioBinderTest,
                              public ::testing::WithParamInterface<RefusalCase> {};

TEST_P(VfioBinderRefusalTest, RefusesBeforeAnyWrite) {
  const RefusalCase& c = GetParam();
  c.setup(host_.kernel);
  std::vector<PciAddress> addresses;
  for (const std::string& a : c.bind) addresses.push_back(Addr(a));
  auto out = binder_->Bind(addresses);
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.message)));
  EXPECT_EQ(FailureReason(out.status()), c.reason);
  EXPECT_THAT(host_.kernel.writes(), IsEmpty());
  EXPECT_THAT(journal_->Entries(), IsEmpty());
  EXPECT_THAT(binder_->CheckBindable(addresses), StatusIs(absl::StatusCode::kFailedPrecondition));
}

using K = testing::FakeKernel;
INSTANTIATE_TEST_SUITE_P(
    Safety, VfioBinderRefusalTest,
    ::testing::Values(
        RefusalCase{"UnmatchedClass",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .vendor = 0x8086, .device = 0x10d3,
                                   .class_code = 0x020000, .group = 3});
                    },
                    {"0000:00:03.0"}, "unmatched_class", "no configured device class matches"},
        RefusalCase{"NoIommuGroup",
                    [](K& k) { k.AddDevice({.address = "0000:00:03.0", .group = -1, .driver = "nvme"}); },
                    {"0000:00:03.0"}, "no_iommu_group", "no IOMMU group"},
        RefusalCase{"GroupWithAForeignDevice",
                    [](K& k) {
                      k.AddDevice({.address = "0000:01:00.0", .group = 4, .driver = "nvme"});
                      k.AddDevice({.address = "0000:01:01.0", .vendor = 0x8086, .device = 0x10d3,
                                   .class_code = 0x020000, .group = 4});
                    },
                    {"0000:01:00.0"}, "iommu_group_shared",
                    "0000:01:01.0 (8086:10d3 class 020000), which is neither an allowed device nor a PCI bridge"},
        RefusalCase{"PartOfAGroup",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:1e.0", .vendor = 0x1b36, .device = 0x000e,
                                   .class_code = 0x060400, .group = 4});
                      k.AddDevice({.address = "0000:01:00.0", .group = 4, .driver = "nvme", .serial = "a"});
                      k.AddDevice({.address = "0000:01:01.0", .group = 4, .driver = "nvme", .serial = "b"});
                    },
                    {"0000:01:00.0"}, "iommu_group_partial", "only part of IOMMU group 4"},
        RefusalCase{"MountedNamespace",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      k.AddMount(k.BlockDev("nvme0n1"), "/var/lib/data", "/dev/nvme0n1");
                    },
                    {"0000:00:03.0"}, "host_in_use", "nvme0n1 (259:0) is mounted at /var/lib/data"},
        RefusalCase{"MountedPartitionByNumberOnly",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                                   .partitions = 2});
                      k.AddMount(k.BlockDev("nvme0n1p2"), "/boot", "/dev/root");
                    },
                    {"0000:00:03.0"}, "host_in_use", "nvme0n1p2 (259:2) is mounted at /boot"},
        RefusalCase{"MountedByNameWithAnonymousDevice",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                                   .partitions = 1});
                      k.AddMount("0:45", "/srv/my\\040data", "/dev/nvme0n1p1");  // btrfs
                    },
                    {"0000:00:03.0"}, "host_in_use", "is mounted at /srv/my data"},
        RefusalCase{"Swap",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                                   .partitions = 1});
                      k.AddSwap("/dev/nvme0n1p1");
                    },
                    {"0000:00:03.0"}, "host_in_use", "nvme0n1p1 is used as swap"},
        RefusalCase{"HolderOnNamespace",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      k.AddHolder("nvme0n1", "md0");
                    },
                    {"0000:00:03.0"}, "host_in_use", "nvme0n1 is held by md0"},
        RefusalCase{"HolderOnPartition",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                                   .partitions = 3});
                      k.AddHolder("nvme0n1p3", "dm-0");
                    },
                    {"0000:00:03.0"}, "host_in_use", "nvme0n1p3 is held by dm-0"},
        RefusalCase{"NamespaceOpenInAProcess",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      k.AddProcess(4242, "postgres", {"nvme0n1"});
                    },
                    {"0000:00:03.0"}, "host_in_use", "nvme0n1 is open in process 4242 (postgres)"},
        RefusalCase{"PartitionOpenInAProcess",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                                   .partitions = 2});
                      k.AddProcess(17, "ceph-osd", {"vfio/3", "nvme0n1p2"});
                    },
                    {"0000:00:03.0"}, "host_in_use", "nvme0n1p2 is open in process 17 (ceph-osd)"},
        RefusalCase{"NamespaceBusy",  // ZFS, a lazily unmounted file system, O_EXCL openers.
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      k.MarkBusy("nvme0n1");
                    },
                    {"0000:00:03.0"}, "host_in_use",
                    "/dev/nvme0n1 (259:0) is in use by the host (mounted, swap, RAID/LVM member, "
                    "ZFS or held open exclusively)"},
        RefusalCase{"PartitionBusy",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                                   .partitions = 2});
                      k.MarkBusy("nvme0n1p2");
                    },
                    {"0000:00:03.0"}, "host_in_use", "/dev/nvme0n1p2 (259:2) is in use by the host"},
        RefusalCase{"LoopDeviceOverTheNamespace",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      k.AddLoop("loop0", "/var/lib/images/disk.img");
                      k.AddLoop("loop1", "/dev/nvme0n1");
                    },
                    {"0000:00:03.0"}, "host_in_use", "nvme0n1 backs loop device loop1"},
        RefusalCase{"LoopDeviceOverAFileOnAPartition",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                                   .partitions = 2});
                      k.AddMount("8:1", "/", "/dev/sda1");
                      k.AddMount(k.BlockDev("nvme0n1p2"), "/var/lib/images", "/dev/nvme0n1p2");
                      k.AddLoop("loop4", "/var/lib/images/vm/disk.img (deleted)");
                    },
                    {"0000:00:03.0"}, "host_in_use",
                    "nvme0n1p2 (259:2) holds /var/lib/images/vm/disk.img, the backing file of "
                    "loop device loop4 (mounted at /var/lib/images)"},
        RefusalCase{"MountTableUnreadableFailsClosed",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      std::filesystem::remove(k.proc_root() + "/self/mountinfo");
                    },
                    {"0000:00:03.0"}, "host_in_use", "cannot check the host's mounts"},
        RefusalCase{"SwapsUnreadableFailsClosed",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      std::filesystem::remove(k.proc_root() + "/swaps");
                    },
                    {"0000:00:03.0"}, "host_in_use", "cannot check the host's swap devices"},
        RefusalCase{"LoopBackingUnreadableFailsClosed",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      k.AddLoop("loop0", "/x");
                      std::filesystem::create_directories(
                          k.sys_root() + "/devices/virtual/block/loop0/loop/backing_file.d");
                      std::filesystem::remove(k.sys_root() +
                                              "/devices/virtual/block/loop0/loop/backing_file");
                      std::filesystem::rename(
                          k.sys_root() + "/devices/virtual/block/loop0/loop/backing_file.d",
                          k.sys_root() + "/devices/virtual/block/loop0/loop/backing_file");
                    },
                    {"0000:00:03.0"}, "host_in_use", "cannot check loop device loop0"},
        RefusalCase{"DeviceNumberMissingFailsClosed",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      std::filesystem::remove(
                          std::filesystem::canonical(k.sys_root() + "/class/block/nvme0n1") / "dev");
                    },
                    {"0000:00:03.0"}, "host_in_use", "cannot check block device nvme0n1"},
        RefusalCase{"NicWithoutAVisibleInterfaceFailsClosed",  // Moved into a pod's netns.
                    [](K& k) { AddNic(k); },
                    {"0000:02:00.0"}, "host_in_use",
                    "it is on igb but no network interface of it is visible in the host's "
                    "network namespace"},
        RefusalCase{"NicCarrierUnreadableFailsClosed",
                    [](K& k) {
                      AddNic(k);
                      k.AddInterface("0000:02:00.0", "enp2s0", 0x1002, "");
                      std::filesystem::remove(k.sys_root() + "/class/net/enp2s0/flags");
                    },
                    {"0000:02:00.0"}, "host_in_use", "cannot check interface enp2s0"},
        RefusalCase{"HoldersUnreadableFailsClosed",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      std::filesystem::remove_all(
                          std::filesystem::canonical(k.sys_root() + "/class/block/nvme0n1") /
                          "holders");
                    },
                    {"0000:00:03.0"}, "host_in_use",
                    "cannot tell whether the host uses it: FAILED_PRECONDITION: cannot check the "
                    "holders of nvme0n1"},
        RefusalCase{"DeviceNodeMissingFailsClosed",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      std::filesystem::remove(k.dev_root() + "/nvme0n1");
                    },
                    {"0000:00:03.0"}, "host_in_use",
                    "cannot check nvme0n1 (open /dev/nvme0n1 exclusively; is the host's /dev mounted?)"},
        RefusalCase{"NvmeControllerMissingFailsClosed",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      std::filesystem::remove_all(k.sys_root() +
                                                  "/devices/pci0000:00/0000:00:03.0/nvme");
                    },
                    {"0000:00:03.0"}, "host_in_use", "is on nvme but sysfs shows no controller"},
        RefusalCase{"AhciDiskMounted",
                    [](K& k) {
                      AddAhci(k);
                      k.AddMount(k.BlockDev("sda1"), "/", "/dev/sda1");
                    },
                    {"0000:00:1f.2"}, "host_in_use", "sda1 (8:1) is mounted at /"},
        RefusalCase{"AhciDiskHeld",
                    [](K& k) {
                      AddAhci(k);
                      k.AddHolder("sda2", "dm-3");
                    },
                    {"0000:00:1f.2"}, "host_in_use", "sda2 is held by dm-3"},
        RefusalCase{"NicInterfaceUp",
                    [](K& k) {
                      AddNic(k);
                      k.AddInterface("0000:02:00.0", "enp2s0", 0x1003, "");
                    },
                    {"0000:02:00.0"}, "host_in_use", "interface enp2s0 is up"},
        RefusalCase{"NicInterfaceInABond",
                    [](K& k) {
                      AddNic(k);
                      k.AddInterface("0000:02:00.0", "enp2s0", 0x1002, "bond0");
                    },
                    {"0000:02:00.0"}, "host_in_use", "interface enp2s0 is part of bond0"},
        RefusalCase{"GpuOnAHostDriverTheClassDoesNotList",
                    [](K& k) { AddGpu(k, "nouveau"); },
                    {"0000:03:00.0"}, "host_in_use",
                    "bound to the host driver nouveau, which device class example.com/gpu does "
                    "not list in hostDrivers"},
        RefusalCase{"TakeOverOfAGroupAProcessHolds",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "vfio-pci"});
                      k.AddProcess(77, "qemu-kvm", {"vfio/3"});
                    },
                    {"0000:00:03.0"}, "not_bound_by_pdc",
                    "it is on vfio-pci but pdc did not bind it (no bind-journal entry)"},
        RefusalCase{"TakeOverOfAFreeGroup",  // Free now; its owner may open it any time.
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "vfio-pci"});
                    },
                    {"0000:00:03.0"}, "not_bound_by_pdc",
                    "it is on vfio-pci but pdc did not bind it (no bind-journal entry)"},
        RefusalCase{"VfioPciNotLoaded",
                    [](K& k) {
                      k.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
                      k.RemoveDriver("vfio-pci");
                    },
                    {"0000:00:03.0"}, "vfio_pci_missing", "modprobe vfio-pci"}),
    [](const ::testing::TestParamInfo<RefusalCase>& info) { return info.param.name; });

TEST_F(VfioBinderTest, HoldsTheDisksExclusivelyUntilTheUnbindIsDone) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                          .namespaces = 2, .partitions = 1});
  ASSERT_OK_AND_ASSIGN(BindOutcome out, binder_->Bind({Addr("0000:00:03.0")}));
  EXPECT_EQ(out, BindOutcome::kBound);
  ASSERT_EQ(host_.kernel.open_at_unbind().size(), 1u);
  // Whole disks only: the kernel refuses a partition of a disk another open
  // file holds (bd_may_claim), and the disk's hold covers its partitions.
  EXPECT_THAT(host_.kernel.open_at_unbind()[0], ElementsAre("nvme0n1", "nvme0n2"));
  EXPECT_THAT(host_.kernel.OpenDevNodes(), IsEmpty()) << "released once bound";
}

TEST_F(VfioBinderTest, CheckBindableHoldsNothing) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
  ASSERT_OK(binder_->CheckBindable({Addr("0000:00:03.0")}));
  EXPECT_THAT(host_.kernel.OpenDevNodes(), IsEmpty());
}

TEST_F(VfioBinderTest, RefusalReleasesWhatItOpened) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme",
                          .partitions = 2});
  host_.kernel.MarkBusy("nvme0n1p2");
  EXPECT_THAT(binder_->Bind({Addr("0000:00:03.0")}), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(host_.kernel.OpenDevNodes(), IsEmpty());
}

TEST_F(VfioBinderTest, OtherClassesBindWhenTheHostDoesNotUseThem) {
  AddAhci(host_.kernel);
  AddNic(host_.kernel);
  host_.kernel.AddInterface("0000:02:00.0", "enp2s0", 0x1002, "");  // Down, no master.
  AddGpu(host_.kernel, "nvidia");
  host_.kernel.AddProcess(99, "bash", {"nvme9n9"});  // Opens nothing of ours.
  EXPECT_THAT(binder_->Bind({Addr("0000:00:1f.2")}), IsOk());
  EXPECT_THAT(binder_->Bind({Addr("0000:02:00.0")}), IsOk());
  EXPECT_THAT(binder_->Bind({Addr("0000:03:00.0")}), IsOk());
  EXPECT_EQ(Driver("0000:00:1f.2"), "vfio-pci");
  EXPECT_EQ(Driver("0000:02:00.0"), "vfio-pci");
  EXPECT_EQ(Driver("0000:03:00.0"), "vfio-pci");
}

TEST_F(VfioBinderTest, OwnDeviceStaysBoundWhileItsVmHoldsTheGroup) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
  ASSERT_OK(binder_->Bind({Addr("0000:00:03.0")}));
  host_.kernel.AddProcess(77, "qemu-kvm", {"vfio/3"});
  ASSERT_OK_AND_ASSIGN(BindOutcome again, binder_->Bind({Addr("0000:00:03.0")}));
  EXPECT_EQ(again, BindOutcome::kAlreadyBound);
}

// A device on vfio-pci pdc did not bind was bound by someone who may use it:
// never adopted, free group or not, and nothing journaled.
TEST_F(VfioBinderTest, NeverAdoptsADeviceOnVfioPciItDidNotBind) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "vfio-pci"});
  auto out = binder_->Bind({Addr("0000:00:03.0")});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kFailedPrecondition,
                            HasSubstr("pdc did not bind it")));
  EXPECT_EQ(FailureReason(out.status()), "not_bound_by_pdc");
  EXPECT_THAT(journal_->Entries(), IsEmpty());
  EXPECT_THAT(host_.kernel.OpenDevNodes(), IsEmpty());
}

TEST_F(VfioBinderTest, LoopDeviceOverAFileOnAnotherDiskDoesNotBlock) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme", .partitions = 1});
  host_.kernel.AddMount("8:1", "/", "/dev/sda1");
  host_.kernel.AddMount("8:2", "/var/lib/images", "/dev/sda2");
  // "/var/lib/images2" is not below "/var/lib/images": the file is on "/".
  host_.kernel.AddLoop("loop0", "/var/lib/images/disk.img");
  host_.kernel.AddLoop("loop1", "/var/lib/images2/disk.img");
  EXPECT_THAT(binder_->Bind({Addr("0000:00:03.0")}), IsOk());
}

TEST_F(VfioBinderTest, HostUsesNamesEachUsedDeviceAndHoldsNothing) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme", .serial = "a"});
  host_.kernel.AddDevice({.address = "0000:00:04.0", .group = 4, .driver = "nvme", .serial = "b"});
  host_.kernel.AddDevice({.address = "0000:00:05.0", .group = 5, .driver = "nvme", .serial = "c"});
  host_.kernel.AddDevice({.address = "0000:00:06.0", .group = 6, .driver = "vfio-pci"});
  AddNic(host_.kernel);
  host_.kernel.AddInterface("0000:02:00.0", "enp2s0", 0x1003, "");
  AddGpu(host_.kernel, "nvidia");
  host_.kernel.MarkBusy("nvme1n1");  // A ZFS pool, say.
  std::filesystem::remove(host_.kernel.dev_root() + "/nvme2n1");
  const auto used = binder_->HostUses({Addr("0000:00:03.0"), Addr("0000:00:04.0"),
                                       Addr("0000:00:05.0"), Addr("0000:00:06.0"),
                                       Addr("0000:02:00.0"), Addr("0000:03:00.0"),
                                       Addr("0000:09:00.0")});
  std::vector<std::string> got;
  for (const auto& [a, why] : used) got.push_back(a.ToString() + " " + why);
  EXPECT_THAT(got, ElementsAre(HasSubstr("0000:00:04.0 the host uses it: /dev/nvme1n1 (259:1) is "
                                         "in use by the host"),
                               HasSubstr("0000:00:05.0 cannot tell whether the host uses it: "
                                         "FAILED_PRECONDITION: cannot check nvme2n1"),
                               "0000:02:00.0 the host uses it: interface enp2s0 is up"));
  EXPECT_THAT(host_.kernel.OpenDevNodes(), IsEmpty());
}

TEST_F(VfioBinderTest, MountOfAnotherDiskDoesNotBlock) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme", .serial = "a"});
  host_.kernel.AddDevice({.address = "0000:00:04.0", .group = 4, .driver = "nvme", .serial = "b"});
  host_.kernel.AddMount(host_.kernel.BlockDev("nvme1n1"), "/", "/dev/nvme1n1");
  EXPECT_THAT(binder_->Bind({Addr("0000:00:04.0")}), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(binder_->Bind({Addr("0000:00:03.0")}), IsOk());
}

TEST_F(VfioBinderTest, BindsAWholeGroupBehindABridgeTogether) {
  host_.kernel.AddDevice({.address = "0000:00:1e.0", .vendor = 0x1b36, .device = 0x000e,
                          .class_code = 0x060400, .group = 4});
  host_.kernel.AddDevice({.address = "0000:01:00.0", .group = 4, .driver = "nvme", .serial = "a"});
  host_.kernel.AddDevice({.address = "0000:01:01.0", .group = 4, .driver = "nvme", .serial = "b"});
  ASSERT_OK(binder_->Bind({Addr("0000:01:01.0"), Addr("0000:01:00.0")}));
  EXPECT_EQ(Driver("0000:01:00.0"), "vfio-pci");
  EXPECT_EQ(Driver("0000:01:01.0"), "vfio-pci");
  EXPECT_EQ(Driver("0000:00:1e.0"), "");  // The bridge is never touched.
  EXPECT_TRUE(VfioNode(4));
  ASSERT_OK(binder_->Restore(Addr("0000:01:00.0")));
  EXPECT_TRUE(VfioNode(4));  // Still used by 01:01.0.
  ASSERT_OK(binder_->Restore(Addr("0000:01:01.0")));
  EXPECT_FALSE(VfioNode(4));
}

TEST_F(VfioBinderTest, FailedProbeIsDetectedAndTheDeviceGivenBack) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
  host_.kernel.FailProbe("0000:00:03.0", "vfio-pci");
  auto out = binder_->Bind({Addr("0000:00:03.0")});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kUnavailable,
                            HasSubstr("after the probe its driver is \"\" (see the kernel log); device "
                                      "given back to nvme")));
  EXPECT_EQ(FailureReason(out.status()), "probe_failed");
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_EQ(Override("0000:00:03.0"), "(null)");
  EXPECT_THAT(journal_->Entries(), IsEmpty());
  EXPECT_GT(clock_.sleeps(), 0);  // It waited for the kernel before giving up.
}

TEST_F(VfioBinderTest, GroupIsAllOrNothing) {
  host_.kernel.AddDevice({.address = "0000:01:00.0", .group = 4, .driver = "nvme", .serial = "a"});
  host_.kernel.AddDevice({.address = "0000:01:01.0", .group = 4, .driver = "nvme", .serial = "b"});
  host_.kernel.FailProbe("0000:01:01.0", "vfio-pci");
  EXPECT_THAT(binder_->Bind({Addr("0000:01:00.0"), Addr("0000:01:01.0")}),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(Driver("0000:01:00.0"), "nvme");
  EXPECT_EQ(Driver("0000:01:01.0"), "nvme");
  EXPECT_FALSE(VfioNode(4));
  EXPECT_THAT(journal_->Entries(), IsEmpty());
}

TEST_F(VfioBinderTest, FailedSysfsWriteIsRolledBack) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
  host_.kernel.FailWrite("drivers_probe");
  auto out = binder_->Bind({Addr("0000:00:03.0")});
  EXPECT_FALSE(out.ok());
  EXPECT_EQ(FailureReason(out.status()), "sysfs_error");
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_THAT(journal_->Entries(), IsEmpty());
}

TEST_F(VfioBinderTest, JournalSurvivesARestartAndRestoreUsesIt) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .vendor = 0x8086, .device = 0x5845,
                          .group = 3, .driver = "nvme", .serial = "x"});
  host_.kernel.AddDriver({"vendor-nvme", {{0x8086, 0x5845}}, std::nullopt});
  // Move it to a vendor driver first, the way a host might have it (one the
  // class allows taking from: a storage function on any driver but nvme is
  // refused otherwise, since its users cannot be seen).
  ASSERT_OK(host_.kernel.Write("bus/pci/drivers/nvme/unbind", "0000:00:03.0"));
  ASSERT_OK(host_.kernel.Write("bus/pci/drivers/vendor-nvme/bind", "0000:00:03.0"));
  nvme_host_drivers_ = {"vendor-nvme"};
  Reopen();
  ASSERT_OK(binder_->Bind({Addr("0000:00:03.0")}));
  Reopen();
  ASSERT_TRUE(journal_->Get(Addr("0000:00:03.0")).has_value());
  EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->original_driver, "vendor-nvme");
  // Both drivers match after the override is cleared; without the journal
  // the kernel's first choice (nvme) would not be what the host had.
  auto out = binder_->Restore(Addr("0000:00:03.0"));
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("back to vendor-nvme")));
  EXPECT_EQ(FailureReason(out.status()), "restore_failed");
  ASSERT_TRUE(journal_->Get(Addr("0000:00:03.0")).has_value());
  EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->state, JournalState::kRestoring);
}

TEST_F(VfioBinderTest, RecoverFinishesABindThatReachedVfio) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "vfio-pci"});
  ASSERT_OK(journal_->Put({Addr("0000:00:03.0"), JournalState::kBinding, "nvme", "s"}));
  ASSERT_OK(binder_->Recover());
  EXPECT_EQ(journal_->Get(Addr("0000:00:03.0"))->state, JournalState::kBound);
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
}

TEST_F(VfioBinderTest, RecoverRollsBackABindCutShortAfterUnbind) {
  // The crash came after driver_override and unbind, before the probe.
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "nvme"});
  ASSERT_OK(journal_->Put({Addr("0000:00:03.0"), JournalState::kBinding, "nvme", "s"}));
  ASSERT_OK(host_.kernel.Write("bus/pci/devices/0000:00:03.0/driver_override", "vfio-pci"));
  ASSERT_OK(host_.kernel.Write("bus/pci/drivers/nvme/unbind", "0000:00:03.0"));
  Reopen();
  ASSERT_OK(binder_->Recover());
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_EQ(Override("0000:00:03.0"), "(null)");
  EXPECT_THAT(journal_->Entries(), IsEmpty());
}

TEST_F(VfioBinderTest, RecoverFinishesAnInterruptedRestore) {
  // The crash came after clearing the override and unbinding from vfio-pci.
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3});
  ASSERT_OK(journal_->Put({Addr("0000:00:03.0"), JournalState::kRestoring, "nvme", "s"}));
  ASSERT_OK(binder_->Recover());
  EXPECT_EQ(Driver("0000:00:03.0"), "nvme");
  EXPECT_THAT(journal_->Entries(), IsEmpty());
}

TEST_F(VfioBinderTest, RecoverKeepsBoundDevicesAndReportsMissingOnes) {
  host_.kernel.AddDevice({.address = "0000:00:03.0", .group = 3, .driver = "vfio-pci"});
  ASSERT_OK(journal_->Put({Addr("0000:00:03.0"), JournalState::kBound, "nvme", "s"}));
  ASSERT_OK(journal_->Put({Addr("0000:00:09.0"), JournalState::kBinding, "nvme", "t"}));
  EXPECT_THAT(binder_->Recover(), StatusIs(absl::StatusCode::kNotFound, HasSubstr("0000:00:09.0")));
  EXPECT_EQ(journal_->Entries().size(), 2u);
  EXPECT_EQ(Driver("0000:00:03.0"), "vfio-pci");
}

TEST_F(VfioBinderTest, MissingDeviceIsNotFound) {
  auto out = binder_->Bind({Addr("0000:00:09.0")});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(FailureReason(out.status()), "device_not_found");
}

}  // namespace
}  // namespace pdc::driver
