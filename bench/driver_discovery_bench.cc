// Discovery over a sysfs tree of N PCI functions laid out like the kernel's
// (real directories and links in a temporary directory, read through
// RealSysfs): 3/4 of them NVMe controllers matched by the class, 1/4 other
// devices. Also the safety check of one bind (IOMMU group + host usage),
// and the host-use check of the inventory over every NVMe at once, with P
// processes of 16 descriptors each to scan.
//   build/bench/driver_discovery_bench
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "driver/bind_journal.h"
#include "driver/discovery.h"
#include "driver/sysfs.h"
#include "driver/vfio_binder.h"

namespace pdc::driver {
namespace {

namespace fs = std::filesystem;

void Put(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

// Builds sys/, dev/ and proc/ under a fresh temp directory.
class Tree {
 public:
  explicit Tree(int n, int processes = 0) {
    char tmpl[] = "/tmp/pdc-bench-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    const fs::path sys = root_ / "sys";
    fs::create_directories(sys / "bus/pci/devices");
    fs::create_directories(sys / "bus/pci/drivers/nvme");
    fs::create_directories(sys / "bus/pci/drivers/vfio-pci");
    fs::create_directories(sys / "class/block");
    fs::create_directories(root_ / "dev/vfio");
    fs::create_directories(root_ / "proc/self");
    Put(root_ / "proc/self/mountinfo", "22 1 0:21 / / rw - tmpfs rootfs rw\n");
    Put(root_ / "proc/swaps", "Filename Type Size Used Priority\n");
    int ctrl = 0;
    for (int i = 0; i < n; ++i) {
      const std::string addr = absl::StrFormat("0000:%02x:%02x.0", 1 + i / 32, i % 32);
      const fs::path dir = sys / "devices/pci0000:00" / addr;
      fs::create_directories(dir);
      const bool nvme = i % 4 != 3;
      Put(dir / "vendor", nvme ? "0x1b36\n" : "0x8086\n");
      Put(dir / "device", nvme ? "0x0010\n" : "0x10d3\n");
      Put(dir / "class", nvme ? "0x010802\n" : "0x020000\n");
      Put(dir / "numa_node", absl::StrFormat("%d\n", i % 2));
      Put(dir / "driver_override", "(null)\n");
      fs::create_directory_symlink("../../../devices/pci0000:00/" + addr,
                                   sys / "bus/pci/devices" / addr);
      const fs::path g = sys / "kernel/iommu_groups" / std::to_string(i) / "devices";
      fs::create_directories(g);
      fs::create_directory_symlink("../../../../devices/pci0000:00/" + addr, g / addr);
      fs::create_directory_symlink("../../../kernel/iommu_groups/" + std::to_string(i),
                                   dir / "iommu_group");
      if (nvme) {
        fs::create_directory_symlink("../../../bus/pci/drivers/nvme", dir / "driver");
        const std::string c = absl::StrFormat("nvme%d", ctrl++);
        const fs::path cd = dir / "nvme" / c;
        fs::create_directories(cd / (c + "n1") / "holders");
        Put(cd / "serial", absl::StrFormat("SN%06d            \n", i));
        Put(cd / "model", "QEMU NVMe Ctrl\n");
        Put(cd / (c + "n1") / "dev", absl::StrFormat("259:%d\n", ctrl));
        Put(root_ / "dev" / (c + "n1"), "");  // A plain file: opens, is no device.
        fs::create_directory_symlink(
            absl::StrFormat("../../devices/pci0000:00/%s/nvme/%s/%sn1", addr, c, c),
            sys / "class/block" / (c + "n1"));
      }
    }
    for (int p = 0; p < processes; ++p) {
      const fs::path fd = root_ / "proc" / std::to_string(100 + p) / "fd";
      fs::create_directories(fd);
      Put(fd.parent_path() / "comm", "worker\n");
      for (int k = 0; k < 16; ++k) {
        fs::create_symlink(root_ / "proc/swaps", fd / std::to_string(k));
      }
    }
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string sys() const { return (root_ / "sys").string(); }
  std::string dev() const { return (root_ / "dev").string(); }
  std::string proc() const { return (root_ / "proc").string(); }
  std::string journal() const { return (root_ / "journal").string(); }

 private:
  fs::path root_;
};

DeviceClass Nvme() {
  return DeviceClass{"devices.kubevirt.io/nvme",
                     {PciSelector{0x1b36, 0x0010, std::nullopt},
                      PciSelector{0x8086, 0x5845, std::nullopt}}};
}

void BM_Discover(benchmark::State& state) {
  Tree tree(static_cast<int>(state.range(0)));
  RealSysfs sys(tree.sys());
  DiscoveryOptions options{{Nvme()}, {}};
  size_t found = 0;
  for (auto _ : state) {
    auto r = Discover(sys, "node-a", options);
    if (!r.ok()) state.SkipWithError("discovery failed");
    found = r->inventory.devices.size();
    benchmark::DoNotOptimize(found);
  }
  state.counters["devices"] = static_cast<double>(state.range(0));
  state.counters["matched"] = static_cast<double>(found);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Discover)->Arg(16)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

// The checks made before a bind: class, IOMMU group members, mounts, swap,
// holders. No writes.
void BM_CheckBindable(benchmark::State& state) {
  Tree tree(256);
  RealSysfs sys(tree.sys()), dev(tree.dev()), proc(tree.proc());
  auto journal = BindJournal::Open(tree.journal());
  BinderOptions options;
  options.classes = {Nvme()};
  VfioBinder binder(&sys, &dev, &proc, journal->get(), options);
  const PciAddress a = *PciAddress::Parse("0000:01:00.0");
  for (auto _ : state) {
    absl::Status s = binder.CheckBindable({a});
    if (!s.ok()) state.SkipWithError("check failed");
  }
}
BENCHMARK(BM_CheckBindable)->Unit(benchmark::kMicrosecond);

// The inventory's host-use check of every pass (VfioBinder::HostUses): all
// NVMe of a tree of 64 functions (48), with Arg processes to scan.
void BM_HostUsesOfTheInventory(benchmark::State& state) {
  Tree tree(64, static_cast<int>(state.range(0)));
  RealSysfs sys(tree.sys()), dev(tree.dev()), proc(tree.proc());
  auto journal = BindJournal::Open(tree.journal());
  BinderOptions options;
  options.classes = {Nvme()};
  VfioBinder binder(&sys, &dev, &proc, journal->get(), options);
  auto found = Discover(sys, "node-a", {{Nvme()}, {}});
  std::vector<PciAddress> addresses;
  for (const Device& d : found->inventory.devices) addresses.push_back(d.address);
  for (auto _ : state) {
    auto used = binder.HostUses(addresses);
    if (!used.empty()) state.SkipWithError(used.begin()->second.c_str());
  }
  state.counters["devices"] = static_cast<double>(addresses.size());
  state.counters["processes"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_HostUsesOfTheInventory)->Arg(0)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pdc::driver

BENCHMARK_MAIN();
