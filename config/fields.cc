#include "config/fields.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::config_internal {
namespace {

using Setter = std::function<absl::Status(const DecodeContext&,
                                          const YAML::Node&, PdcConfig*)>;

std::string_view KindOf(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "a value";
}

// The text of a scalar; null (`key:` with nothing) reads as "".
absl::StatusOr<std::string> ScalarText(const DecodeContext& ctx,
                                       const YAML::Node& n,
                                       std::string_view path) {
  if (!n.IsDefined() || n.IsNull()) return std::string();
  if (!n.IsScalar()) {
    return FieldError(ctx, n, path,
                      absl::StrCat("want a single value, got ", Sv(KindOf(n))));
  }
  return n.Scalar();
}

absl::StatusOr<uint64_t> ParseBytes(std::string_view text) {
  static constexpr std::pair<std::string_view, uint64_t> kSuffixes[] = {
      {"Ki", uint64_t{1} << 10}, {"Mi", uint64_t{1} << 20},
      {"Gi", uint64_t{1} << 30}, {"K", 1000},
      {"M", 1000 * 1000},        {"G", 1000 * 1000 * 1000},
  };
  uint64_t multiplier = 1;
  for (const auto& [suffix, m] : kSuffixes) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      text.remove_suffix(suffix.size());
      multiplier = m;
      break;
    }
  }
  uint64_t v = 0;
  if (!absl::SimpleAtoi(Sv(text), &v) ||
      v > std::numeric_limits<uint64_t>::max() / multiplier) {
    return absl::InvalidArgumentError("");
  }
  return v * multiplier;
}

std::string FormatBytes(uint64_t v) {
  if (v != 0 && v % (uint64_t{1} << 30) == 0)
    return absl::StrCat(v >> 30, "Gi");
  if (v != 0 && v % (uint64_t{1} << 20) == 0)
    return absl::StrCat(v >> 20, "Mi");
  if (v != 0 && v % (uint64_t{1} << 10) == 0)
    return absl::StrCat(v >> 10, "Ki");
  return absl::StrCat(v);
}

// Field builders. `get` maps a config to the member, const or not.
template <typename Get>
FieldSpec Str(std::string path, Get get) {
  Setter set = [path, get](const DecodeContext& ctx, const YAML::Node& n,
                           PdcConfig* c) -> absl::Status {
    ASSIGN_OR_RETURN(std::string v, ScalarText(ctx, n, path));
    get(*c) = std::move(v);
    return absl::OkStatus();
  };
  return {path, false, std::move(set),
          [get](const PdcConfig& c) { return QuoteYaml(get(c)); }};
}

template <typename T, typename Get>
FieldSpec Int(std::string path, Get get) {
  Setter set = [path, get](const DecodeContext& ctx, const YAML::Node& n,
                           PdcConfig* c) -> absl::Status {
    ASSIGN_OR_RETURN(std::string text, ScalarText(ctx, n, path));
    T v{};
    if (!absl::SimpleAtoi(Sv(text), &v)) {
      return FieldError(ctx, n, path,
                        absl::StrCat(QuoteYaml(text), " is not an integer"));
    }
    get(*c) = v;
    return absl::OkStatus();
  };
  return {path, false, std::move(set),
          [get](const PdcConfig& c) { return absl::StrCat(get(c)); }};
}

template <typename Get>
FieldSpec Bytes(std::string path, Get get) {
  Setter set = [path, get](const DecodeContext& ctx, const YAML::Node& n,
                           PdcConfig* c) -> absl::Status {
    ASSIGN_OR_RETURN(std::string text, ScalarText(ctx, n, path));
    absl::StatusOr<uint64_t> v = ParseBytes(text);
    if (!v.ok()) {
      return FieldError(
          ctx, n, path,
          absl::StrCat(QuoteYaml(text),
                       " is not a size in bytes (like 67108864, 64Mi, 1Gi)"));
    }
    get(*c) = *v;
    return absl::OkStatus();
  };
  return {path, false, std::move(set),
          [get](const PdcConfig& c) { return FormatBytes(get(c)); }};
}

template <typename Get>
FieldSpec Dur(std::string path, Get get) {
  Setter set = [path, get](const DecodeContext& ctx, const YAML::Node& n,
                           PdcConfig* c) -> absl::Status {
    ASSIGN_OR_RETURN(std::string text, ScalarText(ctx, n, path));
    absl::Duration d;
    if (!absl::ParseDuration(Sv(text), &d) || d == absl::InfiniteDuration() ||
        d == -absl::InfiniteDuration()) {
      return FieldError(ctx, n, path,
                        absl::StrCat(QuoteYaml(text),
                                     " is not a duration (like 500ms, 60s, "
                                     "5m, 1h30m)"));
    }
    get(*c) = d;
    return absl::OkStatus();
  };
  return {path, false, std::move(set), [get](const PdcConfig& c) {
            return QuoteYaml(StdSv(absl::FormatDuration(get(c))));
          }};
}

template <typename E, typename Get>
FieldSpec Enum(std::string path, std::vector<std::pair<std::string, E>> values,
               Get get) {
  Setter set = [path, values, get](const DecodeContext& ctx,
                                   const YAML::Node& n,
                                   PdcConfig* c) -> absl::Status {
    ASSIGN_OR_RETURN(std::string text, ScalarText(ctx, n, path));
    std::vector<std::string> names;
    for (const auto& [name, v] : values) {
      if (name == text) {
        get(*c) = v;
        return absl::OkStatus();
      }
      names.push_back(name);
    }
    return FieldError(ctx, n, path,
                      absl::StrCat(QuoteYaml(text), " is not one of ",
                                   absl::StrJoin(names, ", ")));
  };
  return {path, false, std::move(set), [values, get](const PdcConfig& c) {
            for (const auto& [name, v] : values) {
              if (v == get(c)) return name;
            }
            return std::string("\"\"");
          }};
}

// A kernel driver name as sysfs shows it under bus/pci/drivers.
bool IsKernelDriverName(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '-';
  });
}

absl::Status SetDeviceClasses(const DecodeContext& ctx, const YAML::Node& n,
                              PdcConfig* c) {
  const std::string path = "deviceClasses";
  std::vector<DeviceClass> classes;
  std::map<std::string, DraClassConfig> dra_classes;
  if (n.IsDefined() && !n.IsNull()) {
    if (!n.IsSequence()) {
      return FieldError(
          ctx, n, path,
          absl::StrCat("want a list of device classes, got ", Sv(KindOf(n))));
    }
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node item = n[i];
      const std::string item_path = absl::StrCat(path, "[", i, "]");
      if (!item.IsMap()) {
        return FieldError(
            ctx, item, item_path,
            "want a mapping with resourceName, selectors, classCode, hostDrivers, mode, "
            "draDriverName, draReclaimPolicy");
      }
      DeviceClass dc;
      std::optional<uint32_t> class_code;
      std::optional<std::string> mode;
      std::optional<std::string> dra_driver;
      std::optional<ReclaimPolicy> dra_reclaim;
      for (auto it = item.begin(); it != item.end(); ++it) {
        const std::string key = it->first.Scalar();
        const std::string field_path = absl::StrCat(item_path, ".", key);
        const YAML::Node v = it->second;  // a copy: `->` yields a temporary proxy
        if (key == "resourceName") {
          ASSIGN_OR_RETURN(dc.resource_name, ScalarText(ctx, v, field_path));
        } else if (key == "classCode") {
          ASSIGN_OR_RETURN(std::string text, ScalarText(ctx, v, field_path));
          uint32_t code = 0;
          if (text.size() != 6 ||
              !std::all_of(text.begin(), text.end(), absl::ascii_isxdigit) ||
              !absl::SimpleHexAtoi(Sv(text), &code)) {
            return FieldError(ctx, v, field_path,
                              absl::StrCat(QuoteYaml(text),
                                           " is not a PCI class code (6 hex "
                                           "digits like 010802)"));
          }
          class_code = code;
        } else if (key == "selectors") {
          if (!v.IsSequence()) {
            return FieldError(
                ctx, v, field_path,
                absl::StrCat("want a list of vendor:device ids, got ",
                             Sv(KindOf(v))));
          }
          for (size_t j = 0; j < v.size(); ++j) {
            const std::string sel_path = absl::StrCat(field_path, "[", j, "]");
            ASSIGN_OR_RETURN(std::string text, ScalarText(ctx, v[j], sel_path));
            absl::StatusOr<PciSelector> sel = ParsePciSelector(text);
            if (!sel.ok()) {
              return FieldError(ctx, v[j], sel_path,
                                StdSv(sel.status().message()));
            }
            dc.selectors.push_back(*sel);
          }
        } else if (key == "hostDrivers") {
          if (!v.IsSequence()) {
            return FieldError(ctx, v, field_path,
                              absl::StrCat("want a list of kernel driver names, got ",
                                           Sv(KindOf(v))));
          }
          for (size_t j = 0; j < v.size(); ++j) {
            const std::string drv_path = absl::StrCat(field_path, "[", j, "]");
            ASSIGN_OR_RETURN(std::string name, ScalarText(ctx, v[j], drv_path));
            if (!IsKernelDriverName(name)) {
              return FieldError(ctx, v[j], drv_path,
                                absl::StrCat(QuoteYaml(name),
                                             " is not a kernel driver name (letters, digits, "
                                             "'_' and '-', at most 64)"));
            }
            if (name == "vfio-pci") {
              return FieldError(ctx, v[j], drv_path,
                                "vfio-pci is where pdc-node moves devices to, not a host driver");
            }
            dc.host_drivers.push_back(std::move(name));
          }
        } else if (key == "mode") {
          ASSIGN_OR_RETURN(std::string text, ScalarText(ctx, v, field_path));
          if (text != "devicePlugin" && text != "dra") {
            return FieldError(ctx, v, field_path,
                              absl::StrCat(QuoteYaml(text), " is not devicePlugin or dra"));
          }
          mode = std::move(text);
        } else if (key == "draDriverName") {
          ASSIGN_OR_RETURN(std::string text, ScalarText(ctx, v, field_path));
          dra_driver = std::move(text);
        } else if (key == "draReclaimPolicy") {
          ASSIGN_OR_RETURN(std::string text, ScalarText(ctx, v, field_path));
          if (text == "Delete") {
            dra_reclaim = ReclaimPolicy::kDelete;
          } else if (text == "Retain") {
            dra_reclaim = ReclaimPolicy::kRetain;
          } else {
            return FieldError(ctx, v, field_path,
                              absl::StrCat(QuoteYaml(text), " is not Delete or Retain"));
          }
        } else {
          return FieldError(ctx, it->first, field_path,
                            "unknown field (want resourceName, selectors, classCode, "
                            "hostDrivers, mode, draDriverName, draReclaimPolicy)");
        }
      }
      if (dra_driver.has_value() && mode != "dra") {
        return FieldError(ctx, item, absl::StrCat(item_path, ".draDriverName"),
                          "only a class in mode dra has a DRA driver name");
      }
      if (dra_reclaim.has_value() && mode != "dra") {
        return FieldError(ctx, item, absl::StrCat(item_path, ".draReclaimPolicy"),
                          "only a class in mode dra has a DRA reclaim policy (a "
                          "PersistentDeviceClaim carries its own)");
      }
      if (mode == "dra") {
        DraClassConfig dra;
        if (dra_driver.has_value()) dra.driver_name = *dra_driver;
        if (dra_reclaim.has_value()) dra.reclaim_policy = *dra_reclaim;
        dra_classes[dc.resource_name] = std::move(dra);
      }
      for (PciSelector& s : dc.selectors) s.class_code = class_code;
      classes.push_back(std::move(dc));
    }
  }
  c->device_classes = std::move(classes);
  c->dra_classes = std::move(dra_classes);
  return absl::OkStatus();
}

std::string FormatDeviceClasses(const PdcConfig& c) {
  std::vector<std::string> items;
  for (const DeviceClass& dc : c.device_classes) {
    std::vector<std::string> sels;
    for (const PciSelector& s : dc.selectors) {
      sels.push_back(QuoteYaml(FormatPciSelector(s)));
    }
    std::string item =
        absl::StrCat("{resourceName: ", QuoteYaml(dc.resource_name),
                     ", selectors: [", absl::StrJoin(sels, ", "), "]");
    if (!dc.selectors.empty() && dc.selectors[0].class_code.has_value()) {
      absl::StrAppend(
          &item, ", classCode: ",
          QuoteYaml(absl::StrFormat("%06x", *dc.selectors[0].class_code)));
    }
    if (!dc.host_drivers.empty()) {
      std::vector<std::string> drivers;
      for (const std::string& d : dc.host_drivers) drivers.push_back(QuoteYaml(d));
      absl::StrAppend(&item, ", hostDrivers: [", absl::StrJoin(drivers, ", "), "]");
    }
    if (auto dra = c.dra_classes.find(dc.resource_name); dra != c.dra_classes.end()) {
      absl::StrAppend(&item, ", mode: dra, draDriverName: ", QuoteYaml(dra->second.driver_name),
                      ", draReclaimPolicy: ", Sv(ToString(dra->second.reclaim_policy)));
    }
    item += "}";
    items.push_back(std::move(item));
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::vector<FieldSpec> MakeFields() {
  const std::vector<std::pair<std::string, LogFormat>> log_formats = {
      {"text", LogFormat::kText}, {"json", LogFormat::kJson}};
  const std::vector<std::pair<std::string, StoreKind>> stores = {
      {"file", StoreKind::kFile}, {"memory", StoreKind::kMemory},
      {"kubernetes", StoreKind::kKubernetes}};
  const std::vector<std::pair<std::string, ScoringPolicy>> scorings = {
      {"binpack", ScoringPolicy::kBinPack}, {"spread", ScoringPolicy::kSpread}};
  const std::vector<std::pair<std::string, ReclaimPolicy>> reclaims = {
      {"Retain", ReclaimPolicy::kRetain}, {"Delete", ReclaimPolicy::kDelete}};
  const std::vector<std::pair<std::string, KubernetesMode>> kube_modes = {
      {"none", KubernetesMode::kNone},
      {"in-cluster", KubernetesMode::kInCluster},
      {"kubeconfig", KubernetesMode::kKubeconfig}};

  std::vector<FieldSpec> f;
  f.push_back({"deviceClasses", true, SetDeviceClasses, FormatDeviceClasses});
  f.push_back(Enum(
      "logFormat", log_formats, [](auto& c) -> auto& { return c.log_format; }));
  f.push_back(Str(
      "logLevel", [](auto& c) -> auto& { return c.log_level; }));

  f.push_back(Str(
      "extender.listen", [](auto& c) -> auto& { return c.extender.listen; }));
  f.push_back(Str(
      "extender.schedulerPathPrefix",
      [](auto& c) -> auto& { return c.extender.scheduler_path_prefix; }));
  f.push_back(Int<int>(
      "extender.workerThreads",
      [](auto& c) -> auto& { return c.extender.worker_threads; }));
  f.push_back(Int<int>(
      "extender.bindThreads",
      [](auto& c) -> auto& { return c.extender.bind_threads; }));
  f.push_back(Dur(
      "extender.bindDeadline",
      [](auto& c) -> auto& { return c.extender.bind_deadline; }));
  f.push_back(Bytes(
      "extender.maxBodyBytes",
      [](auto& c) -> auto& { return c.extender.max_body_bytes; }));
  f.push_back(Int<int>(
      "extender.maxConnections",
      [](auto& c) -> auto& { return c.extender.max_connections; }));
  f.push_back(Dur(
      "extender.readTimeout",
      [](auto& c) -> auto& { return c.extender.read_timeout; }));
  f.push_back(Dur(
      "extender.idleTimeout",
      [](auto& c) -> auto& { return c.extender.idle_timeout; }));
  f.push_back(Str(
      "extender.tls.certFile",
      [](auto& c) -> auto& { return c.extender.tls.cert_file; }));
  f.push_back(Str(
      "extender.tls.keyFile",
      [](auto& c) -> auto& { return c.extender.tls.key_file; }));
  f.push_back(Str(
      "extender.tls.clientCAFile",
      [](auto& c) -> auto& { return c.extender.tls.client_ca_file; }));
  f.push_back(Str(
      "extender.webhook.listen",
      [](auto& c) -> auto& { return c.extender.webhook.listen; }));
  f.push_back(Str(
      "extender.webhook.certFile",
      [](auto& c) -> auto& { return c.extender.webhook.cert_file; }));
  f.push_back(Str(
      "extender.webhook.keyFile",
      [](auto& c) -> auto& { return c.extender.webhook.key_file; }));
  f.push_back(Str(
      "extender.tokenFile",
      [](auto& c) -> auto& { return c.extender.token_file; }));
  f.push_back(Str(
      "extender.nodeAuth.serviceAccount",
      [](auto& c) -> auto& { return c.extender.node_auth.service_account; }));
  f.push_back(Str(
      "extender.nodeAuth.audience",
      [](auto& c) -> auto& { return c.extender.node_auth.audience; }));
  f.push_back(Dur(
      "extender.nodeAuth.cacheTTL",
      [](auto& c) -> auto& { return c.extender.node_auth.cache_ttl; }));
  f.push_back(Int<int>(
      "extender.nodeAuth.cacheSize",
      [](auto& c) -> auto& { return c.extender.node_auth.cache_size; }));
  f.push_back(Dur(
      "extender.nodeAuth.reviewTimeout",
      [](auto& c) -> auto& { return c.extender.node_auth.review_timeout; }));
  f.push_back(Str(
      "extender.nodeAuth.tokenDir",
      [](auto& c) -> auto& { return c.extender.node_auth.token_dir; }));
  f.push_back(Str(
      "extender.dataDir",
      [](auto& c) -> auto& { return c.extender.data_dir; }));
  f.push_back(Enum(
      "extender.store", stores,
      [](auto& c) -> auto& { return c.extender.store; }));
  f.push_back(Dur(
      "extender.nodeStaleAfter",
      [](auto& c) -> auto& { return c.extender.allocator.node_stale_after; }));
  f.push_back(Enum(
      "extender.scoring", scorings,
      [](auto& c) -> auto& { return c.extender.allocator.scoring; }));
  f.push_back(Enum(
      "extender.templateReclaimPolicy", reclaims,
      [](auto& c) -> auto& { return c.extender.allocator.template_reclaim_policy; }));
  f.push_back(Int<uint64_t>(
      "extender.checkpointEveryRecords",
      [](auto& c) -> auto& { return c.extender.allocator.checkpoint_every_records; }));
  f.push_back(Bytes(
      "extender.checkpointLogBytes",
      [](auto& c) -> auto& { return c.extender.allocator.checkpoint_every_bytes; }));
  const std::vector<std::pair<std::string, bool>> booleans = {{"true", true},
                                                              {"false", false}};
  f.push_back(Enum(
      "extender.serializeHandoffs", booleans,
      [](auto& c) -> auto& { return c.extender.allocator.serialize_handoffs; }));
  f.push_back(Enum(
      "extender.allowUnauthenticated", booleans,
      [](auto& c) -> auto& { return c.extender.allow_unauthenticated; }));
  f.push_back(Enum(
      "extender.kubernetes.mode", kube_modes,
      [](auto& c) -> auto& { return c.extender.kubernetes.mode; }));
  f.push_back(Str(
      "extender.kubernetes.kubeconfig",
      [](auto& c) -> auto& { return c.extender.kubernetes.kubeconfig; }));
  f.push_back(Str(
      "extender.kubernetes.namespace",
      [](auto& c) -> auto& { return c.extender.kubernetes.ns; }));
  f.push_back(Str(
      "extender.kubernetes.schedulerName",
      [](auto& c) -> auto& { return c.extender.kubernetes.scheduler_name; }));
  f.push_back(Enum(
      "extender.leaderElection.enabled", booleans,
      [](auto& c) -> auto& { return c.extender.leader_election.enabled; }));
  f.push_back(Str(
      "extender.leaderElection.leaseName",
      [](auto& c) -> auto& { return c.extender.leader_election.lease_name; }));
  f.push_back(Str(
      "extender.leaderElection.identity",
      [](auto& c) -> auto& { return c.extender.leader_election.identity; }));
  f.push_back(Dur(
      "extender.leaderElection.leaseDuration",
      [](auto& c) -> auto& { return c.extender.leader_election.lease_duration; }));
  f.push_back(Dur(
      "extender.leaderElection.renewDeadline",
      [](auto& c) -> auto& { return c.extender.leader_election.renew_deadline; }));
  f.push_back(Dur(
      "extender.leaderElection.retryPeriod",
      [](auto& c) -> auto& { return c.extender.leader_election.retry_period; }));
  f.push_back(Str(
      "extender.leaderElection.service",
      [](auto& c) -> auto& { return c.extender.leader_election.service; }));
  f.push_back(Enum(
      "extender.dra.keeper.enabled", booleans,
      [](auto& c) -> auto& { return c.extender.dra_keeper.enabled; }));
  f.push_back(Dur(
      "extender.dra.keeper.resyncPeriod",
      [](auto& c) -> auto& { return c.extender.dra_keeper.resync_period; }));

  f.push_back(Str(
      "node.nodeName", [](auto& c) -> auto& { return c.node.node_name; }));
  f.push_back(Str(
      "node.extenderURL",
      [](auto& c) -> auto& { return c.node.extender_url; }));
  f.push_back(Str(
      "node.tls.caFile", [](auto& c) -> auto& { return c.node.tls.ca_file; }));
  f.push_back(Str(
      "node.tls.certFile",
      [](auto& c) -> auto& { return c.node.tls.cert_file; }));
  f.push_back(Str(
      "node.tls.keyFile",
      [](auto& c) -> auto& { return c.node.tls.key_file; }));
  f.push_back(Str(
      "node.tokenFile", [](auto& c) -> auto& { return c.node.token_file; }));
  f.push_back(Str(
      "node.sysfsRoot", [](auto& c) -> auto& { return c.node.sysfs_root; }));
  f.push_back(Str(
      "node.devRoot", [](auto& c) -> auto& { return c.node.dev_root; }));
  f.push_back(Str(
      "node.procRoot", [](auto& c) -> auto& { return c.node.proc_root; }));
  f.push_back(Str(
      "node.stateDir", [](auto& c) -> auto& { return c.node.state_dir; }));
  f.push_back(Str(
      "node.podResourcesSocket",
      [](auto& c) -> auto& { return c.node.pod_resources_socket; }));
  f.push_back(Dur(
      "node.heartbeatInterval",
      [](auto& c) -> auto& { return c.node.heartbeat_interval; }));
  f.push_back(Str(
      "node.metricsListen",
      [](auto& c) -> auto& { return c.node.metrics_listen; }));
  f.push_back(Enum(
      "node.allowSharedNvme", booleans,
      [](auto& c) -> auto& { return c.node.allow_shared_nvme; }));
  f.push_back(Enum(
      "node.allowSriov", booleans,
      [](auto& c) -> auto& { return c.node.allow_sriov; }));
  f.push_back(Enum(
      "node.eraseOnVfio", booleans,
      [](auto& c) -> auto& { return c.node.erase_on_vfio; }));
  const std::vector<std::pair<std::string, std::string>> firmware_changes = {
      {"hold", "hold"}, {"report", "report"}};
  f.push_back(Enum(
      "node.firmwareChange", firmware_changes,
      [](auto& c) -> auto& { return c.node.firmware_change; }));
  f.push_back(Str(
      "node.kubeletDir", [](auto& c) -> auto& { return c.node.kubelet_dir; }));
  f.push_back(Str(
      "node.cdiDir", [](auto& c) -> auto& { return c.node.cdi_dir; }));
  f.push_back(Str(
      "node.draMetadataDir", [](auto& c) -> auto& { return c.node.dra_metadata_dir; }));
  f.push_back(Str(
      "node.kubeconfig", [](auto& c) -> auto& { return c.node.kubeconfig; }));
  return f;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same =
          absl::ascii_tolower(a[i - 1]) == absl::ascii_tolower(b[j - 1]);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + !same});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

absl::Status FieldError(const DecodeContext& ctx, const YAML::Node& at,
                        std::string_view path, std::string_view problem) {
  std::string where = ctx.origin;
  if (ctx.has_marks && at.IsDefined()) {
    const YAML::Mark m = at.Mark();
    if (!m.is_null()) {
      where = absl::StrFormat("%s:%d:%d", ctx.origin, m.line + 1, m.column + 1);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", Sv(path), ": ", Sv(problem)));
}

const std::vector<FieldSpec>& Fields() {
  static const std::vector<FieldSpec>* const fields =
      new std::vector<FieldSpec>(MakeFields());
  return *fields;
}

const FieldSpec* FindField(std::string_view path) {
  for (const FieldSpec& f : Fields()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

bool IsSection(std::string_view path) {
  for (const FieldSpec& f : Fields()) {
    if (f.path.size() > path.size() && f.path.starts_with(path) &&
        f.path[path.size()] == '.') {
      return true;
    }
  }
  return false;
}

std::string Suggestion(std::string_view unknown_path) {
  const FieldSpec* best = nullptr;
  size_t best_distance = 3;  // Only near misses: typos, not guesses.
  for (const FieldSpec& f : Fields()) {
    const size_t d = EditDistance(unknown_path, f.path);
    if (d < best_distance) {
      best = &f;
      best_distance = d;
    }
  }
  if (best == nullptr) return "";
  return absl::StrCat(" (did you mean \"", best->path, "\"?)");
}

std::string QuoteYaml(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace pdc::config_internal
