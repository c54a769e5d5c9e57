#include "driver/deviceplugin/resource_plugin.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/deviceplugin/names.h"
#include "driver/pci_function.h"
#include "spdlog/spdlog.h"

namespace pdc::driver::deviceplugin {
namespace {

std::string Join(const std::vector<PciAddress>& addresses) {
  return absl::StrJoin(addresses, ",",
                       [](std::string* out, PciAddress a) { out->append(a.ToString()); });
}

grpc::Status ToGrpc(const absl::Status& s) {
  // absl and gRPC share the canonical code numbers.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace

v1beta1::DevicePluginOptions PluginOptions() {
  v1beta1::DevicePluginOptions o;
  o.set_pre_start_required(false);
  o.set_get_preferred_allocation_available(true);
  return o;
}

ResourcePlugin::ResourcePlugin(Sysfs* sys, ExtenderApi* api, HandoffBook* book,
                               HandoffConfirmer* confirmer, const Clock* clock,
                               ResourcePluginOptions options)
    : sys_(sys),
      api_(api),
      book_(book),
      confirmer_(confirmer),
      clock_(clock),
      options_(std::move(options)) {}

void ResourcePlugin::SetDevices(std::vector<Device> devices) {
  std::map<PciAddress, Device> next;
  for (Device& d : devices) next.emplace(d.address, std::move(d));
  absl::MutexLock lock(&mu_);
  auto same = [](const std::map<PciAddress, Device>& a, const std::map<PciAddress, Device>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
      return x.first == y.first && x.second.health == y.second.health &&
             x.second.numa_node == y.second.numa_node;
    });
  };
  if (devices_version_ > 0 && same(devices_, next)) return;
  devices_ = std::move(next);
  ++devices_version_;
}

bool ResourcePlugin::WaitForDevices(uint64_t* seen, const std::atomic<bool>* stopped,
                                    absl::Duration timeout, v1beta1::ListAndWatchResponse* out) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return devices_version_ != *seen || stopped->load();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (devices_version_ == *seen || stopped->load()) return false;
  *seen = devices_version_;
  out->Clear();
  for (const auto& [address, d] : devices_) {
    v1beta1::Device* dev = out->add_devices();
    dev->set_id(address.ToString());
    dev->set_health(std::string(d.health == DeviceHealth::kHealthy ? kHealthy : kUnhealthy));
    if (d.numa_node >= 0) dev->mutable_topology()->add_nodes()->set_id(d.numa_node);
  }
  return true;
}

void ResourcePlugin::Poke() {
  // Waiters re-evaluate their conditions when the mutex is released.
  absl::MutexLock lock(&mu_);
  ++pokes_;
}

std::unique_ptr<ResourcePlugin::Service> ResourcePlugin::NewService() {
  return std::make_unique<Service>(this);
}

absl::StatusOr<PendingPod> ResourcePlugin::PendingOrRefresh() {
  absl::StatusOr<PendingPod> pod = book_->Pending(options_.resource_name);
  if (!absl::IsNotFound(pod.status())) return pod;
  // The long-poll may not have delivered the newest answer yet: ask once.
  auto fresh = api_->GetAllocations(book_->node(), 0, absl::ZeroDuration());
  if (!fresh.ok()) {
    return absl::UnavailableError(absl::StrCat(pod.status().message(),
                                               " (pdc-extender could not be asked again: ",
                                               fresh.status().message(), ")"));
  }
  book_->Update(*fresh, /*fresh=*/true);
  return book_->Pending(options_.resource_name);
}

absl::Status ResourcePlugin::DeviceReady(PciAddress address, int32_t* group) {
  const std::string a = address.ToString();
  auto info = ReadPciFunction(*sys_, address);
  if (absl::IsNotFound(info.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", a, " is not on node ", book_->node(), "'s PCI bus"));
  }
  if (!info.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", a, " cannot be read in sysfs: ", info.status().message()));
  }
  if (info->iommu_group < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", a, " is in no IOMMU group, so vfio cannot pass it to a VM"));
  }
  if (info->driver != kVfioPci) {
    return absl::UnavailableError(absl::StrCat(
        "device ", a, " is bound to ", info->driver.empty() ? "no driver" : info->driver,
        ", not vfio-pci (pdc-node has not moved it yet, or could not: see its log)"));
  }
  {
    // Closed until discovery has said something about the device: before
    // the first inventory nothing (host use, a pending erase, an adopted
    // device) has been checked.
    absl::MutexLock lock(&mu_);
    if (devices_version_ == 0) {
      return absl::UnavailableError(absl::StrCat(
          "device ", a, " cannot be handed over yet: pdc-node has not finished its first "
          "inventory of node ", book_->node()));
    }
    auto it = devices_.find(address);
    if (it == devices_.end()) {
      return absl::UnavailableError(absl::StrCat("device ", a, " is not in node ", book_->node(),
                                                 "'s inventory of ", options_.resource_name));
    }
    if (it->second.health != DeviceHealth::kHealthy) {
      return absl::UnavailableError(absl::StrCat(
          "device ", a, " is Unhealthy on node ", book_->node(), " (",
          Sv(ToString(it->second.unhealthy_reason)), ")"));
    }
  }
  *group = info->iommu_group;
  return absl::OkStatus();
}

absl::Status ResourcePlugin::WaitReady(const PendingPod& pod, std::vector<int32_t>* groups) {
  const absl::Time deadline = clock_->Now() + options_.vfio_wait;
  while (true) {
    std::set<int32_t> seen;
    absl::Status failed;
    for (PciAddress a : pod.devices) {
      int32_t group = -1;
      failed = DeviceReady(a, &group);
      if (!failed.ok()) break;
      seen.insert(group);
    }
    if (failed.ok()) {
      groups->assign(seen.begin(), seen.end());
      return absl::OkStatus();
    }
    // Unavailable may pass (the reconcile loop is binding); the rest never.
    if (!absl::IsUnavailable(failed) || clock_->Now() >= deadline) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot hand ", options_.resource_name, " to VM ", pod.Describe(), ": ",
          failed.message(),
          absl::IsUnavailable(failed)
              ? absl::StrCat(" (waited ", absl::FormatDuration(options_.vfio_wait), ")")
              : ""));
    }
    clock_->SleepFor(options_.vfio_poll);
  }
}

absl::StatusOr<std::vector<std::string>> ResourcePlugin::Preferred(
    const std::vector<std::string>& available, const std::vector<std::string>& must_include,
    int size) {
  absl::StatusOr<PendingPod> pod = PendingOrRefresh();
  if (pod.ok() && static_cast<int>(pod->devices.size()) == size) {
    std::vector<std::string> ids;
    for (PciAddress a : pod->devices) ids.push_back(a.ToString());
    for (const std::string& id : ids) {
      if (std::find(available.begin(), available.end(), id) == available.end()) {
        spdlog::warn("GetPreferredAllocation for {}: claimed device {} of VM {} is not among "
                     "kubelet's available devices; preferring it anyway (Allocate decides)",
                     options_.resource_name, id, pod->Describe());
      }
    }
    return ids;
  }
  const std::string why =
      pod.ok() ? absl::StrCat("VM ", pod->Describe(), " holds ", pod->devices.size(),
                              " claimed device(s) but kubelet wants ", size)
               : std::string(pod.status().message());
  spdlog::warn("GetPreferredAllocation for {}: {}; suggesting kubelet's own choice, Allocate "
               "decides",
               options_.resource_name, why);
  std::vector<std::string> ids;
  for (const std::string& id : must_include) {
    if (static_cast<int>(ids.size()) < size) ids.push_back(id);
  }
  for (const std::string& id : available) {
    if (static_cast<int>(ids.size()) >= size) break;
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<Handoff> ResourcePlugin::Allocate(const std::vector<std::string>& kubelet_ids) {
  absl::MutexLock serial(&allocate_mu_);
  const char* outcome = "handed_off";
  absl::StatusOr<Handoff> h = AllocateLocked(kubelet_ids, &outcome);
  if (options_.metrics) options_.metrics->handoffs->WithLabels({outcome})->Increment();
  return h;
}

absl::StatusOr<Handoff> ResourcePlugin::AllocateLocked(const std::vector<std::string>& kubelet_ids,
                                                       const char** outcome) {
  absl::StatusOr<PendingPod> pending = PendingOrRefresh();
  if (!pending.ok()) {
    *outcome = absl::IsNotFound(pending.status())      ? "nothing_pending"
               : absl::IsUnavailable(pending.status()) ? "extender_unreachable"
                                                       : "several_pending";
    return pending.status();
  }
  PendingPod& pod = *pending;
  if (kubelet_ids.size() != pod.devices.size()) {
    *outcome = "count_mismatch";
    return absl::FailedPreconditionError(absl::StrCat(
        "kubelet asked for ", kubelet_ids.size(), " ", options_.resource_name,
        " device(s) but VM ", pod.Describe(), " holds ", pod.devices.size(), " claimed (",
        Join(pod.devices), "); the pod's request must equal its claims"));
  }
  Handoff h;
  if (absl::Status s = WaitReady(pod, &h.iommu_groups); !s.ok()) {
    *outcome = "device_not_ready";
    return s;
  }
  // Done here at once: a second Allocate before the extender has recorded
  // this one must not get these devices again.
  book_->MarkHandedOff(options_.resource_name, pod.pod_uid);
  // Journaled before kubelet hears the answer, so that a restart before the
  // confirmation is accepted confirms it again (handoff_journal.h).
  absl::Status journaled = confirmer_->Enqueue(
      HandoffRecord{options_.resource_name, pod.pod_uid, pod.ns, pod.pod_name, pod.devices});
  if (!journaled.ok()) {
    // Answering anyway: refusing would fail the pod's admission for a
    // record only a restart in the next moments would miss (and the
    // PodResources recovery may still find it then).
    spdlog::warn("hand-off of {} to VM {} is not journaled: {}", options_.resource_name,
                 pod.Describe(), journaled.ToString());
  }
  spdlog::info("handing {} {} (claims {}) to VM {}; kubelet had chosen [{}]",
               options_.resource_name, Join(pod.devices), absl::StrJoin(pod.claims, ","),
               pod.Describe(), absl::StrJoin(kubelet_ids, ","));
  h.pod = std::move(pod);
  return h;
}

void ResourcePlugin::Service::Stop() {
  stopped_ = true;
  plugin_->Poke();
}

grpc::Status ResourcePlugin::Service::GetDevicePluginOptions(
    grpc::ServerContext* context, const v1beta1::Empty* request,
    v1beta1::DevicePluginOptions* response) {
  *response = PluginOptions();
  return grpc::Status::OK;
}

grpc::Status ResourcePlugin::Service::ListAndWatch(
    grpc::ServerContext* context, const v1beta1::Empty* request,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  uint64_t seen = ~uint64_t{0};
  v1beta1::ListAndWatchResponse update;
  while (!stopped_ && !context->IsCancelled()) {
    // Wakes on a change or Stop(); the timeout notices a vanished kubelet.
    if (!plugin_->WaitForDevices(&seen, &stopped_, absl::Seconds(1), &update)) continue;
    if (!writer->Write(update)) break;  // kubelet hung up.
  }
  return grpc::Status::OK;
}

grpc::Status ResourcePlugin::Service::GetPreferredAllocation(
    grpc::ServerContext* context, const v1beta1::PreferredAllocationRequest* request,
    v1beta1::PreferredAllocationResponse* response) {
  for (const v1beta1::ContainerPreferredAllocationRequest& c : request->container_requests()) {
    std::vector<std::string> available(c.available_deviceids().begin(),
                                       c.available_deviceids().end());
    std::vector<std::string> must(c.must_include_deviceids().begin(),
                                  c.must_include_deviceids().end());
    auto ids = plugin_->Preferred(available, must, c.allocation_size());
    if (!ids.ok()) return ToGrpc(ids.status());
    auto* out = response->add_container_responses();
    for (const std::string& id : *ids) out->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status ResourcePlugin::Service::Allocate(grpc::ServerContext* context,
                                               const v1beta1::AllocateRequest* request,
                                               v1beta1::AllocateResponse* response) {
  const std::string& resource = plugin_->resource_name();
  if (request->container_requests_size() != 1) {
    // kubelet's device manager allocates one container at a time.
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("Allocate for ", resource, " carries ",
                                     request->container_requests_size(),
                                     " container requests; pdc answers exactly one"));
  }
  const auto& ids = request->container_requests(0).devices_ids();
  auto h = plugin_->Allocate(std::vector<std::string>(ids.begin(), ids.end()));
  if (!h.ok()) {
    spdlog::warn("Allocate of {} refused: {}", resource, std::string(h.status().message()));
    return ToGrpc(h.status());
  }
  v1beta1::ContainerAllocateResponse* c = response->add_container_responses();
  (*c->mutable_envs())[ResourceEnvVar(resource)] = Join(h->pod.devices);
  auto add = [c](const std::string& path) {
    v1beta1::DeviceSpec* d = c->add_devices();
    d->set_container_path(path);
    d->set_host_path(path);
    d->set_permissions("mrw");
  };
  add("/dev/vfio/vfio");
  for (int32_t g : h->iommu_groups) add(absl::StrCat("/dev/vfio/", g));
  return grpc::Status::OK;
}

grpc::Status ResourcePlugin::Service::PreStartContainer(
    grpc::ServerContext* context, const v1beta1::PreStartContainerRequest* request,
    v1beta1::PreStartContainerResponse* response) {
  return grpc::Status::OK;  // Not requested (PluginOptions).
}

}  // namespace pdc::driver::deviceplugin
