// Writes the fake sysfs/dev tree that pdc-node runs against in
// prometheus_integration_test.py (--node.sysfsRoot/--node.devRoot), using
// the driver tests' FakeKernel (tests/driver/fake_sysfs.h), and the proc/
// view of a pdc-node in the host's PID namespace (--node.procRoot):
//   0000:01:00.0, 0000:02:00.0  NVMe already on vfio-pci, bound by pdc-node
//                               in this boot (their entries are written to
//                               STATE_DIR/vfio-journal: a device on vfio-pci
//                               pdc did not bind is never offered), so binds
//                               are "already_bound"
//   0000:03:00.0                NVMe with no driver: a real pdc-node bind
//                               cannot succeed on a static tree (no kernel
//                               to probe), and a device on no driver stays
//                               in the extender's returnToHost list, so a
//                               restore of it is always attempted
//   0000:04:00.0                NVMe on nvme sharing IOMMU group 4 with a
//                               USB controller (0000:04:00.1): offered (the
//                               host does not use it), and every bind of it
//                               is refused (iommu_group_shared). A device the
//                               host uses would not do: it is reported
//                               unhealthy and never allocated.
// The others are alone in their IOMMU groups. There is no NVMe controller to
// ask whether a controller is shared: the test runs pdc-node with
// node.allowSharedNvme. Usage: fake_node_tree DIR STATE_DIR (DIR an existing
// empty directory; sys/ dev/ proc/ are created below it; STATE_DIR is
// pdc-node's node.stateDir, created).
// Thread-safety: a single-threaded program.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "driver/bind_journal.h"
#include "model/pci_address.h"
#include "tests/driver/fake_sysfs.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DIR STATE_DIR\n", argv[0]);
    return 2;
  }
  pdc::driver::testing::FakeKernel kernel(argv[1]);
  struct Spec {
    const char* address;
    int group;
    const char* driver;
    const char* serial;
  };
  for (const Spec& s : {Spec{"0000:01:00.0", 1, "vfio-pci", "SNA1"},
                        Spec{"0000:02:00.0", 2, "vfio-pci", "SNA2"},
                        Spec{"0000:03:00.0", 3, "", "SNA3"},
                        Spec{"0000:04:00.0", 4, "nvme", "SNA4"}}) {
    pdc::driver::testing::FakePciDevice d;
    d.address = s.address;
    d.group = s.group;
    d.numa = 0;
    d.driver = s.driver;
    d.serial = s.serial;
    kernel.AddDevice(d);
  }
  pdc::driver::testing::FakePciDevice usb;
  usb.address = "0000:04:00.1";
  usb.vendor = 0x8086;
  usb.device = 0x1e31;
  usb.class_code = 0x0c0330;
  usb.group = 4;
  usb.numa = 0;
  kernel.AddDevice(usb);
  // The host's view, as pdc-node with hostPID sees it: one PID namespace,
  // PID 1's mount table.
  std::error_code ec;
  std::filesystem::create_directories(kernel.proc_root() + "/1", ec);
  std::ofstream(kernel.proc_root() + "/self/status") << "Name:\tpdc-node\nNSpid:\t4242\n";
  std::ofstream(kernel.proc_root() + "/1/mountinfo")
      << "22 1 0:21 / / rw,relatime - tmpfs rootfs rw\n";
  if (ec || !std::filesystem::exists(kernel.proc_root() + "/1/mountinfo")) {
    std::fprintf(stderr, "fake_node_tree: cannot write %s\n", kernel.proc_root().c_str());
    return 1;
  }
  // pdc-node's own record of the two devices it bound in this boot.
  std::filesystem::create_directories(argv[2], ec);
  auto journal = pdc::driver::BindJournal::Open(std::string(argv[2]) + "/vfio-journal",
                                                pdc::driver::testing::kFakeBootId);
  if (!journal.ok()) {
    std::fprintf(stderr, "fake_node_tree: %s\n", journal.status().ToString().c_str());
    return 1;
  }
  for (const auto& [address, serial] : {std::pair{"0000:01:00.0", "SNA1"},
                                        std::pair{"0000:02:00.0", "SNA2"}}) {
    auto a = pdc::PciAddress::Parse(address);
    absl::Status s =
        a.ok() ? (*journal)->Put({*a, pdc::driver::JournalState::kBound, "nvme", serial})
               : a.status();
    if (!s.ok()) {
      std::fprintf(stderr, "fake_node_tree: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("%s\n", kernel.sys_root().c_str());
  return 0;
}
