// ExtenderApp: pdc-extender without its main: everything built from the
// loaded configuration and started, and stopped again, with no signals and
// no process state, so a test can run the whole program in-process.
//
// Start: token file -> store (FileStore on dataDir, or MemoryStore for
// `store: memory`) -> Allocator::Open (recovery) -> notifier following the
// allocator's commits -> Kubernetes client (unless kubernetes.mode: none)
// -> Router -> HTTP server -> hand-off sweeper (with a Kubernetes API) and
// checkpointer.
// Stop (what SIGTERM does): stop the sweeper, stop accepting and finish the
// requests in flight, stop the checkpointer, write a last checkpoint.
//
// Thread-safety: Start and Stop from one thread; the accessors are
// thread-safe.
#ifndef PDC_EXTENDER_EXTENDER_APP_H_
#define PDC_EXTENDER_EXTENDER_APP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "allocator/allocator.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "config/config.h"
#include "extender/admission_webhook.h"
#include "extender/checkpointer.h"
#include "extender/claim_controller.h"
#include "extender/kube_bind_target.h"
#include "extender/dra/claim_keeper.h"
#include "extender/dra/vm_claim_maker.h"
#include "extender/dra_consumers.h"
#include "kube/event_recorder.h"
#include "extender/kube_api_store.h"
#include "extender/extender_context.h"
#include "extender/extender_metrics.h"
#include "extender/handoff_sweeper.h"
#include "extender/router_server.h"
#include "extender/bind_queue.h"
#include "extender/binder.h"
#include "kube/kube_client.h"
#include "kube/kube_http_client.h"
#include "kube/kube_reflector.h"
#include "kube/leader_elector.h"
#include "kube/leader_endpoint.h"
#include "extender/node_auth.h"
#include "kube/token_reviewer.h"
#include "extender/vm_directory.h"
#include "common/notifier.h"
#include "extender/pod_cache.h"
#include "extender/pod_directory.h"
#include "extender/router.h"
#include "extender/timed_store.h"

namespace pdc::extender {

class ExtenderApp {
 public:
  struct Options {
    const Clock* clock = RealClock();  // Must outlive the app.
    std::string version = "dev";       // Reported in metrics and logs.
  };

  // Builds and starts everything; an error names the configuration field
  // (or the store) that stopped it. `config` is copied.
  static absl::StatusOr<std::unique_ptr<ExtenderApp>> Start(const PdcConfig& config,
                                                            Options options);
  ~ExtenderApp();  // Stop().

  // The listening address and port (port 0 in the config: the one chosen).
  const std::string& address() const { return address_; }
  uint16_t port() const;
  // The admission webhook's port; 0 when extender.webhook.listen is "".
  uint16_t webhook_port() const;
  Allocator* allocator() const { return allocator_.get(); }
  // Null without a Kubernetes API (the VMs' and VirtualMachines' caches).
  const VmDirectory* vm_directory() const { return vms_.get(); }
  // Null unless store: kubernetes with a Kubernetes API.
  const ClaimController* claim_controller() const { return claims_.get(); }
  // Null unless extender.dra.keeper.enabled (and, with leader election,
  // until this replica leads).
  const dra::ClaimKeeper* claim_keeper() const { return keeper_.get(); }

  // Graceful stop, as on SIGTERM (a leader releases its lease last).
  // Idempotent.
  void Stop();

  // extender.leaderElection: this replica lost the lease it held, or could
  // not start serving once it got it. It serves nothing any more; main
  // exits (non-zero) so that it starts afresh as a follower.
  bool LeadershipLost() const { return lost_.HasBeenNotified(); }
  // The elector, or null without leader election.
  const kube::LeaderElector* leadership() const { return elector_.get(); }

 private:
  ExtenderApp(const PdcConfig& config, Options options);
  // Everything that serves, in the steps below: store recovery, watches,
  // router, servers.
  absl::Status Init();
  absl::StatusOr<kube::KubeClientConfig> ConnectKubernetes();
  absl::Status OpenStore();
  absl::Status OpenAllocator();
  void MakeMetricsAndEvents();
  absl::Status StartWatches(const kube::KubeClientConfig& kc);
  void FillContext();
  void StartNodeAuth();
  void MakeRouter(const std::string& token);
  absl::Status StartServers();
  void RegisterGauges();
  // extender.leaderElection: the elector, and a standby server on
  // extender.listen that answers NotLeader() until this replica leads;
  // then Init() runs on the promoter thread (a fresh recovery from the API,
  // so the new leader starts from what the API holds now).
  absl::Status StartStandby();
  void Promote();
  // One watch Init() starts: a collection, its selector and its sink.
  struct Watch {
    std::string_view path;
    std::string selector;
    kube::ReflectorSink* sink;
  };
  // extender.dra.keeper: the keeper and the watches it needs.
  void StartKeeper(std::vector<Watch>* watches);
  // Every watch the keeper reads from holds a whole list.
  bool KeeperCachesSynced() const;
  // On keeper_starter_: starts the keeper's workers once KeeperCachesSynced.
  void KeepWhenSynced();

  const PdcConfig config_;
  const Options options_;
  MetricsRegistry registry_;
  std::unique_ptr<Store> base_store_;
  std::unique_ptr<TimedStore> store_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<ExtenderMetrics> metrics_;
  Notifier notifier_;
  std::unique_ptr<PodCache> pods_;
  std::unique_ptr<kube::KubeClient> kube_;
  // Kubernetes mode: the watches of VirtualMachines and their instances.
  std::unique_ptr<kube::KubeEndpoint> endpoint_;
  std::unique_ptr<VmDirectory> vms_;
  // ... and of the pods of pdc's scheduler.
  std::unique_ptr<PodDirectory> pod_watch_;
  // store: kubernetes: the API calls of the store, and the controller that
  // follows the claim objects.
  std::unique_ptr<kube::KubeApi> kube_api_;
  KubeApiStore* api_store_ = nullptr;  // base_store_, when it is one.
  std::unique_ptr<ClaimController> claims_;
  // extender.dra.keeper: the virt-launcher pods' watch and the keeper.
  std::unique_ptr<PodDirectory> launcher_pods_;
  std::unique_ptr<DraConsumers> dra_consumers_;
  std::unique_ptr<dra::ClaimKeeper> keeper_;
  std::unique_ptr<kube::EventRecorder> events_;
  std::vector<std::unique_ptr<kube::Reflector>> reflectors_;
  std::thread ready_waiter_;  // Sets the Router ready once they synced.
  // The DRA claim keeper's own watches (ResourceClaims, virt-launcher pods):
  // readiness does not wait for them.
  std::vector<std::unique_ptr<kube::Reflector>> keeper_reflectors_;
  std::thread keeper_starter_;  // KeepWhenSynced.
  absl::Notification stopping_;
  ExtenderContext ctx_;
  // With a Kubernetes API: binds run here, off the HTTP threads.
  std::unique_ptr<KubeBindTarget> bind_target_;
  std::unique_ptr<Binder> binder_;
  std::unique_ptr<BindQueue> binds_;
  // extender.nodeAuth: node identities (made before, so destroyed after,
  // the router and the server that use them).
  std::unique_ptr<kube::TokenReviewer> reviewer_;
  std::unique_ptr<NodeAuthenticator> node_auth_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> server_;
  // extender.webhook: its own listener and threads.
  std::unique_ptr<AdmissionWebhook> webhook_;
  std::unique_ptr<dra::VmClaimMaker> vm_claim_maker_;  // With the DRA keeper.
  std::unique_ptr<VmClaimWebhook> vm_claim_webhook_;
  std::unique_ptr<HttpServer> webhook_server_;
  std::unique_ptr<HandoffSweeper> sweeper_;
  std::unique_ptr<Checkpointer> checkpointer_;
  // extender.leaderElection.
  std::unique_ptr<kube::KubeApi> lease_api_;
  std::unique_ptr<kube::LeaderElector> elector_;
  std::unique_ptr<HttpServer> standby_server_;
  std::thread promoter_;
  absl::Notification promote_;
  absl::Notification lost_;  // Notified through MarkLost() only.
  std::atomic<bool> marked_lost_{false};
  // This replica leads no more (lease lost, promotion failed, store
  // failed): main() stops it, which gives the lease up. Idempotent.
  void MarkLost();
  uint16_t standby_port_ = 0;  // Init() listens on this port once promoted.
  absl::Notification router_ready_;
  kube::LeaderEndpoint endpoint_slice_;  // service "" = not published.
  bool endpoint_published_ = false;  // Promoter thread; read after its join.
  std::atomic<double> promotion_seconds_{0};
  std::string address_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_EXTENDER_APP_H_
