// Shared fixtures for the driver tests: a fake kernel with dev/proc views,
// and the NVMe device class and address parser of
// tests/testing/inventory_builders.h under driver::testing.
// Thread-safety: test-only, single thread.
#ifndef PDC_TESTS_DRIVER_TEST_UTIL_H_
#define PDC_TESTS_DRIVER_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "model/types.h"
#include "model/pci_address.h"
#include "driver/sysfs.h"
#include "tests/driver/fake_sysfs.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/temp_dir.h"

namespace pdc::driver::testing {

using ::pdc::testing::Addr;
using ::pdc::testing::NvmeClass;
// The NVMe resource of pdc's default configuration, and the environment
// variable KubeVirt reads its PCI addresses from.
using ::pdc::testing::kNvme;
inline constexpr char kNvmeEnv[] = "PCI_RESOURCE_DEVICES_KUBEVIRT_IO_NVME";

// A SATA controller class (Intel ICH9 AHCI), for tests of a second kind.
inline DeviceClass AhciClass() {
  return {"example.com/ahci", {{0x8086, 0x2922, std::nullopt}}, {}};
}

// A temp dir holding a fake kernel plus views of its dev/ and proc/ trees.
struct FakeHost {
  FakeHost()
      : kernel(tmp.path()),
        dev(&kernel, kernel.dev_root()),
        proc(&kernel, kernel.proc_root()) {}
  pdc::testing::TempDir tmp;
  FakeKernel kernel;
  FakeKernelView dev;
  FakeKernelView proc;
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_TEST_UTIL_H_
