// pdc-node's readers of kernel files, fed by the input: the PCI function's
// attributes (ReadPciFunction), the host-use check's mountinfo, swaps, loop
// backing file and interface flags (HostUsesOf), and /proc/self/status
// (CheckHostView). Fields are the input cut at NUL bytes.
#include <string>
#include <vector>

#include "driver/host_usage.h"
#include "driver/pci_function.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/memory_sysfs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using pdc::fuzz::MemorySysfs;
  std::vector<std::string> f = pdc::fuzz::SplitAtNul(pdc::fuzz::AsText(data, size));
  f.resize(14);
  const std::string dev = "devices/pci0000:00/0000:00:03.0";
  MemorySysfs sys;
  sys.Link("bus/pci/devices/0000:00:03.0", dev);
  sys.File(dev + "/vendor", f[0]);
  sys.File(dev + "/device", f[1]);
  sys.File(dev + "/class", f[2]);
  sys.File(dev + "/numa_node", f[3]);
  sys.File(dev + "/driver_override", f[4]);
  sys.Link(dev + "/driver", "bus/pci/drivers/" + (f[5].empty() ? std::string("nvme") : f[5]));
  sys.File("bus/pci/drivers/nvme/new_id", "");
  sys.Link(dev + "/iommu_group", "kernel/iommu_groups/" + f[6]);
  sys.File("kernel/iommu_groups/" + f[6] + "/type", "DMA");
  sys.File(dev + "/nvme/nvme0/serial", f[7]);
  sys.File(dev + "/nvme/nvme0/model", f[8]);
  sys.File(dev + "/nvme/nvme0/nvme0n1/dev", f[9]);
  sys.File(dev + "/nvme/nvme0/nvme0n1/holders/.keep", "");
  sys.Link("class/block/nvme0n1", dev + "/nvme/nvme0/nvme0n1");
  sys.File("devices/virtual/block/loop0/loop/backing_file", f[10]);
  sys.Link("class/block/loop0", "devices/virtual/block/loop0");
  sys.File(dev + "/net/eth0/flags", f[11]);
  sys.Link("class/net/eth0", dev + "/net/eth0");

  MemorySysfs devfs;
  devfs.Node("vfio", "6", "c511:6");
  MemorySysfs proc;
  proc.File("self/status", f[12]);
  proc.File("1/mountinfo", f[13]);
  proc.File("self/mountinfo", f[13]);
  proc.File("swaps", f[12]);
  proc.File("4242/comm", f[8]);
  proc.Node("4242/fd", "3", f[9]);

  (void)pdc::driver::CheckHostView(proc);
  auto info = pdc::driver::ReadPciFunction(sys, *pdc::PciAddress::Parse("0000:00:03.0"));
  if (!info.ok()) return 0;
  const pdc::driver::HostView host{&sys, &devfs, &proc, "1/mountinfo"};
  const pdc::DeviceClass device_class{"example.com/any", {}, {f[5]}};
  pdc::driver::BlockDeviceHold hold;
  (void)pdc::driver::HostUsesOf(host, *info, device_class, &hold);
  (void)pdc::driver::VfioGroupUsers(host, info->iommu_group);
  return 0;
}
