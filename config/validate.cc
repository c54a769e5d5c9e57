// Validation of a loaded PdcConfig, conversions and names.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "config/config.h"
#include "config/fields.h"
#include "model/names.h"

namespace pdc {
namespace {

using config_internal::QuoteYaml;

absl::Status Bad(std::string_view field, std::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(field), ": ", Sv(problem)));
}

// host:port with a numeric port; host may be empty, a name, IPv4 or [IPv6].
bool IsHostPort(std::string_view s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return false;
  std::string_view host = s.substr(0, colon);
  const std::string_view port = s.substr(colon + 1);
  int p = 0;
  if (port.empty() || !absl::SimpleAtoi(Sv(port), &p) || p < 0 || p > 65535 ||
      !std::all_of(port.begin(), port.end(), absl::ascii_isdigit)) {
    return false;
  }
  if (host.starts_with("[")) return host.size() > 2 && host.ends_with("]");
  return std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_';
  });
}

bool IsResourceName(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == s.size() ||
      s.find('/', slash + 1) != std::string_view::npos) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_' ||
           c == '/';
  });
}

absl::Status CheckPositive(std::string_view field, absl::Duration d) {
  if (d <= absl::ZeroDuration()) {
    return Bad(field,
               absl::StrCat("must be positive, got ", absl::FormatDuration(d)));
  }
  return absl::OkStatus();
}

absl::Status CheckKeyPair(std::string_view prefix, const std::string& cert,
                          const std::string& key) {
  if (!cert.empty() && key.empty()) {
    return Bad(absl::StrCat(Sv(prefix), ".keyFile"),
               absl::StrCat("required when ", Sv(prefix), ".certFile is set"));
  }
  if (cert.empty() && !key.empty()) {
    return Bad(absl::StrCat(Sv(prefix), ".certFile"),
               absl::StrCat("required when ", Sv(prefix), ".keyFile is set"));
  }
  return absl::OkStatus();
}

absl::Status ValidateCommon(const PdcConfig& c) {
  if (c.device_classes.empty()) {
    return Bad("deviceClasses", "at least one device class is required");
  }
  for (size_t i = 0; i < c.device_classes.size(); ++i) {
    const DeviceClass& dc = c.device_classes[i];
    const std::string path = absl::StrCat("deviceClasses[", i, "]");
    if (!IsResourceName(dc.resource_name)) {
      return Bad(absl::StrCat(path, ".resourceName"),
                 absl::StrCat(QuoteYaml(dc.resource_name),
                              " is not a resource name like "
                              "devices.kubevirt.io/nvme"));
    }
    if (dc.selectors.empty()) {
      return Bad(absl::StrCat(path, ".selectors"),
                 "at least one vendor:device selector is required");
    }
    for (size_t j = 0; j < i; ++j) {
      const DeviceClass& other = c.device_classes[j];
      if (other.resource_name == dc.resource_name) {
        return Bad(absl::StrCat(path, ".resourceName"),
                   absl::StrCat(QuoteYaml(dc.resource_name),
                                " is already used by deviceClasses[", j, "]"));
      }
      // A device matched by two classes would be offered twice.
      for (size_t s = 0; s < dc.selectors.size(); ++s) {
        for (const PciSelector& o : other.selectors) {
          if (o == dc.selectors[s]) {
            return Bad(
                absl::StrCat(path, ".selectors[", s, "]"),
                absl::StrCat(FormatPciSelector(o),
                             " is already selected by deviceClasses[", j, "]"));
          }
        }
      }
    }
  }
  // DRA driver names: DNS subdomains of at most 63 characters (the
  // resource.k8s.io validation of ResourceSlice.spec.driver), one class each.
  std::map<std::string, std::string> driver_owner;
  for (size_t i = 0; i < c.device_classes.size(); ++i) {
    auto dra = c.dra_classes.find(c.device_classes[i].resource_name);
    if (dra == c.dra_classes.end()) continue;
    const std::string path = absl::StrCat("deviceClasses[", i, "].draDriverName");
    const std::string& name = dra->second.driver_name;
    bool ok = !name.empty() && name.size() <= 63 && name.front() != '.' && name.back() != '.' &&
              name.find("..") == std::string::npos;
    for (size_t k = 0; ok && k < name.size(); ++k) {
      const char ch = name[k];
      ok = absl::ascii_islower(ch) || absl::ascii_isdigit(ch) || ch == '.' ||
           (ch == '-' && k > 0 && k + 1 < name.size() && name[k - 1] != '.' &&
            name[k + 1] != '.');
    }
    if (!ok) {
      return Bad(path, absl::StrCat(QuoteYaml(name),
                                    " is not a DRA driver name (a DNS subdomain of at most 63 "
                                    "characters, like nvme.pdc.kubevirt.io)"));
    }
    auto [owner, fresh] = driver_owner.emplace(name, c.device_classes[i].resource_name);
    if (!fresh) {
      return Bad(path, absl::StrCat(QuoteYaml(name), " is already the driver of ",
                                    owner->second));
    }
  }
  static constexpr std::string_view kLevels[] = {
      "trace", "debug", "info", "warn", "error", "critical", "off"};
  if (std::find(std::begin(kLevels), std::end(kLevels), c.log_level) ==
      std::end(kLevels)) {
    return Bad("logLevel",
               absl::StrCat(QuoteYaml(c.log_level),
                            " is not one of trace, debug, info, warn, error, "
                            "critical, off"));
  }
  return absl::OkStatus();
}

// extender.nodeAuth.
absl::Status ValidateNodeAuth(const ExtenderConfig& e) {
  const NodeAuthConfig& na = e.node_auth;
  if (!na.service_account.empty()) {
    const size_t slash = na.service_account.find('/');
    if (slash == std::string::npos) {
      return Bad("extender.nodeAuth.serviceAccount",
                 absl::StrCat(QuoteYaml(na.service_account),
                              " is not <namespace>/<name> (pdc-node's ServiceAccount, e.g. "
                              "pdc-system/pdc-node)"));
    }
    RETURN_IF_ERROR(model::ValidateNamespace("extender.nodeAuth.serviceAccount namespace",
                                             na.service_account.substr(0, slash)));
    RETURN_IF_ERROR(model::ValidateObjectName("extender.nodeAuth.serviceAccount name",
                                              na.service_account.substr(slash + 1)));
    if (e.kubernetes.mode == KubernetesMode::kNone) {
      return Bad("extender.nodeAuth.serviceAccount",
                 "needs a Kubernetes API to send TokenReviews to: set "
                 "extender.kubernetes.mode to in-cluster or kubeconfig (or use "
                 "extender.nodeAuth.tokenDir)");
    }
    if (na.audience.empty()) {
      return Bad("extender.nodeAuth.audience",
                 "required with extender.nodeAuth.serviceAccount (the audience of pdc-node's "
                 "projected service-account token)");
    }
  }
  if (na.cache_ttl < absl::Seconds(1) || na.cache_ttl > absl::Hours(1)) {
    return Bad("extender.nodeAuth.cacheTTL",
               absl::StrCat("must be between 1s and 1h, got ", absl::FormatDuration(na.cache_ttl)));
  }
  if (na.cache_size < 16 || na.cache_size > 1000000) {
    return Bad("extender.nodeAuth.cacheSize",
               absl::StrCat("must be between 16 and 1000000, got ", na.cache_size));
  }
  if (na.review_timeout < absl::Milliseconds(100) || na.review_timeout > absl::Seconds(30)) {
    return Bad("extender.nodeAuth.reviewTimeout",
               absl::StrCat("must be between 100ms and 30s, got ",
                            absl::FormatDuration(na.review_timeout)));
  }
  return absl::OkStatus();
}

absl::Status ValidateExtender(const ExtenderConfig& e) {
  if (!IsHostPort(e.listen)) {
    return Bad("extender.listen",
               absl::StrCat(QuoteYaml(e.listen),
                            " is not host:port (like 0.0.0.0:8888)"));
  }
  const std::string& prefix = e.scheduler_path_prefix;
  if (!prefix.empty() && (!prefix.starts_with("/") || prefix.ends_with("/"))) {
    return Bad("extender.schedulerPathPrefix",
               absl::StrCat(QuoteYaml(prefix),
                            " must start with / and not end with / (like "
                            "/scheduler)"));
  }
  if (e.worker_threads < 1 || e.worker_threads > 1024) {
    return Bad(
        "extender.workerThreads",
        absl::StrCat("must be between 1 and 1024, got ", e.worker_threads));
  }
  if (e.bind_threads < 1 || e.bind_threads > 1024) {
    return Bad("extender.bindThreads",
               absl::StrCat("must be between 1 and 1024, got ", e.bind_threads));
  }
  if (e.bind_deadline < absl::Seconds(1) || e.bind_deadline > absl::Minutes(5)) {
    return Bad("extender.bindDeadline",
               absl::StrCat("must be between 1s and 5m, got ",
                            absl::FormatDuration(e.bind_deadline)));
  }
  if (e.max_body_bytes < 4096 || e.max_body_bytes > (uint64_t{256} << 20)) {
    return Bad(
        "extender.maxBodyBytes",
        absl::StrCat("must be between 4096 and 256Mi, got ", e.max_body_bytes));
  }
  if (e.max_connections < 16 || e.max_connections > 1000000) {
    return Bad("extender.maxConnections",
               absl::StrCat("must be between 16 and 1000000, got ", e.max_connections));
  }
  RETURN_IF_ERROR(CheckPositive("extender.readTimeout", e.read_timeout));
  RETURN_IF_ERROR(CheckPositive("extender.idleTimeout", e.idle_timeout));
  RETURN_IF_ERROR(
      CheckKeyPair("extender.tls", e.tls.cert_file, e.tls.key_file));
  if (!e.tls.client_ca_file.empty() && e.tls.cert_file.empty()) {
    return Bad("extender.tls.clientCAFile",
               "needs extender.tls.certFile and keyFile (client certificates "
               "are only checked over TLS)");
  }
  if (!e.webhook.listen.empty()) {
    if (!IsHostPort(e.webhook.listen)) {
      return Bad("extender.webhook.listen",
                 absl::StrCat(QuoteYaml(e.webhook.listen), " is not host:port"));
    }
    if (e.webhook.cert_file.empty() || e.webhook.key_file.empty()) {
      return Bad(e.webhook.cert_file.empty() ? "extender.webhook.certFile"
                                             : "extender.webhook.keyFile",
                 "required when extender.webhook.listen is set (kube-apiserver calls "
                 "admission webhooks over HTTPS only)");
    }
    if (e.webhook.listen == e.listen && !e.listen.ends_with(":0")) {
      return Bad("extender.webhook.listen",
                 absl::StrCat(QuoteYaml(e.webhook.listen),
                              " is extender.listen as well; the webhook needs its own port"));
    }
  } else if (!e.webhook.cert_file.empty() || !e.webhook.key_file.empty()) {
    return Bad("extender.webhook.listen",
               "required when extender.webhook.certFile or keyFile is set");
  }
  // Every interface reachable beyond loopback is authenticated, or the
  // configuration says, by name, that it need not be.
  if (!e.allow_unauthenticated && !IsLoopbackListen(e.listen)) {
    std::vector<std::string> open;
    if (e.token_file.empty() && e.node_auth.service_account.empty() &&
        e.node_auth.token_dir.empty()) {
      open.push_back("the REST API needs extender.tokenFile (or extender.nodeAuth)");
    }
    if (e.tls.client_ca_file.empty()) {
      open.push_back(
          "the scheduler verbs need extender.tls.clientCAFile (with tls.certFile and "
          "tls.keyFile) so that kube-scheduler presents a client certificate");
    }
    if (!open.empty()) {
      return Bad("extender.listen",
                 absl::StrCat(QuoteYaml(e.listen),
                              " is reachable beyond loopback, so every interface must "
                              "be authenticated: ",
                              absl::StrJoin(open, "; "),
                              ". Or listen on 127.0.0.1, or set "
                              "extender.allowUnauthenticated: true to accept this (test "
                              "clusters, or a network that only lets kube-scheduler and "
                              "pdc-node reach the port)"));
    }
  }
  if (e.store == StoreKind::kFile && e.data_dir.empty()) {
    return Bad("extender.dataDir", "required when extender.store is file");
  }
  RETURN_IF_ERROR(CheckPositive("extender.nodeStaleAfter", e.allocator.node_stale_after));
  if (e.allocator.checkpoint_every_records < 1) {
    return Bad("extender.checkpointEveryRecords", "must be at least 1");
  }
  if (e.allocator.checkpoint_every_bytes < (uint64_t{1} << 20)) {
    return Bad("extender.checkpointLogBytes",
               absl::StrCat("must be at least 1Mi, got ", e.allocator.checkpoint_every_bytes));
  }
  if (e.kubernetes.mode == KubernetesMode::kKubeconfig &&
      e.kubernetes.kubeconfig.empty()) {
    return Bad("extender.kubernetes.kubeconfig",
               "required when extender.kubernetes.mode is kubeconfig");
  }
  if (e.store == StoreKind::kKubernetes && e.kubernetes.mode == KubernetesMode::kNone) {
    return Bad("extender.store",
               "kubernetes needs a Kubernetes API: set extender.kubernetes.mode to in-cluster "
               "or kubeconfig");
  }
  if (!e.kubernetes.ns.empty()) {
    RETURN_IF_ERROR(model::ValidateNamespace("extender.kubernetes.namespace", e.kubernetes.ns));
  }
  // A pod's spec.schedulerName must be a DNS-1123 subdomain (the API's pod
  // validation, ValidatePodSpec), so no other name can match a pod.
  RETURN_IF_ERROR(model::ValidateObjectName("extender.kubernetes.schedulerName",
                                            e.kubernetes.scheduler_name));
  RETURN_IF_ERROR(ValidateNodeAuth(e));
  if (e.dra_keeper.enabled && e.kubernetes.mode == KubernetesMode::kNone) {
    return Bad("extender.dra.keeper.enabled",
               "true needs a Kubernetes API: set extender.kubernetes.mode to in-cluster or "
               "kubeconfig");
  }
  if (e.dra_keeper.resync_period < absl::Milliseconds(100) ||
      e.dra_keeper.resync_period > absl::Hours(24)) {
    return Bad("extender.dra.keeper.resyncPeriod", "must be between 100ms and 24h");
  }
  const LeaderElectionConfig& le = e.leader_election;
  if (le.enabled) {
    if (e.store != StoreKind::kKubernetes) {
      return Bad("extender.leaderElection.enabled",
                 absl::StrCat("needs extender.store: kubernetes (the replicas share the claims "
                              "through the API; a ",
                              Sv(ToString(e.store)), " store belongs to one process)"));
    }
    RETURN_IF_ERROR(
        model::ValidateObjectName("extender.leaderElection.leaseName", le.lease_name));
    if (!le.service.empty()) {
      RETURN_IF_ERROR(model::ValidateObjectName("extender.leaderElection.service", le.service));
    }
    if (le.identity.size() > 253) {
      return Bad("extender.leaderElection.identity", "is longer than 253 bytes");
    }
    // client-go's NewLeaderElector: leaseDuration > renewDeadline >
    // 1.2 * retryPeriod (JitterFactor), all positive.
    if (le.retry_period < absl::Milliseconds(100)) {
      return Bad("extender.leaderElection.retryPeriod",
                 absl::StrCat("must be at least 100ms, got ",
                              absl::FormatDuration(le.retry_period)));
    }
    if (le.renew_deadline <= le.retry_period * 1.2) {
      return Bad("extender.leaderElection.renewDeadline",
                 absl::StrCat("must be greater than 1.2 x retryPeriod (",
                              absl::FormatDuration(le.retry_period * 1.2), "), got ",
                              absl::FormatDuration(le.renew_deadline)));
    }
    if (le.lease_duration <= le.renew_deadline) {
      return Bad("extender.leaderElection.leaseDuration",
                 absl::StrCat("must be greater than renewDeadline (",
                              absl::FormatDuration(le.renew_deadline), "), got ",
                              absl::FormatDuration(le.lease_duration)));
    }
    if (le.lease_duration > absl::Hours(1)) {
      return Bad("extender.leaderElection.leaseDuration", "must be at most 1h");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNode(const PdcConfig& c) {
  const NodeConfig& n = c.node;
  if (n.node_name.empty()) {
    return Bad("node.nodeName", "empty and $NODE_NAME is not set");
  }
  if (n.node_name.size() > 253 ||
      !std::all_of(n.node_name.begin(), n.node_name.end(), [](char ch) {
        return absl::ascii_islower(ch) || absl::ascii_isdigit(ch) ||
               ch == '-' || ch == '.';
      })) {
    return Bad("node.nodeName",
               absl::StrCat(QuoteYaml(n.node_name),
                            " is not a Kubernetes node name (lower-case "
                            "letters, digits, '-', '.')"));
  }
  const std::string& url = n.extender_url;
  const size_t scheme_end = url.find("://");
  const std::string_view scheme = std::string_view(url).substr(
      0, scheme_end == std::string::npos ? 0 : scheme_end);
  if ((scheme != "http" && scheme != "https") || url.size() <= scheme_end + 3) {
    return Bad(
        "node.extenderURL",
        absl::StrCat(QuoteYaml(url), " is not an http:// or https:// URL"));
  }
  RETURN_IF_ERROR(CheckKeyPair("node.tls", n.tls.cert_file, n.tls.key_file));
  if (n.sysfs_root.empty()) return Bad("node.sysfsRoot", "must not be empty");
  if (n.dev_root.empty()) return Bad("node.devRoot", "must not be empty");
  if (n.state_dir.empty()) return Bad("node.stateDir", "must not be empty");
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{
                                         "node.kubeletDir", &n.kubelet_dir},
                                     {"node.cdiDir", &n.cdi_dir},
                                     {"node.draMetadataDir", &n.dra_metadata_dir}}) {
    if (value->empty() || (*value)[0] != '/') {
      return Bad(field, absl::StrCat(QuoteYaml(*value), " is not an absolute path"));
    }
  }
  if (!n.pod_resources_socket.empty() && n.pod_resources_socket[0] != '/') {
    return Bad("node.podResourcesSocket",
               absl::StrCat(QuoteYaml(n.pod_resources_socket),
                            " is not an absolute path (like "
                            "/var/lib/kubelet/pod-resources/kubelet.sock; \"\" "
                            "turns the recovery from kubelet off)"));
  }
  RETURN_IF_ERROR(
      CheckPositive("node.heartbeatInterval", n.heartbeat_interval));
  if (n.heartbeat_interval >= c.extender.allocator.node_stale_after) {
    return Bad("node.heartbeatInterval",
               absl::StrCat(absl::FormatDuration(n.heartbeat_interval),
                            " must be shorter than extender.nodeStaleAfter (",
                            absl::FormatDuration(c.extender.allocator.node_stale_after),
                            ") or the node looks stale between heartbeats"));
  }
  if (!n.metrics_listen.empty() && !IsHostPort(n.metrics_listen)) {
    return Bad("node.metricsListen",
               absl::StrCat(QuoteYaml(n.metrics_listen),
                            " is not host:port (like 0.0.0.0:9102)"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsLoopbackListen(std::string_view listen) {
  std::string host(listen.substr(0, listen.rfind(':')));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}


std::vector<DeviceClass> PdcConfig::DefaultDeviceClasses() {
  DeviceClass nvme;
  nvme.resource_name = "devices.kubevirt.io/nvme";
  nvme.selectors = {PciSelector{0x1b36, 0x0010, std::nullopt},
                    PciSelector{0x8086, 0x5845, std::nullopt}};
  return {nvme};
}

absl::Status Validate(const PdcConfig& config, Component component) {
  if (absl::Status s = ValidateCommon(config); !s.ok()) return s;
  switch (component) {
    case Component::kExtender:
      return ValidateExtender(config.extender);
    case Component::kNode:
      return ValidateNode(config);
  }
  return absl::OkStatus();
}

AllocatorOptions ToAllocatorOptions(const PdcConfig& config) {
  AllocatorOptions o = config.extender.allocator;
  o.device_classes = config.device_classes;
  return o;
}

std::string_view ToString(StoreKind v) {
  switch (v) {
    case StoreKind::kFile:
      return "file";
    case StoreKind::kMemory:
      return "memory";
    case StoreKind::kKubernetes:
      return "kubernetes";
  }
  return "?";
}
std::string_view ToString(LogFormat v) {
  return v == LogFormat::kText ? "text" : "json";
}
std::string_view ToString(KubernetesMode v) {
  switch (v) {
    case KubernetesMode::kNone:
      return "none";
    case KubernetesMode::kInCluster:
      return "in-cluster";
    case KubernetesMode::kKubeconfig:
      return "kubeconfig";
  }
  return "none";
}
std::string_view ScoringPolicyName(ScoringPolicy v) {
  return v == ScoringPolicy::kBinPack ? "binpack" : "spread";
}

absl::StatusOr<PciSelector> ParsePciSelector(std::string_view text) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(QuoteYaml(text),
                     " is not vendor:device in hex (like "
                     "1b36:0010)"));
  };
  if (text.size() != 9 || text[4] != ':') return bad();
  const std::string_view vendor = text.substr(0, 4);
  const std::string_view device = text.substr(5, 4);
  uint32_t v = 0;
  uint32_t d = 0;
  const auto hex = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), absl::ascii_isxdigit);
  };
  if (!hex(vendor) || !hex(device) || !absl::SimpleHexAtoi(Sv(vendor), &v) ||
      !absl::SimpleHexAtoi(Sv(device), &d)) {
    return bad();
  }
  return PciSelector{static_cast<uint16_t>(v), static_cast<uint16_t>(d),
                     std::nullopt};
}

std::string FormatPciSelector(const PciSelector& s) {
  return absl::StrFormat("%04x:%04x", s.vendor_id, s.device_id);
}

}  // namespace pdc
