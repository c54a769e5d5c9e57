#include "extender/extender_app.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "allocator/file_store.h"
#include "allocator/memory_store.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "extender/claim_events.h"
#include "kube/kube_http_client.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {
namespace {

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  if (path.empty()) return std::string();
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("extender.tokenFile: ", text.status().message()));
  }
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("extender.tokenFile: ", path, " is empty"));
  }
  return token;
}

// Where the device holds live: the configured namespace, else the service
// account's (in a pod), else pdc-system (deploy/namespace.yaml).
std::string OwnNamespace(const std::string& configured) {
  if (!configured.empty()) return configured;
  absl::StatusOr<std::string> sa =
      ReadFileToString("/var/run/secrets/kubernetes.io/serviceaccount/namespace");
  if (sa.ok()) {
    std::string ns(absl::StripAsciiWhitespace(*sa));
    if (!ns.empty()) return ns;
  }
  return "pdc-system";
}

// Who publishes the Events (source.host, reportingInstance): the pod's name
// (the Deployment sets $POD_NAME), else the host's.
std::string InstanceName() {
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') return pod;
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') return host;
  return "pdc-extender";
}

absl::StatusOr<kube::KubeClientConfig> ClientConfig(const KubernetesConfig& k) {
  return k.mode == KubernetesMode::kInCluster ? kube::InClusterConfig() : kube::KubeconfigFile(k.kubeconfig);
}

// The main listener's options (extender.listen and its limits and TLS).
absl::StatusOr<HttpServerOptions> ListenerOptions(const ExtenderConfig& ec) {
  HttpServerOptions so;
  if (absl::Status s = net::SplitListenAddress(ec.listen, "extender.listen", &so); !s.ok()) {
    return s;
  }
  so.threads = ec.worker_threads;
  so.max_body_bytes = ec.max_body_bytes;
  so.max_connections = static_cast<size_t>(ec.max_connections);
  so.read_timeout = ec.read_timeout;
  so.idle_timeout = ec.idle_timeout;
  so.cert_file = ec.tls.cert_file;
  so.key_file = ec.tls.key_file;
  so.client_ca_file = ec.tls.client_ca_file;
  return so;
}

}  // namespace

ExtenderApp::ExtenderApp(const PdcConfig& config, Options options)
    : config_(config), options_(std::move(options)) {}

ExtenderApp::~ExtenderApp() { Stop(); }

uint16_t ExtenderApp::port() const {
  // With leader election, server_ is made later on the promoter thread, on
  // the standby server's port.
  if (standby_port_ != 0) return standby_port_;
  return server_ == nullptr ? 0 : server_->port();
}
uint16_t ExtenderApp::webhook_port() const {
  return webhook_server_ == nullptr ? 0 : webhook_server_->port();
}

absl::StatusOr<std::unique_ptr<ExtenderApp>> ExtenderApp::Start(const PdcConfig& config,
                                                                Options options) {
  std::unique_ptr<ExtenderApp> app(new ExtenderApp(config, std::move(options)));
  const bool replicas = config.extender.leader_election.enabled;
  if (absl::Status s = replicas ? app->StartStandby() : app->Init(); !s.ok()) {
    app->Stop();
    return s;
  }
  return app;
}

absl::Status ExtenderApp::StartStandby() {
  const ExtenderConfig& ec = config_.extender;
  const LeaderElectionConfig& le = ec.leader_election;
  absl::StatusOr<kube::KubeClientConfig> kc = ClientConfig(ec.kubernetes);
  if (!kc.ok()) return kc.status();
  absl::StatusOr<std::unique_ptr<kube::KubeApi>> api = kube::KubeApi::Connect(*kc);
  if (!api.ok()) return api.status();
  lease_api_ = *std::move(api);
  kube::LeaderElectorOptions eo;
  eo.ns = OwnNamespace(ec.kubernetes.ns);
  eo.name = le.lease_name;
  eo.identity = kube::LeaderIdentity(le.identity.empty() ? InstanceName() : le.identity);
  eo.lease_duration = le.lease_duration;
  eo.renew_deadline = le.renew_deadline;
  eo.retry_period = le.retry_period;
  eo.clock = options_.clock;
  eo.on_started_leading = [this] { promote_.Notify(); };
  eo.on_lost = [this] { MarkLost(); };
  elector_ = std::make_unique<kube::LeaderElector>(lease_api_.get(), std::move(eo));
  if (!le.service.empty()) {
    const char* ip = std::getenv("POD_IP");
    if (ip == nullptr || *ip == '\0') {
      return absl::FailedPreconditionError(
          "extender.leaderElection.service: $POD_IP is not set (the Deployment sets it from "
          "status.podIP; the leader names its pod's IP in the Service's endpoints)");
    }
    endpoint_slice_.ns = OwnNamespace(ec.kubernetes.ns);
    endpoint_slice_.service = le.service;
    endpoint_slice_.pod = InstanceName();
    endpoint_slice_.ip = ip;
  }

  registry_.AddCallbackFamily(
      "pdc_leader",
      "1 while this replica serves as the leader (always, without leader election).",
      MetricType::kGauge, {}, [e = elector_.get()] {
        return std::vector<LabeledValue>{{{}, e->Leading() ? 1.0 : 0.0}};
      });
  registry_.AddCallbackFamily(
      "pdc_leader_transitions",
      "The leader Lease's leaseTransitions as this replica last read it: how often the "
      "leadership changed hands.",
      MetricType::kGauge, {}, [e = elector_.get()] {
        return std::vector<LabeledValue>{{{}, static_cast<double>(e->transitions())}};
      });
  registry_.AddCallbackFamily(
      "pdc_leader_promotion_seconds",
      "Time from taking the lease to being ready as the leader (recovery from the API and "
      "watch caches synced); 0 until this replica leads.",
      MetricType::kGauge, {}, [this] {
        return std::vector<LabeledValue>{{{}, promotion_seconds_.load()}};
      });

  absl::StatusOr<HttpServerOptions> so = ListenerOptions(ec);
  if (!so.ok()) return so.status();
  so->threads = std::min(so->threads, 2);
  absl::StatusOr<std::unique_ptr<HttpServer>> standby = HttpServer::Start(
      *so, [this, e = elector_.get()](net::HttpRequest r) {
        std::string_view path = r.target;
        path = path.substr(0, path.find('?'));
        return NotLeader(path, e->Leader(), !lost_.HasBeenNotified(), &registry_);
      });
  if (!standby.ok()) return standby.status();
  standby_server_ = *std::move(standby);
  standby_port_ = standby_server_->port();
  address_ = so->address;
  spdlog::info("pdc-extender {} on standby on {}:{} as {}: serving once it holds lease {}/{}",
               options_.version, address_, standby_port_, elector_->identity(),
               OwnNamespace(ec.kubernetes.ns), le.lease_name);
  promoter_ = std::thread([this] { Promote(); });
  elector_->Start();
  return absl::OkStatus();
}

void ExtenderApp::StartKeeper(std::vector<Watch>* watches) {
  const DraKeeperConfig& kc = config_.extender.dra_keeper;
  // A virt-launcher pod that ended or was deleted: the claims reserved for
  // it are looked at now (set before the watch starts).
  launcher_pods_ = std::make_unique<PodDirectory>(
      [this](const PodRef& pod) {
        if (keeper_ != nullptr) keeper_->ConsumerGone(pod.ns, pod.uid);
      },
      PodEnd::kDone);
  // The keeper acts once the VM, VMI and pod watches and its own hold a
  // whole list (a VM not seen yet would look deleted): KeepWhenSynced.
  dra_consumers_ = std::make_unique<DraConsumers>(
      vms_.get(), launcher_pods_.get(), kube_.get(), [this] { return KeeperCachesSynced(); });
  dra::ClaimKeeper::Options ko;
  ko.clock = options_.clock;
  ko.events = events_.get();
  ko.registry = &registry_;
  ko.resync = kc.resync_period;
  keeper_ = std::make_unique<dra::ClaimKeeper>(kube_api_.get(), dra_consumers_.get(), ko);
  watches->push_back({kPodsPath, std::string(kVirtLauncherPods), launcher_pods_.get()});
  watches->push_back({dra::kResourceClaimsPath, "", keeper_->claim_sink()});
  spdlog::info("DRA claim keeper: keeping KubeVirt VMs in the reservedFor of their "
               "ResourceClaims (resync every {})",
               absl::FormatDuration(kc.resync_period));
}

bool ExtenderApp::KeeperCachesSynced() const {
  for (const auto* list : {&reflectors_, &keeper_reflectors_}) {
    for (const auto& r : *list) {
      if (!r->HasSynced()) return false;
    }
  }
  return true;
}

void ExtenderApp::KeepWhenSynced() {
  // Readiness does not wait for the keeper's watches: a cluster without
  // resource.k8s.io/v1, or without the RBAC for it, stops only the keeper
  // (each failed list is logged by its reflector with the apiserver's
  // answer; pdc_dra_keeper_synced stays 0).
  for (int waits = 1; !KeeperCachesSynced(); ++waits) {
    if (stopping_.WaitForNotificationWithTimeout(absl::Seconds(1))) return;
    if (waits == 30) {
      spdlog::error("DRA claim keeper: not started, its watches (ResourceClaims, virt-launcher "
                    "pods) have not listed after 30s; see their errors. pdc-extender serves "
                    "meanwhile");
    }
  }
  keeper_->Start();
}

void ExtenderApp::MarkLost() {
  if (!marked_lost_.exchange(true)) lost_.Notify();
}

void ExtenderApp::Promote() {
  while (!promote_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    if (stopping_.HasBeenNotified()) return;
  }
  if (stopping_.HasBeenNotified()) return;
  // The standby server gives its port to the leader's.
  standby_server_->Shutdown();
  standby_server_.reset();
  if (absl::Status s = Init(); !s.ok()) {
    spdlog::error("leader election: could not start serving as the leader: {}", s.ToString());
    MarkLost();
    return;
  }
  if (endpoint_slice_.service.empty()) return;
  // Once serving (caches synced), the Service's traffic comes here.
  endpoint_slice_.ports = {{"http", server_->port()}};
  if (webhook_server_ != nullptr) endpoint_slice_.ports.push_back({"webhook", webhook_server_->port()});
  while (!router_ready_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    if (stopping_.HasBeenNotified()) return;
  }
  for (absl::Duration backoff = absl::Milliseconds(200); elector_->Leading();
       backoff = std::min(backoff * 2, absl::Seconds(5))) {
    absl::Status s = kube::WriteLeaderEndpoint(lease_api_.get(), endpoint_slice_, false,
                                         config_.extender.leader_election.retry_period, options_.clock);
    if (s.ok()) {
      endpoint_published_ = true;
      spdlog::info("leader election: EndpointSlice {}/{}-leader names this pod ({})",
                   endpoint_slice_.ns, endpoint_slice_.service, endpoint_slice_.ip);
      return;
    }
    spdlog::warn("leader election: {}", s.ToString());
    if (!options_.clock->WaitFor(backoff, &stopping_)) return;
  }
}

absl::Status ExtenderApp::Init() {
  absl::StatusOr<std::string> token = ReadToken(config_.extender.token_file);
  if (!token.ok()) return token.status();
  std::optional<kube::KubeClientConfig> kc;
  if (config_.extender.kubernetes.mode != KubernetesMode::kNone) {
    absl::StatusOr<kube::KubeClientConfig> c = ConnectKubernetes();
    if (!c.ok()) return c.status();
    kc = *std::move(c);
  }
  RETURN_IF_ERROR(OpenStore());
  RETURN_IF_ERROR(OpenAllocator());
  MakeMetricsAndEvents();
  if (kc.has_value()) {
    RETURN_IF_ERROR(StartWatches(*kc));
  } else {
    spdlog::info("no Kubernetes API (kubernetes.mode: none): binds are "
                 "recorded only");
  }
  FillContext();
  StartNodeAuth();
  MakeRouter(*token);
  RETURN_IF_ERROR(StartServers());
  RegisterGauges();
  // With a Kubernetes API, pending hand-offs of pods that are gone are
  // cancelled; without one, DELETE /v1/nodes/{node}/handoffs/{podUid} does it.
  if (sweeper_ != nullptr) sweeper_->Start();
  checkpointer_ = std::make_unique<Checkpointer>(Checkpointer::Options{}, allocator_.get(),
                                               options_.clock);
  checkpointer_->Start();
  started_ = true;
  return absl::OkStatus();
}

// The Kubernetes API's configuration, the VM directory (its watches start
// once the allocator exists) and the API calls of the store.
absl::StatusOr<kube::KubeClientConfig> ExtenderApp::ConnectKubernetes() {
  absl::StatusOr<kube::KubeClientConfig> c = ClientConfig(config_.extender.kubernetes);
  if (!c.ok()) return c.status();
  // A VM deleted (also while pdc-extender was down, found once synced
  // below) no longer holds its claims. The watches start after the
  // allocator exists.
  vms_ = std::make_unique<VmDirectory>(
      [this](std::string ns, std::string uid) {
        (void)ReleaseGoneVm(*allocator_, ns, uid);  // Logs what it did.
        // Set before the watches start.
        if (keeper_ != nullptr) keeper_->ConsumerGone(ns, uid);
      },
      // A VM started or stopped naming DRA claims: the keeper looks again.
      [this](const std::string& ns, const std::set<std::string>& claims) {
        if (keeper_ == nullptr) return;
        for (const std::string& c : claims) keeper_->Look(ns, c);
      });
  absl::StatusOr<std::unique_ptr<kube::KubeApi>> api = kube::KubeApi::Connect(*c);
  if (!api.ok()) return api.status();
  kube_api_ = *std::move(api);
  return c;
}

// The store (memory, PersistentDeviceClaim objects, or files), timed.
absl::Status ExtenderApp::OpenStore() {
  const ExtenderConfig& ec = config_.extender;
  const Clock* clock = options_.clock;
  if (ec.store == StoreKind::kMemory) {
    spdlog::warn("store: memory - claims are lost when pdc-extender exits");
    base_store_ = std::make_unique<MemoryStore>();
  } else if (ec.store == StoreKind::kKubernetes) {
    KubeApiStore::Options so;
    so.holds_namespace = OwnNamespace(ec.kubernetes.ns);
    so.clock = clock;
    if (elector_ != nullptr) {
      so.may_write = [e = elector_.get()] { return e->Leading(); };
      // A leader that can record nothing gives its lease up at once
      // instead of holding it until a liveness probe restarts it.
      so.on_failed = [this](const absl::Status& why) {
        spdlog::critical("leader election: the store failed ({}); giving the lease up",
                         StdSv(why.message()));
        MarkLost();
      };
    }
    so.owner_of = [vms = vms_.get()](std::string_view ns, std::string_view vm,
                                     std::string_view uid) { return vms->OwnerOf(ns, vm, uid); };
    // events_ is made below, before any status is written.
    so.on_status = [this](const Claim& claim, std::string_view uid,
                          std::optional<ClaimPhase> before) {
      RecordStatusChange(events_.get(), claim, uid, before);
    };
    so.on_refused = [this](const ClaimKey& key, std::string_view uid,
                           const std::optional<Claim>& claim, std::string_view why) {
      RecordWriteRefused(events_.get(), key, uid, claim, why);
    };
    auto store = std::make_unique<KubeApiStore>(kube_api_.get(), std::move(so));
    api_store_ = store.get();
    base_store_ = std::move(store);
    spdlog::info("store: kubernetes - claims are PersistentDeviceClaim objects, device holds "
                 "are ConfigMaps in namespace {}",
                 OwnNamespace(ec.kubernetes.ns));
  } else {
    absl::StatusOr<std::unique_ptr<FileStore>> fs = FileStore::Open(ec.data_dir);
    if (!fs.ok()) return fs.status();
    base_store_ = *std::move(fs);
  }
  // Histogram registered before the allocator exists; the metrics object
  // that reads the allocator is built right after Open.
  Histogram* sync_seconds = registry_.AddHistogram(
      "pdc_store_sync_duration_seconds",
      "Time to make a store record durable (fsync, group commit).",
      ExponentialBuckets(0.0001, 2, 16));
  store_ = std::make_unique<TimedStore>(base_store_.get(), clock, sync_seconds);
  return absl::OkStatus();
}

// Recovery from the store, and the notifier following every commit.
absl::Status ExtenderApp::OpenAllocator() {
  RecoveryReport report;
  AllocatorOptions ao = ToAllocatorOptions(config_);
  if (api_store_ != nullptr) {
    // A template claim's name still taken by another object: the VM waits.
    ao.template_name_taken = [s = api_store_](const ClaimKey& key) {
      return s->WhyNameTaken(key);
    };
  }
  absl::StatusOr<std::unique_ptr<Allocator>> allocator =
      Allocator::Open(ao, store_.get(), options_.clock, &report);
  if (!allocator.ok()) return allocator.status();
  allocator_ = *std::move(allocator);
  spdlog::info("store recovered: snapshot revision {}, {} records replayed, "
               "revision {}{}",
               report.snapshot_revision, report.records_replayed,
               report.last_revision,
               report.torn_tail.empty()
                   ? std::string()
                   : absl::StrCat("; dropped a torn last record: ", report.torn_tail));
  for (const std::string& why : report.skipped_snapshots) {
    spdlog::error("store: recovered from the snapshot before an unreadable one (set aside as "
                  "*.unreadable; the disk under the data directory may be failing): {}",
                  why);
  }
  // Long-polls wake on every commit, whoever makes it. A device that moved
  // with its claim (a renumbered bus) is logged and, with claims as
  // objects, told on the claim (events_ is made below, before any thread
  // that commits starts).
  FollowCommits(allocator_.get(), &notifier_, [this](const std::vector<DeviceMove>& moves) {
    for (const DeviceMove& m : moves) {
      spdlog::info("node {}: {} with serial {} moved from {} to {}; {} {} keeps it", m.node,
                   m.released ? "Released device" : "device", m.serial, m.from.ToString(),
                   m.to.ToString(), m.released ? "the mark of deleted claim" : "claim",
                   m.claim.ToString());
      if (api_store_ == nullptr || m.released) continue;
      if (std::optional<KubeApiStore::ObjectState> o = api_store_->Object(m.claim)) {
        RecordDeviceMoved(events_.get(), m, o->uid);
      }
    }
  });
  return absl::OkStatus();
}

// Metrics, the Event recorder (with a Kubernetes API) and the pod cache.
void ExtenderApp::MakeMetricsAndEvents() {
  const Clock* clock = options_.clock;
  metrics_ = std::make_unique<ExtenderMetrics>(&registry_, allocator_.get(), clock,
                                               options_.version);
  if (kube_api_ != nullptr) {
    kube::EventRecorderOptions eo;
    eo.metrics = metrics_->events();
    if (elector_ != nullptr) eo.may_send = [e = elector_.get()] { return e->Leading(); };
    events_ = std::make_unique<kube::EventRecorder>(kube_api_.get(), "pdc-extender", InstanceName(),
                                              clock, eo);
  }
  pods_ = std::make_unique<PodCache>(clock, 10000, absl::Minutes(10));
}

// The Kubernetes client, the watches (VMs, VMIs, pdc's scheduler's pods,
// claim objects; the DRA keeper's own), the hand-off sweeper and the claim
// controller.
absl::Status ExtenderApp::StartWatches(const kube::KubeClientConfig& kc) {
  const ExtenderConfig& ec = config_.extender;
  const Clock* clock = options_.clock;
  absl::StatusOr<std::unique_ptr<kube::KubeClient>> c = kube::NewHttpKubeClient(kc);
  if (!c.ok()) return c.status();
  kube_ = *std::move(c);
  spdlog::info("Kubernetes API: {}", kc.server);
  // Which VM a pod belongs to comes from the owner chain (UIDs), read
  // from these two watches; with store: kubernetes, the claims from a
  // third.
  endpoint_ = std::make_unique<kube::KubeEndpoint>(kc);
  // A pod of the scheduler that ended or was deleted: its pending
  // hand-off and the deletion of its claims are looked at now. Both are
  // made before the watch starts.
  pod_watch_ = std::make_unique<PodDirectory>([this](const PodRef& pod) {
    sweeper_->PodGone(pod.uid);
    if (claims_ != nullptr) claims_->Kick();
  });
  HandoffSweeper::Options ho;
  ho.pods = pod_watch_.get();
  ho.on_cancelled = [this](const PendingHandoff& h, const std::vector<ClaimKey>& claims,
                           std::string_view why) {
    for (const ClaimKey& key : claims) {
      std::optional<KubeApiStore::ObjectState> o =
          api_store_ != nullptr ? api_store_->Object(key) : std::nullopt;
      RecordHandoffCancelled(events_.get(), h, key, o.has_value() ? o->uid : "", why);
    }
  };
  sweeper_ = std::make_unique<HandoffSweeper>(ho, allocator_.get(), kube_.get(), clock);
  std::vector<Watch> watches = {
      {kVmiPath, "", vms_->vmi_sink()},
      {kVmPath, "", vms_->vm_sink()},
      {kPodsPath, PodsOfScheduler(ec.kubernetes.scheduler_name), pod_watch_.get()}};
  if (api_store_ != nullptr) {
    ClaimController::Options co;
    co.events = events_.get();
    co.clock = clock;
    co.pods = pod_watch_.get();
    claims_ = std::make_unique<ClaimController>(allocator_.get(), api_store_, kube_.get(), co);
    watches.push_back({kClaimsPath, "", claims_->sink()});
    claims_->Start();
  } else {
    spdlog::warn("store: {} with a Kubernetes API - PersistentDeviceClaim objects are not "
                 "read; claims are made through the REST API (store: kubernetes makes the "
                 "objects the claims)",
                 ToString(ec.store));
  }
  std::vector<Watch> keeper_watches;
  if (ec.dra_keeper.enabled) StartKeeper(&keeper_watches);
  for (auto [from, to] : {std::pair{&watches, &reflectors_},
                          std::pair{&keeper_watches, &keeper_reflectors_}}) {
    for (Watch& w : *from) {
      kube::ReflectorOptions o;
      o.path = std::string(w.path);
      o.selector = std::move(w.selector);
      to->push_back(std::make_unique<kube::Reflector>(endpoint_.get(), o, w.sink));
    }
    for (auto& r : *to) r->Start();
  }
  if (keeper_ != nullptr) keeper_starter_ = std::thread([this] { KeepWhenSynced(); });
  ctx_.vms = vms_.get();
  return absl::OkStatus();
}

// What the handlers see (ExtenderContext), and the bind queue with a
// Kubernetes API.
void ExtenderApp::FillContext() {
  const ExtenderConfig& ec = config_.extender;
  const Clock* clock = options_.clock;
  ctx_.allocator = allocator_.get();
  ctx_.clock = clock;
  ctx_.pod_cache = pods_.get();
  ctx_.notifier = &notifier_;
  for (const DeviceClass& dc : config_.device_classes) {
    ctx_.managed.insert(dc.resource_name);
  }
  ctx_.metrics = metrics_.get();
  ctx_.events = events_.get();
  ctx_.registry = &registry_;
  ctx_.dra_keeper = keeper_.get();
  for (const auto& [resource, dra] : config_.dra_classes) ctx_.dra_drivers.insert(dra.driver_name);
  if (api_store_ != nullptr) {
    ctx_.recorded = [s = api_store_](const BindOutcome& outcome) {
      for (const BoundClaim& c : outcome.claims) {
        RETURN_IF_ERROR(s->Recorded(c.key, c.uid, outcome.node, outcome.pod_uid));
      }
      return absl::OkStatus();
    };
  }
  if (kube_ != nullptr) {
    KubeBindTarget::Options to;
    to.clock = clock;
    to.metrics = metrics_.get();
    if (elector_ != nullptr) to.leadership_left = [e = elector_.get()] { return e->SureFor(); };
    bind_target_ = std::make_unique<KubeBindTarget>(kube_.get(), std::move(to));
    ctx_.bind_target = bind_target_.get();
    BinderOptions bo;
    bo.deadline = ec.bind_deadline;
    bo.read_back = std::min(absl::Seconds(2), ec.bind_deadline / 4);
    binder_ = std::make_unique<Binder>(&ctx_, bo);
    BindQueueOptions qo;
    qo.threads = ec.bind_threads;
    binds_ = std::make_unique<BindQueue>(binder_.get(), &notifier_, qo);
    ctx_.binds = binds_.get();
  }
}

// extender.nodeAuth: TokenReviews and per-node token files.
void ExtenderApp::StartNodeAuth() {
  const Clock* clock = options_.clock;
  const NodeAuthConfig& na = config_.extender.node_auth;
  if (!na.service_account.empty() || !na.token_dir.empty()) {
    NodeAuthOptions ao;
    ao.service_account = na.service_account;
    ao.audience = na.audience;
    ao.cache_ttl = na.cache_ttl;
    ao.cache_size = static_cast<size_t>(na.cache_size);
    ao.review_timeout = na.review_timeout;
    ao.token_dir = na.token_dir;
    if (!na.service_account.empty()) {
      // Validate refuses serviceAccount without a Kubernetes API.
      reviewer_ = std::make_unique<kube::HttpTokenReviewer>(kube_api_.get());
    }
    node_auth_ = std::make_unique<NodeAuthenticator>(ao, reviewer_.get(), &notifier_, clock);
    registry_.AddCallbackFamily(
        "pdc_node_token_reviews_total",
        "TokenReviews of node drivers' tokens (extender.nodeAuth) by result: accepted, "
        "refused (401/403), error (kube-apiserver could not answer: the calls failed with 503).",
        MetricType::kCounter, {"result"}, [a = node_auth_.get()] {
          const NodeAuthenticator::ReviewCounts c = a->review_counts();
          return std::vector<LabeledValue>{{{"accepted"}, static_cast<double>(c.accepted)},
                                           {{"refused"}, static_cast<double>(c.refused)},
                                           {{"error"}, static_cast<double>(c.failed)}};
        });
    spdlog::info("node identities: {}{}{}",
                 na.service_account.empty()
                     ? std::string()
                     : absl::StrCat("TokenReview of service account ", na.service_account,
                                    "'s tokens for audience ", na.audience, " (cached ",
                                    absl::FormatDuration(na.cache_ttl), ")"),
                 !na.service_account.empty() && !na.token_dir.empty() ? ", and " : "",
                 na.token_dir.empty() ? std::string()
                                      : absl::StrCat("per-node tokens in ", na.token_dir));
  }
}

// The router, ready at once without watches, else once they synced.
void ExtenderApp::MakeRouter(const std::string& token) {
  const ExtenderConfig& ec = config_.extender;
  RouterOptions ro;
  ro.scheduler_prefix = ec.scheduler_path_prefix;
  while (!ro.scheduler_prefix.empty() && ro.scheduler_prefix.back() == '/') {
    ro.scheduler_prefix.pop_back();
  }
  ro.bearer_token = token;
  ro.node_auth = node_auth_.get();
  ro.scheduler_requires_client_cert = !ec.tls.client_ca_file.empty();
  ro.claims_are_objects = ec.store == StoreKind::kKubernetes;
  ro.leadership = elector_.get();
  router_ = std::make_unique<Router>(ro, &ctx_);
  if (reflectors_.empty()) {
    router_->SetReady(true);
    router_ready_.Notify();
  } else {
    // Ready once every watch cache holds a whole list: before that, a VM
    // pod's owner chain could look broken when it is only not seen yet.
    ready_waiter_ = std::thread([this] {
      for (auto& r : reflectors_) {
        while (!r->WaitForSync(absl::Seconds(1))) {
          if (stopping_.HasBeenNotified()) return;
        }
      }
      // ... and the claim controller has taken in the claims it listed.
      while (claims_ != nullptr && !claims_->WaitForSync(absl::Seconds(1))) {
        if (stopping_.HasBeenNotified()) return;
      }
      spdlog::info("Kubernetes caches synced: {} VirtualMachines, {} VirtualMachineInstances, "
                   "{} pods of {}{}",
                   vms_->vms(), vms_->vmis(), pod_watch_->size(),
                   config_.extender.kubernetes.scheduler_name,
                   claims_ == nullptr
                       ? std::string()
                       : absl::StrCat(", ", allocator_->ListClaims("").size(), " claims"));
      (void)ReleaseVmsNotInDirectory(*vms_, *allocator_);  // Logs what it did.
      router_->SetReady(true);
      router_ready_.Notify();
      if (elector_ != nullptr) {
        const absl::Duration took = options_.clock->Now() - elector_->leading_since();
        promotion_seconds_.store(absl::ToDoubleSeconds(took));
        spdlog::info("leader election: serving as the leader {} after taking the lease",
                     absl::FormatDuration(took));
      }
    });
  }
}

// The HTTP(S) listener and the admission webhook's.
absl::Status ExtenderApp::StartServers() {
  const ExtenderConfig& ec = config_.extender;
  absl::StatusOr<HttpServerOptions> listener = ListenerOptions(ec);
  if (!listener.ok()) return listener.status();
  HttpServerOptions& so = *listener;
  if (standby_port_ != 0) so.port = standby_port_;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      StartRouterServer(so, router_.get(), &notifier_, metrics_.get());
  if (!server.ok()) return server.status();
  server_ = *std::move(server);
  if (standby_port_ == 0) address_ = so.address;  // Else set by StartStandby.
  spdlog::info("pdc-extender {} serving on {}:{} ({} threads, {}, store {})",
               options_.version, so.address, server_->port(), so.threads,
               so.cert_file.empty() ? "plain HTTP" : "TLS", ToString(ec.store));

  if (!ec.webhook.listen.empty()) {
    webhook_ = std::make_unique<AdmissionWebhook>(allocator_.get(), vms_.get(), ctx_.managed,
                                                  options_.clock, &registry_);
    // VM-scoped DRA claims come with the keeper that keeps them.
    if (ec.dra_keeper.enabled && kube_api_ != nullptr) {
      vm_claim_maker_ = std::make_unique<dra::VmClaimMaker>(kube_api_.get(), absl::Seconds(3));
    }
    vm_claim_webhook_ =
        std::make_unique<VmClaimWebhook>(vms_.get(), vm_claim_maker_.get(), &registry_);
    absl::StatusOr<std::unique_ptr<HttpServer>> ws =
        StartWebhookServer({ec.webhook.listen, ec.webhook.cert_file, ec.webhook.key_file},
                           webhook_.get(), vm_claim_webhook_.get());
    if (!ws.ok()) {
      return absl::Status(ws.status().code(),
                          absl::StrCat("extender.webhook: ", ws.status().message()));
    }
    webhook_server_ = *std::move(ws);
    spdlog::info("admission webhook serving on {} (port {})", ec.webhook.listen,
                 webhook_server_->port());
  }

  const bool rest_open = ec.token_file.empty() && node_auth_ == nullptr;
  if (!IsLoopbackListen(ec.listen) && (rest_open || ec.tls.client_ca_file.empty())) {
    // Only with extender.allowUnauthenticated (Validate refuses it otherwise).
    spdlog::warn("extender.allowUnauthenticated: anyone who can reach {} may call {}",
                 ec.listen,
                 rest_open && ec.tls.client_ca_file.empty()
                     ? "the REST API and the scheduler verbs"
                     : (rest_open ? "the REST API" : "the scheduler verbs"));
  }
  return absl::OkStatus();
}

// The gauges read at scrape time.
void ExtenderApp::RegisterGauges() {
  if (elector_ == nullptr) {
    // The only replica always leads (StartStandby registers the elected one).
    registry_.AddCallbackFamily(
        "pdc_leader",
        "1 while this replica serves as the leader (always, without leader election).",
        MetricType::kGauge, {}, [] { return std::vector<LabeledValue>{{{}, 1.0}}; });
  }
  if (api_store_ != nullptr) {
    registry_.AddCallbackFamily(
        "pdc_claim_conflicts",
        "Devices in the status of more than one PersistentDeviceClaim, as found at start; pdc "
        "uses them for none of their claims until an administrator resolves it.",
        MetricType::kGauge, {}, [s = api_store_] {
          return std::vector<LabeledValue>{{{}, static_cast<double>(s->conflicts().size())}};
        });
  }
  registry_.AddCallbackFamily(
      "pdc_handoffs_pending",
      "VM pods bound to a node that have not yet received their devices from the node's "
      "device plugin, by resource name.",
      MetricType::kGauge, {"resource"}, [a = allocator_.get(), this] {
        std::vector<LabeledValue> out;
        for (const DeviceClass& dc : config_.device_classes) {
          out.push_back({{dc.resource_name}, 0});
        }
        for (const PendingHandoff& p : a->PendingHandoffs("")) {
          for (LabeledValue& v : out) {
            if (v.label_values[0] == p.resource_name) v.value += 1;
          }
        }
        return out;
      });
}

void ExtenderApp::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.Notify();
  if (promoter_.joinable()) promoter_.join();
  if (standby_server_ != nullptr) standby_server_->Shutdown();
  if (ready_waiter_.joinable()) ready_waiter_.join();
  if (keeper_starter_.joinable()) keeper_starter_.join();
  for (auto& r : reflectors_) r->Stop();
  for (auto& r : keeper_reflectors_) r->Stop();
  if (claims_ != nullptr) claims_->Stop();
  if (keeper_ != nullptr) keeper_->Stop();
  if (sweeper_ != nullptr) sweeper_->Stop();
  if (webhook_server_ != nullptr) webhook_server_->Shutdown();
  if (server_ != nullptr) server_->Shutdown();
  // Binds already talking to the apiserver end; waiting ones are dropped.
  binds_.reset();
  if (checkpointer_ != nullptr) checkpointer_->Stop();
  // Only an app that served writes a last checkpoint; one that failed to
  // start leaves the store as recovery found it.
  if (started_) {
    if (absl::Status s = allocator_->Checkpoint(); !s.ok()) {
      spdlog::error("final checkpoint failed: {}", s.ToString());
    }
  }
  server_.reset();
  webhook_server_.reset();
  if (events_ != nullptr) events_->Stop();
  // Last: nothing of this replica serves any more when it takes itself out
  // of the Service and gives the lease to the next.
  if (endpoint_published_ && elector_->Leading()) {
    if (absl::Status s = kube::WriteLeaderEndpoint(lease_api_.get(), endpoint_slice_, true,
                                             config_.extender.leader_election.retry_period, options_.clock);
        !s.ok()) {
      spdlog::warn("leader election: {}", s.ToString());
    }
  }
  if (elector_ != nullptr) elector_->Stop();
}

}  // namespace pdc::extender
