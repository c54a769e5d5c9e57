// pdc-node: the node driver DaemonSet. Discovers the managed PCI devices,
// reports them to pdc-extender, and keeps the node's claimed devices on
// vfio-pci (see node_reconciler.h). Configuration: the shared config/ module
// (`node:` section, deviceClasses), plus `--once`: one pass without waiting,
// exit status 0 when it succeeded with no device errors (for scripts).
// Serves /metrics and /healthz on node.metricsListen (driver/node_routes.h)
// through the shared HTTP server.
// It is also the kubelet device plugin for every managed resource name
// (driver/deviceplugin/): `--device-plugin-dir=DIR` (default
// /var/lib/kubelet/device-plugins) is where kubelet.sock and pdc's sockets
// live; `--device-plugin=false` turns the plugin off (a node where KubeVirt's
// own plugin serves the resource, or no kubelet at all).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/file_util.h"
#include "common/log_format.h"
#include "common/metrics.h"
#include "config/config.h"
#include "driver/deviceplugin/device_plugin_manager.h"
#include "driver/bind_journal.h"
#include "driver/deviceplugin/handoff_journal.h"
#include "driver/dra/claim_index.h"
#include "driver/dra/claim_source.h"
#include "driver/dra/dra_driver.h"
#include "driver/host_usage.h"
#include "driver/node_extender_api.h"
#include "driver/node_metrics.h"
#include "driver/node_reconciler.h"
#include "driver/node_routes.h"
#include "driver/nvme_erase.h"
#include "driver/nvme_vfio_channel.h"
#include "driver/sysfs.h"
#include "driver/vfio_binder.h"
#include "kube/kube_http_client.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "spdlog/spdlog.h"

namespace pdc::driver {
namespace {

int Fail(const absl::Status& s) {
  spdlog::critical("{}", s.ToString());
  return 2;
}

// The release directory of DRA driver `driver` (device_reclaimer.h).
std::string DraReleaseDir(const std::string& state_dir, const std::string& driver) {
  return absl::StrCat(state_dir, "/dra-release-", driver);
}

// --release-dra-device=DRIVER/DEVICE: leaves the request the running
// pdc-node acts on (and removes) at its next pass.
int ReleaseDraDevice(const std::string& state_dir, const std::string& what) {
  const size_t slash = what.find('/');
  const std::string driver = what.substr(0, slash);
  const std::string device = slash == std::string::npos ? "" : what.substr(slash + 1);
  auto label = [](const std::string& s) {
    return !s.empty() && s.size() <= 253 && s != "." && s != ".." &&
           std::all_of(s.begin(), s.end(), [](char c) {
             return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
           });
  };
  if (!label(driver) || !label(device) || device.find('.') != std::string::npos) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--release-dra-device=", what, ": want DRIVER/DEVICE, e.g. nvme.pdc.kubevirt.io/",
        "s1234-0a1b2c3d (the device name of the ResourceSlice)")));
  }
  const std::string dir = DraReleaseDir(state_dir, driver);
  if (absl::Status s = MakeDirectories(dir); !s.ok()) return Fail(s);
  if (absl::Status s = WriteFileAtomically(absl::StrCat(dir, "/", device), ""); !s.ok()) {
    return Fail(s);
  }
  std::printf("release of %s/%s requested: pdc-node acts on it at its next pass (its log says "
              "what it did)\n", driver.c_str(), device.c_str());
  return 0;
}

int Main(int argc, char** argv) {
  bool once = false;
  bool device_plugin = true;
  std::string device_plugin_dir(deviceplugin::kDefaultPluginDir);
  std::string release_dra_device;  // DRIVER/DEVICE
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--once" || a == "--once=true") {
      once = true;
    } else if (a == "--device-plugin" || a == "--device-plugin=true") {
      device_plugin = true;
    } else if (a == "--device-plugin=false") {
      device_plugin = false;
    } else if (a.starts_with("--device-plugin-dir=")) {
      device_plugin_dir = a.substr(std::string_view("--device-plugin-dir=").size());
    } else if (a.starts_with("--release-dra-device=")) {
      release_dra_device = a.substr(std::string_view("--release-dra-device=").size());
    } else {
      args.push_back(a);
    }
  }
  auto flags = ParseConfigFlags(args);
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) {
    std::printf("pdc-node [--config=FILE] [--once] [--device-plugin=false] "
                "[--device-plugin-dir=DIR] [--release-dra-device=DRIVER/DEVICE] "
                "[--<field>=<value>...]\n"
                "  --once               one reconcile pass without waiting; exit 0 when it "
                "succeeded\n"
                "  --release-dra-device  asks the running pdc-node to release a Released DRA "
                "device (erased first when its kind can be), then exits\n"
                "  --device-plugin=false  do not serve the kubelet device plugin API\n"
                "  --device-plugin-dir  kubelet's device plugin directory (default %s)\n%s",
                std::string(deviceplugin::kDefaultPluginDir).c_str(), ConfigHelp().c_str());
    return 0;
  }
  auto config = LoadConfig(*flags, Component::kNode);
  if (!config.ok()) return Fail(config.status());
  const NodeConfig& nc = config->node;
  InstallLogging("pdc-node", config->log_format == LogFormat::kJson, config->log_level);
  if (!release_dra_device.empty()) {
    return ReleaseDraDevice(nc.state_dir, release_dra_device);
  }

  RealSysfs sys(nc.sysfs_root);
  RealSysfs dev(nc.dev_root);
  RealSysfs proc(nc.proc_root);
  // The safety checks need the host's processes and mounts: refuse to run
  // on a container's own view of them (no hostPID).
  if (absl::Status s = CheckHostView(proc); !s.ok()) return Fail(s);
  // The journal's serials are trusted in the boot they were read in only.
  auto boot_id = proc.Read("sys/kernel/random/boot_id");
  if (!boot_id.ok()) return Fail(boot_id.status());
  const std::string boot = std::string(absl::StripAsciiWhitespace(*boot_id));
  if (boot.empty()) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat(nc.proc_root, "/sys/kernel/random/boot_id is empty")));
  }

  if (absl::Status s = MakeDirectories(nc.state_dir); !s.ok()) return Fail(s);
  auto journal = BindJournal::Open(nc.state_dir + "/vfio-journal", boot);
  if (!journal.ok()) return Fail(journal.status());
  // NVMe controllers are erased (Format NVM, user data erase) through
  // /dev/nvmeN before a deleted claim's device is offered again; the
  // host-use check asks them whether they are shared (Identify).
  DevNvmeAdmin nvme_admin(nc.dev_root);
  BinderOptions binder_options;
  binder_options.classes = config->device_classes;
  binder_options.mountinfo_path = "1/mountinfo";  // PID 1's: the host's mounts.
  binder_options.nvme_admin = &nvme_admin;
  binder_options.policy.allow_shared_nvme = nc.allow_shared_nvme;
  binder_options.policy.allow_sriov = nc.allow_sriov;
  VfioBinder binder(&sys, &dev, &proc, journal->get(), binder_options);

  HttpClientOptions client_options;
  client_options.base_url = nc.extender_url;
  client_options.ca_file = nc.tls.ca_file;
  client_options.cert_file = nc.tls.cert_file;
  client_options.key_file = nc.tls.key_file;
  client_options.user_agent = "pdc-node";
  client_options.timeout = absl::Seconds(30);
  // Read again when it changes: kubelet rotates the projected token.
  client_options.bearer_token_file = nc.token_file;
  auto client = HttpClient::Create(client_options);
  if (!client.ok()) return Fail(client.status());
  HttpExtenderApi api(std::move(*client));
  // The device plugin has a connection of its own: kubelet's Allocate must
  // not wait behind the reconcile loop's long-poll.
  auto plugin_client = HttpClient::Create(client_options);
  if (!plugin_client.ok()) return Fail(plugin_client.status());
  HttpExtenderApi plugin_api(std::move(*plugin_client));

  MetricsRegistry registry;
  NodeMetrics metrics(&registry);
  ReconcilerOptions options;
  options.node = nc.node_name;
  options.classes = config->device_classes;
  options.heartbeat = nc.heartbeat_interval;
  options.nvme_admin = &nvme_admin;
  // A deleted claim's drive is erased where it is, on vfio-pci, unless
  // node.eraseOnVfio is false (or VFIO is not possible for it).
  DevVfioNvmeOpener vfio_opener(&sys, nc.dev_root);
  if (nc.erase_on_vfio) options.erase.vfio = &vfio_opener;
  options.erase.erase.hold_on_firmware_change = nc.firmware_change != "report";
  // Classes in `dra` mode: pdc-node is their DRA driver (driver/dra/), and
  // the device plugin leaves them alone.
  std::vector<DeviceClass> plugin_classes;
  std::unique_ptr<kube::KubeApi> kube_api;
  std::unique_ptr<kube::KubeEndpoint> kube_endpoint;
  std::unique_ptr<dra::ReflectedClaimIndex> claim_index;
  std::unique_ptr<dra::KubeClaimSource> claim_source;
  std::unique_ptr<dra::KubeSlicePublisher> slice_publisher;
  std::vector<std::unique_ptr<dra::DraDriver>> dra_drivers;
  for (const DeviceClass& dc : config->device_classes) {
    auto mode = config->dra_classes.find(dc.resource_name);
    if (mode == config->dra_classes.end()) {
      plugin_classes.push_back(dc);
      continue;
    }
    options.unreported_resources.push_back(dc.resource_name);
    if (once) continue;
    if (kube_api == nullptr) {
      auto kc = nc.kubeconfig.empty() ? kube::InClusterConfig()
                                      : kube::KubeconfigFile(nc.kubeconfig);
      if (!kc.ok()) return Fail(kc.status());
      auto connected = kube::KubeApi::Connect(*kc);
      if (!connected.ok()) return Fail(connected.status());
      kube_api = std::move(*connected);
      // Every ResourceClaim, watched: a claim that held a device of this
      // node being gone is what frees the device (device_reclaimer.h).
      kube_endpoint = std::make_unique<kube::KubeEndpoint>(*kc);
      claim_index = std::make_unique<dra::ReflectedClaimIndex>(kube_endpoint.get());
      claim_source = std::make_unique<dra::KubeClaimSource>(kube_api.get(), absl::Seconds(10));
      slice_publisher =
          std::make_unique<dra::KubeSlicePublisher>(kube_api.get(), absl::Seconds(10));
    }
    dra::DraDriverOptions d{mode->second.driver_name,
                            nc.node_name,
                            dc,
                            nc.kubelet_dir + "/plugins_registry",
                            nc.kubelet_dir + "/plugins",
                            nc.cdi_dir,
                            nc.dra_metadata_dir,
                            nc.state_dir + "/dra-prepared-" + mode->second.driver_name,
                            nc.state_dir + "/dra-holders-" + mode->second.driver_name,
                            mode->second.reclaim_policy,
                            DraReleaseDir(nc.state_dir, mode->second.driver_name)};
    auto driver = dra::DraDriver::Create(std::move(d), claim_source.get(), claim_index.get(),
                                         &binder, journal->get(),
                                         HostView{&sys, &dev, &proc, "1/mountinfo"},
                                         slice_publisher.get());
    if (!driver.ok()) return Fail(driver.status());
    dra_drivers.push_back(std::move(*driver));
  }
  // Declared first: the plugins' confirmer writes it until it stops.
  std::unique_ptr<deviceplugin::HandoffJournal> handoff_journal;
  std::unique_ptr<deviceplugin::DevicePluginManager> plugins;
  if (device_plugin && !once) {
    // A corrupt line loses only itself: the rest is confirmed again.
    auto opened = deviceplugin::HandoffJournal::Open(nc.state_dir + "/handoff-journal");
    if (!opened.ok()) return Fail(opened.status());
    for (const absl::Status& s : opened->corrupt) {
      spdlog::error("{} (kept in {}.corrupt; the other hand-offs are confirmed again)",
                    s.ToString(), opened->journal->path());
    }
    handoff_journal = std::move(opened->journal);
    deviceplugin::DevicePluginManagerOptions po;
    po.node = nc.node_name;
    po.plugin_dir = device_plugin_dir;
    po.classes = plugin_classes;
    po.metrics = &metrics;
    po.confirmer.journal = handoff_journal.get();
    po.recovery.socket_path = nc.pod_resources_socket;
    plugins = std::make_unique<deviceplugin::DevicePluginManager>(&sys, &plugin_api, RealClock(),
                                                                  std::move(po));
    options.on_inventory = [&plugins](const NodeInventory& i) { plugins->OnInventory(i); };
    options.on_allocations = [&plugins](const NodeAllocations& a) { plugins->OnAllocations(a); };
  }
  if (!dra_drivers.empty()) {
    options.on_inventory = [&dra_drivers, chained = std::move(options.on_inventory)](
                               const NodeInventory& i) {
      if (chained) chained(i);
      for (auto& d : dra_drivers) {
        d->Tick();
        d->OnInventory(i);
      }
    };
    options.on_allocations = [&dra_drivers, chained = std::move(options.on_allocations)](
                                 const NodeAllocations& a) {
      if (chained) chained(a);
      for (auto& d : dra_drivers) d->OnAllocations(a);
    };
  }
  Reconciler reconciler(&sys, &binder, journal->get(), &api, &metrics, RealClock(), options);
  (void)reconciler.Start();  // Logged; the loop retries whatever is left.

  if (once) {
    auto pass = reconciler.RunOnce(absl::ZeroDuration());
    if (!pass.ok()) return Fail(pass.status());
    std::printf("node %s: reported=%s bound=%d restored=%d erased=%d errors=%zu\n",
                nc.node_name.c_str(), pass->reported ? "yes" : "no", pass->bound, pass->restored,
                pass->erased, pass->errors.size());
    for (const std::string& e : pass->errors) std::printf("  error: %s\n", e.c_str());
    return pass->errors.empty() ? 0 : 1;
  }

  // SIGTERM/SIGINT end the loop after the current pass.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // After the mask: the plugin's gRPC threads inherit it, so SIGTERM reaches
  // the signal thread below and never ends the process mid-answer.
  if (plugins) {
    if (absl::Status s = plugins->Start(); !s.ok()) return Fail(s);
    spdlog::info("kubelet device plugin for {} in {}",
                 absl::StrJoin(plugins->resource_names(), ", "), device_plugin_dir);
  }
  if (claim_index) claim_index->Start();
  for (auto& d : dra_drivers) {
    if (absl::Status s = d->Start(); !s.ok()) return Fail(s);
  }
  absl::Notification stop;
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (!stop.HasBeenNotified()) {
      spdlog::info("signal {}: stopping after the current pass", sig);
      stop.Notify();
    }
  });

  std::unique_ptr<net::HttpServer> server;
  if (!nc.metrics_listen.empty()) {
    // Two workers, so that one slow scraper cannot hold the probes; short
    // timeouts and a small body limit: nothing here takes a body.
    net::HttpServerOptions so;
    if (absl::Status s = net::SplitListenAddress(nc.metrics_listen, "node.metricsListen", &so);
        !s.ok()) {
      return Fail(s);
    }
    so.threads = 2;
    so.max_body_bytes = 1 << 20;
    so.max_connections = 64;  // Probes and scrapers; more only wait.
    so.read_timeout = absl::Seconds(5);
    so.idle_timeout = absl::Seconds(30);
    so.shutdown_grace = absl::Seconds(5);
    so.server_name = "pdc-node";
    auto started = net::HttpServer::Start(
        std::move(so), NodeStatusRoutes(&registry, [&reconciler] { return reconciler.Healthy(); }));
    if (!started.ok()) return Fail(started.status());
    server = std::move(*started);
    spdlog::info("serving /metrics and /healthz on port {}", server->port());
  }
  spdlog::info("pdc-node for {} talking to {}", nc.node_name, nc.extender_url);
  reconciler.Run(&stop);  // Returns once the signal thread notified `stop`.
  // The plugin sockets go away with us; kubelet marks the devices unhealthy.
  if (plugins) plugins->Stop();
  for (auto& d : dra_drivers) d->Stop();
  if (claim_index) claim_index->Stop();
  if (server) server->Shutdown();
  signal_thread.join();
  return 0;
}

}  // namespace
}  // namespace pdc::driver

int main(int argc, char** argv) { return pdc::driver::Main(argc, argv); }
