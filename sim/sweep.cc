#include "sim/sweep.h"

#include <atomic>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "allocator/allocator.h"
#include "api/handoff_json.h"
#include "api/json_util.h"
#include "api/rest_json.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "net/http_client.h"
#include "net/pdc_client.h"
#include "sim/extender_process.h"
#include "sim/http_report.h"
#include "sim/kube_scheduler.h"
#include "sim/kube_wire.h"

namespace pdc::sim {
namespace {

namespace json = api::json;

constexpr char kResource[] = "devices.kubevirt.io/nvme";
constexpr int kDevicesPerNode = 8;
constexpr int kMaxAttempts = 10;

// Seconds from `t0` to now.
double Since(const Clock& clock, absl::Time t0) {
  return absl::ToDoubleSeconds(clock.Now() - t0);
}

struct SweepPod {
  std::string vm, name, uid;
  std::optional<ClaimKey> claim;  // From the node step.
  int node = -1;        // Placed in the current phase.
  int bound_node = -1;  // Where the claims are (restart phase).
  int attempts = 0;
};

class Step {
 public:
  Step(const SweepOptions& o, std::string url, int nodes, std::string prefix)
      : o_(o), url_(std::move(url)), n_(nodes), prefix_(std::move(prefix)) {}

  absl::Status Init() {
    for (int i = 0; i < std::max(1, o_.binders) + 1; ++i) {
      HttpClientOptions co;
      co.base_url = url_;
      co.user_agent = "pdc-sim-sweep";
      co.timeout = absl::Seconds(120);
      ASSIGN_OR_RETURN(std::unique_ptr<HttpClient> c, HttpClient::Create(co));
      clients_.push_back(std::make_unique<PdcClient>(std::move(c)));
    }
    for (int i = 0; i < n_; ++i) {
      names_.push_back(absl::StrFormat("%snode-%05d", prefix_, i));
      if (o_.node_list) node_json_.push_back(NodeJson({names_.back(), 128, 512, kResource, 8}));
    }
    offered_ = KubeSchedulerModel::NumFeasibleNodesToFind(o_.percentage, n_);
    const int pods = std::min(o_.pods, n_ * kDevicesPerNode);
    for (int i = 0; i < pods; ++i) {
      SweepPod p;
      p.vm = absl::StrFormat("%svm-%05d", prefix_, i);
      pods_.push_back(std::move(p));
    }
    absl::StatusOr<std::vector<PendingHandoff>> probe = clients_[0]->ListHandoffs("");
    std::optional<Refusal> refusal = RefusalOf(probe.status());
    if (!probe.ok() && !(refusal && refusal->http_status == 404)) return probe.status();
    handoffs_ = probe.ok();
    return absl::OkStatus();
  }

  absl::Status Inventory(double* seconds) {
    const absl::Time t0 = o_.clock->Now();
    HttpStats stats;
    RETURN_IF_ERROR(Parallel([&](int worker, int i) -> absl::Status {
      NodeInventory inv;
      inv.node = names_[i];
      for (int d = 0; d < kDevicesPerNode; ++d) {
        Device dev;
        dev.address = PciAddress(0, static_cast<uint8_t>(0x10 + d), 0, 0);
        dev.vendor_id = 0x1b36;
        dev.device_id = 0x0010;
        dev.class_code = 0x010802;
        dev.iommu_group = d;
        dev.numa_node = static_cast<int16_t>(d / 4);
        dev.serial = absl::StrFormat("%s-SN%d", names_[i], d);
        dev.driver = "vfio-pci";
        inv.devices.push_back(std::move(dev));
      }
      absl::StatusOr<api::InventoryAccepted> r =
          Rest(&stats, "inventory", [&] { return clients_[worker]->PutInventory(inv); });
      if (!r.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("inventory of ", inv.node, ": ", r.status().message()));
      }
      return absl::OkStatus();
    }, n_));
    *seconds = Since(*o_.clock, t0);
    return absl::OkStatus();
  }

  // One phase: every pod scheduled once (with retries).
  absl::Status Phase(bool restart, SweepPhase* out) {
    out->name = restart ? "restart" : "first-start";
    HttpStats stats;
    if (restart) RETURN_IF_ERROR(ReleaseAllClaims());
    NamePodsForPhase(restart);
    const absl::Time t0 = o_.clock->Now();
    std::vector<std::thread> binders;
    for (int b = 0; b < o_.binders; ++b) {
      binders.emplace_back([&, b] { BinderLoop(b + 1, &stats, out); });
    }
    absl::Status failure = ScheduleAll(&stats, out);
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    for (std::thread& t : binders) t.join();
    out->wall_seconds = Since(*o_.clock, t0);
    {
      absl::MutexLock lock(&mu_);
      stop_ = false;
      if (failure.ok()) failure = bind_failure_;
    }
    if (!failure.ok()) return failure;
    for (const SweepPod& p : pods_) out->pods_placed += p.node >= 0;
    out->verbs = stats.Summaries();
    malformed_ += stats.malformed_total();
    requests_ += stats.requests_total();
    for (const std::string& e : stats.malformed_examples()) examples_.push_back(e);
    return absl::OkStatus();
  }

  int offered() const { return offered_; }
  int pods() const { return static_cast<int>(pods_.size()); }
  uint64_t malformed() const { return malformed_ + stats_release_.malformed_total(); }
  uint64_t requests() const { return requests_ + stats_release_.requests_total(); }
  const std::vector<std::string>& examples() const { return examples_; }

 private:
  // Before the restart phase the VMs stop: their pods go, the claims are
  // released (kept bound).
  absl::Status ReleaseAllClaims() {
    return Parallel([&](int worker, int i) -> absl::Status {
      const SweepPod& p = pods_[i];
      if (!p.claim.has_value()) return absl::OkStatus();
      absl::StatusOr<Claim> r = Rest(&stats_release_, "release", [&] {
        return clients_[worker]->ReleaseClaim(*p.claim, p.uid);
      });
      if (!r.ok()) {
        return absl::InternalError(
            absl::StrCat("release ", p.claim->ToString(), ": ", r.status().message()));
      }
      return absl::OkStatus();
    }, static_cast<int>(pods_.size()));
  }

  // Each phase's pods are new pods of the same VMs: new names and UIDs.
  void NamePodsForPhase(bool restart) {
    for (size_t i = 0; i < pods_.size(); ++i) {
      SweepPod& p = pods_[i];
      p.attempts = 0;
      p.bound_node = restart ? p.node : -1;
      p.node = -1;
      p.name = absl::StrCat("virt-launcher-", p.vm, restart ? "-b" : "-a");
      p.uid = absl::StrFormat("%s%05d-%s", prefix_, i, restart ? "2" : "1");
    }
  }

  // kube-scheduler's loop: one pod at a time through filter and prioritize,
  // its bind handed to the binders; pods they send back are tried again.
  // Returns when no pod is left to schedule or bind.
  absl::Status ScheduleAll(HttpStats* stats, SweepPhase* out) {
    std::deque<int> queue;
    for (size_t i = 0; i < pods_.size(); ++i) queue.push_back(static_cast<int>(i));
    while (RefillQueue(&queue)) {
      if (queue.empty()) continue;
      const int next = queue.front();
      queue.pop_front();
      ASSIGN_OR_RETURN(const int node, Schedule(next, stats));
      ++pods_[next].attempts;
      if (node < 0) {
        RetryLater(next, out);
        continue;
      }
      absl::MutexLock lock(&mu_);
      ++in_flight_;
      jobs_.emplace_back(next, node);
    }
    return absl::OkStatus();
  }

  // Moves the pods the binders sent back into `queue`; with none to
  // schedule, waits for a bind to come back first (it may send its pod
  // back). False when nothing is left to schedule and no bind is in flight.
  bool RefillQueue(std::deque<int>* queue) {
    absl::MutexLock lock(&mu_);
    for (int r : retry_) queue->push_back(r);
    retry_.clear();
    if (!queue->empty()) return true;
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return in_flight_ == 0 || !retry_.empty();
    };
    mu_.Await(absl::Condition(&idle));
    for (int r : retry_) queue->push_back(r);
    retry_.clear();
    return !queue->empty() || in_flight_ != 0;
  }

  // Pod `i` fit no node: gives up after kMaxAttempts, else queues it again.
  void RetryLater(int i, SweepPhase* out) {
    absl::MutexLock lock(&mu_);
    if (pods_[i].attempts >= kMaxAttempts) {
      ++out->unplaced;
    } else if (in_flight_ == 0) {
      retry_.push_back(i);  // The next window of nodes may fit.
    } else {
      // Nothing fits now (another pod's hand-off is pending where this
      // one fits): wait for binds in flight, then try again.
      auto changed = [this, seen = done_binds_]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return done_binds_ != seen;
      };
      mu_.Await(absl::Condition(&changed));
      retry_.push_back(i);
    }
  }

  // Filter + prioritize for pod `i`; the chosen node, or -1 when none.
  absl::StatusOr<int> Schedule(int i, HttpStats* stats) {
    SweepPod& p = pods_[i];
    PodInfo info{"default", p.name, p.uid, p.vm, absl::StrCat("vmi-", p.vm), kResource, 1, 8, 32,
                 {}};
    const std::string pod = VirtLauncherPodJson(info);
    std::vector<int> idx;
    std::vector<std::string_view> offer;
    if (p.bound_node >= 0 && o_.percentage != 100) {
      // Below 100 % the VM's node is rarely in kube-scheduler's window: pdc
      // then relies on node affinity to the claims' node (docs/design.md
      // §5.7), so kube-scheduler offers that node alone.
      idx.push_back(p.bound_node);
      offer.push_back(names_[p.bound_node]);
    } else {
      for (int k = 0; k < offered_; ++k) {
        const int n = (start_ + k) % n_;
        idx.push_back(n);
        offer.push_back(names_[n]);
      }
      start_ = (start_ + offered_) % n_;
    }
    ASSIGN_OR_RETURN(HttpResponse fr,
                     Call(0, stats, "filter", "POST", "/scheduler/filter", Args(pod, idx, offer)));
    absl::StatusOr<FilterAnswer> fa =
        fr.status == 200 ? ParseFilterAnswer(fr.body, offer, o_.node_list)
                         : absl::InvalidArgumentError(absl::StrCat("HTTP ", fr.status));
    if (!fa.ok()) {
      stats->Malformed("filter", StdSv(fa.status().message()));
      return -1;
    }
    if (!fa->error.empty() || fa->passed.empty()) return -1;
    std::vector<size_t> passed = fa->passed;
    std::sort(passed.begin(), passed.end());
    std::vector<int> pidx;
    std::vector<std::string_view> pnames;
    for (size_t k : passed) {
      pidx.push_back(idx[k]);
      pnames.push_back(offer[k]);
    }
    // kube-scheduler does not prioritize a single feasible node.
    if (pidx.size() == 1) return pidx[0];
    ASSIGN_OR_RETURN(HttpResponse pr, Call(0, stats, "prioritize", "POST", "/scheduler/prioritize",
                                           Args(pod, pidx, pnames)));
    absl::StatusOr<std::vector<int>> scores =
        pr.status == 200 ? ParsePriorityAnswer(pr.body, pnames)
                         : absl::InvalidArgumentError(absl::StrCat("HTTP ", pr.status));
    if (!scores.ok()) {
      stats->Malformed("prioritize", StdSv(scores.status().message()));
      return -1;
    }
    // The plugins' scores are equal on identical nodes: the extender decides;
    // ties go to the first offered.
    size_t best = 0;
    for (size_t k = 1; k < scores->size(); ++k) {
      if ((*scores)[k] > (*scores)[best]) best = k;
    }
    return pidx[best];
  }

  void BinderLoop(int worker, HttpStats* stats, SweepPhase* out) {
    while (true) {
      std::pair<int, int> job;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_ || !jobs_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (jobs_.empty()) return;
        job = jobs_.front();
        jobs_.pop_front();
      }
      absl::StatusOr<bool> bound = BindAndHandOff(worker, stats, job.first, job.second);
      absl::MutexLock lock(&mu_);
      --in_flight_;
      ++done_binds_;
      if (!bound.ok()) {
        if (bind_failure_.ok()) bind_failure_ = bound.status();
      } else if (!*bound) {
        ++out->bind_refused;
        if (pods_[job.first].attempts < kMaxAttempts) {
          retry_.push_back(job.first);
        } else {
          ++out->unplaced;
        }
      }
    }
  }

  // Bind, then pdc-node's hand-off. false: the extender refused the bind.
  absl::StatusOr<bool> BindAndHandOff(int worker, HttpStats* stats, int i, int node) {
    SweepPod& p = pods_[i];
    const std::string& node_name = names_[node];
    ASSIGN_OR_RETURN(HttpResponse br,
                     Call(worker, stats, "bind", "POST", "/scheduler/bind",
                          BindingArgsJson(p.name, "default", p.uid, node_name)));
    absl::StatusOr<std::string> err =
        br.status == 200 ? ParseBindAnswer(br.body)
                         : absl::InvalidArgumentError(absl::StrCat("HTTP ", br.status));
    if (!err.ok()) {
      stats->Malformed("bind", StdSv(err.status().message()));
      return false;
    }
    if (!err->empty()) return false;
    absl::StatusOr<NodeAllocations> a = Rest(stats, "allocations", [&] {
      return clients_[worker]->GetNodeAllocations(node_name, 0, absl::ZeroDuration());
    });
    if (!a.ok()) {
      stats->Malformed("allocations", StdSv(a.status().message()));
      return absl::InternalError(absl::StrCat("allocations of ", node_name, ": ",
                                              a.status().message()));
    }
    std::vector<PciAddress> devices;
    std::optional<ClaimKey> claim;
    for (const NodeAllocation& e : a->claimed) {
      if (!e.reserved_for || e.reserved_for->pod_uid != p.uid) continue;
      devices.push_back(e.address);
      claim = e.claim;
    }
    if (devices.empty()) {
      stats->Malformed("allocations", absl::StrCat("no device reserved for pod ", p.uid,
                                                   " on ", node_name, " after its bind"));
      return false;
    }
    if (handoffs_) {
      api::HandoffConfirm confirm{p.uid, kResource, devices};
      absl::StatusOr<std::vector<ClaimKey>> h = Rest(stats, "handoff", [&] {
        return clients_[worker]->ConfirmHandoff(node_name, confirm);
      });
      if (!h.ok()) {
        if (!RefusalOf(h.status()).has_value() && !absl::IsInvalidArgument(h.status())) {
          return h.status();  // No answer.
        }
        stats->Malformed("handoff", StdSv(h.status().message()));
      }
    }
    p.node = node;
    p.claim = claim;
    return true;
  }

  std::string Args(const std::string& pod, const std::vector<int>& idx,
                   const std::vector<std::string_view>& names) const {
    if (!o_.node_list) return ExtenderArgsJson(pod, names);
    std::vector<const std::string*> items;
    for (int n : idx) items.push_back(&node_json_[n]);
    return ExtenderArgsNodeListJson(pod, items);
  }

  // fn(worker, i) for i in [0, count), on `binders` threads.
  template <typename Fn>
  absl::Status Parallel(Fn fn, int count) {
    std::atomic<int> next{0};
    std::vector<absl::Status> errors(o_.binders);
    std::vector<std::thread> threads;
    for (int w = 0; w < o_.binders; ++w) {
      threads.emplace_back([&, w] {
        for (int i = next++; i < count; i = next++) {
          absl::Status s = fn(w + 1, i);
          if (!s.ok()) {
            errors[w] = s;
            return;
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& s : errors) RETURN_IF_ERROR(s);
    return absl::OkStatus();
  }

  // One kube-scheduler wire call on connection `client`, timed.
  absl::StatusOr<HttpResponse> Call(int client, HttpStats* stats, std::string_view verb,
                                    std::string_view method, std::string_view target,
                                    std::string_view body) {
    const absl::Time t0 = o_.clock->Now();
    absl::StatusOr<HttpResponse> r = clients_[client]->http().Do(method, target, body);
    if (!r.ok()) return r.status();
    stats->Record(verb, absl::ToInt64Nanoseconds(o_.clock->Now() - t0));
    return r;
  }

  // One REST call through a PdcClient, timed like Call(): every answered
  // call counts, a transport error passes through.
  template <typename Fn>
  auto Rest(HttpStats* stats, std::string_view verb, Fn call) -> decltype(call()) {
    const absl::Time t0 = o_.clock->Now();
    auto r = call();
    if (r.ok() || RefusalOf(r.status()).has_value()) {
      stats->Record(verb, absl::ToInt64Nanoseconds(o_.clock->Now() - t0));
    }
    return r;
  }

  const SweepOptions& o_;
  const std::string url_;
  const int n_;
  const std::string prefix_;
  std::vector<std::unique_ptr<PdcClient>> clients_;  // [0] scheduling, [1..] binders.
  std::vector<std::string> names_, node_json_;
  std::vector<SweepPod> pods_;
  int offered_ = 0;
  int start_ = 0;
  bool handoffs_ = false;
  HttpStats stats_release_;
  uint64_t malformed_ = 0, requests_ = 0;
  std::vector<std::string> examples_;

  absl::Mutex mu_;
  std::deque<std::pair<int, int>> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<int> retry_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t done_binds_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status bind_failure_ ABSL_GUARDED_BY(mu_);
};

const VerbSummary* Verb(const SweepPhase& p, std::string_view verb) {
  for (const VerbSummary& v : p.verbs) {
    if (v.verb == verb) return &v;
  }
  return nullptr;
}

int SweepUsage(const std::string& why) {
  std::cerr << "pdc-sim sweep: " << why << "\nrun `pdc-sim --help` for usage\n";
  return 2;
}

// Reads sweep's flags; an error's message names the flag.
absl::Status ParseSweepArgs(const std::vector<std::string>& args, SweepOptions* o,
                            std::vector<int>* nodes, std::string* out) {
  auto usage = [](const std::string& why) { return absl::InvalidArgumentError(why); };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* v) {
      if (i + 1 >= args.size()) return false;
      *v = args[++i];
      return true;
    };
    std::string v;
    auto number = [&](int* n, int min) {
      return value(&v) && absl::SimpleAtoi(v, n) && *n >= min;
    };
    if (a == "--nodes") {
      nodes->clear();
      if (!value(&v)) return usage("--nodes needs a list");
      for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        int n = 0;
        if (!absl::SimpleAtoi(part, &n) || n < 1) return usage("--nodes: bad count");
        nodes->push_back(n);
      }
    } else if (a == "--pods") {
      if (!number(&o->pods, 1)) return usage("--pods needs a number >= 1");
    } else if (a == "--binders") {
      if (!number(&o->binders, 1)) return usage("--binders needs a number >= 1");
    } else if (a == "--percentage") {
      if (!number(&o->percentage, 0) || o->percentage > 100) {
        return usage("--percentage needs 0..100 (0: kube-scheduler's adaptive default)");
      }
    } else if (a == "--extender") {
      if (!value(&o->url)) return usage("--extender needs a URL");
    } else if (a == "--spawn-extender") {
      if (!value(&o->spawn_binary)) return usage("--spawn-extender needs a path");
    } else if (a == "--node-list") {
      o->node_list = true;
    } else if (a == "--out") {
      if (!value(out)) return usage("--out needs a directory");
    } else {
      return usage("unknown argument " + a);
    }
  }
  if (o->url.empty() == o->spawn_binary.empty()) {
    return usage("give exactly one of --extender URL and --spawn-extender PATH");
  }
  return absl::OkStatus();
}

// One sweep step of `nodes` nodes against --extender, or against a
// pdc-extender spawned for this step alone; appends it to `steps`. Returns
// the exit code (errors said on stderr).
int RunSweepStepAt(const SweepOptions& o, int nodes, std::vector<SweepStep>* steps) {
  std::unique_ptr<ExtenderProcess> spawned;
  std::string url = o.url;
  if (!o.spawn_binary.empty()) {
    ExtenderProcessOptions eo;
    eo.binary = o.spawn_binary;
    DeviceClass nvme;
    nvme.resource_name = kResource;
    nvme.selectors.push_back(PciSelector{0x1b36, 0x0010, std::nullopt});
    eo.device_classes.push_back(nvme);
    absl::StatusOr<std::unique_ptr<ExtenderProcess>> p = ExtenderProcess::Start(eo);
    if (!p.ok()) {
      std::cerr << "pdc-sim sweep: " << p.status().message() << "\n";
      return 1;
    }
    spawned = *std::move(p);
    url = spawned->url();
  }
  std::cerr << "[pdc-sim sweep] " << nodes << " nodes against " << url << " ...\n";
  absl::StatusOr<SweepStep> step = RunSweepStep(o, url, nodes, absl::StrCat("s", nodes, "-"));
  if (spawned != nullptr) {
    absl::StatusOr<int> stopped = spawned->Stop();
    if (!stopped.ok() || *stopped != 0) {
      std::cerr << "pdc-sim sweep: pdc-extender did not stop cleanly\n";
      return 1;
    }
  }
  if (!step.ok()) {
    std::cerr << "pdc-sim sweep: " << nodes << " nodes: " << step.status() << "\n";
    return 1;
  }
  steps->push_back(*std::move(step));
  return 0;
}

// The table of every step, the malformed answers, and sweep.csv and
// sweep.json in `out`. Returns the exit code: 1 when an answer was malformed.
int ReportSweep(const std::vector<SweepStep>& steps, const std::string& out) {
  std::cout << "\n" << FormatSweepTable(steps);
  uint64_t bad = 0;
  for (const SweepStep& s : steps) {
    bad += s.malformed;
    for (const std::string& e : s.malformed_examples) std::cout << "  malformed: " << e << "\n";
  }
  if (absl::Status s = MakeDirectories(out); !s.ok()) {
    std::cerr << "pdc-sim sweep: " << s << "\n";
    return 1;
  }
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"sweep.csv", SweepCsv(steps)},
                                   {"sweep.json", SweepJson(steps)}}) {
    if (absl::Status s = WriteFileAtomically(out + "/" + name, text); !s.ok()) {
      std::cerr << "pdc-sim sweep: " << s << "\n";
      return 1;
    }
  }
  std::cout << "answers malformed: " << bad << "\nwrote " << out << "/{sweep.csv,sweep.json}\n";
  return bad == 0 ? 0 : 1;
}

}  // namespace

absl::StatusOr<SweepStep> RunSweepStep(const SweepOptions& options, const std::string& url,
                                       int nodes, const std::string& prefix) {
  if (nodes < 1) return absl::InvalidArgumentError("a sweep step needs at least one node");
  if (options.binders < 1) return absl::InvalidArgumentError("--binders must be >= 1");
  Step step(options, url, nodes, prefix);
  RETURN_IF_ERROR(step.Init());
  SweepStep out;
  out.nodes = nodes;
  out.offered = step.offered();
  out.pods = step.pods();
  const absl::Time step_started = options.clock->Now();
  RETURN_IF_ERROR(step.Inventory(&out.inventory_seconds));
  for (bool restart : {false, true}) {
    if (restart && Since(*options.clock, step_started) - out.inventory_seconds > 20) {
      // pdc-node's heartbeat: an extender started with the default
      // nodeStaleAfter (60 s) must not see the nodes go stale mid-step.
      double again = 0;
      RETURN_IF_ERROR(step.Inventory(&again));
    }
    SweepPhase phase;
    RETURN_IF_ERROR(step.Phase(restart, &phase));
    out.phases.push_back(std::move(phase));
  }
  out.requests = step.requests();
  out.malformed = step.malformed();
  out.malformed_examples = step.examples();
  return out;
}

std::string FormatSweepTable(const std::vector<SweepStep>& steps) {
  std::string o = absl::StrFormat(
      "%6s %7s %5s %-11s %15s %15s %15s %15s %8s %7s %8s %9s\n", "nodes", "offered", "pods",
      "phase", "filter p50/p99", "prio p50/p99", "bind p50/p99", "handoff p50/p99", "pods/s",
      "refused", "unplaced", "malformed");
  for (const SweepStep& s : steps) {
    for (const SweepPhase& p : s.phases) {
      auto cell = [&](std::string_view verb) {
        const VerbSummary* v = Verb(p, verb);
        return v == nullptr ? std::string("-")
                            : absl::StrFormat("%.2f/%.2f", v->p50_ms, v->p99_ms);
      };
      absl::StrAppendFormat(&o, "%6d %7d %5d %-11s %15s %15s %15s %15s %8.0f %7d %8d %9d\n",
                            s.nodes, s.offered, s.pods, p.name, cell("filter"),
                            cell("prioritize"), cell("bind"), cell("handoff"),
                            p.wall_seconds > 0 ? p.pods_placed / p.wall_seconds : 0.0,
                            p.bind_refused, p.unplaced, s.malformed);
    }
  }
  o += "(latencies in ms, wall clock per request; pods/s: pods placed per second of the phase;\n"
       " refused: binds answered with an Error, retried; unplaced: gave up after 10 attempts)\n";
  return o;
}

std::string SweepCsv(const std::vector<SweepStep>& steps) {
  std::string o =
      "nodes,offered,pods,phase,verb,requests,p50_ms,p90_ms,p99_ms,max_ms,mean_ms,malformed,"
      "phase_wall_s,pods_per_s,bind_refused,unplaced\n";
  for (const SweepStep& s : steps) {
    for (const SweepPhase& p : s.phases) {
      for (const VerbSummary& v : p.verbs) {
        absl::StrAppendFormat(&o, "%d,%d,%d,%s,%s,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%d,%.3f,%.1f,%d,%d\n",
                              s.nodes, s.offered, s.pods, p.name, v.verb, v.count, v.p50_ms,
                              v.p90_ms, v.p99_ms, v.max_ms, v.mean_ms, v.malformed,
                              p.wall_seconds,
                              p.wall_seconds > 0 ? p.pods_placed / p.wall_seconds : 0.0,
                              p.bind_refused, p.unplaced);
      }
    }
  }
  return o;
}

std::string SweepJson(const std::vector<SweepStep>& steps) {
  std::string o = "{\"steps\": [";
  for (size_t i = 0; i < steps.size(); ++i) {
    const SweepStep& s = steps[i];
    absl::StrAppendFormat(&o,
                          "%s\n  {\"nodes\": %d, \"offered\": %d, \"pods\": %d, "
                          "\"inventory_seconds\": %.3f, \"requests\": %d, \"malformed\": %d, "
                          "\"phases\": [",
                          i ? "," : "", s.nodes, s.offered, s.pods, s.inventory_seconds,
                          s.requests, s.malformed);
    for (size_t k = 0; k < s.phases.size(); ++k) {
      const SweepPhase& p = s.phases[k];
      absl::StrAppendFormat(&o,
                            "%s\n    {\"phase\": \"%s\", \"wall_seconds\": %.3f, "
                            "\"pods_placed\": %d, \"pods_per_second\": %.1f, "
                            "\"bind_refused\": %d, \"unplaced\": %d, \"verbs\": %s}",
                            k ? "," : "", p.name, p.wall_seconds, p.pods_placed,
                            p.wall_seconds > 0 ? p.pods_placed / p.wall_seconds : 0.0,
                            p.bind_refused, p.unplaced, VerbJsonArray(p.verbs, "    "));
    }
    o += "]}";
  }
  o += "\n]}\n";
  return o;
}

int SweepMain(const std::vector<std::string>& args) {
  SweepOptions o;
  std::vector<int> nodes = {100, 1000, 5000, 10000};
  std::string out = "out/sweep";
  if (absl::Status s = ParseSweepArgs(args, &o, &nodes, &out); !s.ok()) {
    return SweepUsage(std::string(s.message()));
  }
  std::vector<SweepStep> steps;
  for (int n : nodes) {
    if (const int failed = RunSweepStepAt(o, n, &steps); failed != 0) return failed;
    std::cout << FormatSweepTable({steps.back()}) << std::flush;
  }
  return ReportSweep(steps, out);
}

}  // namespace pdc::sim
