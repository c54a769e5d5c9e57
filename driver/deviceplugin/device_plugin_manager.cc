#include "driver/deviceplugin/device_plugin_manager.h"

#include <sys/stat.h>

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "driver/discovery.h"
#include "spdlog/spdlog.h"

namespace pdc::driver::deviceplugin {

DevicePluginManager::DevicePluginManager(Sysfs* sys, ExtenderApi* api, const Clock* clock,
                                         DevicePluginManagerOptions options)
    : sys_(sys),
      options_(std::move(options)),
      book_(options_.node),
      confirmer_(api, &book_, options_.confirmer, options_.metrics) {
  for (const DeviceClass& c : options_.classes) {
    if (plugins_.contains(c.resource_name)) continue;  // Several classes, one name.
    ResourcePluginOptions po;
    po.resource_name = c.resource_name;
    po.vfio_wait = options_.vfio_wait;
    po.vfio_poll = options_.vfio_poll;
    po.metrics = options_.metrics;
    auto plugin = std::make_unique<ResourcePlugin>(sys_, api, &book_, &confirmer_, clock, po);
    endpoints_.emplace(c.resource_name,
                       std::make_unique<PluginEndpoint>(
                           plugin.get(), EndpointOptions{options_.plugin_dir,
                                                         options_.register_timeout,
                                                         options_.metrics}));
    plugins_.emplace(c.resource_name, std::move(plugin));
  }
  std::set<std::string> resources;
  for (const auto& [name, p] : plugins_) resources.insert(name);
  RecoveryOptions recovery = options_.recovery;
  recovery.metrics = options_.metrics;
  recovery_ = std::make_unique<HandoffRecovery>(api, &book_, &confirmer_, std::move(resources),
                                                std::move(recovery));
}

DevicePluginManager::~DevicePluginManager() { Stop(); }

absl::Status DevicePluginManager::Start() {
  struct stat st;
  if (::stat(options_.plugin_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    // kubelet creates it when it starts; keep trying rather than exit.
    spdlog::warn("device plugin directory {} does not exist (yet): kubelet will not see pdc's "
                 "devices until it does (mount kubelet's device-plugins directory, set "
                 "--device-plugin-dir, or run with --device-plugin=false)",
                 options_.plugin_dir);
  }
  // Journaled hand-offs were answered: never offered again, confirmed again.
  if (options_.confirmer.journal != nullptr) {
    for (const HandoffRecord& r : options_.confirmer.journal->Entries()) {
      book_.MarkHandedOff(r.resource_name, r.pod_uid);
      if (options_.metrics != nullptr) {
        options_.metrics->handoffs_recovered->WithLabels({"journal"})->Increment();
      }
    }
  }
  confirmer_.Start();
  recovery_->Start();
  (void)CheckEndpoints();  // Logged; the watcher retries.
  watcher_ = std::thread([this] { Watch(); });
  return absl::OkStatus();
}

void DevicePluginManager::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
  {
    absl::MutexLock lock(&endpoints_mu_);
    for (auto& [name, e] : endpoints_) e->Stop();
  }
  recovery_->Stop();
  confirmer_.Stop();
}

absl::Status DevicePluginManager::CheckEndpoints() {
  absl::MutexLock lock(&endpoints_mu_);
  absl::Status first;
  for (auto& [name, e] : endpoints_) {
    if (stop_.HasBeenNotified()) break;
    absl::Status s = e->Ensure();
    std::string message(s.message());
    auto [it, inserted] = last_error_.try_emplace(name, "");
    if (it->second != message) {
      if (!s.ok()) spdlog::warn("device plugin for {}: {}", name, message);
      it->second = message;
    }
    if (first.ok()) first = s;
  }
  return first;
}

void DevicePluginManager::Watch() {
  while (!stop_.WaitForNotificationWithTimeout(options_.watch_interval)) {
    (void)CheckEndpoints();
  }
}

void DevicePluginManager::OnInventory(const NodeInventory& inventory) {
  std::map<std::string, std::vector<Device>> by_resource;
  for (auto& [name, p] : plugins_) by_resource[name];  // An empty list is news too.
  for (const Device& d : inventory.devices) {
    if (const DeviceClass* c = MatchingClass(options_.classes, d)) {
      by_resource[c->resource_name].push_back(d);
    }
  }
  for (auto& [name, devices] : by_resource) {
    if (auto it = plugins_.find(name); it != plugins_.end()) it->second->SetDevices(devices);
  }
}

void DevicePluginManager::OnAllocations(const NodeAllocations& allocations) {
  book_.Update(allocations, /*fresh=*/false);
}

std::vector<std::string> DevicePluginManager::resource_names() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : plugins_) out.push_back(name);
  return out;
}

ResourcePlugin* DevicePluginManager::plugin(const std::string& resource_name) const {
  auto it = plugins_.find(resource_name);
  return it == plugins_.end() ? nullptr : it->second.get();
}

PluginEndpoint* DevicePluginManager::endpoint(const std::string& resource_name) const {
  auto it = endpoints_.find(resource_name);
  return it == endpoints_.end() ? nullptr : it->second.get();
}

}  // namespace pdc::driver::deviceplugin
