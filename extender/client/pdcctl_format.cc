#include "extender/client/pdcctl_format.h"

#include <algorithm>
#include <cstdint>
#include <optional>

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

using Value = rapidjson::Value;
constexpr std::string_view kNone = "<none>";

// Tolerant readers: a missing or mistyped field reads as empty, because a
// display tool should show what it can rather than refuse.
// Keys are matched as every api/ codec matches them: exactly first, then
// ASCII case-insensitively (docs/rest-api.md §1).
const Value* Member(const Value& obj, const char* key) { return api::json::Find(obj, key); }

std::string Str(const Value& obj, const char* key) {
  const Value* v = Member(obj, key);
  if (v == nullptr || !v->IsString()) return "";
  return std::string(api::json::StringOf(*v));
}

int64_t Int(const Value& obj, const char* key, int64_t fallback = 0) {
  const Value* v = Member(obj, key);
  if (v == nullptr || !v->IsInt64()) return fallback;
  return v->GetInt64();
}

bool Bool(const Value& obj, const char* key) {
  const Value* v = Member(obj, key);
  return v != nullptr && v->IsBool() && v->GetBool();
}

std::string OrNone(std::string s) { return s.empty() ? std::string(kNone) : s; }

absl::StatusOr<rapidjson::Document> Parse(std::string_view json) {
  rapidjson::Document d;
  if (absl::Status s = api::json::Parse(json, &d); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the server sent invalid JSON (", s.message(), ")"));
  }
  if (!d.IsObject()) {
    return absl::InvalidArgumentError(
        "the server sent JSON that is not an object");
  }
  return d;
}

// {"items": [...]} -> the items; a single object -> itself.
std::vector<const Value*> Items(const rapidjson::Document& d) {
  std::vector<const Value*> out;
  const Value* items = Member(d, "items");
  if (items != nullptr && items->IsArray()) {
    for (const Value& v : items->GetArray()) {
      if (v.IsObject()) out.push_back(&v);
    }
  } else {
    out.push_back(&d);
  }
  return out;
}

std::optional<absl::Time> ParseRfc3339(const std::string& s) {
  absl::Time t;
  std::string err;
  if (s.empty() || !absl::ParseTime(absl::RFC3339_full, s, &t, &err)) {
    return std::nullopt;
  }
  return t;
}

std::string Age(const Value& obj, const char* key, absl::Time now) {
  std::optional<absl::Time> t = ParseRfc3339(Str(obj, key));
  if (!t.has_value()) return "<unknown>";
  return HumanAge(now - *t);
}

std::vector<std::string> DeviceAddresses(const Value& status) {
  std::vector<std::string> out;
  const Value* devices = Member(status, "devices");
  if (devices != nullptr && devices->IsArray()) {
    for (const Value& d : devices->GetArray()) out.push_back(Str(d, "address"));
  }
  return out;
}

// The strings of array member `key` joined with ','.
std::string JoinedStrings(const Value& obj, const char* key) {
  std::string out;
  const Value* v = Member(obj, key);
  if (v == nullptr || !v->IsArray()) return out;
  for (const Value& e : v->GetArray()) {
    if (!e.IsString()) continue;
    if (!out.empty()) out += ",";
    out.append(e.GetString(), e.GetStringLength());
  }
  return out;
}

std::string ReservedVm(const Value& status) {
  const Value* r = Member(status, "reservedFor");
  return r != nullptr && r->IsObject() ? Str(*r, "vm") : "";
}

std::string PciId(const Value& d) {
  const std::string vendor = Str(d, "vendor");
  const std::string device = Str(d, "device");
  if (vendor.empty() && device.empty()) return std::string(kNone);
  return absl::StrCat(vendor, ":", device);
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

absl::StatusOr<std::string> ClaimsTable(std::string_view json,
                                        bool show_namespace, absl::Time now) {
  absl::StatusOr<rapidjson::Document> d = Parse(json);
  if (!d.ok()) return d.status();
  std::vector<const Value*> items = Items(*d);
  if (items.empty()) return std::string();
  std::sort(items.begin(), items.end(), [](const Value* a, const Value* b) {
    return std::make_pair(Str(*a, "namespace"), Str(*a, "name")) <
           std::make_pair(Str(*b, "namespace"), Str(*b, "name"));
  });
  const bool show_age = std::any_of(
      items.begin(), items.end(),
      [](const Value* v) { return !Str(*v, "creationTimestamp").empty(); });
  std::vector<std::string> header = {"NAME", "PHASE",   "RESOURCE",
                                     "NODE", "DEVICES", "VM"};
  if (show_namespace) header.insert(header.begin(), "NAMESPACE");
  if (show_age) header.push_back("AGE");
  std::vector<std::vector<std::string>> rows;
  for (const Value* c : items) {
    static const Value kEmpty(rapidjson::kObjectType);
    const Value* status_ptr = Member(*c, "status");
    const Value& status = status_ptr != nullptr ? *status_ptr : kEmpty;
    std::vector<std::string> row = {
        Str(*c, "name"),
        OrNone(Str(status, "phase")),
        Str(*c, "resourceName"),
        OrNone(Str(status, "node")),
        OrNone(absl::StrJoin(DeviceAddresses(status), ",")),
        OrNone(ReservedVm(status)),
    };
    if (show_namespace) row.insert(row.begin(), Str(*c, "namespace"));
    if (show_age) row.push_back(Age(*c, "creationTimestamp", now));
    rows.push_back(std::move(row));
  }
  return FormatTable(header, rows);
}

absl::StatusOr<std::string> NodesTable(std::string_view json, absl::Time now) {
  absl::StatusOr<rapidjson::Document> d = Parse(json);
  if (!d.ok()) return d.status();
  std::vector<const Value*> items = Items(*d);
  if (items.empty()) return std::string();
  std::sort(items.begin(), items.end(), [](const Value* a, const Value* b) {
    return Str(*a, "name") < Str(*b, "name");
  });
  std::vector<std::vector<std::string>> rows;
  for (const Value* n : items) {
    std::optional<absl::Time> last = ParseRfc3339(Str(*n, "lastReport"));
    const Value* devices = Member(*n, "devices");
    int64_t count = 0;
    if (devices != nullptr && devices->IsArray()) {
      count = devices->Size();  // Node detail: the devices themselves.
    } else {
      count = Int(*n, "devices");
    }
    rows.push_back({Str(*n, "name"), Bool(*n, "reporting") ? "True" : "False",
                    last.has_value()
                        ? absl::StrCat(HumanAge(now - *last), " ago")
                        : "<never>",
                    absl::StrCat(count)});
  }
  return FormatTable({"NAME", "REPORTING", "LAST REPORT", "DEVICES"}, rows);
}

absl::StatusOr<std::string> DevicesTable(std::string_view json,
                                         std::string_view node_filter) {
  absl::StatusOr<rapidjson::Document> d = Parse(json);
  if (!d.ok()) return d.status();
  std::vector<const Value*> items = Items(*d);
  std::erase_if(items, [&](const Value* v) {
    return !node_filter.empty() && Str(*v, "node") != node_filter;
  });
  if (items.empty()) return std::string();
  std::sort(items.begin(), items.end(), [](const Value* a, const Value* b) {
    return std::make_pair(Str(*a, "node"), Str(*a, "address")) <
           std::make_pair(Str(*b, "node"), Str(*b, "address"));
  });
  std::vector<std::vector<std::string>> rows;
  for (const Value* v : items) {
    const int64_t group = Int(*v, "iommuGroup", -1);
    const int64_t numa = Int(*v, "numaNode", -1);
    rows.push_back({Str(*v, "node"), Str(*v, "address"), PciId(*v),
                    OrNone(Str(*v, "class")),
                    group < 0 ? std::string(kNone) : absl::StrCat(group),
                    numa < 0 ? std::string(kNone) : absl::StrCat(numa),
                    OrNone(Str(*v, "serial")), OrNone(Str(*v, "driver")),
                    Bool(*v, "healthy") ? "Healthy" : "Unhealthy",
                    OrNone(Str(*v, "claim"))});
  }
  return FormatTable({"NODE", "ADDRESS", "ID", "CLASS", "IOMMU", "NUMA",
                      "SERIAL", "DRIVER", "HEALTH", "CLAIM"},
                     rows);
}

absl::StatusOr<std::string> HandoffsTable(std::string_view json) {
  absl::StatusOr<rapidjson::Document> d = Parse(json);
  if (!d.ok()) return d.status();
  std::vector<const Value*> items = Items(*d);
  if (items.empty()) return std::string();
  std::sort(items.begin(), items.end(), [](const Value* a, const Value* b) {
    return std::make_tuple(Str(*a, "node"), Str(*a, "resourceName"), Str(*a, "podUid")) <
           std::make_tuple(Str(*b, "node"), Str(*b, "resourceName"), Str(*b, "podUid"));
  });
  std::vector<std::vector<std::string>> rows;
  for (const Value* v : items) {
    rows.push_back({Str(*v, "node"), Str(*v, "resourceName"),
                    absl::StrCat(Str(*v, "namespace"), "/", Str(*v, "vm")), Str(*v, "podName"),
                    Str(*v, "podUid"), OrNone(JoinedStrings(*v, "devices"))});
  }
  return FormatTable({"NODE", "RESOURCE", "VM", "POD", "POD UID", "DEVICES"}, rows);
}

absl::StatusOr<std::string> DescribeClaim(std::string_view json,
                                          absl::Time now) {
  absl::StatusOr<rapidjson::Document> d = Parse(json);
  if (!d.ok()) return d.status();
  const Value& c = *d;
  static const Value kEmpty(rapidjson::kObjectType);
  const Value* status_ptr = Member(c, "status");
  const Value& status = status_ptr != nullptr ? *status_ptr : kEmpty;

  std::vector<std::string> pins;
  for (const char* key : {"node", "serial", "address"}) {
    const std::string v = Str(c, key);
    if (!v.empty()) pins.push_back(absl::StrCat(key, "=", v));
  }
  std::vector<std::pair<std::string, std::string>> lines = {
      {"Name", Str(c, "name")},
      {"Namespace", Str(c, "namespace")},
      {"UID", OrNone(Str(c, "uid"))},
      {"Resource", Str(c, "resourceName")},
      {"Count", absl::StrCat(Int(c, "count", 1))},
      {"Reclaim Policy", OrNone(Str(c, "reclaimPolicy"))},
      {"Owner VM", OrNone(Str(c, "ownerVM"))},
      {"Pinned To", OrNone(absl::StrJoin(pins, ", "))},
  };
  if (!Str(c, "creationTimestamp").empty()) {
    lines.push_back({"Age", Age(c, "creationTimestamp", now)});
  }
  lines.push_back({"Phase", OrNone(Str(status, "phase"))});
  lines.push_back({"Node", OrNone(Str(status, "node"))});
  if (!Str(status, "lostReason").empty()) {
    lines.push_back({"Lost Reason", Str(status, "lostReason")});
  }
  const Value* r = Member(status, "reservedFor");
  if (r != nullptr && r->IsObject()) {
    lines.push_back(
        {"Reserved For", absl::StrCat("vm ", Str(*r, "vm"), " (pod ",
                                      OrNone(Str(*r, "podName")), ", uid ",
                                      OrNone(Str(*r, "podUid")), ")")});
  } else {
    lines.push_back({"Reserved For", std::string(kNone)});
  }
  size_t width = 0;
  for (const auto& [k, v] : lines) width = std::max(width, k.size());
  std::string out;
  for (const auto& [k, v] : lines) {
    absl::StrAppend(&out, k, ":", std::string(width - k.size() + 2, ' '), v,
                    "\n");
  }
  const Value* devices = Member(status, "devices");
  if (devices != nullptr && devices->IsArray() && devices->Size() > 0) {
    out += "Devices:\n";
    std::vector<std::vector<std::string>> rows;
    for (const Value& dev : devices->GetArray()) {
      rows.push_back({Str(dev, "address"), OrNone(Str(dev, "serial"))});
    }
    const std::string table = FormatTable({"ADDRESS", "SERIAL"}, rows);
    for (absl::string_view l : absl::StrSplit(table, '\n', absl::SkipEmpty())) {
      absl::StrAppend(&out, "  ", l, "\n");
    }
  } else {
    absl::StrAppend(&out, "Devices:", std::string(width - 7 + 2, ' '),
                    Sv(kNone), "\n");
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

std::string ServerErrorMessage(int status, std::string_view body) {
  rapidjson::Document d;
  if (api::json::Parse(body, &d).ok() && d.IsObject()) {
    const std::string message = Str(d, "error");
    if (!message.empty()) {
      const std::string field = Str(d, "field");
      return field.empty() ? message
                           : absl::StrCat(message, " (field ", field, ")");
    }
  }
  std::string_view first = body.substr(0, body.find('\n'));
  if (first.size() > 200) first = first.substr(0, 200);
  return first.empty() ? absl::StrCat("HTTP ", status)
                       : absl::StrCat("HTTP ", status, ": ", Sv(first));
}

}  // namespace pdc::pdcctl
