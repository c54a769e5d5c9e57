#include "tests/driver/fake_sysfs.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace pdc::driver::testing {
namespace fs = std::filesystem;

namespace {
constexpr char kPciRoot[] = "devices/pci0000:00";

bool IsNvmeClass(uint32_t class_code) { return (class_code >> 8) == 0x0108; }
}  // namespace

FakeKernel::FakeKernel(const std::string& base) : RealSysfs(base + "/sys"), base_(base) {
  for (const char* d : {"/sys/bus/pci/devices", "/sys/bus/pci/drivers", "/sys/kernel/iommu_groups",
                        "/sys/class/block", "/sys/class/net", "/sys/devices/pci0000:00", "/dev",
                        "/proc/self", "/proc/sys/kernel/random"}) {
    fs::create_directories(base_ + d);
  }
  Put(sys_root() + "/bus/pci/drivers_probe", "");
  Put(proc_root() + "/self/mountinfo",
      "22 1 0:21 / / rw,relatime - tmpfs rootfs rw\n");
  Put(proc_root() + "/swaps", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
  Put(proc_root() + "/sys/kernel/random/boot_id", std::string(kFakeBootId) + "\n");
  AddDriver({"nvme", {}, 0x010802});
  AddDriver({"vfio-pci", {}, std::nullopt});
  AddDriver({"pcieport", {}, 0x060400});
}

void FakeKernel::Put(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::trunc) << content;
}

void FakeKernel::Link(const std::string& target, const std::string& link) {
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_symlink(target, link);
}

std::string FakeKernel::DevDir(const std::string& address) const {
  return absl::StrCat(sys_root(), "/", kPciRoot, "/", address);
}

void FakeKernel::AddDriver(const FakeDriverSpec& spec) {
  drivers_[spec.name] = spec;
  const std::string dir = absl::StrCat(sys_root(), "/bus/pci/drivers/", spec.name);
  fs::create_directories(dir);
  for (const char* f : {"bind", "unbind", "new_id"}) Put(dir + "/" + f, "");
}

void FakeKernel::RemoveDriver(const std::string& name) {
  drivers_.erase(name);
  fs::remove_all(absl::StrCat(sys_root(), "/bus/pci/drivers/", name));
}

void FakeKernel::AddDevice(const FakePciDevice& spec) {
  devices_[spec.address] = spec;
  const std::string dir = DevDir(spec.address);
  fs::create_directories(dir);
  Put(dir + "/vendor", absl::StrFormat("0x%04x\n", spec.vendor));
  Put(dir + "/device", absl::StrFormat("0x%04x\n", spec.device));
  Put(dir + "/class", absl::StrFormat("0x%06x\n", spec.class_code));
  Put(dir + "/numa_node", absl::StrCat(spec.numa, "\n"));
  Put(dir + "/driver_override", "(null)\n");
  Link(absl::StrCat("../../../", kPciRoot, "/", spec.address),
       absl::StrCat(sys_root(), "/bus/pci/devices/", spec.address));
  if (spec.group >= 0) {
    const std::string g = absl::StrCat(sys_root(), "/kernel/iommu_groups/", spec.group);
    fs::create_directories(g + "/devices");
    Link(absl::StrCat("../../../../", kPciRoot, "/", spec.address),
         absl::StrCat(g, "/devices/", spec.address));
    Link(absl::StrCat("../../../kernel/iommu_groups/", spec.group), dir + "/iommu_group");
  }
  if (IsNvmeClass(spec.class_code)) {
    const int n = static_cast<int>(nvme_index_.size());
    nvme_index_[spec.address] = n;
  }
  if (!spec.driver.empty()) Attach(spec.address, spec.driver);
}

std::string FakeKernel::Driver(const std::string& address) const {
  std::error_code ec;
  fs::path target = fs::read_symlink(DevDir(address) + "/driver", ec);
  return ec ? "" : target.filename().string();
}

void FakeKernel::Attach(const std::string& address, const std::string& driver) {
  const FakePciDevice& spec = devices_.at(address);
  const std::string dir = DevDir(address);
  Link(absl::StrCat("../../../bus/pci/drivers/", driver), dir + "/driver");
  Link(absl::StrCat("../../../../", kPciRoot, "/", address),
       absl::StrCat(sys_root(), "/bus/pci/drivers/", driver, "/", address));
  if (driver == "vfio-pci") {
    fs::create_directories(dev_root() + "/vfio");
    Put(absl::StrCat(dev_root(), "/vfio/", spec.group), "");
    Put(dev_root() + "/vfio/vfio", "");
  }
  if (driver == "nvme" && nvme_index_.contains(address)) {
    const int n = nvme_index_.at(address);
    const std::string ctrl = absl::StrCat("nvme", n);
    const std::string cdir = absl::StrCat(dir, "/nvme/", ctrl);
    fs::create_directories(cdir);
    // The kernel pads serial and model with spaces.
    Put(cdir + "/serial", spec.serial + "    \n");
    Put(cdir + "/model", spec.model + "                  \n");
    Put(cdir + "/firmware_rev", spec.firmware_rev + "\n");
    Put(cdir + "/state", "live\n");
    // The controller's character device (nvme_dev_class, major from the
    // kernel's dynamic range) and each namespace's generic one (ngXnY).
    char_dev_[ctrl] = absl::StrCat("241:", n);
    Put(cdir + "/dev", char_dev_[ctrl] + "\n");
    Put(absl::StrCat(dev_root(), "/", ctrl), "");
    for (int ns = 1; ns <= spec.namespaces; ++ns) {
      const std::string name = absl::StrCat(ctrl, "n", ns);
      const std::string nsdir = absl::StrCat(cdir, "/", name);
      fs::create_directories(nsdir + "/holders");
      if (!block_dev_.contains(name)) block_dev_[name] = absl::StrCat("259:", next_minor_++);
      Put(nsdir + "/dev", block_dev_[name] + "\n");
      Put(nsdir + "/size", absl::StrCat(spec.namespace_sectors, "\n"));
      if (ns == 1 && !spec.nguid.empty()) Put(nsdir + "/nguid", spec.nguid + "\n");
      if (ns == 1 && !spec.eui.empty()) Put(nsdir + "/eui", spec.eui + "\n");
      Link(absl::StrCat("../../", kPciRoot, "/", address, "/nvme/", ctrl, "/", name),
           absl::StrCat(sys_root(), "/class/block/", name));
      Put(absl::StrCat(dev_root(), "/", name), "");
      const std::string ng = absl::StrCat("ng", n, "n", ns);
      fs::create_directories(absl::StrCat(cdir, "/", ng));
      char_dev_[ng] = absl::StrCat("240:", n * 64 + ns);
      Put(absl::StrCat(cdir, "/", ng, "/dev"), char_dev_[ng] + "\n");
      Put(absl::StrCat(dev_root(), "/", ng), "");
      for (int p = 1; p <= spec.partitions; ++p) {
        const std::string part = absl::StrCat(name, "p", p);
        fs::create_directories(absl::StrCat(nsdir, "/", part, "/holders"));
        if (!block_dev_.contains(part)) block_dev_[part] = absl::StrCat("259:", next_minor_++);
        Put(absl::StrCat(nsdir, "/", part, "/dev"), block_dev_[part] + "\n");
        Put(absl::StrCat(nsdir, "/", part, "/partition"), absl::StrCat(p, "\n"));
        Link(absl::StrCat("../../", kPciRoot, "/", address, "/nvme/", ctrl, "/", name, "/", part),
             absl::StrCat(sys_root(), "/class/block/", part));
        Put(absl::StrCat(dev_root(), "/", part), "");
        whole_disk_[part] = name;
      }
    }
  }
}

void FakeKernel::Detach(const std::string& address) {
  const std::string driver = Driver(address);
  const FakePciDevice& spec = devices_.at(address);
  const std::string dir = DevDir(address);
  fs::remove(dir + "/driver");
  fs::remove(absl::StrCat(sys_root(), "/bus/pci/drivers/", driver, "/", address));
  if (driver == "nvme") {
    fs::remove_all(dir + "/nvme");
    if (auto n = nvme_index_.find(address); n != nvme_index_.end()) {
      const std::string ctrl = absl::StrCat("nvme", n->second);
      const std::string ng = absl::StrCat("ng", n->second, "n");
      for (const auto& [name, number] : char_dev_) {
        if (name == ctrl || absl::StartsWith(name, ng)) fs::remove(dev_root() + "/" + name);
      }
    }
    for (const auto& entry : fs::directory_iterator(sys_root() + "/class/block")) {
      if (!fs::exists(entry.path())) {  // Dangling now: the disk went with the driver.
        fs::remove(dev_root() + "/" + entry.path().filename().string());
        fs::remove(entry.path());
      }
    }
  }
  if (driver == "vfio-pci") {
    bool group_still_used = false;
    for (const auto& [a, d] : devices_) {
      if (a != address && d.group == spec.group && Driver(a) == "vfio-pci") group_still_used = true;
    }
    if (!group_still_used) fs::remove(absl::StrCat(dev_root(), "/vfio/", spec.group));
  }
}

bool FakeKernel::Matches(const FakeDriverSpec& d, const FakePciDevice& dev) const {
  if (d.class_code && *d.class_code == dev.class_code) return true;
  for (const auto& [v, p] : d.ids) {
    if (v == dev.vendor && p == dev.device) return true;
  }
  return false;
}

void FakeKernel::Probe(const std::string& address) {
  if (!devices_.contains(address) || !Driver(address).empty()) return;
  const FakePciDevice& dev = devices_.at(address);
  auto ov = ReadFileToString(DevDir(address) + "/driver_override");
  std::string override_name = ov.ok() ? *ov : "(null)\n";
  override_name.pop_back();
  std::vector<std::string> candidates;
  if (override_name != "(null)") {
    if (drivers_.contains(override_name)) candidates.push_back(override_name);
  } else {
    for (const auto& [name, d] : drivers_) {
      if (Matches(d, dev)) candidates.push_back(name);
    }
  }
  for (const std::string& c : candidates) {
    if (failing_probes_.contains({address, c})) continue;
    if (c == "vfio-pci" && dev.group < 0) continue;  // -EINVAL without an IOMMU.
    Attach(address, c);
    return;
  }
}

void FakeKernel::FailProbe(const std::string& address, const std::string& driver) {
  failing_probes_.insert({address, driver});
}

void FakeKernel::FailWrite(const std::string& suffix) { failing_writes_.push_back(suffix); }

std::string FakeKernel::BlockDev(const std::string& name) const {
  auto it = block_dev_.find(name);
  return it == block_dev_.end() ? "" : it->second;
}

void FakeKernel::AddHolder(const std::string& block, const std::string& holder) {
  fs::path p = fs::canonical(absl::StrCat(sys_root(), "/class/block/", block));
  fs::create_directories(p / "holders" / holder);
}

void FakeKernel::AddMount(const std::string& majmin, const std::string& mount_point,
                          const std::string& source) {
  std::ofstream(proc_root() + "/self/mountinfo", std::ios::app)
      << "40 22 " << majmin << " / " << mount_point << " rw,relatime shared:5 - ext4 " << source
      << " rw\n";
}

void FakeKernel::AddSwap(const std::string& file) {
  std::ofstream(proc_root() + "/swaps", std::ios::app)
      << file << "                          partition\t1048572\t\t0\t\t-2\n";
}

absl::Status FakeKernel::Write(std::string_view path, std::string_view data) {
  auto resolved = Resolve(path);
  if (!resolved.ok()) return resolved.status();
  const std::string r = *resolved;
  writes_.push_back(absl::StrCat(r, " <- ", absl::CEscape(Sv(data))));
  for (auto it = failing_writes_.begin(); it != failing_writes_.end(); ++it) {
    if (absl::EndsWith(r, *it)) {
      failing_writes_.erase(it);
      return ErrnoStatus("write", r, EIO);
    }
  }
  std::string value(data);
  if (!value.empty() && value.back() == '\n') value.pop_back();

  if (absl::EndsWith(r, "/driver_override")) {
    Put(absl::StrCat(sys_root(), "/", r), value.empty() ? "(null)\n" : value + "\n");
    return absl::OkStatus();
  }
  if (r == "bus/pci/drivers_probe") {
    if (!devices_.contains(value)) return ErrnoStatus("write", r, ENODEV);
    Probe(value);
    return absl::OkStatus();
  }
  if (absl::StartsWith(r, "bus/pci/drivers/") && absl::EndsWith(r, "/unbind")) {
    const std::string driver = r.substr(16, r.size() - 16 - 7);
    if (!devices_.contains(value) || Driver(value) != driver) return ErrnoStatus("write", r, ENODEV);
    open_at_unbind_.push_back(OpenDevNodes());
    Detach(value);
    return absl::OkStatus();
  }
  if (absl::StartsWith(r, "bus/pci/drivers/") && absl::EndsWith(r, "/bind")) {
    const std::string driver = r.substr(16, r.size() - 16 - 5);
    if (!devices_.contains(value) || !Driver(value).empty()) return ErrnoStatus("write", r, ENODEV);
    Attach(value, driver);
    return absl::OkStatus();
  }
  return RealSysfs::Write(path, data);
}

void FakeKernel::AddDisk(const std::string& address, const std::string& name, int partitions) {
  const std::string rel = absl::StrCat(kPciRoot, "/", address, "/ata1/host0/target0:0:0/0:0:0:0/block/", name);
  const std::string dir = absl::StrCat(sys_root(), "/", rel);
  fs::create_directories(dir + "/holders");
  if (!block_dev_.contains(name)) block_dev_[name] = absl::StrCat("8:", next_minor_++);
  Put(dir + "/dev", block_dev_[name] + "\n");
  Link(absl::StrCat("../../", rel), absl::StrCat(sys_root(), "/class/block/", name));
  Put(absl::StrCat(dev_root(), "/", name), "");
  for (int p = 1; p <= partitions; ++p) {
    const std::string part = absl::StrCat(name, p);
    fs::create_directories(absl::StrCat(dir, "/", part, "/holders"));
    if (!block_dev_.contains(part)) block_dev_[part] = absl::StrCat("8:", next_minor_++);
    Put(absl::StrCat(dir, "/", part, "/dev"), block_dev_[part] + "\n");
    Put(absl::StrCat(dir, "/", part, "/partition"), absl::StrCat(p, "\n"));
    Link(absl::StrCat("../../", rel, "/", part), absl::StrCat(sys_root(), "/class/block/", part));
    Put(absl::StrCat(dev_root(), "/", part), "");
    whole_disk_[part] = name;
  }
}

std::string FakeKernel::WholeDisk(const std::string& block) const {
  auto it = whole_disk_.find(block);
  return it == whole_disk_.end() ? block : it->second;
}

bool FakeKernel::ExclusiveOpenRefused(const std::string& node) const {
  if (busy_.contains(node)) return true;
  if (!block_dev_.contains(node)) return false;
  // Each open file is its own holder (blkdev_open passes the file as the
  // holder of an O_EXCL open), and bd_may_claim (block/bdev.c) refuses a
  // claim of a device another holder claims, of a partition whose whole
  // disk another holder claims, and of a whole disk one of whose partitions
  // is claimed (the whole disk's holder is then bd_may_claim itself).
  const std::vector<std::string> open = OpenDevNodes();
  auto claimed = [&](const std::string& b) {
    return busy_.contains(b) || std::find(open.begin(), open.end(), b) != open.end();
  };
  if (claimed(node)) return true;
  const std::string whole = WholeDisk(node);
  if (whole != node) return claimed(whole);
  for (const auto& [part, disk] : whole_disk_) {
    if (disk == node && claimed(part)) return true;
  }
  return false;
}

std::vector<std::string> FakeKernel::OpenDevNodes() const {
  std::vector<std::string> out;
  std::error_code ec;
  const std::string prefix = fs::weakly_canonical(dev_root(), ec).string() + "/";
  for (const auto& entry : fs::directory_iterator("/proc/self/fd", ec)) {
    const fs::path target = fs::read_symlink(entry.path(), ec);
    if (!ec && absl::StartsWith(target.string(), prefix)) {
      out.push_back(target.string().substr(prefix.size()));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void FakeKernel::MarkBusy(const std::string& block) { busy_.insert(block); }

void FakeKernel::AddProcess(int pid, const std::string& comm,
                            const std::vector<std::string>& nodes) {
  const std::string dir = absl::StrCat(proc_root(), "/", pid);
  fs::create_directories(dir + "/fd");
  Put(dir + "/comm", comm + "\n");
  int fd = 3;
  for (const std::string& n : nodes) {
    Link(absl::StrCat(dev_root(), "/", n), absl::StrCat(dir, "/fd/", fd++));
    if (absl::StartsWith(n, "vfio/")) busy_.insert(n);  // A group has one opener.
  }
}

void FakeKernel::AddLoop(const std::string& name, const std::string& backing_file) {
  const std::string dir = absl::StrCat(sys_root(), "/devices/virtual/block/", name);
  fs::create_directories(dir + "/loop");
  Put(dir + "/dev", absl::StrCat("7:", next_minor_++, "\n"));
  Put(dir + "/loop/backing_file", backing_file + "\n");
  Link(absl::StrCat("../../devices/virtual/block/", name),
       absl::StrCat(sys_root(), "/class/block/", name));
}

void FakeKernel::AddInterface(const std::string& address, const std::string& name,
                              uint32_t flags, const std::string& master) {
  const std::string rel = absl::StrCat(kPciRoot, "/", address, "/net/", name);
  const std::string dir = absl::StrCat(sys_root(), "/", rel);
  fs::create_directories(dir);
  fs::create_directories(sys_root() + "/class/net");
  Put(dir + "/flags", absl::StrFormat("0x%x\n", flags));
  Link(absl::StrCat("../../", rel), absl::StrCat(sys_root(), "/class/net/", name));
  if (!master.empty()) {
    fs::create_directories(absl::StrCat(sys_root(), "/devices/virtual/net/", master));
    Link(absl::StrCat("../../../../virtual/net/", master), dir + "/master");
  }
}

std::string FakeKernel::NodeNumber(const std::string& node) const {
  const std::string prefix = dev_root() + "/";
  if (!absl::StartsWith(node, prefix)) return "";
  const std::string name = node.substr(prefix.size());
  if (auto it = block_dev_.find(name); it != block_dev_.end()) return "b" + it->second;
  if (auto it = char_dev_.find(name); it != char_dev_.end()) return "c" + it->second;
  if (absl::StartsWith(name, "vfio/")) {
    int group = 0;
    if (absl::SimpleAtoi(name.substr(5), &group)) return absl::StrCat("c511:", group);
  }
  return "";
}

absl::StatusOr<UniqueFd> FakeKernelView::OpenExclusive(std::string_view path) {
  if (kernel_->ExclusiveOpenRefused(std::string(path))) {
    return absl::FailedPreconditionError(absl::StrCat(root(), "/", Sv(path), " is busy"));
  }
  return RealSysfs::OpenExclusive(path);
}

absl::StatusOr<std::map<std::string, std::string>> FakeKernelView::DeviceNumbersIn(
    std::string_view dir) {
  auto names = List(dir);
  if (!names.ok()) return names.status();
  std::map<std::string, std::string> out;
  for (const std::string& n : *names) {
    const std::string p = absl::StrCat(root(), "/", Sv(dir), "/", n);
    std::error_code ec;
    const fs::path target = fs::is_symlink(p, ec) ? fs::read_symlink(p, ec) : fs::path(p);
    if (ec) continue;
    const std::string number = kernel_->NodeNumber(target.string());
    if (!number.empty()) out[n] = number;
  }
  return out;
}

}  // namespace pdc::driver::testing
