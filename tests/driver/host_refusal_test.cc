// What the host-use check refuses beyond open block devices, through the
// binder over the fake kernel: storage functions on drivers that create no
// block devices, SR-IOV and shared NVMe controllers, character-device
// openers, the kernel NVMe-oF target, idle on-disk signatures, devices on
// vfio-pci pdc did not bind; and the exclusive-open rule of the kernel
// (docs/design.md §7).
#include <filesystem>
#include <fstream>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "driver/device_kind.h"
#include "driver/nvme_erase.h"
#include "driver/vfio_binder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver {
namespace {

namespace fs = std::filesystem;
using pdc::testing::IsOk;
using pdc::testing::StatusIs;
using testing::Addr;
using testing::FakeHost;
using testing::FakeKernel;
using testing::AhciClass;
using testing::NvmeClass;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kRefused[] = "0000:00:03.0";

void Write(const std::string& path, const std::string& data, uint64_t offset = 0) {
  fs::create_directories(fs::path(path).parent_path());
  if (!fs::exists(path)) std::ofstream(path) << "";
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// Identify data with CMIC (controller, byte 76) and NMIC (namespace, byte 30)
// as a controller reports them (NVMe Base Specification, Identify
// Controller and Identify Namespace data structures).
class SharedNvmeAdmin : public NvmeAdmin {
 public:
  bool Present(std::string_view) override { return true; }
  absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> Open(std::string_view controller,
                                                         std::string_view) override {
    return std::make_unique<Channel>(this, std::string(controller));
  }
  uint8_t cmic = 0;
  uint8_t nmic = 0;
  absl::Status fail;
  std::vector<std::string> commands;

 private:
  class Channel : public NvmeAdminChannel {
   public:
    Channel(SharedNvmeAdmin* admin, std::string controller)
        : admin_(admin), controller_(std::move(controller)) {}
    absl::StatusOr<uint16_t> Run(const NvmeAdminCommand& cmd, std::span<uint8_t> data) override {
      admin_->commands.push_back(controller_ + " cns " + std::to_string(cmd.cdw10 & 0xff) +
                                 " nsid " + std::to_string(cmd.nsid));
      if (!admin_->fail.ok()) return admin_->fail;
      std::fill(data.begin(), data.end(), 0);
      if (cmd.opcode != kNvmeAdminIdentify) return uint16_t{0x4001};
      if ((cmd.cdw10 & 0xff) == 1) data[76] = admin_->cmic;
      if ((cmd.cdw10 & 0xff) == 0) data[30] = admin_->nmic;
      return uint16_t{0};
    }
    absl::StatusOr<uint16_t> RunIo(const NvmeAdminCommand&, std::span<uint8_t>) override {
      return absl::UnimplementedError("no I/O here");
    }

   private:
    SharedNvmeAdmin* const admin_;
    const std::string controller_;
  };
};

struct Case {
  std::string name;
  std::function<void(FakeKernel&)> setup;
  std::string reason;  // "" = binds.
  std::string message;
  std::vector<DeviceClass> classes = {NvmeClass(), AhciClass()};
  std::string address = kRefused;
};

class HostRefusalTest : public ::testing::TestWithParam<Case> {};

TEST_P(HostRefusalTest, BindRefusesWithAReasonOrBinds) {
  const Case& c = GetParam();
  FakeHost host;
  host.kernel.AddDriver({"uio_pci_generic", {}, std::nullopt});
  host.kernel.AddDriver({"pci-stub", {}, std::nullopt});
  host.kernel.AddDriver({"ahci", {{0x8086, 0x2922}}, std::nullopt});
  c.setup(host.kernel);
  auto journal = BindJournal::Open(host.tmp.Join("journal"));
  ASSERT_OK(journal.status());
  pdc::testing::FakeClock clock;
  BinderOptions o;
  o.classes = c.classes;
  o.verify_attempts = 2;
  o.clock = &clock;
  VfioBinder binder(&host.kernel, &host.dev, &host.proc, journal->get(), o);
  auto out = binder.Bind({Addr(c.address)});
  if (c.reason.empty()) {
    EXPECT_THAT(out, IsOk());
  } else {
    EXPECT_THAT(out, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(c.message)));
    EXPECT_EQ(FailureReason(out.status()), c.reason);
    // The inventory's check says the same, for a device on a host driver.
    auto d = LinkName(host.kernel, std::string("bus/pci/devices/") + c.address + "/driver");
    if (d.ok() && *d != "vfio-pci") {
      auto used = binder.HostUses({Addr(c.address)});
      ASSERT_EQ(used.size(), 1u);
      EXPECT_THAT(used.begin()->second, HasSubstr(c.message));
    }
  }
  EXPECT_THAT(host.kernel.OpenDevNodes(), IsEmpty());
}

using K = FakeKernel;
INSTANTIATE_TEST_SUITE_P(
    Cases, HostRefusalTest,
    ::testing::Values(
        // Storage on a driver that creates no block devices.
        Case{"NvmeOnUioPciGeneric",
             [](K& k) { k.AddDevice({.address = kRefused, .group = 3, .driver = "uio_pci_generic"}); },
             "host_in_use", "it is bound to uio_pci_generic, not to nvme"},
        Case{"NvmeOnPciStub",
             [](K& k) { k.AddDevice({.address = kRefused, .group = 3, .driver = "pci-stub"}); },
             "host_in_use", "it is bound to pci-stub, not to nvme"},
        Case{"NvmeOnAListedDriver",
             [](K& k) { k.AddDevice({.address = kRefused, .group = 3, .driver = "uio_pci_generic"}); },
             "", "",
             {DeviceClass{"devices.kubevirt.io/nvme", {{0x1b36, 0x0010, std::nullopt}},
                          {"uio_pci_generic"}}}},
        Case{"AhciOnUio",
             [](K& k) {
               k.AddDevice({.address = "0000:00:1f.2", .vendor = 0x8086, .device = 0x2922,
                            .class_code = 0x010601, .group = 9, .driver = "uio_pci_generic"});
             },
             "host_in_use", "uio_pci_generic, which is not a block driver",
             {NvmeClass(), AhciClass()}, "0000:00:1f.2"},
        Case{"NvmeOnNoDriverBinds",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = ""});
               k.AddProcess(99, "bash", {});
               Write(k.proc_root() + "/99/maps",
                     "7f00-7f01 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n");
             },
             "", ""},
        Case{"NvmeOnNoDriverMappedByAProcess",  // A userspace driver through sysfs BARs.
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = ""});
               k.AddProcess(4711, "pcimem", {});
               Write(k.proc_root() + "/4711/maps",
                     "7f00-7f01 rw-s 00000000 00:15 77 "
                     "/sys/devices/pci0000:00/0000:00:03.0/resource0\n");
             },
             "host_in_use", "it is on no driver, but process 4711 (pcimem) maps resource0 of it"},
        // SR-IOV.
        Case{"PhysicalFunctionWithVirtualFunctions",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
               Write(k.sys_root() + "/bus/pci/devices/0000:00:03.0/sriov_numvfs", "2\n");
             },
             "host_in_use", "SR-IOV physical function with 2 virtual function(s) enabled"},
        Case{"PhysicalFunctionWithNoVirtualFunctionEnabled",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
               Write(k.sys_root() + "/bus/pci/devices/0000:00:03.0/sriov_numvfs", "0\n");
             },
             "", ""},
        Case{"VirtualFunctionOfAStorageController",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .serial = "pf"});
               k.AddDevice({.address = "0000:00:03.1", .group = 4, .driver = "nvme", .serial = "vf"});
               fs::create_directory_symlink("../0000:00:03.0",
                                            k.sys_root() + "/devices/pci0000:00/0000:00:03.1/physfn");
             },
             "host_in_use", "SR-IOV virtual function of 0000:00:03.0 (nvme)",
             {NvmeClass()}, "0000:00:03.1"},
        // Shared NVMe subsystems, by sysfs.
        Case{"SubsystemWithTwoControllersOnThisHost",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .serial = "a"});
               for (const char* c : {"nvme0", "nvme1", "nvme0n1"}) {
                 fs::create_directories(k.sys_root() + "/class/nvme-subsystem/nvme-subsys0/" + c);
               }
             },
             "host_in_use", "subsystem nvme-subsys0 has 2 controllers on this host (nvme0, nvme1)"},
        // Users the block devices do not show.
        Case{"ControllerCharacterDeviceOpen",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
               k.AddProcess(5150, "nvme", {"nvme0"});
             },
             "host_in_use", "/dev/nvme0 is open in process 5150 (nvme)"},
        Case{"GenericNamespaceDeviceOpen",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .namespaces = 2});
               k.AddProcess(77, "fio", {"ng0n2"});
             },
             "host_in_use", "/dev/ng0n2 is open in process 77 (fio)"},
        Case{"ExportedByTheNvmeOfTarget",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
               Write(k.sys_root() +
                         "/kernel/config/nvmet/subsystems/nqn.2014-08.org.example:t/namespaces/1/"
                         "device_path",
                     "/dev/nvme0n1\n");
             },
             "host_in_use",
             "nvme0n1 is exported by the kernel NVMe-oF target (subsystem "
             "nqn.2014-08.org.example:t namespace 1)"},
        Case{"TargetExportOfAnotherDisk",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
               Write(k.sys_root() + "/kernel/config/nvmet/subsystems/t/namespaces/1/device_path",
                     "/dev/sda\n");
             },
             "", ""},
        // Idle ownership: signatures at their documented offsets.
        Case{"UnassembledMdMember",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
               Write(k.dev_root() + "/nvme0n1", std::string("\xfc\x4e\x2b\xa9", 4), 4096);
             },
             "host_in_use", "/dev/nvme0n1 holds an md RAID member (superblock 1.2)"},
        Case{"LvmPhysicalVolumeOnAPartition",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .partitions = 2});
               Write(k.dev_root() + "/nvme0n1p2", "LABELONE", 512);
             },
             "host_in_use", "/dev/nvme0n1p2 holds an LVM2 physical volume"},
        Case{"ExportedZfsPool",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
               Write(k.dev_root() + "/nvme0n1", std::string("\x0c\xb1\xba\x00", 4), 128 * 1024 + 3072);
             },
             "host_in_use", "holds a ZFS pool member"},
        Case{"StoppedCephOsd",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
               Write(k.dev_root() + "/nvme0n1", "bluestore block device\n", 0);
             },
             "host_in_use", "holds a Ceph BlueStore OSD"},
        Case{"UnmountedFileSystem",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .partitions = 1});
               Write(k.dev_root() + "/nvme0n1p1", std::string("\x53\xef", 2), 1080);
             },
             "host_in_use", "/dev/nvme0n1p1 holds an ext2/3/4 file system"},
        Case{"ZerosAreNoSignature",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .partitions = 1});
               Write(k.dev_root() + "/nvme0n1", std::string(300 * 1024, '\0'));
             },
             "", ""},
        // A device on vfio-pci pdc did not bind.
        Case{"OnVfioPciWithoutAJournalEntry",
             [](K& k) { k.AddDevice({.address = kRefused, .group = 3, .driver = "vfio-pci"}); },
             "not_bound_by_pdc", "it is on vfio-pci but pdc did not bind it"},
        // The kernel's holder rule: a partitioned drive binds.
        Case{"PartitionedDriveBinds",
             [](K& k) {
               k.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .namespaces = 2,
                            .partitions = 3});
             },
             "", ""}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

class HostRefusalFixture : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    binder_.reset();
    auto j = BindJournal::Open(host_.tmp.Join("journal"));
    ASSERT_OK(j.status());
    journal_ = std::move(*j);
    BinderOptions o;
    o.classes = {NvmeClass()};
    o.verify_attempts = 2;
    o.clock = &clock_;
    o.nvme_admin = &admin_;
    o.policy = policy_;
    binder_ = std::make_unique<VfioBinder>(&host_.kernel, &host_.dev, &host_.proc, journal_.get(), o);
  }
  FakeHost host_;
  pdc::testing::FakeClock clock_;
  SharedNvmeAdmin admin_;
  HostUsePolicy policy_;
  std::unique_ptr<BindJournal> journal_;
  std::unique_ptr<VfioBinder> binder_;
};

TEST_F(HostRefusalFixture, SharedControllersAreRefusedUnlessAllowed) {
  host_.kernel.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .namespaces = 2});
  struct {
    uint8_t cmic, nmic;
    bool allow;
    std::string message;  // "" = binds.
  } cases[] = {
      {0, 0, false, ""},
      {0x1, 0, false, "nvme0 reports CMIC 1 (more than one port)"},
      {0x2, 0, false, "nvme0 reports CMIC 2 (more than one controller)"},
      {0x4, 0, false, "it is an SR-IOV virtual function"},
      {0, 1, false, "namespace 1 (nvme0n1) reports NMIC 1"},
      {0x3, 1, true, ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.cmic, "/", c.nmic, "/", c.allow));
    admin_.cmic = c.cmic;
    admin_.nmic = c.nmic;
    policy_.allow_shared_nvme = c.allow;
    Reopen();
    auto used = binder_->HostUses({Addr(kRefused)});
    if (c.message.empty()) {
      EXPECT_THAT(used, IsEmpty());
    } else {
      ASSERT_EQ(used.size(), 1u);
      EXPECT_THAT(used.begin()->second, HasSubstr(c.message));
      EXPECT_THAT(binder_->Bind({Addr(kRefused)}), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                      HasSubstr(c.message)));
    }
  }
}

TEST_F(HostRefusalFixture, AnIdentifyThatFailsFailsClosed) {
  host_.kernel.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
  admin_.fail = absl::UnavailableError("open /dev/nvme0: No such device");
  auto used = binder_->HostUses({Addr(kRefused)});
  ASSERT_EQ(used.size(), 1u);
  EXPECT_THAT(used.begin()->second,
              HasSubstr("cannot tell whether the host uses it: FAILED_PRECONDITION: cannot check "
                        "whether nvme0 is shared: Identify Controller failed"));
}

TEST_F(HostRefusalFixture, SriovIsOfferedWhenAllowed) {
  host_.kernel.AddDevice({.address = kRefused, .group = 3, .driver = "nvme"});
  Write(host_.kernel.sys_root() + "/bus/pci/devices/0000:00:03.0/sriov_numvfs", "4\n");
  EXPECT_THAT(binder_->HostUses({Addr(kRefused)}), ::testing::SizeIs(1));
  policy_.allow_sriov = true;
  Reopen();
  EXPECT_THAT(binder_->HostUses({Addr(kRefused)}), IsEmpty());
}

// A drive pdc bound for a claim carries what its guest wrote (a Windows
// guest's NTFS, a Linux guest's LVM): after a reboot it comes back on nvme
// and is bound again. Another drive at the address is refused.
TEST_F(HostRefusalFixture, APdcDriveIsNotRefusedForItsGuestsSignatures) {
  host_.kernel.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .serial = "claimed",
                          .partitions = 2});
  Write(host_.kernel.dev_root() + "/nvme0n1p2", "LABELONE", 512);
  ASSERT_OK(journal_->Put(JournalEntry{Addr(kRefused), JournalState::kBound, "nvme", "claimed"}));
  EXPECT_THAT(binder_->HostUses({Addr(kRefused)}), IsEmpty());
  ASSERT_OK(journal_->Put(JournalEntry{Addr(kRefused), JournalState::kBound, "nvme", "another"}));
  EXPECT_THAT(binder_->HostUses({Addr(kRefused)}), ::testing::SizeIs(1));
  ASSERT_OK(journal_->Put(JournalEntry{Addr(kRefused), JournalState::kBound, "nvme", "claimed"}));
  EXPECT_THAT(binder_->Bind({Addr(kRefused)}), IsOk());
}

// "No serial" is not a serial: a rebind of a drive that shows none keeps
// none, whatever the journal said of the drive that was there before.
TEST_F(HostRefusalFixture, TheOldJournaledSerialIsNeverCopiedOntoTheDeviceThere) {
  host_.kernel.AddDevice({.address = kRefused, .group = 3, .driver = ""});  // No driver: no serial.
  ASSERT_OK(journal_->Put(JournalEntry{Addr(kRefused), JournalState::kRestoring, "nvme", "old-drive"}));
  ASSERT_OK(binder_->Bind({Addr(kRefused)}));
  auto e = journal_->Get(Addr(kRefused));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->state, JournalState::kBound);
  EXPECT_EQ(e->original_driver, "nvme");
  EXPECT_EQ(e->serial, "");
}

// block/bdev.c: each open file is a holder; bd_may_claim refuses a
// partition whose disk another holder claims, and a disk one of whose
// partitions is claimed.
TEST(FakeKernelHolderRuleTest, FollowsBdMayClaim) {
  FakeHost host;
  host.kernel.AddDevice({.address = kRefused, .group = 3, .driver = "nvme", .partitions = 2});
  {
    auto disk = host.dev.OpenExclusive("nvme0n1");
    ASSERT_OK(disk.status());
    EXPECT_THAT(host.dev.OpenExclusive("nvme0n1p1"),
                StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_THAT(host.dev.OpenExclusive("nvme0n1"), StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  {
    auto part = host.dev.OpenExclusive("nvme0n1p1");
    ASSERT_OK(part.status());
    EXPECT_THAT(host.dev.OpenExclusive("nvme0n1"), StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_THAT(host.dev.OpenExclusive("nvme0n1p2"), IsOk());  // Another partition is free.
  }
  host.kernel.MarkBusy("nvme0n1p2");  // Mounted, say.
  EXPECT_THAT(host.dev.OpenExclusive("nvme0n1"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(host.dev.OpenExclusive("nvme0n1p1"), IsOk());
}

TEST(DeviceKindTest, ChosenByClass) {
  EXPECT_EQ(KindForClass(0x010802).name(), "nvme");
  EXPECT_EQ(KindForClass(0x010601).name(), "storage");
  EXPECT_EQ(KindForClass(0x020000).name(), "network");
  EXPECT_EQ(KindForClass(0x030200).name(), "pci");
  EXPECT_EQ(KindForClass(0x120000).name(), "pci");
  EXPECT_TRUE(KindForClass(0x010802).ScrubsOnReclaim());
  EXPECT_FALSE(KindForClass(0x030200).ScrubsOnReclaim());
  EXPECT_EQ(KindScrubbingOn("nvme"), &KindForClass(0x010802));
  EXPECT_EQ(KindScrubbingOn("ahci"), nullptr);
  EXPECT_EQ(KindScrubbingOn(""), nullptr);
}

// The PCIe Device Serial Number capability (ID 0003h) in the extended
// configuration space, found by walking the capability list.
TEST(DeviceKindTest, GenericIdentityIsTheDeviceSerialNumber) {
  struct {
    std::string name;
    std::function<std::string()> config;
    std::string want;
  } cases[] = {
      {"NoConfigFile", [] { return std::string(); }, ""},
      {"OnlyTheFirst256Bytes", [] { return std::string(256, '\0'); }, ""},
      {"DsnSecondInTheList",
       [] {
         std::string c(4096, '\0');
         // 0x100: AER (ID 0001h), next 0x148; 0x148: DSN, next 0.
         const uint32_t aer = 0x0001 | (1u << 16) | (0x148u << 20);
         const uint32_t dsn = 0x0003 | (1u << 16);
         std::memcpy(&c[0x100], &aer, 4);
         std::memcpy(&c[0x148], &dsn, 4);
         const uint64_t serial = 0x0011223344556677ull;
         std::memcpy(&c[0x14c], &serial, 8);
         return c;
       },
       "dsn:0011223344556677.1"},
      {"LoopingListEnds",
       [] {
         std::string c(4096, '\0');
         const uint32_t self = 0x0001 | (0x100u << 20);
         std::memcpy(&c[0x100], &self, 4);
         return c;
       },
       ""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    FakeHost host;
    host.kernel.AddDevice({.address = "0000:05:00.1", .vendor = 0x10de, .device = 0x1eb8,
                           .class_code = 0x030200, .group = 11});
    const std::string config = c.config();
    if (!config.empty() || c.name != "NoConfigFile") {
      Write(host.kernel.sys_root() + "/bus/pci/devices/0000:05:00.1/config", config);
    }
    auto info = ReadPciFunction(host.kernel, Addr("0000:05:00.1"));
    ASSERT_OK(info.status());
    EXPECT_EQ(info->serial, c.want);
  }
}

}  // namespace
}  // namespace pdc::driver
