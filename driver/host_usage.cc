#include "driver/host_usage.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/device_kind.h"
#include "driver/disk_signatures.h"

namespace pdc::driver {
namespace {

constexpr uint32_t kIffUp = 0x1;  // IFF_UP of <linux/if.h>.

bool IsAllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
}

// Unescapes mountinfo's octal escapes (\040 for a space).
std::string UnescapeMount(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    auto octal = [&](size_t k) { return s[k] >= '0' && s[k] <= '7'; };
    if (s[i] == '\\' && i + 3 < s.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
                                      (s[i + 3] - '0')));
      i += 3;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

absl::Status CannotCheck(std::string_view what, const absl::Status& why) {
  return absl::FailedPreconditionError(absl::StrCat("cannot check ", Sv(what), ": ", why.ToString()));
}

// One pass over every process's descriptors: for each device number in
// `wanted` ("b259:1"), the processes holding it, as "process 42 (comm)".
// pdc-node itself is skipped.
absl::StatusOr<std::map<std::string, std::vector<std::string>>> ProcessesHolding(
    Sysfs& proc, const std::set<std::string>& wanted) {
  std::map<std::string, std::vector<std::string>> out;
  if (wanted.empty()) return out;
  const auto self = proc.Resolve("self");
  ASSIGN_OR_RETURN(std::vector<std::string> entries, proc.List("."));
  for (const std::string& pid : entries) {
    if (!IsAllDigits(pid) || (self.ok() && *self == pid)) continue;
    auto fds = proc.DeviceNumbersIn(absl::StrCat(pid, "/fd"));
    if (absl::IsNotFound(fds.status())) continue;  // Exited meanwhile.
    if (!fds.ok()) return CannotCheck(absl::StrCat("the open files of process ", pid), fds.status());
    for (const auto& [fd, number] : *fds) {
      if (!wanted.contains(number)) continue;
      auto comm = ReadTrimmed(proc, absl::StrCat(pid, "/comm"));
      out[number].push_back(absl::StrCat("process ", pid, " (", comm.ok() ? *comm : "?", ")"));
      break;  // Once per process is enough to say it.
    }
  }
  return out;
}

// Every entry of class/block with its resolved sysfs path (entries removed
// meanwhile left out), read once per check however many functions it covers.
using BlockIndex = std::vector<std::pair<std::string, std::string>>;

absl::StatusOr<BlockIndex> ReadBlockIndex(Sysfs& sys) {
  ASSIGN_OR_RETURN(std::vector<std::string> all, sys.List("class/block"));
  BlockIndex index;
  for (const std::string& b : all) {
    auto where = sys.Resolve(absl::StrCat("class/block/", b));
    if (absl::IsNotFound(where.status())) continue;  // Removed meanwhile.
    if (!where.ok()) return where.status();
    index.emplace_back(b, std::move(*where));
  }
  return index;
}

absl::StatusOr<std::vector<std::string>> BlockDevicesIn(Sysfs& sys, const PciFunctionInfo& info,
                                                        const BlockIndex& index) {
  std::vector<std::string> disks;
  std::vector<std::string> partitions;
  if (info.driver.empty() || info.driver == kVfioPci) return disks;
  ASSIGN_OR_RETURN(std::vector<std::string> under, KindOf(info).BlockDeviceDirs(sys, info));
  for (const auto& entry : index) {
    const auto& [b, where] = entry;
    // clang-14 lets no lambda capture a structured binding: it reads the pair.
    const bool ours = std::any_of(under.begin(), under.end(), [&](const std::string& u) {
      const auto& w = entry.second;
      return u.ends_with("/") ? w.starts_with(u) : w == u;
    });
    if (!ours) continue;
    const std::string dir = absl::StrCat("class/block/", b);
    // Hidden multipath paths have no device node; their head stands for them.
    if (auto hidden = ReadTrimmed(sys, dir + "/hidden"); hidden.ok() && *hidden == "1") continue;
    (sys.Exists(dir + "/partition") ? partitions : disks).push_back(b);
  }
  disks.insert(disks.end(), partitions.begin(), partitions.end());
  return disks;
}

struct BlockDevice {
  std::string name;
  std::string number;  // major:minor
  bool partition = false;
};

struct Mount {
  std::string number;  // major:minor of the mounted device
  std::string mount_point;
  std::string source;  // e.g. "/dev/nvme0n1p1"
};

struct LoopDevice {
  std::string name;
  std::string backing_file;
};

// The host's tables a storage check reads, read once per check however many
// functions it covers. Each is an error saying what could not be read.
struct HostTables {
  absl::StatusOr<std::map<std::string, std::vector<std::string>>> holding;
  absl::StatusOr<std::vector<Mount>> mounts;
  absl::StatusOr<std::vector<std::string>> swaps;
  absl::StatusOr<std::vector<LoopDevice>> loops;
};

absl::StatusOr<std::vector<Mount>> ReadMounts(const HostView& host) {
  auto mountinfo = host.proc->Read(host.mountinfo_path);
  if (!mountinfo.ok()) return CannotCheck("the host's mounts", mountinfo.status());
  std::vector<Mount> mounts;
  for (absl::string_view line : absl::StrSplit(*mountinfo, '\n', absl::SkipEmpty())) {
    // 36 35 98:0 /root /mnt rw,noatime master:1 - ext3 /dev/root rw
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() < 5) continue;
    Mount m{std::string(f[2]), UnescapeMount(f[4]), ""};
    for (size_t i = 5; i + 2 < f.size(); ++i) {
      if (f[i] == "-") {
        m.source = UnescapeMount(f[i + 2]);
        break;
      }
    }
    mounts.push_back(std::move(m));
  }
  return mounts;
}

absl::StatusOr<std::vector<std::string>> ReadSwaps(Sysfs& proc) {
  auto swaps = proc.Read("swaps");
  if (!swaps.ok()) return CannotCheck("the host's swap devices", swaps.status());
  std::vector<std::string> files;
  for (absl::string_view line : absl::StrSplit(*swaps, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.empty() || f[0] == "Filename") continue;
    files.push_back(UnescapeMount(f[0]));
  }
  return files;
}

absl::StatusOr<std::vector<LoopDevice>> ReadLoops(Sysfs& sys) {
  auto all = sys.List("class/block");
  if (!all.ok()) return CannotCheck("the host's loop devices", all.status());
  std::vector<LoopDevice> loops;
  for (const std::string& l : *all) {
    if (!l.starts_with("loop")) continue;
    auto backing = ReadTrimmed(sys, absl::StrCat("class/block/", l, "/loop/backing_file"));
    if (absl::IsNotFound(backing.status())) continue;  // Not attached.
    if (!backing.ok()) return CannotCheck(absl::StrCat("loop device ", l), backing.status());
    loops.push_back({l, std::string(absl::StripSuffix(*backing, " (deleted)"))});
  }
  return loops;
}

// The mount whose mount point is the longest prefix of `path` (the last one
// mounted there when several are), or null.
const Mount* MountHolding(const std::vector<Mount>& mounts, std::string_view path) {
  const Mount* best = nullptr;
  for (const Mount& m : mounts) {
    const std::string_view mp = m.mount_point;
    const bool below = mp == "/" ? path.starts_with("/")
                                 : path == mp || (path.starts_with(mp) && path[mp.size()] == '/');
    if (below && (best == nullptr || mp.size() >= best->mount_point.size())) best = &m;
  }
  return best;
}

// Whether `part` is a partition of disk `disk` (its sysfs directory lies
// directly below the disk's).
bool IsPartitionOf(Sysfs& sys, const std::string& part, const std::string& disk) {
  auto p = sys.Resolve(absl::StrCat("class/block/", part));
  auto d = sys.Resolve(absl::StrCat("class/block/", disk));
  return p.ok() && d.ok() && *p == absl::StrCat(*d, "/", part);
}

// The block devices behind a storage function with their numbers; holders
// are uses.
absl::StatusOr<std::vector<BlockDevice>> CollectBlocks(Sysfs& sys, const PciFunctionInfo& info,
                                                       const BlockIndex& index,
                                                       std::vector<std::string>* uses) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, BlockDevicesIn(sys, info, index));
  std::vector<BlockDevice> blocks;
  for (const std::string& b : names) {
    const std::string dir = absl::StrCat("class/block/", b);
    auto number = ReadTrimmed(sys, dir + "/dev");
    if (!number.ok()) return CannotCheck(absl::StrCat("block device ", b), number.status());
    auto holders = sys.List(dir + "/holders");
    if (!holders.ok()) return CannotCheck(absl::StrCat("the holders of ", b), holders.status());
    if (!holders->empty()) {
      uses->push_back(absl::StrCat(b, " is held by ", absl::StrJoin(*holders, ", "),
                                   " (md, dm or LVM)"));
    }
    blocks.push_back({b, *number, sys.Exists(dir + "/partition")});
  }
  return blocks;
}

// What the host does with the block devices of one storage function. The
// exclusive descriptors opened along the way go into `opened`.
absl::Status BlockUses(const HostView& host, const HostTables& tables,
                       const std::vector<BlockDevice>& blocks, BlockDeviceHold* opened,
                       std::vector<std::string>* uses) {
  // Processes first (read before any exclusive descriptor of this check
  // existed; pdc-node's own are skipped anyway).
  if (!tables.holding.ok()) return tables.holding.status();
  for (const BlockDevice& b : blocks) {
    auto it = tables.holding->find("b" + b.number);
    if (it == tables.holding->end()) continue;
    for (const std::string& p : it->second) uses->push_back(absl::StrCat(b.name, " is open in ", p));
  }

  // Only whole disks (and multipath heads) are held O_EXCL. The kernel makes
  // each open file a holder of its own and refuses a partition of a disk
  // another holder claims (bd_may_claim in block/bdev.c), so holding the
  // disk and then opening its partitions would refuse every partitioned
  // disk; and a claimed partition (a mount, md, swap) makes the claim of its
  // whole disk fail, so the disk's O_EXCL open covers its partitions.
  for (const BlockDevice& b : blocks) {
    if (b.partition) continue;
    auto fd = host.dev->OpenExclusive(b.name);
    if (fd.ok()) {
      opened->Add(std::move(*fd));
      continue;
    }
    if (!absl::IsFailedPrecondition(fd.status())) {
      return CannotCheck(absl::StrCat(b.name, " (open /dev/", b.name,
                                      " exclusively; is the host's /dev mounted?)"),
                         fd.status());
    }
    // Which one is claimed: each partition on its own, closed at once
    // (nothing of this disk is held now, so the probes refuse only what
    // another holder claims).
    std::vector<const BlockDevice*> refused;
    for (const BlockDevice& p : blocks) {
      if (!p.partition || !IsPartitionOf(*host.sys, p.name, b.name)) continue;
      auto pfd = host.dev->OpenExclusive(p.name);
      if (absl::IsFailedPrecondition(pfd.status())) refused.push_back(&p);
    }
    if (refused.empty()) refused.push_back(&b);
    for (const BlockDevice* r : refused) {
      uses->push_back(absl::StrCat("/dev/", r->name, " (", r->number,
                                   ") is in use by the host (mounted, swap, RAID/LVM member, ZFS "
                                   "or held open exclusively): the kernel refuses to open it "
                                   "exclusively"));
    }
  }

  if (!tables.mounts.ok()) return tables.mounts.status();
  for (const Mount& m : *tables.mounts) {
    for (const BlockDevice& b : blocks) {
      if (b.number == m.number || m.source == absl::StrCat("/dev/", b.name)) {
        uses->push_back(absl::StrCat(b.name, " (", b.number, ") is mounted at ", m.mount_point));
      }
    }
  }

  if (!tables.swaps.ok()) return tables.swaps.status();
  for (const std::string& file : *tables.swaps) {
    for (const BlockDevice& b : blocks) {
      if (file == absl::StrCat("/dev/", b.name)) uses->push_back(absl::StrCat(b.name, " is used as swap"));
    }
  }

  // A loop device over the raw disk holds it without a mount, a holder or
  // a process (the kernel keeps the file open). One over a file on a file
  // system of the disk keeps that file system alive even once unmounted
  // lazily (then only the exclusive open above sees it); while mounted,
  // the mount table says which disk holds the file.
  if (!tables.loops.ok()) return tables.loops.status();
  for (const LoopDevice& l : *tables.loops) {
    const Mount* on = l.backing_file.starts_with("/dev/") ? nullptr
                                                          : MountHolding(*tables.mounts, l.backing_file);
    for (const BlockDevice& b : blocks) {
      if (l.backing_file == absl::StrCat("/dev/", b.name)) {
        uses->push_back(absl::StrCat(b.name, " backs loop device ", l.name));
      } else if (on != nullptr &&
                 (on->number == b.number || on->source == absl::StrCat("/dev/", b.name))) {
        uses->push_back(absl::StrCat(b.name, " (", b.number, ") holds ", l.backing_file,
                                     ", the backing file of loop device ", l.name,
                                     " (mounted at ", on->mount_point, ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status NetworkInterfaceUses(Sysfs& sys, const PciFunctionInfo& info,
                                  std::vector<std::string>* uses) {
  auto self = sys.Resolve(DevicePath(info.address));
  if (!self.ok()) return CannotCheck(info.address.ToString(), self.status());
  auto interfaces = sys.List("class/net");
  if (!interfaces.ok()) return CannotCheck("the host's network interfaces", interfaces.status());
  int seen = 0;
  for (const std::string& i : *interfaces) {
    const std::string dir = absl::StrCat("class/net/", i);
    auto where = sys.Resolve(dir);
    if (absl::IsNotFound(where.status())) continue;  // Removed meanwhile.
    if (!where.ok()) return CannotCheck(absl::StrCat("interface ", i), where.status());
    if (!where->starts_with(*self + "/")) continue;
    ++seen;
    auto flags_text = ReadTrimmed(sys, dir + "/flags");
    uint32_t flags = 0;
    if (!flags_text.ok()) return CannotCheck(absl::StrCat("interface ", i), flags_text.status());
    if (!absl::SimpleHexAtoi(*flags_text, &flags)) {
      return CannotCheck(absl::StrCat("interface ", i),
                         absl::InvalidArgumentError(absl::StrCat("flags \"", *flags_text,
                                                                 "\" is not hex")));
    }
    if (flags & kIffUp) uses->push_back(absl::StrCat("interface ", i, " is up"));
    ASSIGN_OR_RETURN(std::vector<std::string> entries, sys.List(dir));
    for (const std::string& e : entries) {
      if (e == "master") {
        auto m = LinkName(sys, dir + "/master");
        uses->push_back(absl::StrCat("interface ", i, " is part of ", m.ok() ? *m : "another device"));
      } else if (e.starts_with("upper_")) {
        uses->push_back(absl::StrCat("interface ", i, " is part of ", e.substr(6)));
      }
    }
  }
  if (seen == 0) {
    // A network driver without a host interface: the interface was most
    // likely moved into another network namespace (a pod's), where pdc-node
    // cannot see whether it is up.
    return CannotCheck(absl::StrCat("the interfaces of ", info.address.ToString()),
                       absl::NotFoundError(absl::StrCat(
                           "it is on ", info.driver,
                           " but no network interface of it is visible in the host's network "
                           "namespace (moved into a pod's?)")));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> BlockDevicesOf(Sysfs& sys, const PciFunctionInfo& info) {
  if (info.driver.empty() || info.driver == kVfioPci) return std::vector<std::string>{};
  ASSIGN_OR_RETURN(BlockIndex index, ReadBlockIndex(sys));
  return BlockDevicesIn(sys, info, index);
}

namespace {

// A namespace (or passthrough controller) the kernel NVMe-oF target
// exports: configfs `nvmet/subsystems/<nqn>/namespaces/<n>/device_path`
// (and `passthru/device_path`), e.g. "/dev/nvme0n1".
struct TargetExport {
  std::string what;         // "subsystem <nqn> namespace <n>"
  std::string device_name;  // "nvme0n1": the path's last component, links followed.
};

absl::StatusOr<std::vector<TargetExport>> ReadTargetExports(const HostView& host) {
  std::vector<TargetExport> out;
  const std::string root = "kernel/config/nvmet/subsystems";
  auto subsystems = host.sys->List(root);
  if (absl::IsNotFound(subsystems.status())) return out;  // No target configured.
  if (!subsystems.ok()) return CannotCheck("the NVMe-oF target's subsystems", subsystems.status());
  auto add = [&](const std::string& file, std::string what) -> absl::Status {
    auto path = ReadTrimmed(*host.sys, file);
    if (absl::IsNotFound(path.status())) return absl::OkStatus();
    if (!path.ok()) return CannotCheck(file, path.status());
    absl::string_view p = *path;
    if (!absl::ConsumePrefix(&p, "/dev/") || p.empty()) return absl::OkStatus();
    std::string name(p);
    if (auto r = host.dev->Resolve(name); r.ok()) name = *r;  // /dev/disk/by-id/... links.
    name = name.substr(name.rfind('/') + 1);
    out.push_back({std::move(what), std::move(name)});
    return absl::OkStatus();
  };
  for (const std::string& nqn : *subsystems) {
    const std::string sdir = absl::StrCat(root, "/", nqn);
    RETURN_IF_ERROR(add(sdir + "/passthru/device_path", absl::StrCat("subsystem ", nqn, " (passthru)")));
    auto namespaces = host.sys->List(sdir + "/namespaces");
    if (absl::IsNotFound(namespaces.status())) continue;
    if (!namespaces.ok()) return CannotCheck(sdir, namespaces.status());
    for (const std::string& n : *namespaces) {
      RETURN_IF_ERROR(add(absl::StrCat(sdir, "/namespaces/", n, "/device_path"),
                          absl::StrCat("subsystem ", nqn, " namespace ", n)));
    }
  }
  return out;
}

// Every process's mapped files (`<pid>/maps`, the path column), by
// "process <pid> (<comm>)"; pdc-node itself is skipped, processes gone
// meanwhile too.
absl::StatusOr<std::map<std::string, std::vector<std::string>>> ReadMappings(Sysfs& proc) {
  std::map<std::string, std::vector<std::string>> out;
  const auto self = proc.Resolve("self");
  ASSIGN_OR_RETURN(std::vector<std::string> entries, proc.List("."));
  for (const std::string& pid : entries) {
    if (!IsAllDigits(pid) || (self.ok() && *self == pid)) continue;
    auto maps = proc.Read(absl::StrCat(pid, "/maps"));
    if (absl::IsNotFound(maps.status())) continue;  // Exited meanwhile.
    if (!maps.ok()) return CannotCheck(absl::StrCat("the mappings of process ", pid), maps.status());
    auto comm = ReadTrimmed(proc, absl::StrCat(pid, "/comm"));
    std::vector<std::string>& files = out[absl::StrCat("process ", pid, " (", comm.ok() ? *comm : "?", ")")];
    for (absl::string_view line : absl::StrSplit(*maps, '\n', absl::SkipEmpty())) {
      // 7f00-7f01 rw-s 00000000 00:15 1234   /sys/devices/pci0000:00/0000:00:03.0/resource0
      const size_t slash = line.find('/');
      if (slash != absl::string_view::npos) files.emplace_back(line.substr(slash));
    }
  }
  return out;
}

// The probe of one check of several functions: the kinds register the
// block devices of function `current`; the tables every block device is
// checked against are read once afterwards.
class BatchProbe : public HostUseProbe {
 public:
  explicit BatchProbe(const HostView& host, size_t n) : host_(host), blocks_(n), chars_(n) {}

  const HostView& host() const override { return host_; }

  absl::Status CheckBlockDevices(const PciFunctionInfo& info,
                                 std::vector<std::string>* uses) override {
    if (!block_index_.has_value()) block_index_ = ReadBlockIndex(*host_.sys);
    if (!block_index_->ok()) return block_index_->status();
    ASSIGN_OR_RETURN(std::vector<BlockDevice> b, CollectBlocks(*host_.sys, info, **block_index_, uses));
    for (const BlockDevice& d : b) wanted_.insert("b" + d.number);
    if (!b.empty()) {
      if (!exports_.has_value()) exports_ = ReadTargetExports(host_);
      if (!exports_->ok()) return exports_->status();
      for (const TargetExport& e : **exports_) {
        for (const BlockDevice& d : b) {
          if (e.device_name == d.name) {
            uses->push_back(absl::StrCat(d.name, " is exported by the kernel NVMe-oF target (",
                                         e.what, ")"));
          }
        }
      }
    }
    auto& mine = blocks_[current_];
    mine.insert(mine.end(), b.begin(), b.end());
    return absl::OkStatus();
  }

  void CheckCharDevices(const std::vector<std::pair<std::string, std::string>>& devices) override {
    for (const auto& [name, number] : devices) {
      wanted_.insert("c" + number);
      chars_[current_].push_back({name, number});
    }
  }

  absl::Status CheckUserspaceHolders(const PciFunctionInfo& info,
                                     std::vector<std::string>* uses) override {
    if (!mappings_.has_value()) mappings_ = ReadMappings(*host_.proc);
    if (!mappings_->ok()) return mappings_->status();
    const std::string needle = absl::StrCat("/", info.address.ToString(), "/");
    for (const auto& [process, paths] : **mappings_) {
      for (const std::string& p : paths) {
        const size_t at = p.find(needle);
        if (at == std::string::npos) continue;
        const std::string_view file = std::string_view(p).substr(at + needle.size());
        if (!file.starts_with("resource") && file != "config") continue;
        uses->push_back(absl::StrCat("it is on no driver, but ", process, " maps ",
                                     Sv(file), " of it (a userspace driver)"));
        break;
      }
    }
    return absl::OkStatus();
  }

  void set_current(size_t i) { current_ = i; }
  const std::set<std::string>& wanted() const { return wanted_; }
  const std::vector<BlockDevice>& blocks(size_t i) const { return blocks_[i]; }
  const std::vector<BlockDevice>& chars(size_t i) const { return chars_[i]; }

 private:
  const HostView& host_;
  size_t current_ = 0;
  std::optional<absl::StatusOr<BlockIndex>> block_index_;  // Read at the first storage function.
  std::optional<absl::StatusOr<std::vector<TargetExport>>> exports_;
  // "process 42 (spdk_tgt)" -> the files it maps or holds open.
  std::optional<absl::StatusOr<std::map<std::string, std::vector<std::string>>>> mappings_;
  std::vector<std::vector<BlockDevice>> blocks_;
  std::vector<std::vector<BlockDevice>> chars_;  // Character devices, by name and number.
  std::set<std::string> wanted_;
};

// Idle ownership: nothing holds the disk, but a tool would take it (an
// unassembled array, an inactive volume group, an exported pool...).
absl::Status SignatureUses(const HostView& host, const std::vector<BlockDevice>& blocks,
                           std::vector<std::string>* uses) {
  for (const BlockDevice& d : blocks) {
    uint64_t size = 0;
    if (auto sectors = ReadTrimmed(*host.sys, absl::StrCat("class/block/", d.name, "/size"));
        sectors.ok() && absl::SimpleAtoi(*sectors, &size)) {
      size *= 512;
    }
    auto sig = FindDiskSignature(*host.dev, d.name, size);
    if (!sig.ok()) {
      return CannotCheck(absl::StrCat(d.name, " (read its signatures from /dev/", d.name, ")"),
                         sig.status());
    }
    if (sig->has_value()) {
      uses->push_back(absl::StrCat("/dev/", d.name, " holds ", **sig,
                                   ": it belongs to the host or to a tool of it even while "
                                   "nothing has it open (wipe the signature to offer it)"));
    }
  }
  return absl::OkStatus();
}

// SR-IOV: a physical function with virtual functions enabled shares the
// device with them; a virtual function of a kind whose functions share data
// (a storage controller's) shares its physical function's media.
absl::Status SriovUses(const HostView& host, const PciFunctionInfo& info,
                       std::vector<std::string>* uses) {
  if (host.policy.allow_sriov) return absl::OkStatus();
  const std::string dir = DevicePath(info.address);
  if (auto n = ReadTrimmed(*host.sys, dir + "/sriov_numvfs"); n.ok()) {
    int vfs = 0;
    if (!absl::SimpleAtoi(*n, &vfs)) {
      return CannotCheck(absl::StrCat(dir, "/sriov_numvfs"),
                         absl::InvalidArgumentError(absl::StrCat("\"", *n, "\" is not a number")));
    }
    if (vfs > 0) {
      uses->push_back(absl::StrCat(
          "it is an SR-IOV physical function with ", vfs, " virtual function(s) enabled "
          "(sriov_numvfs): they share the device (set node.allowSriov to offer it)"));
    }
  }
  if (auto pf = LinkName(*host.sys, dir + "/physfn"); pf.ok()) {
    auto pf_address = PciAddress::Parse(*pf);
    if (!pf_address.ok()) return CannotCheck(absl::StrCat(dir, "/physfn"), pf_address.status());
    auto pf_info = ReadPciFunction(*host.sys, *pf_address);
    if (!pf_info.ok()) return CannotCheck(absl::StrCat("physical function ", *pf), pf_info.status());
    if (KindOf(*pf_info).VirtualFunctionsShareData()) {
      uses->push_back(absl::StrCat(
          "it is an SR-IOV virtual function of ", *pf, " (", Sv(KindOf(*pf_info).name()),
          "): it shares that controller's media with the host and its other functions (set "
          "node.allowSriov to offer it)"));
    }
  }
  return absl::OkStatus();
}

// The checks of HostUsesOf for several functions; `opened[i]` receives the
// exclusive descriptors of function i.
std::vector<absl::StatusOr<std::vector<std::string>>> CheckEach(
    const HostView& host, const std::vector<HostUsageQuery>& queries,
    std::vector<BlockDeviceHold>* opened) {
  const size_t n = queries.size();
  std::vector<absl::Status> errors(n);
  std::vector<std::vector<std::string>> uses(n);
  opened->resize(n);
  BatchProbe probe(host, n);
  for (size_t i = 0; i < n; ++i) {
    const PciFunctionInfo& info = queries[i].info;
    if (info.driver == kVfioPci) continue;
    const DeviceClass* c = queries[i].device_class;
    if (c == nullptr) {
      errors[i] = absl::InvalidArgumentError(
          absl::StrCat(info.address.ToString(), " matches no device class"));
      continue;
    }
    probe.set_current(i);
    if (!info.driver.empty()) errors[i] = SriovUses(host, info, &uses[i]);
    if (errors[i].ok()) errors[i] = KindOf(info).HostUses(probe, info, *c, &uses[i]);
  }
  if (!probe.wanted().empty()) {
    HostTables tables;
    tables.holding = ProcessesHolding(*host.proc, probe.wanted());
    tables.mounts = ReadMounts(host);
    tables.swaps = ReadSwaps(*host.proc);
    tables.loops = ReadLoops(*host.sys);
    for (size_t i = 0; i < n; ++i) {
      if (!errors[i].ok()) continue;
      if (!probe.chars(i).empty()) {
        if (!tables.holding.ok()) {
          errors[i] = tables.holding.status();
          continue;
        }
        for (const BlockDevice& c : probe.chars(i)) {
          auto it = tables.holding->find("c" + c.number);
          if (it == tables.holding->end()) continue;
          for (const std::string& p : it->second) {
            uses[i].push_back(absl::StrCat("/dev/", c.name, " is open in ", p));
          }
        }
      }
      if (probe.blocks(i).empty()) continue;
      errors[i] = BlockUses(host, tables, probe.blocks(i), &(*opened)[i], &uses[i]);
      if (errors[i].ok() && !queries[i].pdc_drive) {
        errors[i] = SignatureUses(host, probe.blocks(i), &uses[i]);
      }
    }
  }
  std::vector<absl::StatusOr<std::vector<std::string>>> out;
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i].ok()) {
      out.push_back(errors[i]);
      continue;
    }
    std::sort(uses[i].begin(), uses[i].end());
    uses[i].erase(std::unique(uses[i].begin(), uses[i].end()), uses[i].end());
    out.push_back(std::move(uses[i]));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> HostUsesOf(const HostView& host,
                                                    const PciFunctionInfo& info,
                                                    const DeviceClass& device_class,
                                                    BlockDeviceHold* hold, bool pdc_drive) {
  std::vector<BlockDeviceHold> opened;
  auto results = CheckEach(host, {HostUsageQuery{info, &device_class, pdc_drive}}, &opened);
  if (results[0].ok() && results[0]->empty() && hold != nullptr) hold->Take(std::move(opened[0]));
  return std::move(results[0]);
}

std::vector<absl::StatusOr<std::vector<std::string>>> HostUsesOfEach(
    const HostView& host, const std::vector<HostUsageQuery>& queries) {
  std::vector<BlockDeviceHold> opened;
  return CheckEach(host, queries, &opened);
}

absl::StatusOr<std::vector<std::string>> VfioGroupUsers(const HostView& host, int32_t group) {
  const std::string name = absl::StrCat(group);
  ASSIGN_OR_RETURN(auto nodes, host.dev->DeviceNumbersIn("vfio"));
  auto it = nodes.find(name);
  if (it == nodes.end()) {
    return absl::NotFoundError(absl::StrCat("/dev/vfio/", name, " does not exist"));
  }
  ASSIGN_OR_RETURN(auto holding, ProcessesHolding(*host.proc, {it->second}));
  if (!holding[it->second].empty()) return holding[it->second];
  // Closed at once: holding it would refuse the VM that comes to open it.
  auto fd = host.dev->OpenExclusive(absl::StrCat("vfio/", name));
  if (fd.ok()) return std::vector<std::string>{};
  if (absl::IsFailedPrecondition(fd.status())) {
    return std::vector<std::string>{absl::StrCat(
        "a process pdc-node cannot see (the kernel refuses to open /dev/vfio/", name,
        ": EBUSY, the group is open)")};
  }
  return CannotCheck(absl::StrCat("/dev/vfio/", name, " (open it)"), fd.status());
}

absl::Status CheckHostView(Sysfs& proc) {
  auto status = proc.Read("self/status");
  if (!status.ok()) return CannotCheck("pdc-node's PID namespace", status.status());
  std::vector<absl::string_view> nspid;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(*status, '\n')) {
    if (!absl::ConsumePrefix(&line, "NSpid:")) continue;
    found = true;
    nspid = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  }
  if (!found) {
    return absl::FailedPreconditionError(
        "cannot tell whether pdc-node runs in the host's PID namespace: /proc/self/status has "
        "no NSpid line (Linux 4.1 or later is needed)");
  }
  if (nspid.size() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pdc-node runs in a PID namespace of its own (NSpid: ", absl::StrJoin(nspid, " "),
        "), so it cannot see the host's mounts and processes and could take a disk the host "
        "uses; run it in the host's PID namespace (hostPID: true)"));
  }
  if (auto mounts = proc.Read("1/mountinfo"); !mounts.ok()) {
    return CannotCheck("the host's mounts (/proc/1/mountinfo)", mounts.status());
  }
  return absl::OkStatus();
}

}  // namespace pdc::driver
