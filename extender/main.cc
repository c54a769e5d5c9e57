// pdc-extender: the kube-scheduler extender and REST API of pdc.
//
// Start-up: config (config/: YAML + flags) -> store (FileStore on dataDir, or
// MemoryStore for `store: memory`) -> Allocator::Open (recovery) -> HTTP
// server. A background thread writes a checkpoint whenever the allocator
// says one is due. SIGTERM/SIGINT: stop accepting, finish requests in
// flight, write a last checkpoint, exit 0.
//
// Prints "pdc-extender listening on <addr>:<port>" on stdout once serving
// (tests start it with port 0 and read the port from that line).
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "allocator/allocator.h"
#include "allocator/file_store.h"
#include "allocator/memory_store.h"
#include "common/file_util.h"
#include "common/metrics.h"
#include "common/strings.h"
#include "config/config.h"
#include "extender/extender_context.h"
#include "extender/extender_metrics.h"
#include "extender/router_server.h"
#include "extender/handoff_sweeper.h"
#include "common/log_format.h"
#include "extender/kube_http_client.h"
#include "extender/router.h"
#include "extender/timed_store.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

#ifndef PDC_VERSION
#define PDC_VERSION "dev"
#endif

namespace pdc::extender {
namespace {

constexpr char kUsage[] =
    "pdc-extender: kube-scheduler extender and REST API for persistent device "
    "claims (KubeVirt).\n\n"
    "Usage: pdc-extender [--config=FILE] [--<field>=<value> ...]\n\n"
    "Serves on extender.listen:\n"
    "  POST <extender.schedulerPathPrefix>/{filter,prioritize,bind,preempt}\n"
    "       kube-scheduler extender verbs (KubeSchedulerConfiguration "
    "`extenders:`)\n"
    "  /v1/...   REST API: claims, nodes, devices, node inventory and "
    "allocations\n"
    "  /healthz /readyz /metrics\n\n"
    "Signals: SIGTERM or SIGINT stop gracefully (requests in flight finish).\n\n"
    "Fields (YAML path = flag name):\n";

void SetUpLogging(const PdcConfig& config) {
  // Logs on stderr; stdout carries only the "listening on" line.
  InstallLogging("pdc-extender", config.log_format == LogFormat::kJson, config.log_level);
}

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

// "host:port" -> address and port (IPv6 as [::1]:8888).
absl::Status SplitListen(const std::string& listen, HttpServerOptions* o) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("extender.listen: \"", listen, "\" is not host:port"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("extender.listen: bad port in \"", listen, "\""));
  }
  o->address = host.empty() ? "0.0.0.0" : host;
  o->port = static_cast<uint16_t>(port);
  return absl::OkStatus();
}

int Fail(const absl::Status& s) {
  spdlog::critical("pdc-extender: {}", s.ToString());
  std::cerr << "pdc-extender: " << s.message() << "\n";
  return 1;
}

int Run(int argc, char** argv) {
  bool help = false;
  absl::StatusOr<PdcConfig> config =
      LoadConfigFromArgs(argc, argv, Component::kExtender, &help);
  if (help) {
    std::cout << kUsage << ConfigHelp();
    return 0;
  }
  if (!config.ok()) {
    std::cerr << "pdc-extender: " << config.status().message()
              << "\n(run pdc-extender --help for the fields)\n";
    return 2;
  }
  SetUpLogging(*config);
  const ExtenderConfig& ec = config->extender;

  // Signals are handled by sigwait() in this thread; block them before any
  // thread starts so that none of them receives one.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::string> token = ReadToken(ec.token_file);
  if (!token.ok()) return Fail(token.status());

  MetricsRegistry registry;
  std::unique_ptr<Store> base_store;
  if (ec.store == StoreKind::kMemory) {
    spdlog::warn("store: memory - claims are lost when pdc-extender exits");
    base_store = std::make_unique<MemoryStore>();
  } else {
    absl::StatusOr<std::unique_ptr<FileStore>> fs = FileStore::Open(ec.data_dir);
    if (!fs.ok()) return Fail(fs.status());
    base_store = *std::move(fs);
  }
  // Histogram registered before the allocator exists; the metrics object
  // that reads the allocator is built right after Open.
  Histogram* sync_seconds = registry.AddHistogram(
      "pdc_store_sync_duration_seconds",
      "Time to make a store record durable (fsync, group commit).",
      ExponentialBuckets(0.0001, 2, 16));
  TimedStore store(base_store.get(), RealClock(), sync_seconds);

  RecoveryReport report;
  absl::StatusOr<std::unique_ptr<Allocator>> allocator =
      Allocator::Open(ToAllocatorOptions(*config), &store, RealClock(), &report);
  if (!allocator.ok()) return Fail(allocator.status());
  spdlog::info("store recovered: snapshot revision {}, {} records replayed, "
               "revision {}{}",
               report.snapshot_revision, report.records_replayed,
               report.last_revision,
               report.torn_tail.empty()
                   ? std::string()
                   : absl::StrCat("; dropped a torn last record: ", report.torn_tail));

  ExtenderMetrics metrics(&registry, allocator->get(), RealClock(), PDC_VERSION);
  Notifier notifier;
  PodCache pods(RealClock(), 10000, absl::Minutes(10));

  std::unique_ptr<KubeClient> kube;
  if (ec.kubernetes.mode != KubernetesMode::kNone) {
    absl::StatusOr<KubeClientConfig> kc =
        ec.kubernetes.mode == KubernetesMode::kInCluster
            ? InClusterConfig()
            : KubeconfigFile(ec.kubernetes.kubeconfig);
    if (!kc.ok()) return Fail(kc.status());
    absl::StatusOr<std::unique_ptr<KubeClient>> c = NewHttpKubeClient(*kc);
    if (!c.ok()) return Fail(c.status());
    kube = *std::move(c);
    spdlog::info("Kubernetes API: {}", kc->server);
  } else {
    spdlog::info("no Kubernetes API (kubernetes.mode: none): binds are "
                 "recorded only");
  }

  ExtenderContext ctx;
  ctx.allocator = allocator->get();
  ctx.clock = RealClock();
  ctx.pod_cache = &pods;
  ctx.notifier = &notifier;
  for (const DeviceClass& dc : config->device_classes) {
    ctx.managed.insert(dc.resource_name);
  }
  ctx.kube = kube.get();
  ctx.metrics = &metrics;
  ctx.registry = &registry;

  RouterOptions ro;
  ro.scheduler_prefix = ec.scheduler_path_prefix;
  while (!ro.scheduler_prefix.empty() && ro.scheduler_prefix.back() == '/') {
    ro.scheduler_prefix.pop_back();
  }
  ro.bearer_token = *token;
  ro.scheduler_requires_client_cert = !ec.tls.client_ca_file.empty();
  Router router(ro, &ctx);
  router.SetReady(true);

  HttpServerOptions so;
  if (absl::Status s = SplitListen(ec.listen, &so); !s.ok()) return Fail(s);
  so.threads = ec.worker_threads;
  so.max_body_bytes = ec.max_body_bytes;
  so.read_timeout = ec.read_timeout;
  so.idle_timeout = ec.idle_timeout;
  so.cert_file = ec.tls.cert_file;
  so.key_file = ec.tls.key_file;
  so.client_ca_file = ec.tls.client_ca_file;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      StartRouterServer(so, &router, &notifier, &metrics);
  if (!server.ok()) return Fail(server.status());
  spdlog::info("pdc-extender {} serving on {}:{} ({} threads, {}, store {})",
               PDC_VERSION, so.address, (*server)->port(), so.threads,
               so.cert_file.empty() ? "plain HTTP" : "TLS",
               ToString(ec.store));
  std::cout << "pdc-extender listening on " << so.address << ":"
            << (*server)->port() << std::endl;

  registry.AddCallbackFamily(
      "pdc_handoffs_pending",
      "VM pods bound to a node that have not yet received their devices from the node's "
      "device plugin, by resource name.",
      MetricType::kGauge, {"resource"}, [a = allocator->get(), &config] {
        std::vector<LabeledValue> out;
        for (const DeviceClass& dc : config->device_classes) {
          out.push_back({{dc.resource_name}, 0});
        }
        for (const PendingHandoff& p : a->PendingHandoffs("")) {
          for (LabeledValue& v : out) {
            if (v.label_values[0] == p.resource_name) v.value += 1;
          }
        }
        return out;
      });
  // With a Kubernetes API, pending hand-offs of pods that are gone are
  // cancelled; without one, DELETE /v1/nodes/{node}/handoffs/{podUid} does it.
  std::unique_ptr<HandoffSweeper> sweeper;
  if (kube != nullptr) {
    sweeper = std::make_unique<HandoffSweeper>(HandoffSweeper::Options{}, allocator->get(),
                                               kube.get(), RealClock(), &notifier);
    sweeper->Start();
  }

  absl::Notification stop;
  std::thread checkpointer([&] {
    while (!stop.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      if (!(*allocator)->CheckpointDue()) continue;
      if (absl::Status s = (*allocator)->Checkpoint(); !s.ok()) {
        spdlog::error("checkpoint failed: {}", s.ToString());
      }
    }
  });

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  if (sweeper != nullptr) sweeper->Stop();
  (*server)->Shutdown();
  stop.Notify();
  checkpointer.join();
  if (absl::Status s = (*allocator)->Checkpoint(); !s.ok()) {
    spdlog::error("final checkpoint failed: {}", s.ToString());
  }
  server->reset();
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace pdc::extender

int main(int argc, char** argv) { return pdc::extender::Run(argc, argv); }
