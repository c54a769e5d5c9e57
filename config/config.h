// Configuration of pdc-extender and pdc-node: one struct with documented
// defaults, loaded from one YAML file plus command-line flags that override
// it, then validated. Every error names the field (and, for the file, the
// file, line and column):
//   pdc.yaml:7:9: deviceClasses[1].selectors[0]: "1b36:00g0" is not
//   vendor:device in hex flag --extender.workerThreads: "many" is not an
//   integer
//
// Sources, later ones win: built-in defaults (below, also shown field by field
// in config/pdc.example.yaml) < the YAML file < flags < the environment for
// node.nodeName only when it is still empty ($NODE_NAME, set by the DaemonSet
// through the downward API).
//
// Flags (see ParseConfigFlags): `--config=FILE`, `--help`, and one flag per
// field named by its dotted YAML path: `--extender.listen=127.0.0.1:9999`,
// `--logLevel=debug`, `--deviceClasses=[{resourceName: x, selectors:
// [1b36:0010]}]` (a list field takes a YAML flow value). `--name value` works
// too. Unknown flags and unknown YAML keys are errors, so a typo is never
// silently ignored.
//
// YAML layout: top-level `deviceClasses`, `logFormat`, `logLevel` (shared by
// both programs), then sections `extender:` and `node:`.
//
// Thread-safety: pure functions over value types; call from any thread.
#ifndef PDC_CONFIG_CONFIG_H_
#define PDC_CONFIG_CONFIG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "model/allocator_options.h"
#include "model/types.h"

namespace pdc {

enum class StoreKind : uint8_t { kFile, kMemory, kKubernetes };
enum class LogFormat : uint8_t { kText, kJson };
enum class KubernetesMode : uint8_t { kNone, kInCluster, kKubeconfig };

// TLS of the extender's listener. All empty: plain HTTP.
struct ServerTlsConfig {
  std::string cert_file;       // certFile: PEM certificate chain.
  std::string key_file;        // keyFile: PEM private key.
  // clientCAFile: when set, the scheduler verbs (filter, prioritize, bind,
  // preempt) need a client certificate signed by this CA (401 otherwise);
  // the REST API, /healthz, /readyz and /metrics accept clients without one
  // (node drivers and people use tokenFile; probes and Prometheus present
  // none), but a certificate that is presented must verify.
  std::string client_ca_file;
};

// TLS of a client talking to the extender over https://.
struct ClientTlsConfig {
  std::string
      ca_file;  // caFile: CA bundle to verify the extender; "" = system.
  std::string cert_file;  // certFile: client certificate (mTLS), optional.
  std::string key_file;   // keyFile: its key; set together with certFile.
};

struct KubernetesConfig {
  // mode: `none` (no Kubernetes API: no pod annotation, no binding object;
  // for tests and the simulator), `in-cluster` (service account), or
  // `kubeconfig` (the file below). Default none.
  KubernetesMode mode = KubernetesMode::kNone;
  std::string kubeconfig;  // kubeconfig: path; required for mode kubeconfig.
  // namespace: pdc-extender's own namespace, where `store: kubernetes` keeps
  // each node's device holds (ConfigMaps pdc-holds-*). "" = the service
  // account's namespace in-cluster, else pdc-system.
  std::string ns;
  // schedulerName: the kube-scheduler profile pdc-extender serves
  // (deploy/scheduler); its pods (spec.schedulerName) are watched, so that
  // a VM pod that ended or was deleted gives up its hand-off and lets its
  // claims' deletion go on at once. Default pdc-scheduler.
  std::string scheduler_name = "pdc-scheduler";
};

// extender.leaderElection: several replicas, one leader (store: kubernetes
// only), through a coordination.k8s.io/v1 Lease in kubernetes.namespace, as
// client-go's leader election does it (docs/operations.md "High
// availability"). Every replica answers /healthz and /readyz (so rolling
// updates and disruption budgets count them); only the leader answers
// /readyz/leader and everything else, and it alone is in its Service's
// endpoints (`service`).
struct LeaderElectionConfig {
  // enabled: false = this replica is the only one (the default).
  bool enabled = false;
  // leaseName: the Lease object's name.
  std::string lease_name = "pdc-extender";
  // identity: this replica's name in the Lease. "" = $POD_NAME, else the
  // host name, with a random suffix either way (a restarted replica never
  // takes itself for the previous holder).
  std::string identity;
  // leaseDuration: how long followers wait, from the last renewal they saw,
  // before taking the lease (kube-scheduler's default 15s).
  absl::Duration lease_duration = absl::Seconds(15);
  // renewDeadline: the leader stops serving when it could not renew for
  // this long (10s); below leaseDuration, so it stops before a follower
  // may take over.
  absl::Duration renew_deadline = absl::Seconds(10);
  // retryPeriod: time between two tries to take or renew the lease (2s).
  absl::Duration retry_period = absl::Seconds(2);
  // service: the Service (without a selector) whose EndpointSlice
  // "<service>-leader" the leader writes with its own pod ($POD_NAME,
  // $POD_IP) and ports, named `http` (listen) and `webhook`; "" = none.
  std::string service;
};

// extender.dra.keeper: the DRA claim keeper (docs/design.md "The DRA claim
// keeper"): adds a KubeVirt VM to the status.reservedFor of the
// resource.k8s.io ResourceClaims its virt-launcher pods use, so that the
// claim's allocation outlives the pods; leader only; needs a Kubernetes API.
struct DraKeeperConfig {
  // enabled: false (the default) = no keeper, no ResourceClaim watch.
  bool enabled = false;
  // resyncPeriod: every claim the keeper keeps is looked at again this
  // often besides on changes (a missed event costs at most this long).
  absl::Duration resync_period = absl::Minutes(5);
};

// extender.nodeAuth: who may write a node's state through the REST API
// (docs/operations.md "Node identity"). Without it, pdc-node presents the
// shared tokenFile and may write any node. With it, a node driver proves its
// node and may touch only that node: its inventory, its allocations
// long-poll and its hand-offs.
struct NodeAuthConfig {
  // serviceAccount: "<namespace>/<name>" of pdc-node's ServiceAccount. Set:
  // a bearer token that is not the admin tokenFile is checked with a
  // TokenReview (needs extender.kubernetes.mode in-cluster or kubeconfig);
  // it must belong to this service account (user
  // system:serviceaccount:<namespace>:<name>) and carry the node name
  // kube-apiserver (1.30+) adds to pod-bound tokens
  // (authentication.kubernetes.io/node-name). "" = no TokenReview.
  std::string service_account;
  // audience: the audience the node's token must be issued for (the
  // DaemonSet's projected serviceAccountToken volume). Required with
  // serviceAccount.
  std::string audience = "pdc-extender";
  // cacheTTL: how long an authenticated TokenReview answer is reused
  // (1s..1h; 2m, kube-apiserver's --authentication-token-webhook-cache-ttl
  // default). A token that stops being valid (its pod deleted) still works
  // this long.
  absl::Duration cache_ttl = absl::Minutes(2);
  // cacheSize: tokens remembered at most (16..1000000); the oldest answer
  // is dropped first. Each node driver has one token at a time (two for a
  // while after kubelet rotates it).
  int cache_size = 4096;
  // reviewTimeout: the longest a TokenReview may take (100ms..30s); a
  // request whose review is not answered by then is refused (503).
  absl::Duration review_timeout = absl::Seconds(5);
  // tokenDir: per-node tokens for clusters whose tokens carry no node name
  // (before Kubernetes 1.30): a directory with one file per node, named
  // after the node and holding its token (a Secret mounted as a volume,
  // one key per node). Read again when the directory changes. Files whose
  // name starts with '.' are skipped. "" = none.
  std::string token_dir;
};

// extender.webhook: the mutating admission webhook that pins a restarting VM's
// virt-launcher pod to the node of its bound claims (docs/operations.md).
struct WebhookConfig {
  // listen: host:port of its own HTTPS listener, with its own threads (a
  // busy extender never delays admission). "" = no webhook.
  std::string listen;
  // certFile, keyFile: PEM; required with listen (kube-apiserver calls
  // webhooks over HTTPS only). Read again when they change on disk.
  std::string cert_file;
  std::string key_file;
};

// Section `extender:`.
struct ExtenderConfig {
  // listen: host:port of the HTTP(S) listener (scheduler extender verbs,
  // REST API, /metrics, /healthz). Port 0 picks a free port (tests).
  // Loopback by default; beyond loopback (any address but 127.0.0.0/8, ::1
  // and localhost, "0.0.0.0" and "" included) every interface must be
  // authenticated: tokenFile for the REST API and tls.clientCAFile for the
  // scheduler verbs, unless allowUnauthenticated says otherwise.
  std::string listen = "127.0.0.1:8888";
  // schedulerPathPrefix: urlPrefix of the KubeSchedulerConfiguration
  // extender; verbs are served at <prefix>/filter, /prioritize, /bind,
  // /preempt.
  std::string scheduler_path_prefix = "/scheduler";
  // workerThreads: threads running the HTTP server (1..1024).
  int worker_threads = 4;
  // bindThreads: threads running bind sagas with a Kubernetes API (1..1024).
  // A bind waits for the apiserver on one of these, never on an HTTP
  // worker, so slow apiserver calls cannot starve filter, heartbeats or
  // /healthz. kube-scheduler binds at most `parallelism` (16) pods at once.
  int bind_threads = 16;
  // bindDeadline: the whole bind with a Kubernetes API, apiserver calls
  // included (1s..5m). Keep it below the httpTimeout of the extender in
  // the KubeSchedulerConfiguration (deploy/: 10s), so kube-scheduler hears
  // how each bind ended.
  absl::Duration bind_deadline = absl::Seconds(8);
  // maxBodyBytes: largest accepted request body (4096..256Mi; 16777216,
  // 16Mi). kube-scheduler's largest call with nodeCacheCapable: true, at
  // 15,000 nodes, is a preempt call: a pod of at most 3 MiB of JSON (the
  // apiserver's request limit) plus, for each candidate node (at most 10 %
  // of the nodes, so 1,500), its name and up to 110 victims' UIDs: about
  // 11.5 MiB. Filter and prioritize carry the pod and 15,000 names (under
  // 7 MiB).
  uint64_t max_body_bytes = uint64_t{16} << 20;
  // maxConnections: open connections at most (every pdc-node keeps two);
  // beyond it new clients wait in the listen backlog.
  int max_connections = 32768;
  // readTimeout: time allowed to read one request (headers and body).
  absl::Duration read_timeout = absl::Seconds(30);
  // idleTimeout: a kept-alive connection with no request for this long is
  // closed (a long-poll in progress is not idle).
  absl::Duration idle_timeout = absl::Seconds(120);
  ServerTlsConfig tls;  // tls: certFile, keyFile, clientCAFile.
  WebhookConfig webhook;  // webhook: listen, certFile, keyFile.
  // tokenFile: file holding a bearer token required on every REST call under
  // /v1/, reads included (not /healthz, /readyz, /metrics). "" = no token
  // required.
  std::string token_file;
  NodeAuthConfig node_auth;  // nodeAuth: per-node identity of pdc-node.
  // allowUnauthenticated: start even though the listener is reachable beyond
  // loopback and the REST API (no tokenFile) or the scheduler verbs (no
  // tls.clientCAFile) accept anyone who can reach it. What is configured is
  // still enforced. For test clusters, or a network that only lets
  // kube-scheduler reach the port.
  bool allow_unauthenticated = false;
  // dataDir: where the file store keeps its log and snapshots.
  std::string data_dir = "/var/lib/pdc";
  // store: `file` (durable write-ahead log + snapshots in dataDir),
  // `kubernetes` (the PersistentDeviceClaim objects and their status are
  // the record, kept by kube-apiserver; needs kubernetes.mode in-cluster or
  // kubeconfig, and no volume), or `memory` (lost on restart; tests and
  // demos only).
  StoreKind store = StoreKind::kFile;
  // The allocator's knobs, declared once in model/allocator_options.h with
  // their defaults (device classes come from the top-level deviceClasses):
  //   nodeStaleAfter          node_stale_after
  //   scoring                 scoring (`binpack` or `spread`)
  //   templateReclaimPolicy   template_reclaim_policy (`Retain` or `Delete`)
  //   checkpointEveryRecords  checkpoint_every_records
  //   checkpointLogBytes      checkpoint_every_bytes
  //   serializeHandoffs       serialize_handoffs
  AllocatorOptions allocator;
  KubernetesConfig kubernetes;  // kubernetes: mode, kubeconfig.
  LeaderElectionConfig leader_election;  // leaderElection: replicas.
  DraKeeperConfig dra_keeper;            // dra.keeper: the DRA claim keeper.
};

// Section `node:` (pdc-node, the DaemonSet).
struct NodeConfig {
  // nodeName: this node's Kubernetes name. "" = take $NODE_NAME.
  std::string node_name;
  // extenderURL: base URL of pdc-extender (http:// or https://).
  std::string extender_url = "http://pdc-extender.kube-system.svc:8888";
  ClientTlsConfig tls;  // tls: caFile, certFile, keyFile (for https).
  // tokenFile: the bearer token sent with every call to pdc-extender: the
  // admin token (extender.tokenFile), or, with extender.nodeAuth, this
  // node's own (the DaemonSet's projected service-account token, or its
  // file of extender.nodeAuth.tokenDir). Read again when the file changes
  // (kubelet rotates projected tokens). "" = none.
  std::string token_file;
  std::string sysfs_root = "/sys";  // sysfsRoot: a fake tree in tests.
  std::string dev_root = "/dev";    // devRoot: /dev/vfio/<group>, block devices.
  // procRoot: the host's processes and mounts (pdc-node needs hostPID).
  std::string proc_root = "/proc";
  // stateDir: remembers each device's original driver across restarts.
  std::string state_dir = "/var/lib/pdc-node";
  // podResourcesSocket: kubelet's pod resources API, read at start to
  // confirm hand-offs a restart left unconfirmed; "" = do not ask kubelet
  // (the hand-off journal in stateDir alone).
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  // heartbeatInterval: inventory is re-sent at least this often; must be
  // well below extender.nodeStaleAfter.
  absl::Duration heartbeat_interval = absl::Seconds(10);
  // metricsListen: host:port for the driver's /metrics and /healthz;
  // "" = no listener.
  std::string metrics_listen = "0.0.0.0:9102";
  // allowSharedNvme: offer NVMe controllers another host or controller may
  // share (subsystem with more ports or controllers, CMIC; namespaces
  // attachable to more controllers, NMIC). Refused when false.
  bool allow_shared_nvme = false;
  // allowSriov: offer SR-IOV physical functions with virtual functions
  // enabled, and virtual functions of storage controllers. Refused when false.
  bool allow_sriov = false;
  // eraseOnVfio: erase a deleted claim's NVMe drive while it stays on
  // vfio-pci, from userspace through its VFIO group, so the host's block
  // layer never sees the guest's data; false (or VFIO not possible for the
  // drive) erases it through the nvme driver after handing it back.
  bool erase_on_vfio = true;
  // firmwareChange: what pdc-node does when an NVMe controller whose claim
  // was deleted (reclaimPolicy Delete) reports other firmware (revision,
  // slots, boot partitions) than when it was bound: "hold" keeps it
  // unerased on vfio-pci for an administrator (reason firmware_changed);
  // "report" erases it and logs and counts the change.
  std::string firmware_change = "hold";
  // For device classes in `dra` mode (deviceClasses[].mode):
  // kubeletDir: kubelet's root; its plugins_registry/ is where a DRA driver
  // registers, plugins/<driver>/dra.sock where it serves.
  std::string kubelet_dir = "/var/lib/kubelet";
  // cdiDir: where the container runtime reads CDI specs (one per claim).
  std::string cdi_dir = "/var/run/cdi";
  // draMetadataDir: the host side of the device-metadata files (KEP-5304)
  // bind-mounted into the VM's pod.
  std::string dra_metadata_dir = "/var/run/pdc/dra-metadata";
  // kubeconfig: the apiserver pdc-node reads ResourceClaims from; "" = the
  // pod's service account (in-cluster).
  std::string kubeconfig;
};

// How pdc-node hands a device class to kubelet (deviceClasses[].mode).
enum class HandOffMode : uint8_t { kDevicePlugin, kDra };

// A device class in `dra` mode: its DRA driver name
// (deviceClasses[].draDriverName, default nvme.pdc.kubevirt.io) and what
// happens to a device once no ResourceClaim holds it any more
// (deviceClasses[].draReclaimPolicy: Delete, the default, erases it before
// it is published again; Retain keeps it withdrawn, Released, until an
// administrator releases it).
struct DraClassConfig {
  std::string driver_name = "nvme.pdc.kubevirt.io";
  ReclaimPolicy reclaim_policy = ReclaimPolicy::kDelete;

  bool operator==(const DraClassConfig&) const = default;
};

struct PdcConfig {
  // deviceClasses: managed resource names and the PCI devices behind them,
  // like KubeVirt's permittedHostDevices.pciHostDevices. In YAML:
  //   - resourceName: devices.kubevirt.io/nvme
  //     selectors: ["1b36:0010", "8086:5845"]   # vendor:device, hex
  //     classCode: "010802"                      # optional, 6 hex digits
  // Default: devices.kubevirt.io/nvme -> 1b36:0010 (QEMU NVMe), 8086:5845.
  std::vector<DeviceClass> device_classes = DefaultDeviceClasses();
  // The classes whose deviceClasses[] entry says `mode: dra`, by resource
  // name (pdc-node serves them as a DRA driver, not as a device plugin):
  //   - resourceName: devices.kubevirt.io/nvme
  //     mode: dra                            # devicePlugin (default) | dra
  //     draDriverName: nvme.pdc.kubevirt.io  # default
  std::map<std::string, DraClassConfig> dra_classes;
  LogFormat log_format = LogFormat::kText;  // logFormat: `text` or `json`.
  // logLevel: trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
  ExtenderConfig extender;
  NodeConfig node;

  static std::vector<DeviceClass> DefaultDeviceClasses();
};

// Which program is loading; selects the program-specific validation.
enum class Component : uint8_t { kExtender, kNode };

// The result of parsing the command line.
struct ConfigFlags {
  std::string config_file;  // --config; "" = none.
  bool help = false;        // --help / -h.
  // --<dotted.path>=value, in command-line order.
  std::vector<std::pair<std::string, std::string>> overrides;
};

// Parses args (without argv[0]). Unknown fields are InvalidArgument naming
// the flag.
absl::StatusOr<ConfigFlags> ParseConfigFlags(
    absl::Span<const std::string> args);

// Defaults < file < flags < environment, then Validate(). `getenv` is
// injectable for tests; nullptr means ::getenv.
absl::StatusOr<PdcConfig> LoadConfig(
    const ConfigFlags& flags, Component component,
    const std::function<std::optional<std::string>(std::string_view)>& getenv =
        nullptr);

// Convenience for main(): ParseConfigFlags + LoadConfig. On --help, returns
// a config and sets *help (when non-null) so main prints ConfigHelp().
absl::StatusOr<PdcConfig> LoadConfigFromArgs(int argc, char** argv,
                                             Component component,
                                             bool* help = nullptr);

// Applies YAML text (a whole file) on top of `config`. `origin` (a file
// name) prefixes error locations: "origin:line:col: field: problem".
absl::Status ApplyYaml(std::string_view yaml, std::string_view origin,
                       PdcConfig* config);
// Reads `path` and applies it (NotFound / PermissionDenied naming the file).
absl::Status ApplyYamlFile(const std::string& path, PdcConfig* config);
// Applies one --<dotted.path>=value override.
absl::Status ApplyOverride(std::string_view path, std::string_view value,
                           PdcConfig* config);

// Checks ranges and combinations; the error names the field. Node-only
// fields are checked for kNode, extender-only ones for kExtender.
absl::Status Validate(const PdcConfig& config, Component component);

// The effective configuration as YAML (every field), e.g. for a
// --print-config log line. ApplyYaml(FormatConfigYaml(c)) reproduces c.
std::string FormatConfigYaml(const PdcConfig& config);

// One line per field: "  --extender.listen (default "0.0.0.0:8888")".
std::string ConfigHelp();

// True when the host of `listen` (host:port) only accepts connections from
// this machine: 127.0.0.0/8, ::1 (also IPv4-mapped 127.x), or "localhost". An
// empty host, 0.0.0.0, [::] and every other name or address are reachable
// from elsewhere (a name other than localhost may resolve to anything).
bool IsLoopbackListen(std::string_view listen);

// REQUIRES: Validate(config) is OK.
AllocatorOptions ToAllocatorOptions(const PdcConfig& config);

std::string_view ToString(StoreKind v);
std::string_view ToString(LogFormat v);
std::string_view ToString(KubernetesMode v);
// Not ToString(): the allocator may name its own one day.
std::string_view ScoringPolicyName(ScoringPolicy v);

// "1b36:0010" -> selector; InvalidArgument "... is not vendor:device in hex".
absl::StatusOr<PciSelector> ParsePciSelector(std::string_view text);
// "1b36:0010" (the class code is a separate YAML field).
std::string FormatPciSelector(const PciSelector& s);

}  // namespace pdc

#endif  // PDC_CONFIG_CONFIG_H_
