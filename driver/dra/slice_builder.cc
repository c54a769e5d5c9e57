#include "driver/dra/slice_builder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/json_util.h"
#include "common/strings.h"
#include "driver/dra/names.h"
#include "model/dra_device_name.h"

namespace pdc::driver::dra {

namespace json = ::pdc::api::json;

namespace {

void StringAttr(json::Writer& w, std::string_view key, std::string_view value) {
  w.Text(key);
  w.StartObject();
  w.Key("string");
  w.Text(value);
  w.EndObject();
}

void IntAttr(json::Writer& w, std::string_view key, int64_t value) {
  w.Text(key);
  w.StartObject();
  w.Key("int");
  w.Int64(value);
  w.EndObject();
}

}  // namespace

std::string DeviceNameFromSerial(std::string_view serial) {
  return model::DraDeviceNameFromSerial(serial);
}

std::string PcieRootFromSysfsPath(std::string_view resolved) {
  constexpr std::string_view kDevices = "devices/";
  if (resolved.substr(0, kDevices.size()) != kDevices) return "";
  std::string_view rest = resolved.substr(kDevices.size());
  std::string_view root = rest.substr(0, rest.find('/'));
  if (root.size() < 4 || root.substr(0, 3) != "pci") return "";
  return std::string(root);
}

SliceBuilder::SliceBuilder(std::string driver, std::string node, int64_t first_generation)
    : driver_(std::move(driver)), node_(std::move(node)), generation_(first_generation) {}

SliceSet SliceBuilder::Build(const std::vector<SliceDeviceInput>& inputs) {
  SliceSet out;
  // Names first: a name two devices yield is withheld for both.
  std::map<std::string, std::vector<const SliceDeviceInput*>> by_name;
  std::map<std::string, std::string> withheld_by_name;  // Why, for Find.
  for (const SliceDeviceInput& in : inputs) {
    const std::string addr = in.device.address.ToString();
    std::string why = in.withheld_reason;
    if (why.empty() && in.device.health != DeviceHealth::kHealthy) {
      why = std::string(Sv(ToString(in.device.unhealthy_reason)));
    }
    if (!why.empty()) {
      out.withheld.push_back(absl::StrCat(addr, ": ", why));
      if (!in.device.serial.empty()) withheld_by_name[DeviceNameFromSerial(in.device.serial)] = why;
      continue;
    }
    const std::string name = DeviceNameFromSerial(in.device.serial);
    if (name.empty()) {
      out.withheld.push_back(absl::StrCat(addr, ": no serial to name it by"));
      continue;
    }
    by_name[name].push_back(&in);
  }
  std::vector<std::pair<std::string, const SliceDeviceInput*>> devices;
  for (const auto& [name, ins] : by_name) {
    if (ins.size() > 1) {
      for (const SliceDeviceInput* in : ins) {
        out.withheld.push_back(absl::StrCat(in->device.address.ToString(), ": device name ", name,
                                            " is also another device's"));
      }
      continue;
    }
    devices.push_back({name, ins[0]});
  }
  std::sort(out.withheld.begin(), out.withheld.end());

  // The devices array of each slice; compared with the last build's.
  std::vector<std::string> device_arrays;
  std::map<std::string, PciAddress> published;
  for (size_t start = 0; start < devices.size() || start == 0; start += kMaxDevicesPerSlice) {
    rapidjson::StringBuffer buffer;
    json::Writer w(buffer);
    w.StartArray();
    for (size_t i = start; i < std::min(devices.size(), start + kMaxDevicesPerSlice); ++i) {
      const auto& [name, in] = devices[i];
      const Device& d = in->device;
      published[name] = d.address;
      w.StartObject();
      w.Key("name");
      w.Text(name);
      w.Key("attributes");
      w.StartObject();
      StringAttr(w, kPciBusIdAttribute, d.address.ToString());
      if (!in->pcie_root.empty()) StringAttr(w, kPcieRootAttribute, in->pcie_root);
      StringAttr(w, "deviceID", absl::StrFormat("%04x", d.device_id));
      if (d.iommu_group >= 0) IntAttr(w, "iommuGroup", d.iommu_group);
      if (!in->model.empty()) StringAttr(w, "model", in->model);
      if (d.numa_node >= 0) IntAttr(w, "numaNode", d.numa_node);
      StringAttr(w, "serial", d.serial);
      StringAttr(w, "vendorID", absl::StrFormat("%04x", d.vendor_id));
      w.EndObject();
      if (in->capacity_bytes.has_value()) {
        w.Key("capacity");
        w.StartObject();
        w.Key("size");
        w.StartObject();
        w.Key("value");
        w.Text(absl::StrCat(*in->capacity_bytes));
        w.EndObject();
        w.EndObject();
      }
      w.EndObject();
    }
    w.EndArray();
    device_arrays.emplace_back(json::Output(buffer));
    if (devices.empty()) break;
  }

  absl::MutexLock lock(&mu_);
  std::string all;
  for (const std::string& a : device_arrays) absl::StrAppend(&all, a, "\n");
  out.changed = !built_ || all != last_devices_;
  if (built_ && out.changed) ++generation_;
  built_ = true;
  last_devices_ = std::move(all);
  published_ = std::move(published);
  withheld_ = std::move(withheld_by_name);
  out.generation = generation_;
  for (size_t i = 0; i < device_arrays.size(); ++i) {
    const std::string name = absl::StrCat(node_, "-", driver_, "-", i);
    rapidjson::StringBuffer buffer;
    json::Writer w(buffer);
    w.StartObject();
    w.Key("apiVersion");
    w.Text("resource.k8s.io/v1");
    w.Key("kind");
    w.Text("ResourceSlice");
    w.Key("metadata");
    w.StartObject();
    w.Key("name");
    w.Text(name);
    w.EndObject();
    w.Key("spec");
    w.StartObject();
    w.Key("driver");
    w.Text(driver_);
    w.Key("pool");
    w.StartObject();
    w.Key("name");
    w.Text(node_);
    w.Key("generation");
    w.Int64(generation_);
    w.Key("resourceSliceCount");
    w.Int64(static_cast<int64_t>(device_arrays.size()));
    w.EndObject();
    w.Key("nodeName");
    w.Text(node_);
    w.Key("devices");
    w.RawValue(device_arrays[i].data(), device_arrays[i].size(), rapidjson::kArrayType);
    w.EndObject();
    w.EndObject();
    out.names.push_back(name);
    out.slices.emplace_back(json::Output(buffer));
  }
  return out;
}

absl::StatusOr<PciAddress> SliceBuilder::Find(std::string_view device_name) const {
  absl::MutexLock lock(&mu_);
  auto it = published_.find(std::string(device_name));
  if (it == published_.end()) {
    auto w = withheld_.find(std::string(device_name));
    return absl::NotFoundError(absl::StrCat(
        "no device named ", Sv(device_name), " is published by ", driver_, " on node ", node_,
        w == withheld_.end() ? std::string() : absl::StrCat(" (withdrawn: ", w->second, ")")));
  }
  return it->second;
}

}  // namespace pdc::driver::dra
