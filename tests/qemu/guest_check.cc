// pdc-vfio-guest-check: runs inside the QEMU guest of run-vfio-test.sh, as a
// static binary in a busybox initramfs, and checks pdc's driver library
// against the real kernel: discovery, binding to vfio-pci (driver link,
// /dev/vfio/<group>, group viable per VFIO_GROUP_GET_STATUS), idempotence,
// restore to nvme, and the safety refusals (part of a shared IOMMU group, a
// group with a foreign device, a mounted namespace, a file system detached
// with umount -l that a process keeps alive, a loop device over a file on a
// namespace's file system, mounted and detached, a namespace a process holds
// with O_EXCL or has open, a loop device over a namespace, a takeover of a
// VFIO group a process holds), that pdc-node's host-view check
// accepts the guest's own PID namespace, and the erase before a device goes
// back (--erase=<serial>): a drive whose image the host filled with a
// pattern is bound to vfio-pci, journaled `erasing`, "crashes" (journal
// reopened, binder recovered), then FinishPendingErase hands it to nvme and
// formats it (Format NVM, SES=1) through /dev/nvmeN; the namespace, read
// back with O_DIRECT, must hold zeros where the pattern was. And the erase
// where the drive is (--vfio-erase=<serial>): a drive holding the pattern
// and LVM2/ext4 signatures is erased on vfio-pci through pdc's VFIO channel,
// while a second thread watches that neither its driver link nor any block
// device of it appears on the host before the channel closed (the erase is
// recorded right after); then it is on nvme and reads zeros.
// Prints one "PASS:"/"FAIL:" line per check, the bind and restore latencies,
// and finally "PDC-GUEST-RESULT: PASS" or "PDC-GUEST-RESULT: FAIL".
// Not part of the product.
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <linux/vfio.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "model/types.h"
#include "driver/bind_journal.h"
#include "driver/discovery.h"
#include "driver/host_usage.h"
#include "driver/nvme_erase.h"
#include "driver/nvme_vfio_channel.h"
#include "driver/sysfs.h"
#include "driver/vfio_binder.h"

namespace pdc::driver {
namespace {

int failures = 0;
int checks = 0;

void Check(bool ok, const std::string& what) {
  ++checks;
  if (!ok) ++failures;
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
}

std::string Flag(int argc, char** argv, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
  }
  return "";
}

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// VFIO_GROUP_GET_STATUS: the kernel's own view of whether every device of the
// group is bound to vfio (or is a harmless bridge).
bool GroupViable(int group) {
  const std::string path = absl::StrCat("/dev/vfio/", group);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  vfio_group_status st{};
  st.argsz = sizeof(st);
  const bool ok = ::ioctl(fd, VFIO_GROUP_GET_STATUS, &st) == 0 &&
                  (st.flags & VFIO_GROUP_FLAGS_VIABLE) != 0;
  ::close(fd);
  return ok;
}

// A child process that runs `setup` (chdir, open...), tells the parent it
// is ready, and waits to be killed. Stop() kills and reaps it.
class Holder {
 public:
  template <typename F>
  explicit Holder(F setup) {
    int p[2];
    if (::pipe(p) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(p[0]);
      const char ok = setup() ? 'y' : 'n';
      (void)!::write(p[1], &ok, 1);
      for (;;) ::pause();
    }
    ::close(p[1]);
    char ok = 'n';
    ready_ = pid_ > 0 && ::read(p[0], &ok, 1) == 1 && ok == 'y';
    ::close(p[0]);
  }
  ~Holder() { Stop(); }
  bool ready() const { return ready_; }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

class Guest {
 public:
  Guest() : sys_("/sys"), dev_("/dev"), proc_("/proc") {}

  int Run(int argc, char** argv) {
    const std::string solo = Flag(argc, argv, "solo");
    const std::string mounted = Flag(argc, argv, "mounted");
    const std::string foreign = Flag(argc, argv, "foreign");
    std::vector<std::string> shared =
        absl::StrSplit(Flag(argc, argv, "shared"), ',', absl::SkipEmpty());
    classes_ = {DeviceClass{"devices.kubevirt.io/nvme",
                            {PciSelector{0x1b36, 0x0010, std::nullopt},
                             PciSelector{0x8086, 0x5845, std::nullopt}}}};

    // Discovery.
    auto t0 = std::chrono::steady_clock::now();
    auto found = Discover(sys_, "guest", {.classes = classes_, .expected_driver = {}});
    auto t1 = std::chrono::steady_clock::now();
    Check(found.ok(), "discovery over /sys succeeds");
    if (!found.ok()) return Finish();
    std::printf("discovery: %zu devices in %.2f ms\n", found->inventory.devices.size(), Ms(t1 - t0));
    for (const Device& d : found->inventory.devices) {
      std::printf("  %s %04x:%04x class %06x group %d numa %d driver %s serial %s\n",
                  d.address.ToString().c_str(), d.vendor_id, d.device_id, d.class_code,
                  d.iommu_group, d.numa_node, d.driver.c_str(), d.serial.c_str());
      by_serial_[d.serial] = d;
    }
    std::vector<std::string> all = {solo, mounted, foreign};
    all.insert(all.end(), shared.begin(), shared.end());
    for (const std::string& s : all) {
      auto it = by_serial_.find(s);
      const bool ok = it != by_serial_.end() && it->second.vendor_id == 0x1b36 &&
                      it->second.device_id == 0x0010 && it->second.class_code == 0x010802 &&
                      it->second.iommu_group >= 0 && it->second.driver == "nvme";
      Check(ok, absl::StrCat("discovery finds NVMe serial ", s,
                             " as 1b36:0010 class 010802 on nvme in an IOMMU group"));
    }
    if (failures > 0 || shared.size() != 2) return Finish();
    Check(by_serial_[shared[0]].iommu_group == by_serial_[shared[1]].iommu_group,
          "the two NVMe behind the pcie-pci-bridge share an IOMMU group");
    Check(by_serial_[solo].iommu_group != by_serial_[shared[0]].iommu_group,
          "the solo NVMe has a group of its own");

    auto journal = BindJournal::Open("/tmp/pdc-vfio-journal");
    Check(journal.ok(), "journal opens");
    if (!journal.ok()) return Finish();
    BinderOptions options;
    options.classes = classes_;
    options.verify_attempts = 1000;
    options.verify_interval = absl::Milliseconds(5);
    VfioBinder binder(&sys_, &dev_, &proc_, journal->get(), options);

    // Bind, bind again, restore.
    const Device solo_dev = by_serial_[solo];
    t0 = std::chrono::steady_clock::now();
    const absl::Status checkable = binder.CheckBindable({solo_dev.address});
    t1 = std::chrono::steady_clock::now();
    Check(checkable.ok(), "the solo NVMe passes the safety checks");
    std::printf("safety check latency: %.2f ms\n", Ms(t1 - t0));
    t0 = std::chrono::steady_clock::now();
    auto bound = binder.Bind({solo_dev.address});
    t1 = std::chrono::steady_clock::now();
    Check(bound.ok() && *bound == BindOutcome::kBound,
          absl::StrCat("bind ", solo_dev.address.ToString(), " to vfio-pci: ",
                       bound.ok() ? "ok" : bound.status().ToString()));
    std::printf("bind latency: %.1f ms\n", Ms(t1 - t0));
    Check(Driver(solo_dev.address) == "vfio-pci", "driver link is vfio-pci after bind");
    Check(dev_.Exists(absl::StrCat("vfio/", solo_dev.iommu_group)),
          absl::StrCat("/dev/vfio/", solo_dev.iommu_group, " exists"));
    Check(GroupViable(solo_dev.iommu_group), "VFIO_GROUP_GET_STATUS says the group is viable");
    auto journal_entry = (*journal)->Get(solo_dev.address);
    Check(journal_entry && journal_entry->original_driver == "nvme" &&
              journal_entry->state == JournalState::kBound && journal_entry->serial == solo,
          "journal records original driver nvme and the serial");
    auto again = binder.Bind({solo_dev.address});
    Check(again.ok() && *again == BindOutcome::kAlreadyBound, "second bind is a no-op");
    t0 = std::chrono::steady_clock::now();
    auto restored = binder.Restore(solo_dev.address);
    t1 = std::chrono::steady_clock::now();
    Check(restored.ok() && *restored == RestoreOutcome::kRestored,
          absl::StrCat("restore: ", restored.ok() ? "ok" : restored.status().ToString()));
    std::printf("restore latency: %.1f ms\n", Ms(t1 - t0));
    Check(Driver(solo_dev.address) == "nvme", "driver is nvme again after restore");
    Check(!(*journal)->Get(solo_dev.address).has_value(), "journal entry removed after restore");
    auto restored_again = binder.Restore(solo_dev.address);
    Check(restored_again.ok() && *restored_again == RestoreOutcome::kAlreadyRestored,
          "second restore is a no-op");

    // Shared group: part of it is refused, all of it works.
    const Device a = by_serial_[shared[0]];
    const Device b = by_serial_[shared[1]];
    auto part = binder.Bind({a.address});
    Refused(part.status(), kReasonGroupPartial, "bind of one NVMe of a shared IOMMU group", a.address);
    auto whole = binder.Bind({a.address, b.address});
    Check(whole.ok(), absl::StrCat("bind of the whole shared group: ",
                                   whole.ok() ? "ok" : whole.status().ToString()));
    Check(Driver(a.address) == "vfio-pci" && Driver(b.address) == "vfio-pci",
          "both NVMe of the shared group on vfio-pci");
    Check(GroupViable(a.iommu_group), "shared group viable once whole");
    Check(binder.Restore(a.address).ok() && binder.Restore(b.address).ok() &&
              Driver(a.address) == "nvme" && Driver(b.address) == "nvme",
          "shared group restored to nvme");

    // A group with a device that is not ours.
    const Device f = by_serial_[foreign];
    Refused(binder.Bind({f.address}).status(), kReasonGroupShared,
            "bind of an NVMe sharing its group with a foreign device", f.address);

    // The host's own (mounted) disk.
    const Device m = by_serial_[mounted];
    auto host_disk = binder.Bind({m.address});
    Refused(host_disk.status(), kReasonHostInUse, "bind of an NVMe whose namespace is mounted",
            m.address);
    Check(host_disk.status().message().find("mounted at /mnt") != std::string::npos,
          "refusal says where it is mounted");

    // Detached with umount -l while a process works in it: the file system
    // lives on, in no mount table, holder list or descriptor; only the
    // kernel's refusal of an exclusive open shows it.
    {
      Holder keeper([] { return ::chdir("/mnt") == 0; });
      Check(keeper.ready(), "a process works in /mnt");
      Check(::umount2("/mnt", MNT_DETACH) == 0, "umount -l /mnt");
      auto mounts = proc_.Read("self/mountinfo");
      Check(mounts.ok() && mounts->find(" /mnt ") == std::string::npos,
            "/mnt is no longer in the mount table");
      auto alive = binder.Bind({m.address});
      Refused(alive.status(), kReasonHostInUse,
              "bind of an NVMe whose detached file system a process keeps alive", m.address);
      Check(alive.status().message().find("is in use by the host") != std::string::npos,
            "refusal says the kernel holds the namespace");
      keeper.Stop();
      // Gone from the kernel, the file system is still on the disk: a drive
      // that is no pdc claim's with a file system signature belongs to the
      // host (or a tool of it) even while nothing has it open.
      Check(RefusedOnlyForItsSignature(binder, m.address),
            "once the file system is gone, the NVMe is refused for its signature alone");
      Check(Driver(m.address) == "nvme", "and stays on nvme");
    }

    // A loop device over a file on the namespace's file system: named while
    // mounted; once detached with umount -l, the loop keeps the file system
    // alive and only the exclusive open sees it.
    {
      const std::string mns = Namespace(m.address);
      Check(!mns.empty(), "the mounted NVMe's namespace is back");
      const std::string mdev = "/dev/" + mns;
      const bool remounted = !mns.empty() && (::mount(mdev.c_str(), "/mnt", "ext2", 0, nullptr) == 0 ||
                                              ::mount(mdev.c_str(), "/mnt", "ext4", 0, nullptr) == 0);
      Check(remounted, absl::StrCat("mount ", mdev, " at /mnt again"));
      const int file = ::open("/mnt/loop.img", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      const bool sized = file >= 0 && ::ftruncate(file, 1 << 20) == 0;
      const int control = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
      const int n = control >= 0 ? ::ioctl(control, LOOP_CTL_GET_FREE) : -1;
      const std::string loop = absl::StrCat("/dev/loop", n);
      const int loop_fd = n >= 0 ? ::open(loop.c_str(), O_RDWR | O_CLOEXEC) : -1;
      const bool attached = sized && loop_fd >= 0 && ::ioctl(loop_fd, LOOP_SET_FD, file) == 0;
      if (file >= 0) ::close(file);
      Check(attached, absl::StrCat(loop, " is backed by /mnt/loop.img"));
      auto on_fs = binder.Bind({m.address});
      Refused(on_fs.status(), kReasonHostInUse,
              "bind of an NVMe holding the backing file of a loop device", m.address);
      Check(on_fs.status().message().find("/mnt/loop.img, the backing file of loop device loop") !=
                std::string::npos,
            "refusal names the loop device and its file");
      Check(::umount2("/mnt", MNT_DETACH) == 0, "umount -l /mnt with the loop device attached");
      auto detached = binder.Bind({m.address});
      Refused(detached.status(), kReasonHostInUse,
              "bind of an NVMe whose detached file system a loop device keeps alive", m.address);
      Check(detached.status().message().find("is in use by the host") != std::string::npos,
            "refusal says the kernel holds the namespace");
      if (attached) ::ioctl(loop_fd, LOOP_CLR_FD, 0);
      if (loop_fd >= 0) ::close(loop_fd);
      if (control >= 0) ::close(control);
      Check(RefusedOnlyForItsSignature(binder, m.address),
            "once the loop device is gone, the NVMe is refused for its signature alone");
      Check(Driver(m.address) == "nvme", "and stays on nvme");
    }

    // Open in a process with O_EXCL, then without it, then the backing of a
    // loop device: the exclusive open, the descriptor scan and the loop
    // check see them.
    auto solo_info = ReadPciFunction(sys_, solo_dev.address);
    auto blocks = solo_info.ok() ? BlockDevicesOf(sys_, *solo_info)
                                 : absl::StatusOr<std::vector<std::string>>(solo_info.status());
    Check(blocks.ok() && !blocks->empty(), "the solo NVMe has a namespace");
    if (!blocks.ok() || blocks->empty()) return Finish();
    const std::string ns = "/dev/" + blocks->front();
    {
      Holder exclusive([&] { return ::open(ns.c_str(), O_RDONLY | O_EXCL) >= 0; });
      Check(exclusive.ready(), absl::StrCat("a process opens ", ns, " with O_EXCL"));
      auto held = binder.Bind({solo_dev.address});
      Refused(held.status(), kReasonHostInUse, "bind of an NVMe a process holds with O_EXCL",
              solo_dev.address);
      Check(held.status().message().find("is in use by the host") != std::string::npos,
            "refusal says the kernel refuses the exclusive open");
    }
    {
      Holder reader([&] { return ::open(ns.c_str(), O_RDONLY) >= 0; });
      Check(reader.ready(), absl::StrCat("a process opens ", ns));
      auto open_in = binder.Bind({solo_dev.address});
      Refused(open_in.status(), kReasonHostInUse, "bind of an NVMe a process has open",
              solo_dev.address);
      Check(open_in.status().message().find("is open in process") != std::string::npos,
            "refusal names the process");
    }
    {
      const int control = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
      const int n = control >= 0 ? ::ioctl(control, LOOP_CTL_GET_FREE) : -1;
      const std::string loop = absl::StrCat("/dev/loop", n);
      const int loop_fd = n >= 0 ? ::open(loop.c_str(), O_RDWR | O_CLOEXEC) : -1;
      const int backing = ::open(ns.c_str(), O_RDWR | O_CLOEXEC);
      const bool attached = loop_fd >= 0 && backing >= 0 && ::ioctl(loop_fd, LOOP_SET_FD, backing) == 0;
      if (backing >= 0) ::close(backing);
      Check(attached, absl::StrCat(loop, " is backed by ", ns));
      auto looped = binder.Bind({solo_dev.address});
      Refused(looped.status(), kReasonHostInUse, "bind of an NVMe behind a loop device",
              solo_dev.address);
      Check(looped.status().message().find("backs loop device loop") != std::string::npos,
            "refusal names the loop device");
      if (attached) ::ioctl(loop_fd, LOOP_CLR_FD, 0);
      if (loop_fd >= 0) ::close(loop_fd);
      if (control >= 0) ::close(control);
      Check(BindWhenFree(binder, solo_dev.address), "the solo NVMe binds once the loop is gone");
      Check(binder.Restore(solo_dev.address).ok(), "and is restored");
    }

    // A device on vfio-pci that pdc did not bind (its journal entry
    // forgotten, as after a bind by hand) is never adopted: refused
    // (not_bound_by_pdc) while a process holds its group, whose second open
    // the kernel refuses with EBUSY, and still once the group is free; left
    // where it is, unjournaled.
    {
      Check(BindWhenFree(binder, solo_dev.address), "the solo NVMe binds");
      const std::optional<JournalEntry> entry = (*journal)->Get(solo_dev.address);
      Check(entry.has_value() && (*journal)->Remove(solo_dev.address).ok(),
            "its journal entry is forgotten");
      const std::string group = absl::StrCat("/dev/vfio/", solo_dev.iommu_group);
      {
        Holder vm([&] { return ::open(group.c_str(), O_RDWR) >= 0; });
        Check(vm.ready(), absl::StrCat("a process opens ", group));
        const int second = ::open(group.c_str(), O_RDWR | O_CLOEXEC);
        const int err = errno;
        if (second >= 0) ::close(second);
        Check(second < 0 && err == EBUSY,
              absl::StrCat("the kernel refuses a second open of ", group, " with EBUSY"));
        auto taken = binder.Bind({solo_dev.address});
        std::printf("  -> %s\n", taken.status().ToString().c_str());
        Check(absl::IsFailedPrecondition(taken.status()) &&
                  FailureReason(taken.status()) == kReasonNotBoundByPdc,
              "a device pdc did not bind is refused while a process holds its group "
              "(not_bound_by_pdc)");
      }
      auto taken = binder.Bind({solo_dev.address});
      std::printf("  -> %s\n", taken.status().ToString().c_str());
      Check(absl::IsFailedPrecondition(taken.status()) &&
                FailureReason(taken.status()) == kReasonNotBoundByPdc,
            "and once its group is free: never adopted");
      Check(!(*journal)->Get(solo_dev.address).has_value(), "nothing is journaled for it");
      Check(Driver(solo_dev.address) == "vfio-pci", "it is left on vfio-pci");
      // The administrator's side: the entry written back, pdc restores it.
      Check(entry.has_value() && (*journal)->Put(*entry).ok() &&
                binder.Restore(solo_dev.address).ok() && Driver(solo_dev.address) == "nvme",
            "with its journal entry back, the device goes back to nvme");
    }

    Check(CheckHostView(proc_).ok(), "pdc-node's host-view check accepts the guest's PID namespace");
    const std::string erase = Flag(argc, argv, "erase");
    if (!erase.empty()) EraseCheck(erase);
    const std::string detached = Flag(argc, argv, "detached");
    if (!detached.empty()) DetachedCheck(detached);
    if (!erase.empty()) OtherDriveCheck(Flag(argc, argv, "solo"));
    const std::string vfio_erase = Flag(argc, argv, "vfio-erase");
    if (!vfio_erase.empty()) VfioEraseCheck(vfio_erase);
    return Finish();
  }

 private:
  std::string Driver(PciAddress a) {
    auto d = LinkName(sys_, DevicePath(a) + "/driver");
    return d.ok() ? *d : "";
  }

  // The kernel lets go of a released disk asynchronously: a few tries.
  bool BindWhenFree(VfioBinder& binder, PciAddress a) {
    for (int i = 0; i < 50; ++i) {
      auto out = binder.Bind({a});
      if (out.ok()) return true;
      if (i == 49) std::printf("  -> %s\n", out.status().ToString().c_str());
      ::usleep(20000);
    }
    return false;
  }

  // Bind refused (host_in_use) for the file system signature on the disk
  // and nothing else, once the kernel let go of it (retried briefly: a
  // detached file system is released after its last user).
  bool RefusedOnlyForItsSignature(VfioBinder& binder, PciAddress a) {
    std::string last;
    for (int i = 0; i < 50; ++i) {
      auto out = binder.Bind({a});
      if (out.ok()) {
        std::printf("  -> bound, despite its file system signature\n");
        (void)binder.Restore(a);
        return false;
      }
      last = out.status().ToString();
      const std::string m(out.status().message());
      if (FailureReason(out.status()) == kReasonHostInUse &&
          m.find("holds an ext2/3/4 file system") != std::string::npos &&
          m.find("is in use by the host") == std::string::npos &&
          m.find("mounted at") == std::string::npos && m.find("loop device") == std::string::npos) {
        std::printf("  -> %s\n", last.c_str());
        return true;
      }
      ::usleep(20000);
    }
    std::printf("  -> %s\n", last.c_str());
    return false;
  }

  void Refused(const absl::Status& s, std::string_view reason, const std::string& what,
               PciAddress a) {
    std::printf("  -> %s\n", s.ToString().c_str());
    Check(absl::IsFailedPrecondition(s) && FailureReason(s) == reason,
          absl::StrCat(what, " is refused (", std::string(reason), ")"));
    Check(Driver(a) == "nvme", absl::StrCat(a.ToString(), " left on nvme"));
  }

  // The pattern run-vfio-test.sh wrote into the drive's image, at offsets
  // 0 and 8 MiB, 1 MiB each.
  static constexpr char kPattern[] = "PDC-ERASE-PATTERN";
  static constexpr size_t kRegion = 1 << 20;

  // The namespace block device of `a` once nvme created it ("" if none).
  std::string Namespace(PciAddress a) {
    for (int i = 0; i < 300; ++i) {
      auto info = ReadPciFunction(sys_, a);
      if (info.ok()) {
        auto blocks = BlockDevicesOf(sys_, *info);
        if (blocks.ok() && !blocks->empty() && dev_.Exists(blocks->front())) return blocks->front();
      }
      ::usleep(10000);
    }
    return "";
  }

  // Reads the two regions with O_DIRECT (from the device, not a cache).
  // Counts regions holding the pattern and regions all zero.
  bool ReadRegions(const std::string& ns, int* with_pattern, int* all_zero) {
    *with_pattern = 0;
    *all_zero = 0;
    const int fd = ::open(("/dev/" + ns).c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) return false;
    void* buf = nullptr;
    if (::posix_memalign(&buf, 4096, kRegion) != 0) {
      ::close(fd);
      return false;
    }
    bool ok = true;
    for (off_t off : {off_t{0}, off_t{8 << 20}}) {
      if (::pread(fd, buf, kRegion, off) != static_cast<ssize_t>(kRegion)) {
        ok = false;
        break;
      }
      const char* p = static_cast<const char*>(buf);
      if (::memmem(p, kRegion, kPattern, sizeof(kPattern) - 1) != nullptr) ++*with_pattern;
      bool zero = true;
      for (size_t i = 0; i < kRegion && zero; ++i) zero = p[i] == 0;
      if (zero) ++*all_zero;
    }
    std::free(buf);
    ::close(fd);
    return ok;
  }

  std::string BlockSize(const std::string& ns) {
    auto s = ReadTrimmed(sys_, "class/block/" + ns + "/queue/logical_block_size");
    return s.ok() ? *s : "?";
  }

  // A pending erase whose journaled address now holds another drive (what a
  // renumbering or a swap does): the drive `serial` (pdc-solo) is journaled
  // as the erased drive's (pdc-gone). On nvme its sysfs serial refuses it
  // before anything moves; on vfio-pci it is handed to nvme, Identify through
  // the held descriptor says which drive it is, nothing is formatted, and it
  // goes back to vfio-pci.
  void OtherDriveCheck(const std::string& serial) {
    auto it = by_serial_.find(serial);
    if (it == by_serial_.end()) return Check(false, "discovery finds the drive " + serial);
    const PciAddress a = it->second.address;
    auto journal = BindJournal::Open("/tmp/pdc-other-journal");
    if (!journal.ok()) return Check(false, "other-drive journal opens");
    BinderOptions options;
    options.classes = classes_;
    options.verify_attempts = 1000;
    options.verify_interval = absl::Milliseconds(5);
    VfioBinder binder(&sys_, &dev_, &proc_, journal->get(), options);
    DevNvmeAdmin admin("/dev");
    EraseReturnOptions eo;
    eo.controller_wait = absl::Seconds(30);
    eo.poll_interval = absl::Milliseconds(20);
    const JournalEntry gone{a, JournalState::kErasing, "nvme", "pdc-gone"};

    Check(Driver(a) == "nvme", serial + " is on nvme");
    Check((*journal)->Put(gone).ok(), "an erase of drive pdc-gone is journaled at its address");
    auto on_nvme = FinishPendingErase(binder, sys_, admin, a, eo);
    Check(FailureReason(on_nvme.status()) == kReasonDriveChanged && Driver(a) == "nvme",
          absl::StrCat("on nvme, another drive at the address is refused by its serial and left "
                       "there: ", on_nvme.status().ToString()));

    Check((*journal)->Remove(a).ok() && binder.Bind({a}).ok() && Driver(a) == "vfio-pci",
          serial + " is on vfio-pci");
    Check((*journal)->Put(gone).ok(), "the erase of pdc-gone is journaled again");
    auto on_vfio = FinishPendingErase(binder, sys_, admin, a, eo);
    Check(FailureReason(on_vfio.status()) == kReasonDriveChanged &&
              on_vfio.status().message().find("is drive \"" + serial + "\"") != std::string::npos,
          absl::StrCat("on vfio-pci, Identify through the held descriptor names the other drive "
                       "and nothing is formatted: ", on_vfio.status().ToString()));
    Check(Driver(a) == "vfio-pci", "and it is back on vfio-pci");
    Check((*journal)->Remove(a).ok() && binder.Restore(a).ok() && Driver(a) == "nvme",
          serial + " goes back to nvme");
  }

  // A controller of an NVM subsystem whose only namespace is detached (it
  // holds the host's pattern, no block device shows it): the erase must
  // erase it or refuse, never report done while the data is there; the
  // host script greps the image after QEMU exits.
  void DetachedCheck(const std::string& serial) {
    auto it = by_serial_.find(serial);
    Check(it != by_serial_.end(),
          absl::StrCat("discovery finds the controller with a detached namespace (", serial, ")"));
    if (it == by_serial_.end()) return;
    const PciAddress a = it->second.address;
    Check(Namespace(a).empty(), "no block device shows its detached namespace");
    auto journal = BindJournal::Open("/tmp/pdc-detached-journal");
    if (!journal.ok()) return Check(false, "detached journal opens");
    BinderOptions options;
    options.classes = classes_;
    options.verify_attempts = 1000;
    options.verify_interval = absl::Milliseconds(5);
    VfioBinder binder(&sys_, &dev_, &proc_, journal->get(), options);
    auto bound = binder.Bind({a});
    Check(bound.ok(), absl::StrCat("the detached-namespace controller binds: ",
                                   bound.ok() ? "ok" : bound.status().ToString()));
    auto pending = binder.MarkErasePending(a);
    Check(pending.ok() && *pending, "its erase is journaled pending");
    DevNvmeAdmin admin("/dev");
    EraseReturnOptions eo;
    eo.controller_wait = absl::Seconds(30);
    eo.poll_interval = absl::Milliseconds(20);
    const auto t0 = std::chrono::steady_clock::now();
    auto report = FinishPendingErase(binder, sys_, admin, a, eo);
    const auto t1 = std::chrono::steady_clock::now();
    auto e = (*journal)->Get(a);
    if (report.ok()) {
      Check(std::find(report->namespaces.begin(), report->namespaces.end(), 1u) !=
                report->namespaces.end(),
            absl::StrCat("erased, and namespace 1 (detached) was among the erased (", 
                         report->method, ")"));
      Check(e && e->state == JournalState::kReturned, "journaled done");
      std::printf("detached erase latency: %.1f ms\n", Ms(t1 - t0));
    } else {
      std::printf("guest: the detached-namespace erase refused: %s\n",
                  report.status().ToString().c_str());
      Check(e && e->state == JournalState::kErasing,
            "refused: the erase stays pending, never reported done");
      Check(Driver(a) == "vfio-pci", "refused: the controller is held on vfio-pci");
    }
  }

  void EraseCheck(const std::string& serial) {
    auto it = by_serial_.find(serial);
    Check(it != by_serial_.end(), absl::StrCat("discovery finds the drive to erase (", serial, ")"));
    if (it == by_serial_.end()) return;
    const PciAddress a = it->second.address;
    const std::string before = Namespace(a);
    int pattern = 0, zero = 0;
    Check(!before.empty() && ReadRegions(before, &pattern, &zero) && pattern == 2,
          absl::StrCat("/dev/", before, " holds the host's pattern in both regions before"));
    const std::string block_size = BlockSize(before);

    const std::string journal_path = "/tmp/pdc-erase-journal";
    BinderOptions options;
    options.classes = classes_;
    options.verify_attempts = 1000;
    options.verify_interval = absl::Milliseconds(5);
    {
      auto journal = BindJournal::Open(journal_path);
      if (!journal.ok()) return Check(false, "erase journal opens");
      VfioBinder binder(&sys_, &dev_, &proc_, journal->get(), options);
      auto bound = binder.Bind({a});
      Check(bound.ok() && Driver(a) == "vfio-pci",
            absl::StrCat("the drive to erase is on vfio-pci: ",
                         bound.ok() ? "ok" : bound.status().ToString()));
      auto pending = binder.MarkErasePending(a);
      auto e = (*journal)->Get(a);
      Check(pending.ok() && *pending && e && e->state == JournalState::kErasing &&
                Driver(a) == "vfio-pci",
            "erase journaled pending while the drive is still on vfio-pci");
    }  // The "crash": journal and binder gone.
    auto journal = BindJournal::Open(journal_path);
    if (!journal.ok()) return Check(false, "erase journal reopens");
    VfioBinder binder(&sys_, &dev_, &proc_, journal->get(), options);
    Check(binder.Recover().ok() && (*journal)->Get(a) &&
              (*journal)->Get(a)->state == JournalState::kErasing,
          "after the restart the journal still says erasing and Recover leaves it");
    auto refused = binder.Bind({a});
    Check(FailureReason(refused.status()) == kReasonErasePending,
          "a bind is refused while the erase is pending");

    DevNvmeAdmin admin("/dev");
    EraseReturnOptions eo;
    eo.controller_wait = absl::Seconds(30);
    eo.poll_interval = absl::Milliseconds(20);
    const auto t0 = std::chrono::steady_clock::now();
    auto report = FinishPendingErase(binder, sys_, admin, a, eo);
    const auto t1 = std::chrono::steady_clock::now();
    std::string formatted;
    if (report.ok()) {
      for (uint32_t id : report->formatted) {
        absl::StrAppend(&formatted, formatted.empty() ? "" : ",",
                        id == kNvmeNsidAll ? std::string("all") : absl::StrCat(id));
      }
    }
    Check(report.ok(), absl::StrCat("vfio-pci -> nvme -> Format NVM SES=1: ",
                                    report.ok() ? absl::StrCat(report->controller, " namespaces ",
                                                               formatted)
                                                : report.status().ToString()));
    std::printf("erase latency: %.1f ms (unbind, nvme probe, host-use check, identify, "
                "format, read-back)\n", Ms(t1 - t0));
    Check(report.ok() && !report->formatted.empty(), "at least one namespace was formatted");
    Check(Driver(a) == "nvme", "the erased drive is back on nvme");
    {
      auto e = (*journal)->Get(a);
      Check(e && e->state == JournalState::kReturned && e->serial == serial,
            "the erase is journaled done (returned) for that drive, the extender's "
            "acknowledgement");
    }
    if (report.ok()) {
      std::printf("erase method: %s, identity %s, %d block(s) read back%s\n",
                  report->method.c_str(), report->identity.c_str(), report->verified_blocks,
                  report->verify_note.empty() ? "" : (" (" + report->verify_note + ")").c_str());
    }
    const std::string after = Namespace(a);
    Check(!after.empty() && ReadRegions(after, &pattern, &zero) && pattern == 0 && zero == 2,
          absl::StrCat("/dev/", after, " reads zeros where the pattern was (O_DIRECT)"));
    Check(BlockSize(after) == block_size,
          absl::StrCat("the LBA format is kept (logical block size ", block_size, ")"));
  }

  // Block devices of the function at `a` in /sys/class/block.
  std::vector<std::string> BlockDevicesAt(PciAddress a) {
    std::vector<std::string> out;
    auto names = sys_.List("class/block");
    if (!names.ok()) return out;
    for (const std::string& n : *names) {
      auto target = sys_.Resolve("class/block/" + n);
      if (target.ok() && target->find("/" + a.ToString() + "/") != std::string::npos) {
        out.push_back(n);
      }
    }
    return out;
  }

  // An NvmeAdminChannel that notes when it closed (the controller disabled
  // and the VFIO group released: the erase is recorded right after).
  class NotedChannel : public NvmeAdminChannel {
   public:
    NotedChannel(std::unique_ptr<NvmeAdminChannel> inner, std::atomic<int64_t>* closed_ns,
                 std::atomic<int>* commands)
        : inner_(std::move(inner)), closed_ns_(closed_ns), commands_(commands) {}
    ~NotedChannel() override {
      inner_.reset();
      closed_ns_->store(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    absl::StatusOr<uint16_t> Run(const NvmeAdminCommand& cmd, std::span<uint8_t> data) override {
      ++*commands_;
      return inner_->Run(cmd, data);
    }
    absl::StatusOr<uint16_t> RunIo(const NvmeAdminCommand& cmd,
                                   std::span<uint8_t> data) override {
      ++*commands_;
      return inner_->RunIo(cmd, data);
    }

   private:
    std::unique_ptr<NvmeAdminChannel> inner_;
    std::atomic<int64_t>* closed_ns_;
    std::atomic<int>* commands_;
  };

  class NotedOpener : public NvmeVfioOpener {
   public:
    NotedOpener(NvmeVfioOpener* real, std::atomic<int64_t>* closed_ns, std::atomic<int>* commands)
        : real_(real), closed_ns_(closed_ns), commands_(commands) {}
    absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> Open(PciAddress a) override {
      auto c = real_->Open(a);
      if (!c.ok()) return c.status();
      return std::unique_ptr<NvmeAdminChannel>(
          new NotedChannel(std::move(*c), closed_ns_, commands_));
    }

   private:
    NvmeVfioOpener* real_;
    std::atomic<int64_t>* closed_ns_;
    std::atomic<int>* commands_;
  };

  // The erase where the drive is: on vfio-pci, through pdc's VFIO channel;
  // the host sees no block device of it before the erase is done.
  void VfioEraseCheck(const std::string& serial) {
    auto it = by_serial_.find(serial);
    Check(it != by_serial_.end(),
          absl::StrCat("discovery finds the drive to erase on vfio-pci (", serial, ")"));
    if (it == by_serial_.end()) return;
    const PciAddress a = it->second.address;
    const std::string before = Namespace(a);
    int pattern = 0, zero = 0;
    Check(!before.empty() && ReadRegions(before, &pattern, &zero) && pattern == 2,
          absl::StrCat("/dev/", before, " holds the host's pattern (and LVM2/ext4 signatures) "
                       "before"));
    auto journal = BindJournal::Open("/tmp/pdc-vfio-erase-journal");
    if (!journal.ok()) return Check(false, "vfio-erase journal opens");
    BinderOptions options;
    options.classes = classes_;
    options.verify_attempts = 1000;
    options.verify_interval = absl::Milliseconds(5);
    VfioBinder binder(&sys_, &dev_, &proc_, journal->get(), options);
    // As after an earlier claim of this drive, whose guest wrote the
    // signatures: pdc knows the drive, so they do not refuse the bind.
    Check((*journal)->Put({a, JournalState::kReturned, "nvme", serial}).ok(),
          "the drive is journaled as one pdc had before");
    auto bound = binder.Bind({a});
    Check(bound.ok() && Driver(a) == "vfio-pci",
          absl::StrCat("the drive is on vfio-pci: ", bound.ok() ? "ok" : bound.status().ToString()));
    auto pending = binder.MarkErasePending(a);
    Check(pending.ok() && *pending, "its erase is journaled pending");
    Check(BlockDevicesAt(a).empty(), "no block device of it while on vfio-pci");

    // Watches the host's view of the drive until the erase returns.
    std::atomic<bool> stop{false};
    std::atomic<int64_t> seen_ns{0};
    std::string seen_what;
    std::thread watcher([&] {
      while (!stop.load()) {
        const std::string d = Driver(a);
        std::vector<std::string> blocks = BlockDevicesAt(a);
        if (d != "vfio-pci" || !blocks.empty()) {
          seen_ns.store(std::chrono::steady_clock::now().time_since_epoch().count());
          seen_what = absl::StrCat("driver \"", d, "\", block devices ",
                                   blocks.empty() ? std::string("none") : blocks.front());
          return;
        }
        ::usleep(500);
      }
    });
    DevVfioNvmeOpener real(&sys_, "/dev");
    std::atomic<int64_t> closed_ns{0};
    std::atomic<int> commands{0};
    NotedOpener noted(&real, &closed_ns, &commands);
    DevNvmeAdmin admin("/dev");
    EraseReturnOptions eo;
    eo.controller_wait = absl::Seconds(30);
    eo.poll_interval = absl::Milliseconds(20);
    eo.vfio = &noted;
    const auto t0 = std::chrono::steady_clock::now();
    auto report = FinishPendingErase(binder, sys_, admin, a, eo);
    const auto t1 = std::chrono::steady_clock::now();
    // Wait (bounded) for nvme to show the drive, then stop watching.
    for (int i = 0; i < 300 && seen_ns.load() == 0; ++i) ::usleep(10000);
    stop.store(true);
    watcher.join();
    Check(report.ok() && report->path == "vfio-pci",
          absl::StrCat("erased on vfio-pci through the VFIO channel: ",
                       report.ok() ? absl::StrCat(report->method, ", path ", report->path, ", ",
                                                  report->verified_blocks, " block(s) read back")
                                   : report.status().ToString()));
    Check(commands.load() > 0 && closed_ns.load() != 0,
          absl::StrCat(commands.load(), " commands went through the channel, which then closed"));
    Check(seen_ns.load() == 0 || seen_ns.load() > closed_ns.load(),
          absl::StrCat("nothing of the drive reached the host before the erase was done (first "
                       "seen: ", seen_what.empty() ? std::string("never") : seen_what,
                       seen_ns.load() == 0
                           ? std::string()
                           : absl::StrFormat(", %.1f ms after the channel closed",
                                             (seen_ns.load() - closed_ns.load()) / 1e6),
                       ")"));
    if (closed_ns.load() != 0) {
      const double erase_ms =
          (closed_ns.load() - t0.time_since_epoch().count()) / 1e6;
      std::printf("vfio erase latency: %.1f ms (VFIO open, controller reset, identify, format, "
                  "read-back), %.1f ms with the record and the hand-back to nvme\n",
                  erase_ms, Ms(t1 - t0));
    }
    auto e = (*journal)->Get(a);
    Check(e && e->state == JournalState::kReturned && e->serial == serial,
          "the erase is journaled done (returned) for that drive");
    Check(Driver(a) == "nvme", "only then is the drive on nvme");
    const std::string after = Namespace(a);
    Check(!after.empty() && ReadRegions(after, &pattern, &zero) && pattern == 0 && zero == 2,
          absl::StrCat("/dev/", after, " reads zeros where the pattern and the signatures were "
                       "(O_DIRECT)"));
  }

  int Finish() {
    std::printf("PDC-GUEST-RESULT: %s (%d checks, %d failed)\n", failures == 0 ? "PASS" : "FAIL",
                checks, failures);
    std::fflush(stdout);
    return failures == 0 ? 0 : 1;
  }

  RealSysfs sys_;
  RealSysfs dev_;
  RealSysfs proc_;
  std::vector<DeviceClass> classes_;
  std::map<std::string, Device> by_serial_;
};

}  // namespace
}  // namespace pdc::driver

int main(int argc, char** argv) { return pdc::driver::Guest().Run(argc, argv); }
