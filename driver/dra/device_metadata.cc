#include "driver/dra/device_metadata.h"

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/strings.h"
#include "driver/dra/names.h"

namespace pdc::driver::dra {

namespace json = ::pdc::api::json;

std::string DeviceMetadataJson(const MetadataClaim& claim, const MetadataRequest& request) {
  rapidjson::StringBuffer buffer;
  json::Writer w(buffer);
  w.StartObject();
  w.Key("kind");
  w.Text(kMetadataKind);
  w.Key("apiVersion");
  w.Text(kMetadataApiVersion);
  w.Key("metadata");
  w.StartObject();
  w.Key("name");
  w.Text(claim.name);
  w.Key("namespace");
  w.Text(claim.ns);
  w.Key("uid");
  w.Text(claim.uid);
  w.EndObject();
  if (claim.pod_claim_name.has_value()) {
    w.Key("podClaimName");
    w.Text(*claim.pod_claim_name);
  }
  w.Key("requests");
  w.StartArray();
  w.StartObject();
  w.Key("name");
  w.Text(request.name);
  if (!request.devices.empty()) {
    w.Key("devices");
    w.StartArray();
    for (const MetadataDevice& d : request.devices) {
      w.StartObject();
      w.Key("driver");
      w.Text(d.driver);
      w.Key("pool");
      w.Text(d.pool);
      w.Key("name");
      w.Text(d.name);
      w.Key("attributes");
      w.StartObject();
      w.Key(kPciBusIdAttribute.data(), static_cast<rapidjson::SizeType>(kPciBusIdAttribute.size()));
      w.StartObject();
      w.Key("string");
      w.Text(d.pci_bus_id);
      w.EndObject();
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return absl::StrCat(Sv(json::Output(buffer)), "\n");
}

std::string MetadataFileName(std::string_view driver) {
  return absl::StrCat(Sv(driver), "-metadata.json");
}

std::string MetadataContainerDir(const MetadataClaim& claim, std::string_view request) {
  const std::string_view top = request.substr(0, request.find('/'));
  if (claim.pod_claim_name.has_value()) {
    return absl::StrCat(Sv(kMetadataContainerDir), "/resourceclaimtemplates/",
                        *claim.pod_claim_name, "/", Sv(top));
  }
  return absl::StrCat(Sv(kMetadataContainerDir), "/resourceclaims/", claim.name, "/", Sv(top));
}

}  // namespace pdc::driver::dra
