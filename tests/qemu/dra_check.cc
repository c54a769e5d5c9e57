// pdc-dra-guest-check: the orchestrator of run-dra-test.sh's guest, where
// the real pdc-node serves its NVMe class in DRA mode (with the real
// pdc-extender beside it, whose reconcile loop runs the erases). This
// program plays, around it:
//   - kube-apiserver, as a minimal HTTP fake on 127.0.0.1 (the apiserver
//     double of tests/testing needs etcd, which the initramfs does not
//     carry): it records the ResourceSlices pdc-node writes (list by field
//     selector, get, create, update, delete) and serves the ResourceClaims
//     this program makes (get by name; list, and a watch that parks until a
//     claim changes and then answers 410 Expired, so pdc-node's reflector
//     lists again: every change is seen at once);
//   - kubelet: FakeDraKubelet (tests/driver/fake_dra_kubelet.h), registration
//     through the plugin watcher's socket and NodePrepareResources /
//     NodeUnprepareResources over the real gRPC unix sockets;
//   - kube-scheduler's DRA plugin: a claim allocated a published device.
// Checks, against the real kernel: registration; the slices publish the
// free drives and withhold the host-used one; a prepared claim's drive is on
// vfio-pci and its CDI spec and metadata name /dev/vfio/<g>, which exists;
// unprepare keeps vfio-pci; a claim allocated the host-used drive is refused
// with the reason; an open /dev/vfio/<g> blocks the next prepare, naming the
// holder; the claim deleted (reclaimPolicy Delete): the drive is withdrawn,
// erased (the pattern run-dra-test.sh wrote is gone from the namespace),
// back on nvme and published again.
// Prints "PASS:"/"FAIL:" lines and "PDC-DRA-RESULT: PASS|FAIL".
// Not part of the product.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "api/json_util.h"
#include "common/file_util.h"
#include "common/notifier.h"
#include "driver/dra/cdi_spec.h"
#include "driver/dra/slice_builder.h"
#include "driver/host_usage.h"
#include "driver/sysfs.h"
#include "net/http_server.h"
#include "rapidjson/document.h"
#include "tests/driver/fake_dra_kubelet.h"
#include "tests/qemu/daemon_check_util.h"

namespace pdc::qemu {
namespace {

namespace json = ::pdc::api::json;

constexpr char kDraDriver[] = "nvme.pdc.kubevirt.io";
constexpr char kClaimNs[] = "vms";
constexpr char kErasePattern[] = "PDC-ERASE-PATTERN";

struct DraOptions {
  std::string node = "guest";
  uint16_t port = 8890;
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string cdi_dir = "/var/run/cdi";
  std::string erase_serial = "pdc-era";  // Holds the pattern.
  std::string host_used_serial = "pdc-mnt";
  std::string node_log = "/tmp/pdc-node.log";
};

net::HttpResponse Answer(int status, std::string body) {
  net::HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

net::HttpResponse StatusAnswer(int code, const std::string& reason, const std::string& message) {
  return Answer(code, absl::StrCat(R"({"kind":"Status","apiVersion":"v1","status":"Failure",)",
                                   R"("code":)", code, R"(,"reason":")", reason,
                                   R"(","message":")", message, R"("})"));
}

// The fake kube-apiserver: ResourceSlices recorded, ResourceClaims served.
class FakeApiserver {
 public:
  absl::Status Start(uint16_t port) {
    net::HttpServerOptions o;
    o.address = "127.0.0.1";
    o.port = port;
    o.threads = 4;
    o.notifier = &notifier_;
    auto s = net::HttpServer::Start(std::move(o),
                                    [this](net::HttpRequest r) { return Handle(std::move(r)); });
    if (!s.ok()) return s.status();
    server_ = std::move(*s);
    return absl::OkStatus();
  }

  void PutClaim(const std::string& name, const std::string& uid, const std::string& device) {
    absl::MutexLock lock(&mu_);
    claims_[name] = absl::StrCat(
        R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"namespace":")",
        kClaimNs, R"(","name":")", name, R"(","uid":")", uid, R"(","resourceVersion":")", ++rv_,
        R"("},"spec":{},"status":{"allocation":{"devices":{"results":[{"request":"disk",)",
        R"("driver":")", kDraDriver, R"(","pool":")", node_, R"(","device":")", device,
        R"("}]}}}})");
    Changed();
  }
  void DeleteClaim(const std::string& name) {
    absl::MutexLock lock(&mu_);
    claims_.erase(name);
    ++rv_;
    Changed();
  }

  // The device names of every slice now, and of every publication so far
  // (one entry per write that changed a slice).
  std::vector<std::string> Devices() {
    absl::MutexLock lock(&mu_);
    return DevicesLocked();
  }
  std::vector<std::vector<std::string>> History() {
    absl::MutexLock lock(&mu_);
    return history_;
  }
  void set_node(std::string node) { node_ = std::move(node); }

 private:
  void Changed() { notifier_.Bump(); }

  std::vector<std::string> DevicesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> out;
    for (const auto& [name, text] : slices_) {
      rapidjson::Document d;
      d.Parse(text.data(), text.size());
      if (!d.IsObject() || !d.HasMember("spec") || !d["spec"].IsObject()) continue;
      const json::Value& spec = d["spec"];
      if (!spec.HasMember("devices") || !spec["devices"].IsArray()) continue;
      for (const auto& dev : spec["devices"].GetArray()) {
        if (dev.IsObject() && dev.HasMember("name") && dev["name"].IsString()) {
          out.push_back(dev["name"].GetString());
        }
      }
    }
    return out;
  }

  // `text` with metadata.resourceVersion set to `rv`.
  static std::string WithVersion(const std::string& text, int64_t rv) {
    rapidjson::Document d;
    d.Parse(text.data(), text.size());
    if (!d.IsObject() || !d.HasMember("metadata") || !d["metadata"].IsObject()) return text;
    json::Value& meta = d["metadata"];
    meta.RemoveMember("resourceVersion");
    const std::string v = std::to_string(rv);
    meta.AddMember("resourceVersion", rapidjson::Value(v.c_str(), d.GetAllocator()),
                   d.GetAllocator());
    rapidjson::StringBuffer b;
    json::Writer w(b);
    d.Accept(w);
    return std::string(json::Output(b));
  }

  static std::string NameOf(const std::string& text) {
    rapidjson::Document d;
    d.Parse(text.data(), text.size());
    if (!d.IsObject() || !d.HasMember("metadata") || !d["metadata"].IsObject()) return "";
    const json::Value& m = d["metadata"];
    return m.HasMember("name") && m["name"].IsString() ? m["name"].GetString() : "";
  }

  net::HttpResponse Handle(net::HttpRequest r) {
    const std::string path = r.target.substr(0, r.target.find('?'));
    const std::string query =
        r.target.find('?') == std::string::npos ? "" : r.target.substr(r.target.find('?') + 1);
    constexpr std::string_view kSlices = "/apis/resource.k8s.io/v1/resourceslices";
    const std::string claims_prefix =
        absl::StrCat("/apis/resource.k8s.io/v1/namespaces/", kClaimNs, "/resourceclaims/");
    absl::MutexLock lock(&mu_);
    if (path == kSlices && r.method == "GET") {
      std::vector<std::string> items;
      for (const auto& [name, text] : slices_) items.push_back(text);
      return Answer(200, absl::StrCat(R"({"kind":"ResourceSliceList","metadata":{"resourceVersion":")",
                                      rv_, R"("},"items":[)", absl::StrJoin(items, ","), "]}"));
    }
    if (path == kSlices && r.method == "POST") {
      const std::string name = NameOf(r.body);
      if (name.empty()) return StatusAnswer(422, "Invalid", "metadata.name: Required value");
      if (slices_.contains(name)) return StatusAnswer(409, "AlreadyExists", name);
      slices_[name] = WithVersion(r.body, ++rv_);
      history_.push_back(DevicesLocked());
      return Answer(201, slices_[name]);
    }
    if (absl::StartsWith(path, std::string(kSlices) + "/")) {
      const std::string name = path.substr(kSlices.size() + 1);
      auto it = slices_.find(name);
      if (r.method == "GET") {
        if (it == slices_.end()) return StatusAnswer(404, "NotFound", name + " not found");
        return Answer(200, it->second);
      }
      if (r.method == "PUT") {
        if (it == slices_.end()) return StatusAnswer(404, "NotFound", name + " not found");
        slices_[name] = WithVersion(r.body, ++rv_);
        history_.push_back(DevicesLocked());
        return Answer(200, slices_[name]);
      }
      if (r.method == "DELETE") {
        if (it == slices_.end()) return StatusAnswer(404, "NotFound", name + " not found");
        slices_.erase(it);
        history_.push_back(DevicesLocked());
        return StatusAnswer(200, "", "deleted");
      }
    }
    if (absl::StartsWith(path, claims_prefix) && r.method == "GET") {
      auto it = claims_.find(path.substr(claims_prefix.size()));
      if (it == claims_.end()) {
        return StatusAnswer(404, "NotFound",
                            absl::StrCat("resourceclaims \"", path.substr(claims_prefix.size()),
                                         "\" not found"));
      }
      return Answer(200, it->second);
    }
    if (path == "/apis/resource.k8s.io/v1/resourceclaims" && r.method == "GET") {
      if (absl::StrContains(query, "watch=1") || absl::StrContains(query, "watch=true")) {
        // Parks until a claim changes (or 2 s), then says the version is
        // gone: the reflector lists again and sees the change.
        if (r.resume_token == 0 && r.allow_wait) {
          net::HttpResponse park;
          park.long_poll = net::LongPoll{notifier_.version(), absl::Seconds(2), "", 1};
          return park;
        }
        return StatusAnswer(410, "Expired", "too old resource version");
      }
      std::vector<std::string> items;
      for (const auto& [name, text] : claims_) items.push_back(text);
      return Answer(200, absl::StrCat(R"({"kind":"ResourceClaimList","metadata":{"resourceVersion":")",
                                      rv_, R"("},"items":[)", absl::StrJoin(items, ","), "]}"));
    }
    return StatusAnswer(404, "NotFound", r.method + " " + r.target + " is not served here");
  }

  Notifier notifier_;
  std::unique_ptr<net::HttpServer> server_;
  std::string node_;
  absl::Mutex mu_;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, std::string> slices_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> claims_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::string>> history_ ABSL_GUARDED_BY(mu_);
};

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Counts the 1 MiB regions at 0 and 8 MiB of /dev/<ns> holding the pattern
// (O_DIRECT: the device, not a cache); -1 when it cannot be read.
int RegionsWithPattern(const std::string& ns) {
  constexpr size_t kRegion = 1 << 20;
  const int fd = ::open(("/dev/" + ns).c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return -1;
  void* buf = nullptr;
  if (::posix_memalign(&buf, 4096, kRegion) != 0) {
    ::close(fd);
    return -1;
  }
  int found = 0;
  for (off_t off : {off_t{0}, off_t{8 << 20}}) {
    if (::pread(fd, buf, kRegion, off) != static_cast<ssize_t>(kRegion)) {
      found = -1;
      break;
    }
    if (::memmem(buf, kRegion, kErasePattern, sizeof(kErasePattern) - 1) != nullptr) ++found;
  }
  std::free(buf);
  ::close(fd);
  return found;
}

// The namespace block device name ("nvme0n1") of the controller with
// `serial`, once nvme created it; "" when none within `timeout`.
std::string NamespaceOf(const std::string& serial, absl::Duration timeout) {
  std::string out;
  WaitFor(timeout, [&] {
    auto f = FunctionBySerial(serial);
    if (!f) return false;
    driver::RealSysfs sys("/sys");
    auto blocks = driver::BlockDevicesOf(sys, *f);
    if (!blocks.ok() || blocks->empty()) return false;
    if (::access(("/dev/" + blocks->front()).c_str(), R_OK) != 0) return false;
    out = blocks->front();
    return true;
  });
  return out;
}

int Run(const DraOptions& o) {
  const absl::Time start = absl::Now();
  FakeApiserver api;
  api.set_node(o.node);
  if (absl::Status s = api.Start(o.port); !s.ok()) {
    Check(false, "the fake apiserver listens: " + s.ToString());
    return 1;
  }
  const std::string era = driver::dra::DeviceNameFromSerial(o.erase_serial);
  const std::string mnt = driver::dra::DeviceNameFromSerial(o.host_used_serial);
  auto era_fn = FunctionBySerial(o.erase_serial);
  Check(era_fn.has_value(), "the drive " + o.erase_serial + " is there, on nvme");
  if (!era_fn) return 1;
  const PciAddress era_at = era_fn->address;
  const std::string era_ns = NamespaceOf(o.erase_serial, absl::Seconds(30));
  Check(!era_ns.empty() && RegionsWithPattern(era_ns) == 2,
        absl::StrCat("/dev/", era_ns, " holds the pattern at 0 and 8 MiB before any claim"));

  // Registration through the plugin watcher.
  driver::testing::FakeDraKubelet kubelet(o.kubelet_dir + "/plugins_registry",
                                          {"v1.DRAPlugin", "v1beta1.DRAPlugin"});
  const bool registered = WaitFor(absl::Seconds(30), [&] {
    kubelet.WatchOnce();
    return kubelet.plugins().contains(kDraDriver);
  });
  Check(registered,
        absl::StrCat("pdc-node registered ", kDraDriver, " with kubelet (service ",
                     kubelet.plugins().contains(kDraDriver)
                         ? kubelet.plugins().at(kDraDriver).chosen_service
                         : std::string("none"),
                     ")"));

  // Slices: the free drive published, the host-used one withheld.
  Check(WaitFor(absl::Seconds(30), [&] { return Has(api.Devices(), era); }),
        absl::StrCat("the ResourceSlice publishes ", era, " (", o.erase_serial, ")"));
  Check(!Has(api.Devices(), mnt),
        absl::StrCat("the ResourceSlice withholds ", mnt, " (", o.host_used_serial,
                     ", mounted): [", absl::StrJoin(api.Devices(), ", "), "]"));

  // A claim allocated the drive; kubelet prepares it for a pod.
  const driver::testing::FakeClaimRef claim_a{kClaimNs, "disk-a",
                                              "aaaaaaaa-0000-4000-8000-00000000000a", kDraDriver};
  api.PutClaim("disk-a", claim_a.uid, era);
  auto ids = kubelet.PreparePod("pod-a1", {claim_a});
  Check(ids.ok() && ids->size() == 1,
        absl::StrCat("NodePrepareResources of claim vms/disk-a: ",
                     ids.ok() ? absl::StrJoin(*ids, ",") : ids.status().ToString()));
  Check(OnDriver(era_at, "vfio-pci"), absl::StrCat(era_at.ToString(), " is on vfio-pci"));
  auto era_now = FunctionAt(era_at);
  const int group = era_now ? era_now->iommu_group : -1;
  const std::string vfio_dev = absl::StrCat("/dev/vfio/", group);
  const std::string spec_path = driver::dra::CdiSpecPath(o.cdi_dir, kDraDriver, claim_a.uid);
  auto spec = ReadFileToString(spec_path);
  Check(spec.ok() && absl::StrContains(*spec, "\"" + vfio_dev + "\"") &&
            absl::StrContains(*spec, "/dev/vfio/vfio") && ::access(vfio_dev.c_str(), F_OK) == 0,
        absl::StrCat("the CDI spec ", spec_path, " names ", vfio_dev, ", which exists"));
  const std::string meta_path = absl::StrCat("/var/run/pdc/dra-metadata/", claim_a.uid, "/disk/",
                                             kDraDriver, "-metadata.json");
  auto meta = ReadFileToString(meta_path);
  Check(meta.ok() && absl::StrContains(*meta, era_at.ToString()) &&
            absl::StrContains(*meta, "resource.kubernetes.io/pciBusID"),
        absl::StrCat("the device metadata ", meta_path, " names pciBusID ", era_at.ToString()));

  // The pod goes: unprepared, the drive stays on vfio-pci.
  absl::Status un = kubelet.UnpreparePod("pod-a1");
  Check(un.ok(), "NodeUnprepareResources of claim vms/disk-a: " + un.ToString());
  Check(::access(spec_path.c_str(), F_OK) != 0, "the CDI spec is removed");
  Check(OnDriver(era_at, "vfio-pci"), "the drive stays on vfio-pci (its claim still holds it)");

  // A claim allocated the host-used drive is refused with the reason.
  const driver::testing::FakeClaimRef claim_m{kClaimNs, "disk-m",
                                              "aaaaaaaa-0000-4000-8000-00000000000b", kDraDriver};
  api.PutClaim("disk-m", claim_m.uid, mnt);
  auto refused = kubelet.PreparePod("pod-m1", {claim_m});
  Check(!refused.ok() && absl::StrContains(refused.status().message(), "HostInUse"),
        "a claim allocated the mounted drive is refused with the reason: " +
            refused.status().ToString());
  auto mnt_fn = FunctionBySerial(o.host_used_serial);
  Check(mnt_fn && mnt_fn->driver == "nvme", o.host_used_serial + " stays on nvme");
  api.DeleteClaim("disk-m");

  // An open /dev/vfio/<g> (the previous VM's QEMU still shutting down)
  // blocks the next prepare, naming the holder; once closed, it goes.
  const int held = ::open(vfio_dev.c_str(), O_RDWR | O_CLOEXEC);
  Check(held >= 0, absl::StrCat("this program holds ", vfio_dev, " open (pid ", ::getpid(), ")"));
  auto blocked = kubelet.PreparePod("pod-a2", {claim_a});
  Check(!blocked.ok() && absl::StrContains(blocked.status().message(), "is still open by") &&
            absl::StrContains(blocked.status().message(), std::to_string(::getpid())),
        "the next prepare is refused while the group is open: " + blocked.status().ToString());
  if (held >= 0) ::close(held);
  (void)kubelet.UnpreparePod("pod-a2");
  auto again = kubelet.PreparePod("pod-a3", {claim_a});
  Check(again.ok(), "prepared once the group is closed: " + again.status().ToString());
  Check(kubelet.UnpreparePod("pod-a3").ok(), "unprepared again");

  // The claim is deleted (reclaimPolicy Delete): withdrawn, erased, back.
  const size_t publications = api.History().size();
  const absl::Time deleted = absl::Now();
  api.DeleteClaim("disk-a");
  bool back = WaitFor(absl::Seconds(60), [&] {
    return OnDriver(era_at, "nvme") && Has(api.Devices(), era);
  });
  const absl::Duration erase_time = absl::Now() - deleted;
  Check(back, absl::StrCat("after the claim's deletion ", era, " is back on nvme and published (",
                           absl::FormatDuration(erase_time), ")"));
  const auto history = api.History();
  bool withdrawn = false;
  for (size_t i = publications; i < history.size(); ++i) {
    if (!Has(history[i], era)) withdrawn = true;
    if (withdrawn && Has(history[i], era)) break;
  }
  Check(withdrawn, "it was withdrawn from the ResourceSlice before it was published again");
  const std::string ns_after = NamespaceOf(o.erase_serial, absl::Seconds(30));
  const int left = ns_after.empty() ? -1 : RegionsWithPattern(ns_after);
  Check(left == 0, absl::StrCat("/dev/", ns_after, " no longer holds the pattern (", left,
                                " region(s) with it)"));
  auto erased_lines = LinesWith(o.node_log, {"erased", era_at.ToString()});
  Check(!erased_lines.empty(), "pdc-node logs the erase of " + era_at.ToString());
  std::printf("PDC-DRA-FIGURES: checks=%d seconds=%.1f erase_seconds=%.1f\n", Checks(),
              absl::ToDoubleSeconds(absl::Now() - start), absl::ToDoubleSeconds(erase_time));
  return Failures() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace pdc::qemu

int main(int argc, char** argv) {
  pdc::qemu::DraOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string_view flag) { return a.substr(flag.size()); };
    if (a.starts_with("--node=")) {
      o.node = value("--node=");
    } else if (a.starts_with("--erase=")) {
      o.erase_serial = value("--erase=");
    } else if (a.starts_with("--host-used=")) {
      o.host_used_serial = value("--host-used=");
    } else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  const int rc = pdc::qemu::Run(o);
  std::printf("PDC-DRA-RESULT: %s (%d checks, %d failed)\n", rc == 0 ? "PASS" : "FAIL",
              pdc::qemu::Checks(), pdc::qemu::Failures());
  std::fflush(stdout);
  return rc;
}
