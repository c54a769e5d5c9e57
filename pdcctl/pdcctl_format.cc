#include "pdcctl/pdcctl_format.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/json_util.h"
#include "common/strings.h"
#include "rapidjson/document.h"
#include "rapidjson/prettywriter.h"
#include "rapidjson/stringbuffer.h"

namespace pdc::pdcctl {
namespace {

constexpr std::string_view kNone = "<none>";

std::string OrNone(std::string s) { return s.empty() ? std::string(kNone) : s; }

std::string OrNone(int64_t n) { return n < 0 ? std::string(kNone) : absl::StrCat(n); }

std::string Addresses(const std::vector<BoundDevice>& devices) {
  return absl::StrJoin(devices, ",", [](std::string* out, const BoundDevice& d) {
    out->append(d.address.ToString());
  });
}

}  // namespace

std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < header.size() && c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      l += cell;
      if (c + 1 < header.size())
        l += std::string(width[c] - cell.size() + 3, ' ');
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l;
    out += '\n';
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

std::string HumanAge(absl::Duration d) {
  const int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(d));
  const int64_t m = s / 60;
  const int64_t h = m / 60;
  const int64_t days = h / 24;
  auto pair = [](int64_t a, const char* ua, int64_t b, const char* ub) {
    return b == 0 ? absl::StrCat(a, ua) : absl::StrCat(a, ua, b, ub);
  };
  if (s < 120) return absl::StrCat(s, "s");
  if (m < 10) return pair(m, "m", s % 60, "s");
  if (h < 3) return absl::StrCat(m, "m");
  if (h < 8) return pair(h, "h", m % 60, "m");
  if (h < 48) return absl::StrCat(h, "h");
  if (days < 8) return pair(days, "d", h % 24, "h");
  return absl::StrCat(days, "d");
}

std::string ClaimsTable(std::vector<Claim> claims, bool show_namespace) {
  if (claims.empty()) return std::string();
  std::sort(claims.begin(), claims.end(),
            [](const Claim& a, const Claim& b) { return a.key < b.key; });
  std::vector<std::string> header = {"NAME", "PHASE", "RESOURCE", "NODE", "DEVICES", "VM"};
  if (show_namespace) header.insert(header.begin(), "NAMESPACE");
  std::vector<std::vector<std::string>> rows;
  for (const Claim& c : claims) {
    std::vector<std::string> row = {
        c.key.name,
        std::string(ToString(c.status.phase)),
        c.spec.resource_name,
        OrNone(c.status.node),
        OrNone(Addresses(c.status.devices)),
        OrNone(c.status.reserved_for ? c.status.reserved_for->vm : ""),
    };
    if (show_namespace) row.insert(row.begin(), c.key.ns);
    rows.push_back(std::move(row));
  }
  return FormatTable(header, rows);
}

std::string NodesTable(std::vector<api::NodeSummary> nodes, absl::Time now) {
  if (nodes.empty()) return std::string();
  std::sort(nodes.begin(), nodes.end(),
            [](const api::NodeSummary& a, const api::NodeSummary& b) { return a.name < b.name; });
  std::vector<std::vector<std::string>> rows;
  for (const api::NodeSummary& n : nodes) {
    rows.push_back({n.name, n.reporting ? "True" : "False",
                    n.last_report == absl::InfinitePast()
                        ? "<never>"
                        : absl::StrCat(HumanAge(now - n.last_report), " ago"),
                    absl::StrCat(n.devices)});
  }
  return FormatTable({"NAME", "REPORTING", "LAST REPORT", "DEVICES"}, rows);
}

std::string DevicesTable(std::vector<api::DeviceListing> devices, std::string_view node_filter) {
  std::erase_if(devices, [&](const api::DeviceListing& l) {
    return !node_filter.empty() && l.node != node_filter;
  });
  if (devices.empty()) return std::string();
  std::sort(devices.begin(), devices.end(),
            [](const api::DeviceListing& a, const api::DeviceListing& b) {
              return std::tie(a.node, a.device.address) < std::tie(b.node, b.device.address);
            });
  std::vector<std::vector<std::string>> rows;
  for (const api::DeviceListing& l : devices) {
    const Device& d = l.device;
    rows.push_back({l.node, d.address.ToString(),
                    absl::StrFormat("%04x:%04x", d.vendor_id, d.device_id),
                    absl::StrFormat("%06x", d.class_code), OrNone(d.iommu_group),
                    OrNone(d.numa_node), OrNone(d.serial), OrNone(d.driver),
                    d.health == DeviceHealth::kHealthy
                        ? std::string("Healthy")
                        : absl::StrCat("Unhealthy:", Sv(ToString(d.unhealthy_reason))),
                    std::string(api::ToString(l.state)),
                    // A Released device shows the deleted claim its data is of.
                    l.claim           ? l.claim->ToString()
                    : l.released_from ? absl::StrCat("(", l.released_from->ToString(), ")")
                                      : std::string(kNone)});
  }
  return FormatTable({"NODE", "ADDRESS", "ID", "CLASS", "IOMMU", "NUMA", "SERIAL", "DRIVER",
                      "HEALTH", "STATE", "CLAIM"},
                     rows);
}

std::string HandoffsTable(std::vector<PendingHandoff> handoffs) {
  if (handoffs.empty()) return std::string();
  std::sort(handoffs.begin(), handoffs.end(),
            [](const PendingHandoff& a, const PendingHandoff& b) {
              return std::tie(a.node, a.resource_name, a.pod.pod_uid) <
                     std::tie(b.node, b.resource_name, b.pod.pod_uid);
            });
  std::vector<std::vector<std::string>> rows;
  for (const PendingHandoff& h : handoffs) {
    rows.push_back({h.node, h.resource_name, absl::StrCat(h.ns, "/", h.pod.vm), h.pod.pod_name,
                    h.pod.pod_uid,
                    OrNone(absl::StrJoin(h.devices, ",", [](std::string* out, PciAddress a) {
                      out->append(a.ToString());
                    }))});
  }
  return FormatTable({"NODE", "RESOURCE", "VM", "POD", "POD UID", "DEVICES"}, rows);
}

std::string DraClaimsTable(std::vector<api::DraClaimView> claims) {
  if (claims.empty()) return std::string();
  std::sort(claims.begin(), claims.end(), [](const api::DraClaimView& a, const api::DraClaimView& b) {
    return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
  });
  std::vector<std::vector<std::string>> rows;
  for (const api::DraClaimView& c : claims) {
    std::vector<std::string> nodes;
    std::vector<std::string> devices;
    std::vector<std::string> serials;
    for (const api::DraClaimDevice& d : c.devices) {
      if (std::find(nodes.begin(), nodes.end(), d.pool) == nodes.end()) nodes.push_back(d.pool);
      devices.push_back(d.device);
      serials.push_back(d.serial.empty() ? "<unknown>" : d.serial);
    }
    rows.push_back({c.ns, c.name, OrNone(c.vm.has_value() ? c.vm->name : std::string()),
                    OrNone(absl::StrJoin(nodes, ",")), OrNone(absl::StrJoin(devices, ",")),
                    OrNone(absl::StrJoin(serials, ",")), c.persisted ? "yes" : "no"});
  }
  return FormatTable({"NAMESPACE", "NAME", "VM", "NODE", "DEVICE", "SERIAL", "PERSISTED"}, rows);
}

std::string DescribeClaim(const Claim& c) {
  std::vector<std::string> pins;
  if (!c.spec.node.empty()) pins.push_back(absl::StrCat("node=", c.spec.node));
  if (!c.spec.serial.empty()) pins.push_back(absl::StrCat("serial=", c.spec.serial));
  if (c.spec.address) pins.push_back(absl::StrCat("address=", c.spec.address->ToString()));
  std::vector<std::pair<std::string, std::string>> lines = {
      {"Name", c.key.name},
      {"Namespace", c.key.ns},
      {"UID", OrNone(c.uid)},
      {"Resource", c.spec.resource_name},
      {"Count", absl::StrCat(c.spec.count)},
      {"Reclaim Policy", std::string(ToString(c.spec.reclaim_policy))},
      {"Owner VM", c.spec.owner_vm_uid.empty()
                       ? OrNone(c.spec.owner_vm)
                       : absl::StrCat(c.spec.owner_vm, " (uid ", c.spec.owner_vm_uid, ")")},
      {"Pinned To", OrNone(absl::StrJoin(pins, ", "))},
      {"Phase", std::string(ToString(c.status.phase))},
      {"Node", OrNone(c.status.node)},
  };
  if (!c.status.lost_reason.empty()) lines.push_back({"Lost Reason", c.status.lost_reason});
  if (const std::optional<Reservation>& r = c.status.reserved_for) {
    const std::string pod =
        absl::StrCat("pod ", OrNone(r->pod_name), ", uid ", OrNone(r->pod_uid));
    lines.push_back({"Reserved For",
                     r->vm_uid.empty()
                         ? absl::StrCat("vm ", r->vm, " (", pod, ")")
                         : absl::StrCat("vm ", r->vm, " (uid ", r->vm_uid, "), ", pod)});
  } else {
    lines.push_back({"Reserved For", std::string(kNone)});
  }
  size_t width = 0;
  for (const auto& [k, v] : lines) width = std::max(width, k.size());
  std::string out;
  for (const auto& [k, v] : lines) {
    absl::StrAppend(&out, k, ":", std::string(width - k.size() + 2, ' '), v, "\n");
  }
  if (c.status.devices.empty()) {
    absl::StrAppend(&out, "Devices:", std::string(width - 7 + 2, ' '), Sv(kNone), "\n");
    return out;
  }
  out += "Devices:\n";
  std::vector<std::vector<std::string>> rows;
  for (const BoundDevice& d : c.status.devices) {
    rows.push_back({d.address.ToString(), OrNone(d.serial)});
  }
  const std::string table = FormatTable({"ADDRESS", "SERIAL"}, rows);
  for (absl::string_view l : absl::StrSplit(table, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, "  ", l, "\n");
  }
  return out;
}

absl::StatusOr<std::string> PrettyJson(std::string_view json) {
  rapidjson::Document d;
  if (!api::json::Parse(json, &d).ok()) {
    return absl::InvalidArgumentError("the server sent invalid JSON");
  }
  rapidjson::StringBuffer buf;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buf);
  w.SetIndent(' ', 2);
  d.Accept(w);
  return absl::StrCat(buf.GetString(), "\n");
}

}  // namespace pdc::pdcctl
