#include "sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::sim {

SimTime Distribution::Sample(Rng& rng) const {
  switch (kind) {
    case Kind::kFixed:
      return a;
    case Kind::kExponential:
      return static_cast<SimTime>(rng.Exponential(static_cast<double>(a)));
    case Kind::kUniform:
      return a + static_cast<SimTime>(rng.Below(static_cast<uint64_t>(b - a) + 1));
  }
  return a;
}

double Distribution::Mean() const {
  return kind == Kind::kUniform ? (a + b) / 2.0 : static_cast<double>(a);
}

absl::StatusOr<SimTime> ParseDuration(std::string_view text) {
  if (text == "0") return 0;
  static constexpr std::pair<std::string_view, SimTime> kUnits[] = {
      {"ms", 1000}, {"us", 1}, {"s", kSecond}, {"m", kMinute},
      {"h", kHour}, {"d", 24 * kHour}};
  for (const auto& [suffix, scale] : kUnits) {
    if (text.size() <= suffix.size() ||
        text.substr(text.size() - suffix.size()) != suffix) {
      continue;
    }
    std::string_view number = text.substr(0, text.size() - suffix.size());
    // "5m" must not be read as "5" + "ms" of "5ms": the longer suffixes come
    // first in the table, and a number never ends in a letter.
    double value = 0;
    if (!absl::SimpleAtod(Sv(number), &value) || value < 0 ||
        !std::isfinite(value) ||
        !std::all_of(number.begin(), number.end(), [](char c) {
          return (c >= '0' && c <= '9') || c == '.';
        })) {
      break;
    }
    return static_cast<SimTime>(std::llround(value * static_cast<double>(scale)));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", Sv(text), "\" is not a duration (e.g. 250ms, 30s, 5m, 8h, 2d)"));
}

std::string FormatDuration(SimTime t) {
  if (t < kSecond) return absl::StrFormat("%.3gms", t / 1000.0);
  if (t < kMinute) return absl::StrFormat("%.3gs", t / 1e6);
  std::string out;
  SimTime days = t / (24 * kHour), hours = t / kHour % 24;
  SimTime minutes = t / kMinute % 60, seconds = t / kSecond % 60;
  if (days) absl::StrAppend(&out, days, "d");
  if (hours) absl::StrAppend(&out, hours, "h");
  if (minutes) absl::StrAppend(&out, minutes, "m");
  if (seconds && !days) absl::StrAppend(&out, seconds, "s");
  return out;
}

namespace {

// yaml-cpp throws; everything here catches at the ParseScenario boundary and
// reports through Status. A Field is a node plus its path for messages.
struct Field {
  YAML::Node node;
  std::string path;

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", Sv(what)));
  }
  // Absent parents give absent children: yaml-cpp throws when indexing a
  // node that does not exist.
  Field Child(std::string_view key) const {
    std::string child_path =
        path.empty() ? std::string(key) : absl::StrCat(path, ".", Sv(key));
    if (!node.IsDefined() || !node.IsMap()) {
      return {YAML::Node(YAML::NodeType::Undefined), std::move(child_path)};
    }
    return {node[std::string(key)], std::move(child_path)};
  }
  Field At(size_t i) const {
    std::string child_path = absl::StrCat(path, "[", i, "]");
    if (!node.IsDefined() || !node.IsSequence()) {
      return {YAML::Node(YAML::NodeType::Undefined), std::move(child_path)};
    }
    return {node[i], std::move(child_path)};
  }
  bool Present() const { return node.IsDefined() && !node.IsNull(); }

  // Unknown keys are errors: a typo must not silently fall back to a default.
  absl::Status OnlyKeys(std::initializer_list<std::string_view> keys) const {
    if (!Present()) return absl::OkStatus();
    if (!node.IsMap()) return Error("must be a mapping");
    std::set<std::string> sorted;
    for (const auto kv : node) sorted.insert(kv.first.as<std::string>());
    for (const std::string& k : sorted) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
        return Child(k).Error("unknown field");
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String(std::string def) const {
    if (!Present()) return def;
    if (!node.IsScalar()) return Error("must be a string");
    return node.as<std::string>();
  }
  absl::StatusOr<int64_t> Int(int64_t def, int64_t min, int64_t max) const {
    if (!Present()) return def;
    int64_t v = 0;
    if (!node.IsScalar() || !absl::SimpleAtoi(node.as<std::string>(), &v)) {
      return Error("must be an integer");
    }
    if (v < min) return Error(absl::StrCat("must be >= ", min));
    if (v > max) return Error(absl::StrCat("must be <= ", max));
    return v;
  }
  absl::StatusOr<SimTime> Duration(SimTime def) const {
    if (!Present()) return def;
    if (!node.IsScalar()) return Error("must be a duration such as 5m");
    auto d = ParseDuration(node.as<std::string>());
    if (!d.ok()) return Error(StdSv(d.status().message()));
    return *d;
  }
  absl::StatusOr<bool> Bool(bool def) const {
    if (!Present()) return def;
    std::string s = node.IsScalar() ? node.as<std::string>() : "";
    if (s == "true") return true;
    if (s == "false") return false;
    return Error("must be true or false");
  }
};

absl::StatusOr<Distribution> ParseDistribution(const Field& f) {
  Distribution d;
  if (f.node.IsScalar()) {
    ASSIGN_OR_RETURN(d.a, f.Duration(0));
    return d;
  }
  RETURN_IF_ERROR(f.OnlyKeys({"dist", "mean", "value", "min", "max"}));
  ASSIGN_OR_RETURN(std::string kind, f.Child("dist").String("fixed"));
  if (kind == "fixed") {
    ASSIGN_OR_RETURN(d.a, f.Child("value").Duration(0));
  } else if (kind == "exponential") {
    d.kind = Distribution::Kind::kExponential;
    ASSIGN_OR_RETURN(d.a, f.Child("mean").Duration(0));
    if (d.a <= 0) return f.Child("mean").Error("must be > 0");
  } else if (kind == "uniform") {
    d.kind = Distribution::Kind::kUniform;
    ASSIGN_OR_RETURN(d.a, f.Child("min").Duration(0));
    ASSIGN_OR_RETURN(d.b, f.Child("max").Duration(0));
    if (d.b < d.a) return f.Child("max").Error("must be >= min");
  } else {
    return f.Child("dist").Error("must be fixed, exponential or uniform");
  }
  return d;
}

absl::StatusOr<std::optional<Distribution>> OptionalDistribution(const Field& f) {
  if (!f.Present()) return std::optional<Distribution>();
  ASSIGN_OR_RETURN(Distribution d, ParseDistribution(f));
  return std::optional<Distribution>(d);
}

absl::StatusOr<std::pair<uint16_t, uint16_t>> ParsePciId(const Field& f) {
  ASSIGN_OR_RETURN(std::string s, f.String(""));
  unsigned v = 0, d = 0;
  char colon = 0;
  std::istringstream in(s);
  in >> std::hex >> v >> colon >> d;
  if (s.size() != 9 || colon != ':' || in.fail() || v > 0xffff || d > 0xffff) {
    return f.Error(absl::StrCat("\"", s, "\" is not a vendor:device id such as 1b36:0010"));
  }
  return std::make_pair(static_cast<uint16_t>(v), static_cast<uint16_t>(d));
}

absl::StatusOr<int> ClassIndex(const Scenario& s, const Field& f) {
  ASSIGN_OR_RETURN(std::string resource, f.String(""));
  for (size_t i = 0; i < s.device_classes.size(); ++i) {
    if (s.device_classes[i].resource == resource) return static_cast<int>(i);
  }
  return f.Error(absl::StrCat("\"", resource,
                              "\" is not in cluster.device_classes"));
}

absl::Status ParseCluster(const Field& c, Scenario& s) {
  if (!c.Present()) return c.Error("is required");
  RETURN_IF_ERROR(c.OnlyKeys({"device_classes", "node_groups"}));
  Field classes = c.Child("device_classes");
  if (!classes.node.IsSequence() || classes.node.size() == 0) {
    return classes.Error("must list at least one device class");
  }
  for (size_t i = 0; i < classes.node.size(); ++i) {
    Field f = classes.At(i);
    RETURN_IF_ERROR(f.OnlyKeys({"resource", "pci_ids"}));
    DeviceClassSpec dc;
    ASSIGN_OR_RETURN(dc.resource, f.Child("resource").String(""));
    if (dc.resource.empty()) return f.Child("resource").Error("is required");
    Field ids = f.Child("pci_ids");
    if (!ids.node.IsSequence() || ids.node.size() == 0) {
      return ids.Error("must list at least one vendor:device id");
    }
    for (size_t j = 0; j < ids.node.size(); ++j) {
      ASSIGN_OR_RETURN(auto id, ParsePciId(ids.At(j)));
      dc.pci_ids.push_back(id);
    }
    s.device_classes.push_back(std::move(dc));
  }
  Field groups = c.Child("node_groups");
  if (!groups.node.IsSequence() || groups.node.size() == 0) {
    return groups.Error("must list at least one node group");
  }
  std::set<std::string> prefixes;
  for (size_t i = 0; i < groups.node.size(); ++i) {
    Field f = groups.At(i);
    RETURN_IF_ERROR(f.OnlyKeys(
        {"prefix", "count", "cpu", "memory_gib", "numa_nodes", "devices"}));
    NodeGroupSpec g;
    ASSIGN_OR_RETURN(g.prefix, f.Child("prefix").String(absl::StrCat("node", i, "-")));
    if (!prefixes.insert(g.prefix).second) {
      return f.Child("prefix").Error("is used by another node group");
    }
    ASSIGN_OR_RETURN(g.count, f.Child("count").Int(1, 1, 100000));
    ASSIGN_OR_RETURN(g.cpu, f.Child("cpu").Int(64, 1, 100000));
    ASSIGN_OR_RETURN(g.memory_gib, f.Child("memory_gib").Int(256, 1, 1 << 24));
    ASSIGN_OR_RETURN(g.numa_nodes, f.Child("numa_nodes").Int(1, 1, 64));
    Field devs = f.Child("devices");
    if (!devs.node.IsSequence()) return devs.Error("must be a list");
    for (size_t j = 0; j < devs.node.size(); ++j) {
      Field d = devs.At(j);
      RETURN_IF_ERROR(d.OnlyKeys({"resource", "pci_id", "count", "iommu_group_size"}));
      NodeDevicesSpec nd;
      ASSIGN_OR_RETURN(nd.class_index, ClassIndex(s, d.Child("resource")));
      ASSIGN_OR_RETURN(auto id, ParsePciId(d.Child("pci_id")));
      const auto& allowed = s.device_classes[nd.class_index].pci_ids;
      if (std::find(allowed.begin(), allowed.end(), id) == allowed.end()) {
        return d.Child("pci_id").Error("is not one of its device class's pci_ids");
      }
      nd.vendor = id.first;
      nd.device = id.second;
      ASSIGN_OR_RETURN(nd.count, d.Child("count").Int(0, 1, 256));
      ASSIGN_OR_RETURN(nd.iommu_group_size, d.Child("iommu_group_size").Int(1, 1, 8));
      g.devices.push_back(nd);
    }
    s.node_groups.push_back(std::move(g));
  }
  return absl::OkStatus();
}

absl::Status ParseWorkload(const Field& w, Scenario& s) {
  if (!w.Present()) return w.Error("is required");
  RETURN_IF_ERROR(w.OnlyKeys({"namespace", "vms"}));
  ASSIGN_OR_RETURN(s.ns, w.Child("namespace").String("default"));
  Field vms = w.Child("vms");
  if (!vms.node.IsSequence() || vms.node.size() == 0) {
    return vms.Error("must list at least one VM group");
  }
  std::set<std::string> prefixes;
  for (size_t i = 0; i < vms.node.size(); ++i) {
    Field f = vms.At(i);
    RETURN_IF_ERROR(f.OnlyKeys({"prefix", "count", "cpu", "memory_gib", "devices",
                                "claims", "start_at", "run", "stop", "lifetime"}));
    VmGroupSpec g;
    ASSIGN_OR_RETURN(g.prefix, f.Child("prefix").String(absl::StrCat("vm", i, "-")));
    if (!prefixes.insert(g.prefix).second) {
      return f.Child("prefix").Error("is used by another VM group");
    }
    ASSIGN_OR_RETURN(g.count, f.Child("count").Int(1, 1, 10'000'000));
    ASSIGN_OR_RETURN(g.cpu, f.Child("cpu").Int(4, 0, 100000));
    ASSIGN_OR_RETURN(g.memory_gib, f.Child("memory_gib").Int(16, 0, 1 << 24));
    Field d = f.Child("devices");
    if (!d.Present()) return d.Error("is required");
    RETURN_IF_ERROR(d.OnlyKeys({"resource", "count"}));
    ASSIGN_OR_RETURN(g.class_index, ClassIndex(s, d.Child("resource")));
    ASSIGN_OR_RETURN(g.device_count, d.Child("count").Int(1, 1, 64));
    ASSIGN_OR_RETURN(std::string claims, f.Child("claims").String("implicit"));
    if (claims != "implicit" && claims != "explicit") {
      return f.Child("claims").Error("must be implicit or explicit");
    }
    g.explicit_claims = claims == "explicit";
    ASSIGN_OR_RETURN(g.start_at_max, f.Child("start_at").Duration(0));
    ASSIGN_OR_RETURN(g.run, OptionalDistribution(f.Child("run")));
    if (f.Child("stop").Present()) {
      ASSIGN_OR_RETURN(g.stop, ParseDistribution(f.Child("stop")));
    } else if (g.run) {
      return f.Child("stop").Error("is required when run is set");
    }
    ASSIGN_OR_RETURN(g.lifetime, OptionalDistribution(f.Child("lifetime")));
    if (g.run && g.run->Mean() <= 0) return f.Child("run").Error("must be > 0");
    if (g.lifetime && g.lifetime->Mean() <= 0) {
      return f.Child("lifetime").Error("must be > 0");
    }
    s.vm_groups.push_back(std::move(g));
  }
  return absl::OkStatus();
}

absl::Status ParseFailureProcess(const Field& f, FailureProcessSpec& out) {
  ASSIGN_OR_RETURN(out.every, OptionalDistribution(f.Child("every")));
  if (out.every && out.every->Mean() <= 0) return f.Child("every").Error("must be > 0");
  if (out.every) {
    if (!f.Child("repair").Present()) return f.Child("repair").Error("is required");
    ASSIGN_OR_RETURN(out.repair, ParseDistribution(f.Child("repair")));
  }
  return absl::OkStatus();
}

bool NodeExists(const Scenario& s, const std::string& name) {
  for (const NodeGroupSpec& g : s.node_groups) {
    if (name.rfind(g.prefix, 0) != 0) continue;
    int64_t idx = 0;
    std::string rest = name.substr(g.prefix.size());
    if (!rest.empty() && absl::SimpleAtoi(rest, &idx) && idx >= 0 && idx < g.count) {
      return true;
    }
  }
  return false;
}

absl::Status ParseEvents(const Field& e, Scenario& s) {
  if (!e.Present()) return absl::OkStatus();
  RETURN_IF_ERROR(
      e.OnlyKeys({"node_failures", "device_failures", "mass_restarts", "node_reboots"}));
  Field nr = e.Child("node_reboots");
  if (nr.Present() && !nr.node.IsSequence()) return nr.Error("must be a list");
  for (size_t i = 0; nr.Present() && i < nr.node.size(); ++i) {
    Field f = nr.At(i);
    RETURN_IF_ERROR(f.OnlyKeys({"name", "nodes", "group", "at", "down"}));
    NodeRebootSpec r;
    ASSIGN_OR_RETURN(r.name, f.Child("name").String(""));
    if (r.name.empty()) return f.Child("name").Error("is required");
    for (const NodeRebootSpec& other : s.node_reboots) {
      if (other.name == r.name) return f.Child("name").Error("is used twice");
    }
    ASSIGN_OR_RETURN(r.group, f.Child("group").String(""));
    Field nodes = f.Child("nodes");
    if (nodes.Present() && !nodes.node.IsSequence()) return nodes.Error("must be a list");
    for (size_t k = 0; nodes.Present() && k < nodes.node.size(); ++k) {
      ASSIGN_OR_RETURN(std::string n, nodes.At(k).String(""));
      if (!NodeExists(s, n)) {
        return nodes.At(k).Error(absl::StrCat("\"", n, "\" is not a node of the cluster"));
      }
      r.nodes.push_back(std::move(n));
    }
    if (r.nodes.empty() == r.group.empty()) {
      return f.Error("needs exactly one of nodes and group");
    }
    if (!r.group.empty() &&
        std::none_of(s.node_groups.begin(), s.node_groups.end(),
                     [&](const NodeGroupSpec& g) { return g.prefix == r.group; })) {
      return f.Child("group").Error(
          absl::StrCat("\"", r.group, "\" is not the prefix of a node group"));
    }
    ASSIGN_OR_RETURN(r.at, f.Child("at").Duration(0));
    ASSIGN_OR_RETURN(r.down, f.Child("down").Duration(r.down));
    if (r.down <= 0) return f.Child("down").Error("must be > 0");
    // Longer, and the node lifecycle controller evicts the pods first: that is
    // a node failure (node_failures), not a reboot.
    if (r.down >= 5 * kMinute) {
      return f.Child("down").Error("must be < 5m (the unreachable toleration)");
    }
    s.node_reboots.push_back(std::move(r));
  }
  Field nf = e.Child("node_failures");
  RETURN_IF_ERROR(nf.OnlyKeys({"every", "repair", "list"}));
  if (nf.Present()) {
    RETURN_IF_ERROR(ParseFailureProcess(nf, s.node_failures));
    Field list = nf.Child("list");
    if (list.Present() && !list.node.IsSequence()) return list.Error("must be a list");
    for (size_t i = 0; list.Present() && i < list.node.size(); ++i) {
      Field f = list.At(i);
      RETURN_IF_ERROR(f.OnlyKeys({"node", "at", "repair_after"}));
      NodeFailureSpec n;
      ASSIGN_OR_RETURN(n.node, f.Child("node").String(""));
      if (!NodeExists(s, n.node)) {
        return f.Child("node").Error(absl::StrCat("\"", n.node, "\" is not a node of the cluster"));
      }
      ASSIGN_OR_RETURN(n.at, f.Child("at").Duration(0));
      ASSIGN_OR_RETURN(n.repair_after, f.Child("repair_after").Duration(0));
      s.node_failure_list.push_back(n);
    }
  }
  Field df = e.Child("device_failures");
  RETURN_IF_ERROR(df.OnlyKeys({"every", "repair"}));
  if (df.Present()) RETURN_IF_ERROR(ParseFailureProcess(df, s.device_failures));
  Field mr = e.Child("mass_restarts");
  RETURN_IF_ERROR(mr.OnlyKeys({"every", "down"}));
  if (mr.Present()) {
    ASSIGN_OR_RETURN(s.mass_restart_every, OptionalDistribution(mr.Child("every")));
    if (!s.mass_restart_every || s.mass_restart_every->Mean() <= 0) {
      return mr.Child("every").Error("must be > 0");
    }
    if (!mr.Child("down").Present()) return mr.Child("down").Error("is required");
    ASSIGN_OR_RETURN(s.mass_restart_down, ParseDistribution(mr.Child("down")));
  }
  return absl::OkStatus();
}

absl::Status ParseScheduler(const Field& f, SchedulerSpec& s) {
  RETURN_IF_ERROR(f.OnlyKeys({"percentage_of_nodes_to_score",
                              "pdc_percentage_of_nodes_to_score", "pdc_node_affinity",
                              "extender_weight",
                              "pdc_scoring", "latency"}));
  ASSIGN_OR_RETURN(s.percentage_of_nodes_to_score,
                   f.Child("percentage_of_nodes_to_score").Int(0, 0, 100));
  ASSIGN_OR_RETURN(s.pdc_percentage_of_nodes_to_score,
                   f.Child("pdc_percentage_of_nodes_to_score").Int(0, 0, 100));
  ASSIGN_OR_RETURN(s.pdc_node_affinity, f.Child("pdc_node_affinity").Bool(true));
  ASSIGN_OR_RETURN(s.extender_weight, f.Child("extender_weight").Int(5, 1, 100));
  ASSIGN_OR_RETURN(std::string scoring, f.Child("pdc_scoring").String("bin-pack"));
  if (scoring != "bin-pack" && scoring != "spread") {
    return f.Child("pdc_scoring").Error("must be bin-pack or spread");
  }
  s.pdc_spread = scoring == "spread";
  Field l = f.Child("latency");
  RETURN_IF_ERROR(l.OnlyKeys({"cycle", "per_node", "extender_call", "bind"}));
  ASSIGN_OR_RETURN(s.cycle, l.Child("cycle").Duration(s.cycle));
  // Per-node costs are sub-microsecond: also accept nanoseconds ("500ns").
  ASSIGN_OR_RETURN(std::string per_node, l.Child("per_node").String(""));
  if (!per_node.empty()) {
    int64_t ns = 0;
    if (per_node.size() > 2 && per_node.substr(per_node.size() - 2) == "ns" &&
        absl::SimpleAtoi(per_node.substr(0, per_node.size() - 2), &ns) && ns >= 0) {
      s.per_node_ns = ns;
    } else {
      ASSIGN_OR_RETURN(SimTime us, l.Child("per_node").Duration(0));
      s.per_node_ns = us * 1000;
    }
  }
  ASSIGN_OR_RETURN(s.extender_call, l.Child("extender_call").Duration(s.extender_call));
  ASSIGN_OR_RETURN(s.bind, l.Child("bind").Duration(s.bind));
  return absl::OkStatus();
}

absl::Status ParseStartPath(const Field& f, StartPathSpec& p) {
  if (!f.Present()) return absl::OkStatus();
  RETURN_IF_ERROR(f.OnlyKeys({"kubelet_watch", "admission", "allocate", "handoff_confirm",
                              "allocate_vfio_wait", "vfio_bind", "prepare", "claim_write",
                              "qemu_start", "pod_recreate", "max_backoff"}));
  p.enabled = true;
  ASSIGN_OR_RETURN(p.kubelet_watch, f.Child("kubelet_watch").Duration(p.kubelet_watch));
  ASSIGN_OR_RETURN(p.admission, f.Child("admission").Duration(p.admission));
  ASSIGN_OR_RETURN(p.allocate, f.Child("allocate").Duration(p.allocate));
  ASSIGN_OR_RETURN(p.handoff_confirm, f.Child("handoff_confirm").Duration(p.handoff_confirm));
  ASSIGN_OR_RETURN(p.allocate_vfio_wait,
                   f.Child("allocate_vfio_wait").Duration(p.allocate_vfio_wait));
  if (f.Child("vfio_bind").Present()) {
    ASSIGN_OR_RETURN(p.vfio_bind, ParseDistribution(f.Child("vfio_bind")));
  }
  ASSIGN_OR_RETURN(p.prepare, f.Child("prepare").Duration(p.prepare));
  ASSIGN_OR_RETURN(p.claim_write, f.Child("claim_write").Duration(p.claim_write));
  if (f.Child("qemu_start").Present()) {
    ASSIGN_OR_RETURN(p.qemu_start, ParseDistribution(f.Child("qemu_start")));
  }
  ASSIGN_OR_RETURN(p.pod_recreate, f.Child("pod_recreate").Duration(p.pod_recreate));
  if (p.pod_recreate <= 0) return f.Child("pod_recreate").Error("must be > 0");
  ASSIGN_OR_RETURN(p.max_backoff, f.Child("max_backoff").Duration(p.max_backoff));
  if (p.max_backoff < kSecond) return f.Child("max_backoff").Error("must be >= 1s");
  return absl::OkStatus();
}

absl::Status ParseDra(const Field& f, DraSpec& d) {
  RETURN_IF_ERROR(f.OnlyKeys({"kubernetes", "keeper_delay"}));
  ASSIGN_OR_RETURN(std::string version, f.Child("kubernetes").String("1.36"));
  if (version == "1.34") {
    d.kubernetes_minor = 34;
  } else if (version == "1.35") {
    d.kubernetes_minor = 35;
  } else if (version == "1.36") {
    d.kubernetes_minor = 36;
  } else {
    return f.Child("kubernetes").Error("must be 1.34, 1.35 or 1.36");
  }
  ASSIGN_OR_RETURN(d.keeper_delay, f.Child("keeper_delay").Duration(d.keeper_delay));
  return absl::OkStatus();
}

absl::StatusOr<Scenario> ParseRoot(const Field& root) {
  if (!root.node.IsMap()) return root.Error("must be a mapping");
  RETURN_IF_ERROR(root.OnlyKeys({"name", "description", "seed", "duration",
                                 "max_events", "sample_every", "cluster",
                                 "workload", "events", "scheduler", "start_path",
                                 "dra"}));
  Scenario s;
  ASSIGN_OR_RETURN(s.name, root.Child("name").String(""));
  if (s.name.empty()) return root.Child("name").Error("is required");
  ASSIGN_OR_RETURN(s.description, root.Child("description").String(""));
  ASSIGN_OR_RETURN(int64_t seed, root.Child("seed").Int(1, 0, INT64_MAX));
  s.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(s.duration, root.Child("duration").Duration(24 * kHour));
  if (s.duration <= 0) return root.Child("duration").Error("must be > 0");
  ASSIGN_OR_RETURN(int64_t max_events, root.Child("max_events").Int(0, 0, INT64_MAX));
  s.max_events = static_cast<uint64_t>(max_events);
  ASSIGN_OR_RETURN(s.sample_every, root.Child("sample_every").Duration(s.duration / 48));
  if (s.sample_every <= 0) return root.Child("sample_every").Error("must be > 0");
  if (s.duration / s.sample_every > 100000) {
    return root.Child("sample_every").Error("gives more than 100000 samples");
  }
  RETURN_IF_ERROR(ParseCluster(root.Child("cluster"), s));
  RETURN_IF_ERROR(ParseWorkload(root.Child("workload"), s));
  RETURN_IF_ERROR(ParseEvents(root.Child("events"), s));
  RETURN_IF_ERROR(ParseScheduler(root.Child("scheduler"), s.scheduler));
  RETURN_IF_ERROR(ParseStartPath(root.Child("start_path"), s.start_path));
  RETURN_IF_ERROR(ParseDra(root.Child("dra"), s.dra));
  if (!s.node_reboots.empty() && !s.start_path.enabled) {
    return root.Child("start_path").Error("is required with events.node_reboots");
  }
  return s;
}

}  // namespace

absl::StatusOr<Scenario> ParseScenario(std::string_view yaml_text,
                                       std::string_view source) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    absl::StatusOr<Scenario> s = ParseRoot(Field{root, ""});
    if (!s.ok()) {
      // Root-level errors have an empty path; say which file either way.
      return absl::InvalidArgumentError(
          absl::StrCat(Sv(source), ": ", s.status().message()));
    }
    return s;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        Sv(source), ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
}

absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read scenario ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseScenario(buf.str(), path);
}

}  // namespace pdc::sim
