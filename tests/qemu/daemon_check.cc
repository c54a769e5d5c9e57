// pdc-daemon-guest-check: the orchestrator of run-daemon-test.sh's guest.
// The guest's /init starts the real pdc-extender (embedded file store) and
// the real pdc-node (reconcile loop, bind journal, device plugin) on
// loopback; this program plays kube-scheduler and kubelet around them:
//   - kubelet: FakeKubelet (tests/driver/fake_kubelet.h) serves kubelet.sock
//     in the device plugin directory and calls pdc-node's plugin over the
//     real unix sockets;
//   - kube-scheduler: filter and bind as its extender client sends them
//     (sim/kube_wire.h), the claim created over the REST API.
// Checks, against the real kernel: the inventory reaches the extender with
// the real serials; a claim is bound, pdc-node moves the device to vfio-pci,
// Allocate names it (PCI_RESOURCE_..., /dev/vfio/<group>) and the hand-off
// is confirmed; namespaces the host uses (mounted, held with O_EXCL by a
// child, backing a loop device) are reported unhealthy and a claim pinned to
// one is not bound; then, with --move, a PCI renumbering driven by the host
// (the "PDC-HOST-ACTION: unplug|plug-other|plug" lines ask
// run-daemon-test.sh to device_del the claimed controller, to put another
// drive into the vacated slot, and to device_add the claimed drive on another
// root port): the old address is offered to no one meanwhile (the drive that
// took it is held while the Lost claim names the address, left on nvme, and
// free once the claim moved on), the claim follows the serial to the new
// address, pdc-node binds it, and Allocate for the VM's restarted pod
// answers the new address. Also: a function on uio_pci_generic and one bound
// to vfio-pci by hand are never offered; unassembled md and inactive LVM
// signatures refuse a drive; a partitioned claimed drive is bound by a
// restarted pdc-node; a Delete-policy erase waits while the VFIO group is
// open (pdc-node keeps answering), and a renumbering while it is pending
// formats nothing but the claimed drive ("unplug-part", "plug-host2",
// "plug-part"). Last, Delete-policy drives whose claims are deleted while
// pdc-node is down and which come back to nvme as after a node reboot: with
// pdc-node's journal the drive is erased before it is listed free; with its
// state directory lost it stays held (ReturningToHost), never free, and
// nothing is erased; and a controller whose only namespace is detached is
// erased or its erase refused, never reported done with the data there.
// Prints "PASS:"/"FAIL:" lines and "PDC-DAEMON-RESULT: PASS|FAIL".
// Not part of the product.
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/strings.h"
#include "tests/driver/fake_kubelet.h"
#include "tests/qemu/daemon_check_util.h"

namespace pdc::qemu {
namespace {

constexpr char kResource[] = "devices.kubevirt.io/nvme";
constexpr char kEnv[] = "PCI_RESOURCE_DEVICES_KUBEVIRT_IO_NVME";
constexpr char kNs[] = "default";
// The drive run-daemon-test.sh plugs into the vacated slot.
constexpr char kOtherSerial[] = "pdc-swap";

struct Options {
  std::string node = "guest";
  std::string extender = "http://127.0.0.1:8888";
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string node_log = "/tmp/pdc-node.log";
  std::string extender_log = "/tmp/pdc-extender.log";
  std::string vm_serial = "pdc-vm";
  std::vector<std::string> host_used;  // serial:how
  bool move = false;
  // Functions the guest's /init moved before pdc-node started: one to
  // uio_pci_generic, one to vfio-pci by hand (no journal entry).
  std::optional<PciAddress> uio;
  std::optional<PciAddress> hand_vfio;
  // The drive a Delete-policy claim holds: partitioned under a restarted
  // pdc-node, then erased while its VFIO group is open.
  std::string part_serial;
  // Delete-policy drives that come back to nvme as after a node reboot:
  // with pdc-node's journal, and with its state directory lost.
  std::string rebooted_serial;
  std::string lost_serial;
  // A controller whose only namespace is detached.
  std::string detached_serial;
  std::string state_dir = "/var/lib/pdc-node";
  std::string node_pid_file = "/tmp/pdc-node.pid";
  std::string node_cmd = "/pdc-node --config=/etc/pdc/pdc.yaml";
  std::string node_metrics = "http://127.0.0.1:9100";
};

struct Env {
  Options opt;
  PdcClient* pdc;
  NodeView view;
  SchedulerCalls sched;
  driver::testing::FakeKubelet* kubelet;
};

std::optional<Claim> GetClaim(Env& e, const std::string& name) {
  absl::StatusOr<Claim> c = e.pdc->GetClaim(ClaimKey{kNs, name});
  if (!c.ok()) return std::nullopt;
  return *c;
}

// kubelet admits `pod`: Allocate through the plugin; checks the answer names
// exactly `address` and its VFIO group.
void CheckAllocate(Env& e, const sim::PodInfo& pod, PciAddress address, int group) {
  const std::string addr = address.ToString();
  const bool listed = e.kubelet->WaitForDevices(
      kResource,
      [&](const std::vector<v1beta1::Device>& ds) {
        for (const v1beta1::Device& d : ds) {
          if (d.id() == addr && d.health() == "Healthy") return true;
        }
        return false;
      },
      absl::Seconds(20));
  Check(listed, absl::StrCat("ListAndWatch advertises ", addr, " as Healthy to kubelet"));
  driver::testing::FakeKubelet::Admission a = e.kubelet->Admit(pod.uid, kResource, 1, false);
  Check(a.response.ok(), absl::StrCat("Allocate for pod ", pod.name, " answers: ",
                                      a.response.ok() ? "ok" : a.response.status().ToString()));
  if (!a.response.ok()) return;
  auto env = a.response->envs().find(kEnv);
  const std::string got = env == a.response->envs().end() ? "<unset>" : env->second;
  Check(got == addr, absl::StrCat("Allocate: ", kEnv, "=", got, " (want ", addr, ")"));
  const std::string group_dev = absl::StrCat("/dev/vfio/", group);
  bool has_group = false, has_container = false;
  for (const v1beta1::DeviceSpec& d : a.response->devices()) {
    has_group = has_group || d.host_path() == group_dev;
    has_container = has_container || d.host_path() == "/dev/vfio/vfio";
  }
  Check(has_group && has_container,
        absl::StrCat("Allocate: device specs name ", group_dev, " and /dev/vfio/vfio"));
  Check(access(group_dev.c_str(), F_OK) == 0, absl::StrCat(group_dev, " exists in the guest"));
}

// Filter then bind `pod`; true when both accepted it.
bool Schedule(Env& e, const sim::PodInfo& pod) {
  std::string reason;
  absl::StatusOr<bool> passed = e.sched.Filter(pod, &reason);
  Check(passed.ok() && *passed,
        absl::StrCat("filter passes node ", e.opt.node, " for ", pod.name,
                     passed.ok() ? (*passed ? "" : " (failed: " + reason + ")")
                                 : " (" + passed.status().ToString() + ")"));
  if (!passed.ok() || !*passed) return false;
  absl::StatusOr<std::string> err = e.sched.Bind(pod);
  Check(err.ok() && err->empty(),
        absl::StrCat("bind ", pod.name, " to ", e.opt.node,
                     err.ok() ? (err->empty() ? "" : " refused: " + *err)
                              : " (" + err.status().ToString() + ")"));
  return err.ok() && err->empty();
}

// The claim `name` bound at the device with `serial` on vfio-pci, handed off
// to `pod`. Returns the address.
std::optional<PciAddress> CheckBoundAndHandedOff(Env& e, const std::string& name,
                                                 const sim::PodInfo& pod,
                                                 const std::string& serial) {
  std::optional<Claim> c;
  WaitFor(absl::Seconds(10), [&] {
    c = GetClaim(e, name);
    return c && c->status.phase == ClaimPhase::kBound && c->status.devices.size() == 1;
  });
  const bool bound = c && c->status.phase == ClaimPhase::kBound && c->status.devices.size() == 1;
  Check(bound && c->status.devices[0].serial == serial && c->status.node == e.opt.node,
        absl::StrCat("claim ", name, " is Bound on ", e.opt.node, " to serial ", serial));
  if (!bound) return std::nullopt;
  const PciAddress a = c->status.devices[0].address;
  const bool vfio = WaitFor(absl::Seconds(20), [&] { return OnDriver(a, driver::kVfioPci); });
  Check(vfio, absl::StrCat("pdc-node bound ", a.ToString(), " to vfio-pci (sysfs driver link)"));
  std::optional<api::DeviceListing> l = e.view.ByAddress(a);
  const int group = l ? l->device.iommu_group : -1;
  CheckAllocate(e, pod, a, group);
  const bool confirmed = WaitFor(absl::Seconds(20), [&] {
    c = GetClaim(e, name);
    return c && c->status.handed_off_to == pod.uid;
  });
  Check(confirmed, absl::StrCat("claim ", name, " shows the hand-off to ", pod.uid,
                                " confirmed (handedOffTo)"));
  absl::StatusOr<std::vector<PendingHandoff>> pending = e.pdc->ListHandoffs(e.opt.node);
  Check(pending.ok() && pending->empty(), "no hand-off pending on the node afterwards");
  return a;
}

std::optional<PciAddress> HappyPath(Env& e) {
  api::ClaimCreate create;
  create.key = ClaimKey{kNs, "vm1-disk"};
  create.spec.resource_name = kResource;
  create.spec.count = 1;
  absl::StatusOr<Claim> made = e.pdc->CreateClaim(create);
  Check(made.ok() && made->status.phase == ClaimPhase::kPending,
        "claim default/vm1-disk created (REST), Pending");
  const sim::PodInfo pod = VmPod("vm1", "a1b2c", {"vm1-disk"});
  if (!Schedule(e, pod)) return std::nullopt;
  return CheckBoundAndHandedOff(e, "vm1-disk", pod, e.opt.vm_serial);
}

// A controller the host uses (`how`: mounted, O_EXCL held, loop device).
void CheckHostUsed(Env& e, const std::string& serial, const std::string& how) {
  std::optional<driver::PciFunctionInfo> f = FunctionBySerial(serial);
  Check(f.has_value(), absl::StrCat("the guest sees ", serial, " (", how, ")"));
  if (!f) return;
  const std::string addr = f->address.ToString();
  std::optional<api::DeviceListing> l;
  const bool unhealthy = WaitFor(absl::Seconds(20), [&] {
    l = e.view.BySerial(serial);
    return l && l->device.health == DeviceHealth::kUnhealthy;
  });
  Check(unhealthy, absl::StrCat(serial, " at ", addr, " (", how,
                                ") is reported unhealthy in GET /v1/nodes/", e.opt.node));
  if (l) {
    Check(l->device.unhealthy_reason == UnhealthyReason::kHostInUse,
          absl::StrCat(serial, ": unhealthyReason \"", Sv(ToString(l->device.unhealthy_reason)),
                       "\" (want HostInUse)"));
  }
  std::vector<std::string> lines = LinesWith(e.opt.node_log, {addr, "not offered"});
  Check(!lines.empty(), absl::StrCat("pdc-node logged why ", addr, " is not offered"));
  if (!lines.empty()) std::printf("  pdc-node: %s\n", lines.back().c_str());

  const std::string claim = absl::StrCat("pin-", serial);
  api::ClaimCreate create;
  create.key = ClaimKey{kNs, claim};
  create.spec.resource_name = kResource;
  create.spec.count = 1;
  create.spec.serial = serial;
  Check(e.pdc->CreateClaim(create).ok(), absl::StrCat("claim ", claim, " pinned to ", serial));
  const sim::PodInfo pod = VmPod(absl::StrCat("vm-", serial), "x1y2z", {claim});
  std::string reason;
  absl::StatusOr<bool> passed = e.sched.Filter(pod, &reason);
  Check(passed.ok() && !*passed, absl::StrCat("filter fails ", e.opt.node, " for ", pod.name,
                                              ": ", reason));
  absl::StatusOr<std::string> err = e.sched.Bind(pod);
  Check(err.ok() && !err->empty(), absl::StrCat("bind of ", pod.name, " refused: ",
                                                err.ok() ? *err : err.status().ToString()));
  std::optional<Claim> c = GetClaim(e, claim);
  Check(c && c->status.phase == ClaimPhase::kPending,
        absl::StrCat("claim ", claim, " stays Pending"));
  Check(OnDriver(f->address, "nvme"), absl::StrCat(addr, " stays on nvme"));
}

// A hot swap into the vacated slot: another drive takes the claimed drive's
// old address while the claim is Lost. The Lost claim still names that
// address, so the drive there is held for nobody (docs/design.md §4.1: a
// drive nobody can be sure of is given to nobody): not offered, left on
// nvme, and it does not end the claim's Lost state.
void AnotherDriveInTheOldSlot(Env& e, PciAddress old_addr) {
  const std::string old_s = old_addr.ToString();
  HostAction("plug-other");
  std::optional<driver::PciFunctionInfo> f;
  const bool there = WaitFor(absl::Seconds(40), [&] {
    f = FunctionBySerial(kOtherSerial);
    return f.has_value();
  });
  Check(there && f->address == old_addr,
        absl::StrCat(kOtherSerial, " plugged into the vacated slot, at ",
                     there ? f->address.ToString() : "(nowhere)", " (want ", old_s, ")"));
  if (!there || f->address != old_addr) return;
  std::optional<api::DeviceListing> l;
  const bool listed = WaitFor(absl::Seconds(20), [&] {
    l = e.view.ByAddress(old_addr);
    return l && l->device.serial == kOtherSerial;
  });
  Check(listed && l->state != api::DeviceState::kFree,
        absl::StrCat("pdc-extender lists ", old_s, " as ", kOtherSerial,
                     ", not free while a Lost claim names the address (", Describe(l), ")"));
  std::optional<Claim> c = GetClaim(e, "vm1-disk");
  Check(c && c->status.phase == ClaimPhase::kLost,
        absl::StrCat("claim vm1-disk stays Lost: ", kOtherSerial, " is another drive"));
  std::string reason;
  absl::StatusOr<bool> passed = e.sched.Filter(VmPod("vm2", "q9w8e", {}), &reason);
  Check(passed.ok() && !*passed,
        absl::StrCat(kOtherSerial, " is not offered to vm2 either (filter: ", reason, ")"));
  // pdc-node runs a pass a second: three passes leave it with the host.
  const bool taken = WaitFor(absl::Seconds(3), [&] { return !OnDriver(old_addr, "nvme"); });
  Check(!taken, absl::StrCat(kOtherSerial, " at ", old_s, " stays on nvme"));
}

void Renumbering(Env& e, PciAddress old_addr) {
  const std::string old_s = old_addr.ToString();
  HostAction("unplug");
  const bool gone = WaitFor(absl::Seconds(40), [&] { return !FunctionAt(old_addr); });
  Check(gone, absl::StrCat(old_s, " was hot-unplugged (gone from sysfs)"));
  if (!gone) return;
  // Until pdc-node reports it gone, the extender still lists the device: held
  // by the claim, never free.
  bool offered = false;
  const bool reported = WaitFor(absl::Seconds(20), [&] {
    std::optional<api::DeviceListing> l = e.view.ByAddress(old_addr);
    offered = offered || (l && l->state == api::DeviceState::kFree);
    return !l;
  });
  Check(reported, absl::StrCat("pdc-node reported ", old_s, " gone"));
  Check(!offered, absl::StrCat(old_s, " was never listed free while it went away"));
  const bool withdrawn = e.kubelet->WaitForDevices(
      kResource,
      [&](const std::vector<v1beta1::Device>& ds) {
        for (const v1beta1::Device& d : ds) {
          if (d.id() == old_s) return false;
        }
        return true;
      },
      absl::Seconds(20));
  Check(withdrawn, absl::StrCat("ListAndWatch no longer advertises ", old_s, " to kubelet"));
  std::optional<Claim> c = GetClaim(e, "vm1-disk");
  Check(c && c->status.phase == ClaimPhase::kLost,
        absl::StrCat("claim vm1-disk is Lost while its drive is nowhere (",
                     c ? std::string(ToString(c->status.phase)) : std::string("no claim"), ")"));
  // Another VM asks for a device meanwhile: nothing is free.
  const sim::PodInfo other = VmPod("vm2", "q9w8e", {});
  std::string reason;
  absl::StatusOr<bool> passed = e.sched.Filter(other, &reason);
  Check(passed.ok() && !*passed,
        absl::StrCat("meanwhile no device is offered to vm2 (filter: ", reason, ")"));

  AnotherDriveInTheOldSlot(e, old_addr);

  HostAction("plug");
  std::optional<driver::PciFunctionInfo> f;
  const bool back = WaitFor(absl::Seconds(40), [&] {
    f = FunctionBySerial(e.opt.vm_serial);
    return f.has_value();
  });
  Check(back && f->address != old_addr,
        absl::StrCat(e.opt.vm_serial, " is back at a new address ",
                     back ? f->address.ToString() : "(none)", " (was ", old_s, ")"));
  if (!back || f->address == old_addr) return;
  const PciAddress now = f->address;
  const bool follows = WaitFor(absl::Seconds(30), [&] {
    c = GetClaim(e, "vm1-disk");
    return c && c->status.phase == ClaimPhase::kBound && c->status.devices.size() == 1 &&
           c->status.devices[0].address == now;
  });
  Check(follows && c->status.devices[0].serial == e.opt.vm_serial,
        absl::StrCat("claim vm1-disk follows serial ", e.opt.vm_serial, " to ", now.ToString(),
                     ", Bound"));
  // Logged once the move's record is durable, which may be after the
  // claim reads Bound at the new address.
  std::vector<std::string> moved;
  WaitFor(absl::Seconds(10), [&] {
    moved = LinesWith(e.opt.extender_log, {"moved from " + old_s + " to " + now.ToString()});
    return !moved.empty();
  });
  Check(!moved.empty(), "pdc-extender recorded the move");
  if (!moved.empty()) std::printf("  pdc-extender: %s\n", moved.back().c_str());
  const bool vfio = WaitFor(absl::Seconds(20), [&] { return OnDriver(now, driver::kVfioPci); });
  Check(vfio, absl::StrCat("pdc-node bound the new address ", now.ToString(), " to vfio-pci"));
  std::optional<api::DeviceListing> swapped;
  const bool freed = WaitFor(absl::Seconds(10), [&] {
    swapped = e.view.ByAddress(old_addr);
    return swapped && swapped->device.serial == kOtherSerial &&
           swapped->state == api::DeviceState::kFree;
  });
  Check(freed && OnDriver(old_addr, "nvme"),
        absl::StrCat(kOtherSerial, " at ", old_s, " is free once the claim left the address (",
                     Describe(swapped), ")"));

  // The VM's pod restarts: same VM, new pod.
  e.kubelet->Release(VmPod("vm1", "a1b2c", {}).uid);
  const sim::PodInfo again = VmPod("vm1", "r3s4t", {"vm1-disk"});
  if (!Schedule(e, again)) return;
  std::optional<PciAddress> a = CheckBoundAndHandedOff(e, "vm1-disk", again, e.opt.vm_serial);
  Check(a == now, absl::StrCat("the restarted pod got ", now.ToString()));
}

// A function /init moved off nvme before pdc-node started (`how`): never
// offered, reported unhealthy with `log_says` in pdc-node's log, and a claim
// pinned to its address is not bound.
void CheckRefusedAt(Env& e, PciAddress a, const std::string& how, const std::string& log_says,
                    const std::string& claim) {
  const std::string addr = a.ToString();
  std::optional<api::DeviceListing> l;
  const bool unhealthy = WaitFor(absl::Seconds(20), [&] {
    l = e.view.ByAddress(a);
    return l && l->device.health == DeviceHealth::kUnhealthy;
  });
  Check(unhealthy && l->state != api::DeviceState::kFree,
        absl::StrCat(addr, " (", how, ") is reported unhealthy, never free (", Describe(l), ")"));
  std::vector<std::string> lines;
  const bool logged = WaitFor(absl::Seconds(10), [&] {
    lines = LinesWith(e.opt.node_log, {addr, log_says});
    return !lines.empty();
  });
  Check(logged, absl::StrCat("pdc-node logged that ", addr, " ", log_says));
  if (logged) std::printf("  pdc-node: %s\n", lines.back().c_str());
  api::ClaimCreate create;
  create.key = ClaimKey{kNs, claim};
  create.spec.resource_name = kResource;
  create.spec.count = 1;
  create.spec.node = e.opt.node;
  create.spec.address = a;
  absl::StatusOr<Claim> made = e.pdc->CreateClaim(create);
  Check(made.ok(), absl::StrCat("claim ", claim, " pinned to ", e.opt.node, " ", addr,
                                made.ok() ? "" : ": " + made.status().ToString()));
  const sim::PodInfo pod = VmPod(absl::StrCat("vm-", claim), "u7v8w", {claim});
  std::string reason;
  absl::StatusOr<bool> passed = e.sched.Filter(pod, &reason);
  Check(passed.ok() && !*passed,
        absl::StrCat("filter fails ", e.opt.node, " for ", pod.name, ": ", reason));
  std::optional<Claim> c = GetClaim(e, claim);
  Check(c && c->status.phase == ClaimPhase::kPending,
        absl::StrCat("claim ", claim, " stays Pending"));
}

// The Delete-policy claim "part-disk" pinned to `serial`, bound on vfio-pci.
std::optional<PciAddress> ClaimPartDrive(Env& e, const std::string& serial) {
  api::ClaimCreate create;
  create.key = ClaimKey{kNs, "part-disk"};
  create.spec.resource_name = kResource;
  create.spec.count = 1;
  create.spec.serial = serial;
  create.spec.reclaim_policy = ReclaimPolicy::kDelete;
  Check(e.pdc->CreateClaim(create).ok(),
        absl::StrCat("claim part-disk pinned to ", serial, ", reclaimPolicy Delete"));
  const sim::PodInfo pod = VmPod("vm3", "p5q6r", {"part-disk"});
  if (!Schedule(e, pod)) return std::nullopt;
  return CheckBoundAndHandedOff(e, "part-disk", pod, serial);
}

bool WriteSysfs(const std::string& path, const std::string& value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  close(fd);
  return ok;
}

int ReadPid(const std::string& path) {
  std::ifstream in(path);
  int pid = -1;
  in >> pid;
  return pid;
}

// Whether process `pid` is gone (or a zombie nobody reaped yet).
bool ProcessGone(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() &&
                          stat[paren + 2] == 'Z');
}

// pdc-node stopped (SIGTERM) and gone; false (checked) when it is not.
bool StopNode(Env& e) {
  const int pid = ReadPid(e.opt.node_pid_file);
  Check(pid > 0 && kill(pid, SIGTERM) == 0, absl::StrCat("pdc-node (pid ", pid, ") stopped"));
  if (pid <= 0) return false;
  const bool gone = WaitFor(absl::Seconds(20), [&] { return ProcessGone(pid); });
  Check(gone, "pdc-node exited");
  return gone;
}

// pdc-node started again, its output appended to its log; its pid, or -1.
pid_t StartNode(Env& e) {
  const pid_t child = fork();
  if (child == 0) {
    const int out = open(e.opt.node_log.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    execl("/bin/sh", "sh", "-c", absl::StrCat("exec ", e.opt.node_cmd).c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  {
    std::ofstream pf(e.opt.node_pid_file, std::ios::trunc);
    pf << child << "\n";
  }
  Check(child > 0, absl::StrCat("pdc-node started again (pid ", child, ")"));
  return child;
}

// What a reboot does to a drive on vfio-pci (a driver_override does not
// persist): unbound from vfio-pci, the override cleared, probed, so nvme
// takes it. True once its namespace's block device exists.
bool ToNvmeByHand(PciAddress a, const std::string& serial) {
  const std::string addr = a.ToString();
  const std::string dev = absl::StrCat("/sys/bus/pci/devices/", addr);
  return WriteSysfs(dev + "/driver/unbind", addr) && WriteSysfs(dev + "/driver_override", "\n") &&
         WriteSysfs("/sys/bus/pci/drivers_probe", addr) &&
         WaitFor(absl::Seconds(20), [&] {
           std::optional<driver::PciFunctionInfo> f = FunctionBySerial(serial);
           return f && f->address == a && !f->nvme_controller.empty() &&
                  access(absl::StrCat("/dev/", f->nvme_controller, "n1").c_str(), F_OK) == 0;
         });
}

// An MBR with two Linux partitions (1 MiB at 2048, 1 MiB at 4096) and no
// file system in them.
std::string TwoPartitionMbr() {
  std::string mbr(512, '\0');
  auto le32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) mbr[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  for (int p = 0; p < 2; ++p) {
    const size_t e = 446 + 16 * p;
    mbr[e + 4] = static_cast<char>(0x83);
    le32(e + 8, 2048 + 2048 * p);
    le32(e + 12, 2048);
  }
  mbr[510] = static_cast<char>(0x55);
  mbr[511] = static_cast<char>(0xaa);
  return mbr;
}

// A node restart while the claimed drive came back on nvme with a partition
// table its guest wrote (as after a reboot of the host): pdc-node stops, the
// drive is handed to nvme by hand and partitioned (the kernel reads the
// table: nvmeXn1p1, p2), pdc-node starts again and binds it to vfio-pci: the
// partitions are no host use (only whole disks are held O_EXCL; what the
// claim's guest wrote is not the host's).
void PartitionedDriveAfterRestart(Env& e, PciAddress a) {
  const std::string addr = a.ToString();
  if (!StopNode(e)) return;
  const bool on_nvme = ToNvmeByHand(a, e.opt.part_serial);
  Check(on_nvme, absl::StrCat(addr, " is back on nvme (by hand, as after a reboot)"));
  if (!on_nvme) return;
  const std::string ns = absl::StrCat(FunctionBySerial(e.opt.part_serial)->nvme_controller, "n1");
  const int fd = open(absl::StrCat("/dev/", ns).c_str(), O_RDWR | O_CLOEXEC);
  const std::string mbr = TwoPartitionMbr();
  bool written = fd >= 0 && pwrite(fd, mbr.data(), mbr.size(), 0) == 512 && fsync(fd) == 0 &&
                 ioctl(fd, BLKRRPART) == 0;
  if (fd >= 0) close(fd);
  written = written && WaitFor(absl::Seconds(10), [&] {
              return access(absl::StrCat("/sys/class/block/", ns, "p1").c_str(), F_OK) == 0 &&
                     access(absl::StrCat("/sys/class/block/", ns, "p2").c_str(), F_OK) == 0;
            });
  Check(written, absl::StrCat(ns, " has an MBR with partitions ", ns, "p1 and ", ns,
                              "p2 (kernel re-read the table)"));
  if (StartNode(e) <= 0) return;
  const bool vfio = WaitFor(absl::Seconds(40), [&] { return OnDriver(a, driver::kVfioPci); });
  Check(vfio, absl::StrCat("the restarted pdc-node bound the partitioned claimed drive ", addr,
                           " to vfio-pci"));
  std::optional<Claim> c = GetClaim(e, "part-disk");
  Check(c && c->status.phase == ClaimPhase::kBound && c->status.devices.size() == 1 &&
            c->status.devices[0].address == a,
        absl::StrCat("claim part-disk stays Bound to ", addr));
}

// A child holds /dev/vfio/<group> open until killed; its pid, or -1.
pid_t HoldVfioGroup(int group) {
  const std::string path = absl::StrCat("/dev/vfio/", group);
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    const char ok = fd >= 0 ? '1' : '0';
    (void)!write(ready[1], &ok, 1);
    if (fd < 0) _exit(1);
    while (true) pause();
  }
  close(ready[1]);
  char ok = '0';
  (void)!read(ready[0], &ok, 1);
  close(ready[0]);
  Check(ok == '1', absl::StrCat("a child process (pid ", pid, ") holds ", path, " open"));
  return ok == '1' ? pid : -1;
}

// GET `target` of pdc-node's metrics server: the status and body.
std::pair<int, std::string> NodeGet(const Env& e, const std::string& target) {
  HttpClientOptions ho;
  ho.base_url = e.opt.node_metrics;
  ho.timeout = absl::Seconds(3);
  absl::StatusOr<std::unique_ptr<HttpClient>> c = HttpClient::Create(ho);
  if (!c.ok()) return {0, c.status().ToString()};
  absl::StatusOr<HttpResponse> r = (*c)->Get(target);
  if (!r.ok()) return {0, r.status().ToString()};
  return {r->status, r->body};
}

// The claim is deleted (reclaimPolicy Delete) while a process holds the
// drive's VFIO group: the unbind waits (vfio_group_in_use) and pdc-node
// keeps answering; once the group is closed the drive is erased and free on
// nvme again, its partition table gone.
void EraseWaitsForOpenGroup(Env& e, PciAddress a) {
  const std::string addr = a.ToString();
  std::optional<api::DeviceListing> l = e.view.ByAddress(a);
  const int group = l ? l->device.iommu_group : -1;
  const pid_t holder = group >= 0 ? HoldVfioGroup(group) : -1;
  if (holder < 0) return;
  absl::StatusOr<Claim> deleted = e.pdc->DeleteClaim(ClaimKey{kNs, "part-disk"}, true);
  Check(deleted.ok(), absl::StrCat("claim part-disk deleted (force): ",
                                   deleted.ok() ? "ok" : deleted.status().ToString()));
  std::vector<std::string> lines;
  const bool waits = WaitFor(absl::Seconds(20), [&] {
    lines = LinesWith(e.opt.node_log, {addr, "vfio_group_in_use"});
    return !lines.empty();
  });
  Check(waits, absl::StrCat("pdc-node reports vfio_group_in_use for ", addr, " in its log"));
  if (waits) std::printf("  pdc-node: %s\n", lines.back().c_str());
  const auto [mstatus, metrics] = NodeGet(e, "/metrics");
  Check(mstatus == 200 && metrics.find("reason=\"vfio_group_in_use\"") != std::string::npos,
        absl::StrCat("GET /metrics answers ", mstatus,
                     " with pdc_node_bind_failures_total{reason=\"vfio_group_in_use\"}"));
  // Three more passes (one a second) while the group stays open.
  const bool moved = WaitFor(absl::Seconds(3), [&] { return !OnDriver(a, driver::kVfioPci); });
  Check(!moved, absl::StrCat(addr, " stays on vfio-pci while the group is open"));
  const auto [hstatus, health] = NodeGet(e, "/healthz");
  Check(hstatus == 200, absl::StrCat("pdc-node keeps answering: GET /healthz ", hstatus));
  const int reported = WaitFor(absl::Seconds(10), [&] {
    std::optional<api::DeviceListing> r = e.view.ByAddress(a);
    return r && r->state != api::DeviceState::kFree;
  });
  Check(reported, absl::StrCat(addr, " is not offered meanwhile (", Describe(e.view.ByAddress(a)),
                               ")"));
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  std::optional<api::DeviceListing> r;
  const bool freed = WaitFor(absl::Seconds(60), [&] {
    r = e.view.ByAddress(a);
    return r && r->state == api::DeviceState::kFree && OnDriver(a, "nvme");
  });
  Check(freed, absl::StrCat("once the group is closed, ", addr, " is erased and free on nvme (",
                            Describe(r), ")"));
  std::vector<std::string> erased = LinesWith(e.opt.node_log, {addr, "erase"});
  if (!erased.empty()) std::printf("  pdc-node: %s\n", erased.back().c_str());
  std::optional<driver::PciFunctionInfo> f = FunctionBySerial(e.opt.part_serial);
  std::string head(512, '\x01');
  if (f && !f->nvme_controller.empty()) {
    const int fd = open(absl::StrCat("/dev/", f->nvme_controller, "n1").c_str(),
                        O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && pread(fd, head.data(), head.size(), 0) != 512) head.assign(512, '\x01');
    if (fd >= 0) close(fd);
  }
  Check(head == std::string(512, '\0'), "the erased drive's first sector (its MBR) reads zeros");
}

// The first sector of the namespace of the controller with `serial`, or ""
// when it cannot be read.
std::string FirstSector(const std::string& serial) {
  std::optional<driver::PciFunctionInfo> f = FunctionBySerial(serial);
  if (!f || f->nvme_controller.empty()) return "";
  const int fd =
      open(absl::StrCat("/dev/", f->nvme_controller, "n1").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string head(512, '\0');
  const bool ok = pread(fd, head.data(), head.size(), 0) == 512;
  close(fd);
  return ok ? head : "";
}

// A renumbering while an erase is pending: the Delete-policy claim's drive
// (its data a pattern) waits for its erase behind an open VFIO group; the
// host unplugs it, puts a host drive (serial `kHostSerial`, content
// kHostContent) into the vacated slot and plugs the claimed drive back on
// another root port. pdc-node must format nothing but the claimed drive:
// the host's drive at the journaled address keeps its content (read here,
// and grepped in its image by run-daemon-test.sh afterwards); the claimed
// drive is not offered while it holds its data, and is erased at its new
// address.
constexpr char kHostSerial[] = "pdc-host2";
constexpr char kHostContent[] = "PDC-HOST-CONTENT";
constexpr char kGuestData[] = "PDC-GUEST-DATA";
void RenumberingWhileErasePending(Env& e, PciAddress a) {
  const std::string addr = a.ToString();
  std::optional<driver::PciFunctionInfo> f = FunctionBySerial(e.opt.part_serial);
  bool written = false;
  if (f && !f->nvme_controller.empty()) {
    const int fd =
        open(absl::StrCat("/dev/", f->nvme_controller, "n1").c_str(), O_WRONLY | O_CLOEXEC);
    std::string data(512, '\0');
    data.replace(0, sizeof(kGuestData) - 1, kGuestData);
    written = fd >= 0 && pwrite(fd, data.data(), data.size(), 0) == 512 && fsync(fd) == 0;
    if (fd >= 0) close(fd);
  }
  Check(written, absl::StrCat(e.opt.part_serial, " holds data (", kGuestData, ")"));
  // pdc-node may have seen this program's descriptor (a host use) in a
  // pass while the data was written: free again once a pass no longer does.
  std::optional<api::DeviceListing> free;
  const bool offered = WaitFor(absl::Seconds(20), [&] {
    free = e.view.BySerial(e.opt.part_serial);
    return free && free->state == api::DeviceState::kFree;
  });
  Check(offered, absl::StrCat(e.opt.part_serial, " is free with its data (", Describe(free), ")"));
  api::ClaimCreate create;
  create.key = ClaimKey{kNs, "part-disk-2"};
  create.spec.resource_name = kResource;
  create.spec.count = 1;
  create.spec.serial = e.opt.part_serial;
  create.spec.reclaim_policy = ReclaimPolicy::kDelete;
  Check(e.pdc->CreateClaim(create).ok(), "claim part-disk-2 (reclaimPolicy Delete)");
  const sim::PodInfo pod = VmPod("vm4", "k1l2m", {"part-disk-2"});
  if (!Schedule(e, pod)) return;
  if (CheckBoundAndHandedOff(e, "part-disk-2", pod, e.opt.part_serial) != a) return;
  std::optional<api::DeviceListing> l = e.view.ByAddress(a);
  const pid_t holder = l ? HoldVfioGroup(l->device.iommu_group) : -1;
  if (holder < 0) return;
  const size_t before = LinesWith(e.opt.node_log, {addr, "vfio_group_in_use"}).size();
  Check(e.pdc->DeleteClaim(ClaimKey{kNs, "part-disk-2"}, true).ok(),
        "claim part-disk-2 deleted (force)");
  const bool pending = WaitFor(absl::Seconds(20), [&] {
    return LinesWith(e.opt.node_log, {addr, "vfio_group_in_use"}).size() > before;
  });
  Check(pending, absl::StrCat("the erase of ", addr, " is pending (vfio_group_in_use)"));
  HostAction("unplug-part");
  const bool gone = WaitFor(absl::Seconds(40), [&] { return !FunctionAt(a); });
  Check(gone, absl::StrCat(addr, " was hot-unplugged with its erase pending"));
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  if (!gone) return;
  HostAction("plug-host2");
  std::optional<driver::PciFunctionInfo> h;
  const bool there = WaitFor(absl::Seconds(40), [&] {
    h = FunctionBySerial(kHostSerial);
    return h && !FirstSector(kHostSerial).empty();
  });
  Check(there && h->address == a,
        absl::StrCat(kHostSerial, " (the host's drive) plugged into the vacated slot, at ",
                     there ? h->address.ToString() : "(nowhere)", " (want ", addr, ")"));
  if (!there) return;
  // pdc-node runs a pass a second: the listing shows it saw the new drive,
  // then three more passes.
  WaitFor(absl::Seconds(20), [&] {
    std::optional<api::DeviceListing> x = e.view.ByAddress(a);
    return x && x->device.serial == kHostSerial;
  });
  WaitFor(absl::Seconds(3), [] { return false; });
  Check(FirstSector(kHostSerial).starts_with(kHostContent) && OnDriver(a, "nvme"),
        absl::StrCat(kHostSerial, " at ", addr, " keeps its content and stays on nvme (",
                     Describe(e.view.ByAddress(a)), ")"));
  HostAction("plug-part");
  std::optional<driver::PciFunctionInfo> p;
  const bool back = WaitFor(absl::Seconds(40), [&] {
    p = FunctionBySerial(e.opt.part_serial);
    return p && p->address != a && !p->nvme_controller.empty();
  });
  Check(back, absl::StrCat(e.opt.part_serial, " is back at a new address ",
                           back ? p->address.ToString() : "(none)"));
  if (!back) return;
  bool offered_with_data = false;
  std::optional<api::DeviceListing> r;
  const bool erased = WaitFor(absl::Seconds(40), [&] {
    r = e.view.BySerial(e.opt.part_serial);
    const std::string head = FirstSector(e.opt.part_serial);
    const bool has_data = head.starts_with(kGuestData);
    offered_with_data = offered_with_data || (r && r->state == api::DeviceState::kFree && has_data);
    return r && r->state == api::DeviceState::kFree && head == std::string(512, '\0');
  });
  Check(!offered_with_data,
        absl::StrCat(e.opt.part_serial, " was never listed free while it held its data"));
  Check(erased, absl::StrCat(e.opt.part_serial, " is erased at its new address ",
                             p->address.ToString(), " and free (", Describe(r), ")"));
  std::vector<std::string> lines = LinesWith(e.opt.node_log, {"erased", e.opt.part_serial});
  if (!lines.empty()) std::printf("  pdc-node: %s\n", lines.back().c_str());
  // pdc-node decided with the host's drive at the journaled address: it
  // followed the serial ("left alone"), or, when its retry came while the
  // claimed drive was nowhere, refused the drive there (drive_changed).
  std::vector<std::string> decided = LinesWith(e.opt.node_log, {addr, "is another drive"});
  const bool refused =
      NodeGet(e, "/metrics").second.find("reason=\"drive_changed\"") != std::string::npos;
  Check(!decided.empty() || refused,
        absl::StrCat("pdc-node saw ", kHostSerial, " at ", addr,
                     " and left it alone (followed the serial, or refused: drive_changed)"));
  if (!decided.empty()) std::printf("  pdc-node: %s\n", decided.back().c_str());
  Check(FirstSector(kHostSerial).starts_with(kHostContent),
        absl::StrCat(kHostSerial, " still holds ", kHostContent));
  // The erase is done: the address it was journaled at no longer holds the
  // drive that took it.
  std::optional<api::DeviceListing> x;
  const bool released = WaitFor(absl::Seconds(10), [&] {
    x = e.view.ByAddress(a);
    return x && x->device.serial == kHostSerial && x->state != api::DeviceState::kReturning;
  });
  Check(released, absl::StrCat(kHostSerial, " at ", addr,
                               " is no longer held for the finished erase (", Describe(x), ")"));
}

// The Delete-policy claim `claim` pinned to `serial`, bound on vfio-pci and
// handed off to a pod of VM `vm` (name and UID ending in `suffix`).
std::optional<PciAddress> ClaimForDelete(Env& e, const std::string& claim,
                                         const std::string& serial, const std::string& vm,
                                         const std::string& suffix) {
  api::ClaimCreate create;
  create.key = ClaimKey{kNs, claim};
  create.spec.resource_name = kResource;
  create.spec.count = 1;
  create.spec.serial = serial;
  create.spec.reclaim_policy = ReclaimPolicy::kDelete;
  Check(e.pdc->CreateClaim(create).ok(),
        absl::StrCat("claim ", claim, " pinned to ", serial, ", reclaimPolicy Delete"));
  const sim::PodInfo pod = VmPod(vm, suffix, {claim});
  if (!Schedule(e, pod)) return std::nullopt;
  return CheckBoundAndHandedOff(e, claim, pod, serial);
}

// Lines of pdc-node's log saying that it erased the drive at `addr` (and,
// when given, that the drive it erased is `serial`).
size_t ErasedLines(const Env& e, const std::string& addr, const std::string& serial = "") {
  std::vector<std::string> needles = {"erased " + addr + " "};
  if (!serial.empty()) needles.push_back("drive " + serial + ":");
  return LinesWith(e.opt.node_log, needles).size();
}

// The patterns run-daemon-test.sh writes at 0 and 8 MiB of the images of
// the drives below (and greps for after QEMU exits; also in the detached
// namespace's image).
constexpr char kRebootPattern[] = "PDC-REBOOT-PATTERN";
constexpr char kLostPattern[] = "PDC-LOST-PATTERN";

// A deleted Delete-claim's drive that comes back to nvme by a reboot of the
// node (a driver_override does not persist): pdc-node is down when the claim
// is deleted, the drive is handed to nvme as the boot's probe does, and
// pdc-node starts again with its journal. The drive must be erased before it
// is offered: never listed free before pdc-node logged the erase of that
// drive, and its pattern gone (read here, grepped in its image by the script).
void ErasedAfterReboot(Env& e, const std::string& serial) {
  Check(FirstSector(serial).starts_with(kRebootPattern),
        absl::StrCat(serial, " holds ", kRebootPattern, " (its claim's guest data)"));
  std::optional<PciAddress> a = ClaimForDelete(e, "rb-disk", serial, "vm6", "g7h8i");
  if (!a) return;
  const std::string addr = a->ToString();
  // The bind journaled what the controller said of its firmware (FR, the
  // firmware slot log; QEMU has no boot partitions), compared at the erase.
  std::vector<std::string> journaled =
      LinesWith(e.opt.state_dir + "/vfio-journal", {addr + " bound", serial, "fr=", "afi=", "fs="});
  Check(!journaled.empty(), absl::StrCat("pdc-node journaled the firmware state of ", addr,
                                         " at bind (fr=, afi=, fs=)"));
  if (!journaled.empty()) std::printf("  journal: %s\n", journaled.back().c_str());
  if (!StopNode(e)) return;
  Check(e.pdc->DeleteClaim(ClaimKey{kNs, "rb-disk"}, true).ok(),
        "claim rb-disk deleted (force) while pdc-node is down");
  const bool on_nvme = ToNvmeByHand(*a, serial);
  Check(on_nvme, absl::StrCat(addr, " came back to nvme as after a reboot (override cleared, "
                              "drivers_probe)"));
  Check(FirstSector(serial).starts_with(kRebootPattern),
        absl::StrCat("on nvme, ", serial, " still holds the deleted claim's data"));
  const size_t erased_before = ErasedLines(e, addr, serial);
  if (StartNode(e) <= 0 || !on_nvme) return;
  bool offered_early = false;
  std::string seen_before;  // What the listing said before the erase was recorded.
  std::optional<api::DeviceListing> l;
  const std::string zeros(512, '\0');
  const bool erased = WaitFor(absl::Seconds(60), [&] {
    l = e.view.BySerial(serial);
    // pdc-node logs the erase before it reports the acknowledgement, so a
    // listing read before the log that says free was offered too early.
    const bool recorded = ErasedLines(e, addr, serial) > erased_before;
    if (!recorded && l) {
      offered_early = offered_early || l->state == api::DeviceState::kFree;
      const std::string d = Describe(l);
      if (seen_before.find(d) == std::string::npos) absl::StrAppend(&seen_before, "; ", d);
    }
    return recorded && l && l->state == api::DeviceState::kFree && FirstSector(serial) == zeros;
  });
  if (!seen_before.empty()) std::printf("  listed before the erase:%s\n", seen_before.c_str() + 1);
  Check(!offered_early, absl::StrCat(serial, " was never listed free before pdc-node recorded "
                                     "its erase"));
  Check(erased, absl::StrCat(serial, " is erased (first sector zeros) and free on nvme (",
                             Describe(l), ")"));
  std::vector<std::string> lines = LinesWith(e.opt.node_log, {"erased " + addr + " "});
  if (!lines.empty()) std::printf("  pdc-node: %s\n", lines.back().c_str());
}

// A controller of an NVM subsystem whose only namespace is detached (no
// block device shows it) and holds a pattern, claimed with Delete: once the
// claim is deleted pdc-node erases it (attaching the namespace for the
// format) or refuses; a refusal keeps it unhealthy and never free. The
// script greps the namespace's image: a pattern left is a failure unless
// the refusal was seen here.
void DetachedNamespaceErase(Env& e, const std::string& serial) {
  std::optional<driver::PciFunctionInfo> f = FunctionBySerial(serial);
  Check(f.has_value() && FirstSector(serial).empty(),
        absl::StrCat(serial, " is there and no block device shows its detached namespace"));
  std::optional<PciAddress> a = ClaimForDelete(e, "det-disk", serial, "vm8", "m1n2o");
  if (!a) return;
  const std::string addr = a->ToString();
  const size_t erased_before = ErasedLines(e, addr);
  const size_t refused_before = LinesWith(e.opt.node_log, {"erase " + addr + ":"}).size();
  Check(e.pdc->DeleteClaim(ClaimKey{kNs, "det-disk"}, true).ok(), "claim det-disk deleted (force)");
  bool erased = false;
  std::vector<std::string> refused;
  WaitFor(absl::Seconds(60), [&] {
    erased = ErasedLines(e, addr) > erased_before;
    refused = LinesWith(e.opt.node_log, {"erase " + addr + ":"});
    return erased || refused.size() > refused_before;
  });
  std::optional<api::DeviceListing> l;
  if (erased) {
    std::printf("  pdc-node: %s\n",
                LinesWith(e.opt.node_log, {"erased " + addr + " "}).back().c_str());
    const bool freed = WaitFor(absl::Seconds(20), [&] {
      l = e.view.ByAddress(*a);
      return l && l->state == api::DeviceState::kFree && OnDriver(*a, "nvme");
    });
    Check(freed, absl::StrCat("erased: the detached namespace's controller ", addr,
                              " is erased and free on nvme (", Describe(l), ")"));
    return;
  }
  Check(refused.size() > refused_before,
        absl::StrCat("pdc-node erased ", addr, " or refused its erase within 60 s"));
  if (refused.size() <= refused_before) return;
  std::printf("  pdc-node: %s\n", refused.back().c_str());
  // Three more passes: still held.
  bool offered = false;
  WaitFor(absl::Seconds(3), [&] {
    l = e.view.ByAddress(*a);
    offered = offered || (l && l->state == api::DeviceState::kFree);
    return false;
  });
  Check(!offered && l && l->state != api::DeviceState::kFree &&
            l->device.health == DeviceHealth::kUnhealthy && ErasedLines(e, addr) == erased_before,
        absl::StrCat("refused: the detached-namespace erase stays pending, never reported done, "
                     "never free (", Describe(l), ")"));
}

// A deleted Delete-claim's drive back on nvme after a reboot that lost
// pdc-node's state directory (its bind journal): pdc-node has no record of
// which drive was claimed, so it erases nothing; pdc-extender keeps the
// drive held (ReturningToHost) until the erase of that drive is
// acknowledged, and it is never listed free. Last: the other drives on
// vfio-pci have no journal entry afterwards either.
void HeldAfterLostJournal(Env& e, const std::string& serial) {
  Check(FirstSector(serial).starts_with(kLostPattern),
        absl::StrCat(serial, " holds ", kLostPattern, " (its claim's guest data)"));
  std::optional<PciAddress> a = ClaimForDelete(e, "lost-disk", serial, "vm7", "j9k8l");
  if (!a) return;
  const std::string addr = a->ToString();
  if (!StopNode(e)) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(e.opt.state_dir, ec)) {
    std::filesystem::remove_all(entry.path(), ec);
    if (ec) break;
  }
  Check(!ec && std::filesystem::is_empty(e.opt.state_dir, ec),
        absl::StrCat("pdc-node's state directory ", e.opt.state_dir, " wiped (journal lost)"));
  Check(e.pdc->DeleteClaim(ClaimKey{kNs, "lost-disk"}, true).ok(),
        "claim lost-disk deleted (force) while pdc-node is down");
  const bool on_nvme = ToNvmeByHand(*a, serial);
  Check(on_nvme, absl::StrCat(addr, " came back to nvme as after a reboot"));
  if (StartNode(e) <= 0 || !on_nvme) return;
  std::optional<api::DeviceListing> l;
  const bool reported = WaitFor(absl::Seconds(30), [&] {
    l = e.view.BySerial(serial);
    return l && l->device.driver == "nvme";
  });
  Check(reported, absl::StrCat("pdc-node reported ", serial, " on nvme (", Describe(l), ")"));
  std::vector<std::string> lines;
  const bool logged = WaitFor(absl::Seconds(20), [&] {
    lines = LinesWith(e.opt.node_log, {"erase " + addr + ":"});
    return !lines.empty();
  });
  Check(logged, absl::StrCat("pdc-node logged why it does not erase ", addr));
  if (logged) std::printf("  pdc-node: %s\n", lines.back().c_str());
  // Five passes: held all along.
  bool offered = false;
  WaitFor(absl::Seconds(5), [&] {
    l = e.view.BySerial(serial);
    offered = offered || !l || l->state == api::DeviceState::kFree;
    return false;
  });
  std::printf("  pdc-node reports, pdc-extender lists: %s\n", Describe(l).c_str());
  Check(!offered && l && l->state == api::DeviceState::kReturning,
        absl::StrCat(serial, " is held by pdc-extender (ReturningToHost), never listed free (",
                     Describe(l), ")"));
  Check(FirstSector(serial).starts_with(kLostPattern),
        absl::StrCat(serial, " is not erased: no record says which drive was claimed"));
  Check(ErasedLines(e, addr) == 0, absl::StrCat("pdc-node reports no erase of ", addr));
}

// Drives kept from the checks before theirs: a child holds the controller's
// character device open (a passthrough user the host-use check counts), so
// they are not free when an unpinned claim or "nothing is free" is checked.
// Returns the child's pid, or -1.
pid_t HoldController(const std::string& serial) {
  std::optional<driver::PciFunctionInfo> f = FunctionBySerial(serial);
  if (!f || f->nvme_controller.empty()) return -1;
  const std::string dev = absl::StrCat("/dev/", f->nvme_controller);
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(dev.c_str(), O_RDONLY | O_CLOEXEC);
    const char ok = fd >= 0 ? '1' : '0';
    (void)!write(ready[1], &ok, 1);
    if (fd < 0) _exit(1);
    while (true) pause();
  }
  close(ready[1]);
  char ok = '0';
  (void)!read(ready[0], &ok, 1);
  close(ready[0]);
  Check(ok == '1', absl::StrCat("a child process (pid ", pid, ") holds ", dev, " (", serial,
                                ") open until its check"));
  return ok == '1' ? pid : -1;
}

// Ends the hold of `serial` (HoldController) and waits for it to be free.
void ReleaseHeld(Env& e, std::map<std::string, pid_t>& held, const std::string& serial) {
  auto it = held.find(serial);
  if (it == held.end() || it->second <= 0) return;
  kill(it->second, SIGKILL);
  waitpid(it->second, nullptr, 0);
  held.erase(it);
  std::optional<api::DeviceListing> l;
  const bool freed = WaitFor(absl::Seconds(20), [&] {
    l = e.view.BySerial(serial);
    return l && l->state == api::DeviceState::kFree;
  });
  Check(freed, absl::StrCat(serial, " is free once released (", Describe(l), ")"));
}

// A child holds /dev/<ns> open with O_EXCL until killed.
pid_t HoldExclusive(const std::string& serial) {
  std::optional<driver::PciFunctionInfo> f = FunctionBySerial(serial);
  if (!f || f->nvme_controller.empty()) return -1;
  const std::string dev = absl::StrCat("/dev/", f->nvme_controller, "n1");
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(dev.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC);
    const char ok = fd >= 0 ? '1' : '0';
    (void)!write(ready[1], &ok, 1);
    if (fd < 0) _exit(1);
    while (true) pause();
  }
  close(ready[1]);
  char ok = '0';
  (void)!read(ready[0], &ok, 1);
  close(ready[0]);
  Check(ok == '1', absl::StrCat("a child process (pid ", pid, ") holds ", dev, " with O_EXCL"));
  return pid;
}

int Main(int argc, char** argv) {
  Options opt;
  std::string excl;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view flag) { return std::string(a.substr(flag.size())); };
    if (a.starts_with("--node=")) opt.node = value("--node=");
    else if (a.starts_with("--extender=")) opt.extender = value("--extender=");
    else if (a.starts_with("--vm=")) opt.vm_serial = value("--vm=");
    else if (a.starts_with("--host-used=")) opt.host_used.push_back(value("--host-used="));
    else if (a.starts_with("--exclusive=")) excl = value("--exclusive=");
    else if (a == "--move") opt.move = true;
    else if (a.starts_with("--uio=") || a.starts_with("--hand-vfio=")) {
      const bool uio = a.starts_with("--uio=");
      absl::StatusOr<PciAddress> addr = PciAddress::Parse(value(uio ? "--uio=" : "--hand-vfio="));
      if (!addr.ok()) {
        std::fprintf(stderr, "%s: %s\n", argv[i], addr.status().ToString().c_str());
        return 2;
      }
      (uio ? opt.uio : opt.hand_vfio) = *addr;
    }
    else if (a.starts_with("--partitioned=")) opt.part_serial = value("--partitioned=");
    else if (a.starts_with("--rebooted=")) opt.rebooted_serial = value("--rebooted=");
    else if (a.starts_with("--journal-lost=")) opt.lost_serial = value("--journal-lost=");
    else if (a.starts_with("--detached=")) opt.detached_serial = value("--detached=");
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  const pid_t holder = excl.empty() ? -1 : HoldExclusive(excl);
  std::map<std::string, pid_t> held;
  for (const std::string& s : {opt.rebooted_serial, opt.detached_serial, opt.lost_serial}) {
    if (!s.empty()) held[s] = HoldController(s);
  }
  if (!excl.empty()) opt.host_used.push_back(excl + ":held with O_EXCL by a child process");

  driver::testing::FakeKubelet kubelet(opt.plugin_dir);
  absl::Status started = kubelet.Start();
  Check(started.ok(), absl::StrCat("kubelet double serves ", opt.plugin_dir, "/kubelet.sock ",
                                   started.ToString()));
  Check(kubelet.WaitForRegistrations(1, absl::Seconds(30)),
        "pdc-node registered its device plugin with the kubelet double");

  HttpClientOptions ho;
  ho.base_url = opt.extender;
  ho.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<HttpClient>> http = HttpClient::Create(ho);
  if (!http.ok()) {
    Check(false, http.status().ToString());
    return 1;
  }
  PdcClient pdc(std::move(*http));
  Env e{opt, &pdc, NodeView(&pdc, opt.node), SchedulerCalls(&pdc, opt.node), &kubelet};

  std::vector<std::string> serials = {opt.vm_serial};
  for (const std::string& h : opt.host_used) serials.push_back(h.substr(0, h.find(':')));
  if (!opt.part_serial.empty()) serials.push_back(opt.part_serial);
  for (const auto& [s, pid] : held) serials.push_back(s);
  const bool inventory = WaitFor(absl::Seconds(30), [&] {
    for (const std::string& s : serials) {
      std::optional<api::DeviceListing> l = e.view.BySerial(s);
      std::optional<driver::PciFunctionInfo> f = FunctionBySerial(s);
      if (!l || !f || l->device.address != f->address) return false;
      // The held drives are reported held before any claim is made.
      if (held.contains(s) && l->device.health != DeviceHealth::kUnhealthy) return false;
    }
    return true;
  });
  Check(inventory, absl::StrCat("pdc-node's inventory reached pdc-extender with the real "
                                "serials and addresses (GET /v1/nodes/", opt.node, ")"));

  // Claimed first, so that the unpinned claim of HappyPath gets vm_serial.
  std::optional<PciAddress> part;
  if (!opt.part_serial.empty()) part = ClaimPartDrive(e, opt.part_serial);
  std::optional<PciAddress> bound = HappyPath(e);
  for (const std::string& h : opt.host_used) {
    const size_t colon = h.find(':');
    CheckHostUsed(e, h.substr(0, colon), colon == std::string::npos ? "" : h.substr(colon + 1));
  }
  if (opt.uio) {
    CheckRefusedAt(e, *opt.uio, "on uio_pci_generic", "not offered", "pin-uio");
  }
  if (opt.hand_vfio) {
    CheckRefusedAt(e, *opt.hand_vfio, "bound to vfio-pci by hand", "pdc-node did not bind it",
                   "pin-hand-vfio");
  }
  if (opt.move) {
    Check(bound.has_value(), "a bound device to renumber");
    if (bound) Renumbering(e, *bound);
  }
  if (part) {
    PartitionedDriveAfterRestart(e, *part);
    EraseWaitsForOpenGroup(e, *part);
    if (opt.move) RenumberingWhileErasePending(e, *part);
  }
  if (!opt.rebooted_serial.empty()) {
    ReleaseHeld(e, held, opt.rebooted_serial);
    ErasedAfterReboot(e, opt.rebooted_serial);
  }
  if (!opt.detached_serial.empty()) {
    ReleaseHeld(e, held, opt.detached_serial);
    DetachedNamespaceErase(e, opt.detached_serial);
  }
  if (!opt.lost_serial.empty()) {
    ReleaseHeld(e, held, opt.lost_serial);
    HeldAfterLostJournal(e, opt.lost_serial);
  }
  for (const auto& [s, pid] : held) {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  if (holder > 0) {
    kill(holder, SIGKILL);
    waitpid(holder, nullptr, 0);
  }
  kubelet.Stop();
  std::printf("PDC-DAEMON-RESULT: %s (%d checks, %d failed)\n",
              Failures() == 0 ? "PASS" : "FAIL", Checks(), Failures());
  std::fflush(stdout);
  return Failures() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace pdc::qemu

int main(int argc, char** argv) { return pdc::qemu::Main(argc, argv); }
