#include "driver/dra/dra_driver.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json_util.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/discovery.h"
#include "driver/dra/names.h"
#include "driver/pci_function.h"
#include "rapidjson/document.h"
#include "spdlog/spdlog.h"

namespace pdc::driver::dra {

namespace json = ::pdc::api::json;

namespace {

// The ResourceSlice paths (helpers that tests/deploy/check_manifests.py
// follows to the RBAC pdc-node needs).
std::string SlicesPath() { return "/apis/resource.k8s.io/v1/resourceslices"; }
std::string SlicePath(const std::string& name) {
  return absl::StrCat("/apis/resource.k8s.io/v1/resourceslices/", name);
}
std::string NodeSlicesPath(const std::string& node, const std::string& driver) {
  return absl::StrCat(
      "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D",
      node, "%2Cspec.driver%3D", driver);
}

absl::StatusOr<HttpResponse> Ok(absl::StatusOr<HttpResponse> r,
                                std::string_view what) {
  if (!r.ok()) return r.status();
  if (r->status / 100 != 2)
    return kube::FromApiserver(r->status, r->body, what);
  return r;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
KubeSlicePublisher::List(const std::string& driver, const std::string& node) {
  const std::string what =
      absl::StrCat("listing the ResourceSlices of ", driver, " on ", node);
  ASSIGN_OR_RETURN(HttpResponse r,
                   Ok(api_->Call("GET", NodeSlicesPath(node, driver), "", "",
                                 what, timeout_),
                      what));
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseObject(r.body, &doc));
  std::vector<std::pair<std::string, int64_t>> out;
  ASSIGN_OR_RETURN(const json::Value* items, json::OptArray(doc, "items", "items"));
  if (items == nullptr) return out;
  for (rapidjson::SizeType i = 0; i < items->Size(); ++i) {
    const json::Value& item = (*items)[i];
    const std::string field = absl::StrCat("items[", i, "]");
    if (!item.IsObject()) return json::TypeError(field, "is not an object");
    ASSIGN_OR_RETURN(const json::Value* meta, json::OptObject(item, "metadata", field));
    ASSIGN_OR_RETURN(const json::Value* spec, json::OptObject(item, "spec", field));
    if (meta == nullptr || spec == nullptr)
      return json::TypeError(field, "has no metadata or spec");
    ASSIGN_OR_RETURN(std::string_view name,
                     json::ReqString(*meta, "name", field + ".metadata.name"));
    ASSIGN_OR_RETURN(const json::Value* pool, json::OptObject(*spec, "pool", field + ".spec.pool"));
    int64_t generation = 0;
    if (pool != nullptr) {
      ASSIGN_OR_RETURN(generation,
                       json::OptInt(*pool, "generation", field + ".spec.pool.generation", 0));
    }
    out.push_back({std::string(name), generation});
  }
  return out;
}

absl::StatusOr<int64_t> KubeSlicePublisher::CurrentGeneration(const std::string& driver,
                                                              const std::string& node) {
  ASSIGN_OR_RETURN(auto slices, List(driver, node));
  int64_t generation = 0;
  for (const auto& [name, g] : slices) generation = std::max(generation, g);
  return generation;
}

absl::Status KubeSlicePublisher::Publish(const std::string& driver,
                                         const std::string& node,
                                         const SliceSet& set) {
  for (size_t i = 0; i < set.slices.size(); ++i) {
    const std::string what = absl::StrCat("ResourceSlice ", set.names[i]);
    ASSIGN_OR_RETURN(
        HttpResponse current,
        api_->Call("GET", SlicePath(set.names[i]), "", "", what, timeout_));
    if (current.status == 404) {
      RETURN_IF_ERROR(
          Ok(api_->Call("POST", SlicesPath(), set.slices[i], "application/json",
                        "creating " + what, timeout_),
             "creating " + what)
              .status());
      continue;
    }
    if (current.status / 100 != 2)
      return kube::FromApiserver(current.status, current.body, what);
    rapidjson::Document existing;
    RETURN_IF_ERROR(json::ParseObject(current.body, &existing));
    ASSIGN_OR_RETURN(const json::Value* meta,
                     json::OptObject(existing, "metadata", "metadata"));
    if (meta == nullptr) return json::TypeError("metadata", "is missing");
    ASSIGN_OR_RETURN(
        std::string_view rv,
        json::ReqString(*meta, "resourceVersion", "metadata.resourceVersion"));
    // The update names the version it replaces: a conflict (409) means
    // someone else wrote it, and the next pass reads it again.
    rapidjson::Document body;
    RETURN_IF_ERROR(json::ParseObject(set.slices[i], &body));
    body["metadata"].AddMember(
        "resourceVersion",
        rapidjson::Value(rv.data(), static_cast<rapidjson::SizeType>(rv.size()),
                         body.GetAllocator()),
        body.GetAllocator());
    rapidjson::StringBuffer buffer;
    json::Writer w(buffer);
    body.Accept(w);
    RETURN_IF_ERROR(
        Ok(api_->Call("PUT", SlicePath(set.names[i]),
                      std::string(json::Output(buffer)), "application/json",
                      "updating " + what, timeout_),
           "updating " + what)
            .status());
  }
  ASSIGN_OR_RETURN(auto slices, List(driver, node));
  const std::set<std::string> keep(set.names.begin(), set.names.end());
  for (const auto& [name, generation] : slices) {
    if (keep.contains(name)) continue;
    const std::string what = absl::StrCat("deleting ResourceSlice ", name);
    ASSIGN_OR_RETURN(HttpResponse r, api_->Call("DELETE", SlicePath(name), "",
                                                "", what, timeout_));
    if (r.status != 404 && r.status / 100 != 2)
      return kube::FromApiserver(r.status, r.body, what);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DraDriver>> DraDriver::Create(
    DraDriverOptions options, ClaimSource* claims, const ClaimIndex* index, VfioBinder* binder,
    BindJournal* journal, HostView host, SlicePublisher* publisher) {
  std::unique_ptr<DraDriver> d(new DraDriver(std::move(options), host, publisher));
  const DraDriverOptions& o = d->options_;
  ASSIGN_OR_RETURN(d->checkpoint_, PreparedCheckpoint::Open(o.checkpoint_path));
  for (const std::string& p : d->checkpoint_->problems())
    spdlog::error("DRA {}: {}", o.driver_name, p);
  ASSIGN_OR_RETURN(d->holders_, PreparedCheckpoint::Open(o.holders_path));
  for (const std::string& p : d->holders_->problems())
    spdlog::error("DRA {}: {}: {}", o.driver_name, o.holders_path, p);
  // A claim prepared before holder records existed: its devices hold its
  // data, as recorded now.
  for (const PreparedClaim& c : d->checkpoint_->Claims()) {
    if (d->holders_->Get(c.uid)) continue;
    RETURN_IF_ERROR(d->holders_->Put(c));
  }
  if (!o.release_dir.empty()) RETURN_IF_ERROR(MakeDirectories(o.release_dir));
  d->reclaimer_ = std::make_unique<DeviceReclaimer>(
      ReclaimerOptions{o.driver_name, o.node_name, o.reclaim_policy, o.release_dir}, index, claims,
      d->holders_.get(), d->checkpoint_.get(), journal, binder);
  int64_t first_generation = 1;
  if (publisher != nullptr) {
    // A restarted pdc-node publishes above what the apiserver holds, or the
    // scheduler would keep the old slices.
    absl::StatusOr<int64_t> current = publisher->CurrentGeneration(o.driver_name, o.node_name);
    if (current.ok()) {
      first_generation = *current + 1;
    } else {
      spdlog::warn("DRA {}: reading the published pool: {}", o.driver_name,
                   current.status().ToString());
    }
  }
  d->slices_ = std::make_unique<SliceBuilder>(o.driver_name, o.node_name, first_generation);
  PreparerOptions po{o.driver_name, o.node_name, o.device_class.resource_name, o.cdi_dir,
                     o.metadata_dir};
  d->preparer_ = std::make_unique<ClaimPreparer>(po, claims, d->slices_.get(), binder, host,
                                                 d->checkpoint_.get(), d->holders_.get());
  d->server_ = std::make_unique<DraServer>(d->preparer_.get(),
                                           ServiceSocketPath(o.plugins_dir, o.driver_name));
  d->registrar_ = std::make_unique<Registrar>(
      RegistrarOptions{o.driver_name, o.registry_dir, d->server_->socket_path(), {}});
  return d;
}

DraDriver::~DraDriver() { Stop(); }

absl::Status DraDriver::Start() {
  RETURN_IF_ERROR(server_->Start());
  return registrar_->Ensure();
}

void DraDriver::Tick() {
  if (absl::Status s = registrar_->Ensure(); !s.ok()) {
    spdlog::warn("DRA {}: {}", options_.driver_name, s.ToString());
  }
}

void DraDriver::OnInventory(const NodeInventory& inventory) {
  std::vector<SliceDeviceInput> inputs;
  const std::vector<DeviceClass> classes = {options_.device_class};
  std::vector<Device> mine;
  for (const Device& d : inventory.devices) {
    if (MatchingClass(classes, d) != nullptr) mine.push_back(d);
  }
  const ReclaimPlan plan = reclaimer_->Plan(mine, extender_held_);
  for (const Device& d : mine) {
    SliceDeviceInput in;
    in.device = d;
    if (auto w = plan.withheld.find(d.address); w != plan.withheld.end()) {
      in.withheld_reason = w->second;
    }
    absl::StatusOr<std::string> resolved = host_.sys->Resolve(DevicePath(d.address));
    if (resolved.ok()) in.pcie_root = PcieRootFromSysfsPath(*resolved);
    // sysfs shows an NVMe model and namespaces only while the nvme driver
    // has the device: the last ones seen for the serial stay, so binding it
    // to vfio-pci does not change what is published.
    absl::StatusOr<PciFunctionInfo> info = ReadPciFunction(*host_.sys, d.address);
    if (info.ok() && !d.serial.empty()) {
      if (!info->model.empty()) model_by_serial_[d.serial] = info->model;
      if (info->capacity_bytes.has_value()) capacity_by_serial_[d.serial] = *info->capacity_bytes;
    }
    if (auto m = model_by_serial_.find(d.serial); m != model_by_serial_.end()) in.model = m->second;
    if (auto c = capacity_by_serial_.find(d.serial); c != capacity_by_serial_.end()) {
      in.capacity_bytes = c->second;
    }
    inputs.push_back(std::move(in));
  }
  SliceSet set = slices_->Build(inputs);
  if (set.changed) {
    spdlog::info("DRA {}: pool {} generation {}: {} slice(s){}{}", options_.driver_name,
                 options_.node_name, set.generation, set.slices.size(),
                 set.withheld.empty() ? "" : "; withheld: ", absl::StrJoin(set.withheld, "; "));
  }
  if (publisher_ != nullptr && (set.changed || publish_pending_)) {
    absl::Status s = publisher_->Publish(options_.driver_name, options_.node_name, set);
    publish_pending_ = !s.ok();
    if (!s.ok()) {
      spdlog::warn("DRA {}: publishing ResourceSlices: {} (retried next pass)",
                   options_.driver_name, s.ToString());
      return;  // The withdrawn devices may still be offered: nothing is done to them yet.
    }
  }
  reclaimer_->Apply(plan);
}

void DraDriver::OnAllocations(const NodeAllocations& allocations) {
  std::set<PciAddress> held;
  for (const NodeAllocation& a : allocations.claimed) held.insert(a.address);
  extender_held_ = std::move(held);
}

void DraDriver::Stop() {
  if (registrar_) registrar_->Stop();
  if (server_) server_->Stop();
}

}  // namespace pdc::driver::dra
