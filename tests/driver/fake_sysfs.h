// FakeKernel: a Sysfs backed by a real temporary directory laid out like the
// kernel's /sys (devices/pci0000:00/<addr>, bus/pci/devices links,
// kernel/iommu_groups, bus/pci/drivers, class/block), plus sibling dev/ and
// proc/ trees. Its Write applies the kernel's effects of the writes the
// VfioBinder makes: `driver_override` stores the override ("(null)" when
// cleared), `drivers/<d>/unbind` removes the driver link (ENODEV when not
// bound there; the nvme children and /dev/vfio/<group> go with it),
// `drivers_probe` consults the override or the drivers' id tables and
// creates the link, or silently does nothing for an injected probe failure,
// like the kernel. For tests only. Thread-safety: not thread-safe.
#ifndef PDC_TESTS_DRIVER_FAKE_SYSFS_H_
#define PDC_TESTS_DRIVER_FAKE_SYSFS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "driver/sysfs.h"

namespace pdc::driver::testing {

struct FakeDriverSpec {
  std::string name;
  std::vector<std::pair<uint16_t, uint16_t>> ids;  // vendor, device
  std::optional<uint32_t> class_code;              // matches any id
};

struct FakePciDevice {
  std::string address;
  uint16_t vendor = 0x1b36;
  uint16_t device = 0x0010;
  uint32_t class_code = 0x010802;
  int group = -1;
  int numa = -1;
  std::string driver;  // Bound at creation; "" for none.
  // NVMe controllers (class 0108xx) bound to nvme get nvme/nvme<N>/ with
  // these (and the character devices nvme<N>, ng<N>n<ns>), and `namespaces`
  // block devices with `partitions` each.
  std::string serial = "SN0";
  std::string model = "QEMU NVMe Ctrl";
  int namespaces = 1;
  int partitions = 0;
  // Each namespace's block `size`, in 512-byte sectors (1 GiB).
  uint64_t namespace_sectors = 2097152;
  // The first namespace's `nguid` and `eui` attributes, written as the
  // kernel prints them; not written when "" (the kernel hides zero ones).
  std::string nguid = "";
  std::string eui = "";
  // The controller's `firmware_rev` (Identify Controller FR).
  std::string firmware_rev = "1.0";
};

// The kernel boot_id a FakeKernel reports (proc/sys/kernel/random/boot_id).
inline constexpr char kFakeBootId[] = "4c9a1c4e-8e1f-4d6b-9a57-2f0b7d1e3c55";

class FakeKernel : public RealSysfs {
 public:
  // `base` is an existing empty directory; sys/, dev/, proc/ go below it.
  // Drivers nvme (class 010802), vfio-pci (override only) and pcieport exist.
  explicit FakeKernel(const std::string& base);

  std::string sys_root() const { return base_ + "/sys"; }
  std::string dev_root() const { return base_ + "/dev"; }
  std::string proc_root() const { return base_ + "/proc"; }

  void AddDriver(const FakeDriverSpec& spec);
  void RemoveDriver(const std::string& name);
  void AddDevice(const FakePciDevice& spec);

  // Probes of `address` by `driver` fail (the write still succeeds).
  void FailProbe(const std::string& address, const std::string& driver);
  // The next write to a path ending in `suffix` fails with EIO.
  void FailWrite(const std::string& suffix);

  // major:minor of a block device created for an NVMe namespace/partition.
  std::string BlockDev(const std::string& name) const;
  void AddHolder(const std::string& block, const std::string& holder);
  void AddMount(const std::string& majmin, const std::string& mount_point,
                const std::string& source);
  void AddSwap(const std::string& file);

  // A disk behind a storage controller that is not NVMe (AHCI, SAS):
  // class/block/<name> below the function, with `partitions` partitions
  // (<name>1...), and their nodes in dev/.
  void AddDisk(const std::string& address, const std::string& name, int partitions);
  // The kernel refuses exclusive opens of `block` (a mount, a holder, ZFS...),
  // or any open of "vfio/<group>" (a process the proc tree does not show).
  // A busy partition makes its whole disk busy too (bd_may_claim).
  void MarkBusy(const std::string& block);
  bool IsBusy(const std::string& block) const { return busy_.contains(block); }
  // Whether the kernel refuses an O_EXCL open of dev/<node> now: the
  // holder rule of block/bdev.c (bd_prepare_to_claim, bd_may_claim), where
  // every open file of this process that holds a block device exclusively
  // is a holder of its own, and a busy device (MarkBusy) is held by some
  // other holder. A VFIO group marked busy has its opener.
  bool ExclusiveOpenRefused(const std::string& node) const;
  // The whole disk of partition `block`; `block` itself for a whole disk.
  std::string WholeDisk(const std::string& block) const;
  // A process `pid` named `comm` holding open the dev/ nodes named in
  // `nodes` ("nvme0n1", "vfio/7"): proc/<pid>/fd/<n> links to them. A VFIO
  // group among them is then busy (the kernel allows one opener).
  void AddProcess(int pid, const std::string& comm, const std::vector<std::string>& nodes);
  // Loop device `name` backed by `backing_file` (an absolute path).
  void AddLoop(const std::string& name, const std::string& backing_file);
  // A network interface of the function at `address`; `flags` as in
  // class/net/<name>/flags; `master` ("" for none) as the master link.
  void AddInterface(const std::string& address, const std::string& name, uint32_t flags,
                    const std::string& master);
  // "b<major>:<minor>" or "c<major>:<minor>" of the dev/ node at the real
  // path `node`, "" when the fake kernel made no such node.
  std::string NodeNumber(const std::string& node) const;

  // Every write the fake received, "<resolved path> <- <data>", in order.
  const std::vector<std::string>& writes() const { return writes_; }
  // For each unbind written, the dev/ nodes this process held open at that
  // moment ("nvme0n1", ...), in order.
  const std::vector<std::vector<std::string>>& open_at_unbind() const { return open_at_unbind_; }
  // The dev/ nodes this process holds open now.
  std::vector<std::string> OpenDevNodes() const;

  absl::Status Write(std::string_view path, std::string_view data) override;

 private:
  std::string DevDir(const std::string& address) const;
  std::string Driver(const std::string& address) const;
  void Link(const std::string& target, const std::string& link);
  void Put(const std::string& path, const std::string& content);
  void Attach(const std::string& address, const std::string& driver);
  void Detach(const std::string& address);
  bool Matches(const FakeDriverSpec& d, const FakePciDevice& dev) const;
  void Probe(const std::string& address);

  const std::string base_;
  std::map<std::string, FakeDriverSpec> drivers_;
  std::map<std::string, FakePciDevice> devices_;
  std::map<std::string, int> nvme_index_;  // address -> N of nvme<N>
  std::map<std::string, std::string> block_dev_;
  std::set<std::pair<std::string, std::string>> failing_probes_;
  std::vector<std::string> failing_writes_;
  std::vector<std::string> writes_;
  int next_minor_ = 0;
  std::set<std::string> busy_;
  std::map<std::string, std::string> whole_disk_;  // partition -> whole disk
  std::map<std::string, std::string> char_dev_;    // nvme0, ng0n1 -> major:minor
  std::vector<std::vector<std::string>> open_at_unbind_;
};

// A RealSysfs over the fake kernel's dev/ or proc/ tree that answers like
// the kernel where a temporary directory cannot: an exclusive open of a
// block device the fake kernel marked busy fails, and device numbers come
// from the fake kernel (its device nodes are plain files, and a process's
// descriptor is a link to one).
class FakeKernelView : public RealSysfs {
 public:
  FakeKernelView(const FakeKernel* kernel, std::string root)
      : RealSysfs(std::move(root)), kernel_(kernel) {}

  absl::StatusOr<UniqueFd> OpenExclusive(std::string_view path) override;
  absl::StatusOr<std::map<std::string, std::string>> DeviceNumbersIn(
      std::string_view dir) override;

 private:
  const FakeKernel* kernel_;
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_FAKE_SYSFS_H_
