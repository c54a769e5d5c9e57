#include "tests/qemu/daemon_check_util.h"

#include <unistd.h>

#include <cstdio>
#include <string_view>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "driver/sysfs.h"

namespace pdc::qemu {
namespace {

int failures = 0;
int checks = 0;

}  // namespace

void Check(bool ok, const std::string& what) {
  ++checks;
  if (!ok) ++failures;
  std::printf("%s: %s\n", ok ? "PASS" : "FAIL", what.c_str());
  std::fflush(stdout);
}

int Failures() { return failures; }
int Checks() { return checks; }

bool WaitFor(absl::Duration timeout, const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (done()) return true;
    if (absl::Now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::optional<driver::PciFunctionInfo> FunctionBySerial(std::string_view serial) {
  driver::RealSysfs sysfs("/sys");
  absl::StatusOr<driver::PciListing> listing = driver::ListPciAddresses(sysfs);
  if (!listing.ok()) return std::nullopt;
  for (PciAddress a : listing->addresses) {
    absl::StatusOr<driver::PciFunctionInfo> f = driver::ReadPciFunction(sysfs, a);
    if (f.ok() && f->serial == serial) return *f;
  }
  return std::nullopt;
}

std::optional<driver::PciFunctionInfo> FunctionAt(PciAddress address) {
  driver::RealSysfs sysfs("/sys");
  absl::StatusOr<driver::PciFunctionInfo> f = driver::ReadPciFunction(sysfs, address);
  if (!f.ok()) return std::nullopt;
  return *f;
}

std::vector<std::string> LinesWith(const std::string& path,
                                   const std::vector<std::string>& needles) {
  std::vector<std::string> out;
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return out;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    bool all = true;
    for (const std::string& n : needles) all = all && line.find(n) != absl::string_view::npos;
    if (all) out.emplace_back(line.data(), line.size());
  }
  return out;
}

sim::PodInfo VmPod(const std::string& vm, const std::string& suffix,
                   const std::vector<std::string>& claims) {
  sim::PodInfo p;
  p.ns = "default";
  p.name = absl::StrCat("virt-launcher-", vm, "-", suffix);
  p.uid = absl::StrCat("uid-", vm, "-", suffix);
  p.vm = vm;
  p.vmi_uid = absl::StrCat("vmi-uid-", vm);
  p.resource = "devices.kubevirt.io/nvme";
  p.device_count = 1;
  p.cpu = 1;
  p.memory_gib = 1;
  p.claims = claims;
  return p;
}

bool OnDriver(PciAddress a, std::string_view driver) {
  std::optional<driver::PciFunctionInfo> f = FunctionAt(a);
  return f.has_value() && f->driver == driver;
}

void HostAction(const char* what) {
  std::printf("PDC-HOST-ACTION: %s\n", what);
  std::fflush(stdout);
}

std::string Describe(const std::optional<api::DeviceListing>& l) {
  if (!l) return "not listed";
  return absl::StrCat("serial ", l->device.serial, ", ", std::string(api::ToString(l->state)),
                      ", ", l->device.driver,
                      l->device.health == DeviceHealth::kHealthy ? ", healthy" : ", unhealthy",
                      l->claim ? ", claim " + l->claim->ToString() : std::string());
}

absl::StatusOr<api::NodeDetail> NodeView::Get() const { return pdc_->GetNode(node_); }

std::optional<api::DeviceListing> NodeView::Find(
    const std::function<bool(const Device&)>& match) const {
  absl::StatusOr<api::NodeDetail> d = Get();
  if (!d.ok()) return std::nullopt;
  for (const api::DeviceListing& l : d->devices) {
    if (match(l.device)) return l;
  }
  return std::nullopt;
}

std::optional<api::DeviceListing> NodeView::BySerial(std::string_view serial) const {
  return Find([&](const Device& d) { return d.serial == serial; });
}

std::optional<api::DeviceListing> NodeView::ByAddress(PciAddress address) const {
  return Find([&](const Device& d) { return d.address == address; });
}

absl::StatusOr<bool> SchedulerCalls::Filter(const sim::PodInfo& pod, std::string* reason) {
  const std::string pod_json = sim::VirtLauncherPodJson(pod);
  const std::string_view offered[] = {node_};
  absl::StatusOr<HttpResponse> r =
      pdc_->http().Post(prefix_ + "/filter", sim::ExtenderArgsJson(pod_json, offered));
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::InternalError(absl::StrCat("filter: HTTP ", r->status));
  absl::StatusOr<sim::FilterAnswer> a = sim::ParseFilterAnswer(r->body, offered, false);
  if (!a.ok()) return a.status();
  if (reason != nullptr) {
    *reason = a->error;
    for (const std::string& s : a->reasons) absl::StrAppend(reason, reason->empty() ? "" : "; ", s);
  }
  return !a->passed.empty();
}

absl::StatusOr<std::string> SchedulerCalls::Bind(const sim::PodInfo& pod) {
  absl::StatusOr<HttpResponse> r = pdc_->http().Post(
      prefix_ + "/bind", sim::BindingArgsJson(pod.name, pod.ns, pod.uid, node_));
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::InternalError(absl::StrCat("bind: HTTP ", r->status));
  return sim::ParseBindAnswer(r->body);
}

}  // namespace pdc::qemu
