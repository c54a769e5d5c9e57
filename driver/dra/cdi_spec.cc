#include "driver/dra/cdi_spec.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/json_util.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace pdc::driver::dra {

namespace json = ::pdc::api::json;

namespace {

bool IsAlnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// SPEC.md: a device name and a kind's class begin and end with an
// alphanumeric character, with '-', '_', '.' and alphanumerics between.
bool ValidName(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// The kind's vendor: a DNS subdomain (labels of [a-z0-9-], each beginning
// and ending alphanumeric, at most 253 characters).
bool ValidVendor(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(Sv(s), '.')) {
    if (label.empty() || label.size() > 63 || !IsAlnum(label.front()) || !IsAlnum(label.back())) {
      return false;
    }
    for (char c : label) {
      if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
            absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-')) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

std::string CdiKind(std::string_view driver) {
  return absl::StrCat(Sv(driver), "/", Sv(kCdiClass));
}

std::string CdiDeviceName(std::string_view claim_uid, std::string_view device) {
  return absl::StrCat(Sv(claim_uid), "-", Sv(device));
}

std::string CdiDeviceId(std::string_view kind, std::string_view name) {
  return absl::StrCat(Sv(kind), "=", Sv(name));
}

std::string CdiSpecPath(std::string_view cdi_dir, std::string_view driver,
                        std::string_view claim_uid) {
  return absl::StrCat(Sv(cdi_dir), "/pdc-", Sv(driver), "-", Sv(claim_uid), ".json");
}

absl::StatusOr<std::string> CdiSpecJson(std::string_view kind,
                                        const std::vector<CdiDevice>& devices) {
  const size_t slash = kind.find('/');
  if (slash == std::string_view::npos || !ValidVendor(kind.substr(0, slash)) ||
      !ValidName(kind.substr(slash + 1)) || kind.substr(slash + 1).size() > 63) {
    return absl::InvalidArgumentError(
        absl::StrCat("CDI kind \"", Sv(kind), "\" is not <DNS subdomain>/<name>"));
  }
  if (devices.empty()) {
    return absl::InvalidArgumentError("a CDI spec needs at least one device");
  }
  rapidjson::StringBuffer buffer;
  json::Writer w(buffer);
  w.StartObject();
  w.Key("cdiVersion");
  w.Text(kCdiVersion);
  w.Key("kind");
  w.Text(kind);
  w.Key("devices");
  w.StartArray();
  for (const CdiDevice& d : devices) {
    if (!ValidName(d.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CDI device name \"", d.name,
          "\" must begin and end with a letter or digit, with only letters, digits, '-', '_' "
          "and '.' between"));
    }
    w.StartObject();
    w.Key("name");
    w.Text(d.name);
    w.Key("containerEdits");
    w.StartObject();
    if (!d.env.empty()) {
      w.Key("env");
      w.StartArray();
      for (const std::string& e : d.env) w.Text(e);
      w.EndArray();
    }
    if (!d.device_nodes.empty()) {
      w.Key("deviceNodes");
      w.StartArray();
      for (const std::string& path : d.device_nodes) {
        w.StartObject();
        w.Key("path");
        w.Text(path);
        w.EndObject();
      }
      w.EndArray();
    }
    if (!d.mounts.empty()) {
      w.Key("mounts");
      w.StartArray();
      for (const CdiMount& m : d.mounts) {
        w.StartObject();
        w.Key("hostPath");
        w.Text(m.host_path);
        w.Key("containerPath");
        w.Text(m.container_path);
        w.Key("options");
        w.StartArray();
        for (std::string_view o : {"ro", "nosuid", "nodev", "bind"}) w.Text(o);
        w.EndArray();
        w.EndObject();
      }
      w.EndArray();
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return absl::StrCat(Sv(json::Output(buffer)), "\n");
}

absl::Status WriteCdiSpec(const std::string& path, std::string_view json_text) {
  return WriteFileAtomically(path, json_text);
}

}  // namespace pdc::driver::dra
