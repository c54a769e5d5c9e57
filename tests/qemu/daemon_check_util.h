// Helpers of pdc-daemon-guest-check (daemon_check.cc), the orchestrator of
// run-daemon-test.sh's guest: PASS/FAIL lines, bounded polling, the guest's
// own view of its NVMe controllers (sysfs), the extender's view of the node
// (GET /v1/nodes/{node}, also the raw JSON for fields this tree may not
// decode yet), and kube-scheduler's filter and bind calls, encoded by
// sim/kube_wire.h exactly as kube-scheduler's extender client sends them.
// Not part of the product.
// Thread-safety: one thread.
#ifndef PDC_TESTS_QEMU_DAEMON_CHECK_UTIL_H_
#define PDC_TESTS_QEMU_DAEMON_CHECK_UTIL_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/rest_json.h"
#include "driver/pci_function.h"
#include "net/pdc_client.h"
#include "sim/kube_wire.h"

namespace pdc::qemu {

// Prints "PASS: what" or "FAIL: what" and counts it.
void Check(bool ok, const std::string& what);
int Failures();
int Checks();

// Polls `done` every 100 ms until it is true or `timeout` passed.
bool WaitFor(absl::Duration timeout, const std::function<bool()>& done);

// The guest's NVMe controller with serial `serial` (sysfs), or nullopt.
std::optional<driver::PciFunctionInfo> FunctionBySerial(std::string_view serial);
// The function at `address` (its driver link), or nullopt when absent.
std::optional<driver::PciFunctionInfo> FunctionAt(PciAddress address);

// A virt-launcher pod in namespace "default" of VM `vm` asking for one
// devices.kubevirt.io/nvme, with `claims` in pdc.kubevirt.io/claims; its
// name and UID end in `suffix`.
sim::PodInfo VmPod(const std::string& vm, const std::string& suffix,
                   const std::vector<std::string>& claims);
// Whether the function at `a` is bound to `driver` now (sysfs).
bool OnDriver(PciAddress a, std::string_view driver);
// Prints "PDC-HOST-ACTION: <what>" for run-daemon-test.sh.
void HostAction(const char* what);
// "serial S, <state>, <driver>, healthy|unhealthy[, claim K]" or "not listed".
std::string Describe(const std::optional<api::DeviceListing>& l);

// The lines of the file at `path` that contain every one of `needles`.
std::vector<std::string> LinesWith(const std::string& path,
                                   const std::vector<std::string>& needles);

// pdc-extender's view of one node.
class NodeView {
 public:
  NodeView(PdcClient* pdc, std::string node) : pdc_(pdc), node_(std::move(node)) {}
  absl::StatusOr<api::NodeDetail> Get() const;
  // The listing of the device with `serial`, or nullopt (also on errors).
  std::optional<api::DeviceListing> BySerial(std::string_view serial) const;
  std::optional<api::DeviceListing> ByAddress(PciAddress address) const;

 private:
  std::optional<api::DeviceListing> Find(const std::function<bool(const Device&)>& match) const;

  PdcClient* pdc_;
  std::string node_;
};

// kube-scheduler's extender calls for one node.
class SchedulerCalls {
 public:
  SchedulerCalls(PdcClient* pdc, std::string node, std::string prefix = "/scheduler")
      : pdc_(pdc), node_(std::move(node)), prefix_(std::move(prefix)) {}
  // POST <prefix>/filter with the node offered; whether it passed. A
  // transport error or malformed answer is an error.
  absl::StatusOr<bool> Filter(const sim::PodInfo& pod, std::string* reason = nullptr);
  // POST <prefix>/bind; the answer's Error ("" = bound).
  absl::StatusOr<std::string> Bind(const sim::PodInfo& pod);

 private:
  PdcClient* pdc_;
  std::string node_;
  std::string prefix_;
};

}  // namespace pdc::qemu

#endif  // PDC_TESTS_QEMU_DAEMON_CHECK_UTIL_H_
