#include "sim/simulation.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <thread>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "sim/cluster.h"
#include "sim/cluster_state.h"
#include "sim/event_queue.h"
#include "sim/policy.h"
#include "sim/rng.h"
#include "sim/start_path.h"

namespace pdc::sim {
namespace {

// Simulated time for the allocator: a fixed epoch plus the run's clock.
class SimClock final : public Clock {
 public:
  absl::Time Now() const override {
    return kSimEpoch + absl::Microseconds(now_.load(std::memory_order_relaxed));
  }
  // Simulated time moves only with the event queue; nothing in a run waits
  // on it, so a wait returns at once.
  bool WaitUntil(absl::Time, const absl::Notification*) const override {
    return true;
  }
  void Set(SimTime t) { now_.store(t, std::memory_order_relaxed); }

 private:
  std::atomic<SimTime> now_{0};
};

// kube-scheduler retries an unschedulable pod after 1, 2, 4, 8 and 10 s
// (podInitialBackoff/podMaxBackoff); after that the pod waits in the
// unschedulable queue for a cluster event or the periodic flush. One minute
// stands for that wait.
// With the start-path model (boot storms) a rejected pod comes back after
// its backoff alone, capped at podMaxBackoffSeconds: in a storm a cluster
// event (another pod bound or turning Running) moves it out of the
// unschedulable queue well within that.
SimTime RetryDelay(int attempts, const StartPathSpec& sp) {
  static constexpr SimTime kDelays[] = {1 * kSecond, 2 * kSecond, 4 * kSecond,
                                        8 * kSecond, 10 * kSecond};
  if (sp.enabled) {
    return std::min(attempts <= 5 ? kDelays[attempts - 1] : sp.max_backoff, sp.max_backoff);
  }
  return attempts <= 5 ? kDelays[attempts - 1] : kMinute;
}

// Pods on a failed node are evicted after the default 300 s toleration of
// node.kubernetes.io/unreachable; only then does KubeVirt start the VM anew.
constexpr SimTime kNodeFailureEviction = 5 * kMinute;

// Events that come from the workload and failure streams, the same for every
// policy; the others follow from what a policy decided.
bool Exogenous(EventType t) {
  switch (t) {
    case EventType::kRetry:
    case EventType::kSample:
    case EventType::kKubeletArrive:
    case EventType::kHandoff:
    case EventType::kVmRunning:
    case EventType::kPodFailed:
      return false;
    default:
      return true;
  }
}

struct Vm {
  VmInfo info;
  Rng rng;
  uint32_t epoch = 0;
  bool deleted = false;
  // kStarting: placed, its devices taken, on the start path (start_path.h).
  enum class State : uint8_t { kStopped, kPending, kStarting, kRunning } state = State::kStopped;
  SimTime requested_at = 0;
  uint32_t gen = 0;
  int attempts = 0;
  std::string last_reason;
  int node = -1;
  std::vector<int> devices;
  bool placed_before = false;
  int last_node = -1;
  std::vector<int> last_devices;
  uint64_t pods = 0;
  std::string pod_name, pod_uid;
  int storm = -1;  // The node reboot whose recovery this VM counts in.
  SimTime storm_ready = 0;
  std::vector<int> storm_devices;  // Its devices when the hosts went down.
};

class Run {
 public:
  Run(const Scenario& s, const Cluster& c, std::string_view policy,
      const RunOptions& options)
      : s_(s), c_(c), policy_name_(policy), options_(options), state_(c) {
    m_.policy = std::string(policy);
  }

  absl::Status Execute() {
    PolicyContext ctx{&s_, &c_, &state_, &clock_,
                      Rng::Stream(s_.seed, kStreamPolicy, 0).Next(), options_.http,
                      options_.http_stats};
    ASSIGN_OR_RETURN(policy_, NewPolicy(policy_name_, ctx));
    if (s_.start_path.enabled) {
      style_ = policy_->start_style();
      start_ = std::make_unique<StartPathModel>(
          s_.start_path, c_, style_, Rng::Stream(s_.seed, kStreamStartPath, 0).Next());
    }
    for (const NodeRebootSpec& r : s_.node_reboots) {
      StormMetrics sm;
      sm.name = r.name;
      m_.storms.push_back(std::move(sm));
      std::vector<int> nodes;
      for (size_t n = 0; n < c_.nodes.size(); ++n) {
        const std::string& name = c_.nodes[n].name;
        const bool listed = std::find(r.nodes.begin(), r.nodes.end(), name) != r.nodes.end();
        if (listed || (!r.group.empty() && InGroup(name, r.group))) {
          nodes.push_back(static_cast<int>(n));
        }
      }
      m_.storms.back().nodes = nodes.size();
      reboot_nodes_.push_back(std::move(nodes));
    }
    Schedule();
    RETURN_IF_ERROR(Loop());
    Finish();
    return absl::OkStatus();
  }

  PolicyMetrics& metrics() { return m_; }
  SimTime end() const { return end_; }
  uint64_t exogenous() const { return exogenous_; }
  size_t vm_count() const { return vms_.size(); }

 private:
  void Schedule() {
    // Samples first: at equal times the queue keeps insertion order, so a
    // sample always sees the state just before that instant's other events.
    for (SimTime t = s_.sample_every; t <= s_.duration; t += s_.sample_every) {
      queue_.Push(t, EventType::kSample);
    }
    next_index_.assign(s_.vm_groups.size(), 0);
    for (size_t g = 0; g < s_.vm_groups.size(); ++g) {
      for (int i = 0; i < s_.vm_groups[g].count; ++i) {
        const int id = NewVm(static_cast<int>(g));
        const SimTime max = s_.vm_groups[g].start_at_max;
        queue_.Push(max > 0 ? static_cast<SimTime>(vms_[id].rng.Below(max + 1)) : 0,
                    EventType::kVmCreate, id);
      }
    }
    node_rng_ = Rng::Stream(s_.seed, kStreamNodeFailures, 0);
    device_rng_ = Rng::Stream(s_.seed, kStreamDeviceFailures, 0);
    mass_rng_ = Rng::Stream(s_.seed, kStreamMassRestart, 0);
    if (s_.node_failures.every) {
      queue_.Push(s_.node_failures.every->Sample(node_rng_), EventType::kNodeFail, -1);
    }
    for (size_t i = 0; i < s_.node_failure_list.size(); ++i) {
      const NodeFailureSpec& f = s_.node_failure_list[i];
      int node = 0;
      while (c_.nodes[node].name != f.node) ++node;  // Validated to exist.
      queue_.Push(f.at, EventType::kNodeFail, node, static_cast<uint32_t>(i + 1));
    }
    if (s_.device_failures.every) {
      queue_.Push(s_.device_failures.every->Sample(device_rng_), EventType::kDeviceFail, -1);
    }
    if (s_.mass_restart_every) {
      queue_.Push(s_.mass_restart_every->Sample(mass_rng_), EventType::kMassRestart);
    }
    for (size_t r = 0; r < s_.node_reboots.size(); ++r) {
      queue_.Push(s_.node_reboots[r].at, EventType::kNodeReboot, static_cast<int32_t>(r));
    }
  }

  // `name` is prefix + digits (Cluster::Build's node names).
  static bool InGroup(const std::string& name, const std::string& prefix) {
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) {
      return false;
    }
    return std::all_of(name.begin() + prefix.size(), name.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
  }

  int NewVm(int group) {
    const VmGroupSpec& g = s_.vm_groups[group];
    Vm vm;
    vm.info.id = static_cast<int>(vms_.size());
    int width = std::max<int>(2, static_cast<int>(std::to_string(g.count - 1).size()));
    vm.info.name = absl::StrFormat("%s%0*d", g.prefix, width, next_index_[group]++);
    vm.info.group = group;
    vm.info.shape = VmShape{g.cpu, g.memory_gib, g.class_index, g.device_count};
    vm.info.explicit_claims = g.explicit_claims;
    vm.rng = Rng::Stream(s_.seed, kStreamVm, vm.info.id);
    vms_.push_back(std::move(vm));
    return vms_.back().info.id;
  }

  absl::Status Loop() {
    end_ = s_.duration;
    uint64_t processed = 0;
    while (!queue_.empty()) {
      const Event e = queue_.top();
      if (e.time > s_.duration) break;
      if (Exogenous(e.type) && !Stale(e)) {
        if (s_.max_events != 0 && exogenous_ >= s_.max_events) {
          end_ = e.time;
          break;
        }
        ++exogenous_;
      }
      queue_.Pop();
      now_ = e.time;
      clock_.Set(now_);
      RETURN_IF_ERROR(Handle(e));
      if ((++processed & 0xffff) == 0 && options_.progress) {
        const double by_time = static_cast<double>(now_) / s_.duration;
        const double by_events =
            s_.max_events ? static_cast<double>(exogenous_) / s_.max_events : 0;
        options_.progress(policy_name_, std::max(by_time, by_events));
      }
    }
    now_ = end_;
    clock_.Set(now_);
    if (m_.series.empty() || m_.series.back().time < end_) RETURN_IF_ERROR(Sample());
    return absl::OkStatus();
  }

  bool Stale(const Event& e) const {
    if (e.type != EventType::kVmWantStart && e.type != EventType::kVmWantStop) {
      return false;
    }
    const Vm& vm = vms_[e.a];
    return vm.deleted || vm.epoch != e.b;
  }

  absl::Status Handle(const Event& e) {
    switch (e.type) {
      case EventType::kVmCreate:
        return Create(vms_[e.a]);
      case EventType::kVmWantStart:
        return Stale(e) ? absl::OkStatus() : WantStart(vms_[e.a]);
      case EventType::kVmWantStop:
        return Stale(e) ? absl::OkStatus() : WantStop(vms_[e.a]);
      case EventType::kVmDelete:
        return Delete(vms_[e.a]);
      case EventType::kRetry: {
        Vm& vm = vms_[e.a];
        if (vm.state != Vm::State::kPending || vm.gen != e.b) return absl::OkStatus();
        return TryPlace(vm);
      }
      case EventType::kNodeFail:
        return NodeFail(e);
      case EventType::kNodeRepair:
        return NodeRepair(e.a);
      case EventType::kDeviceFail:
        return DeviceFail();
      case EventType::kDeviceRepair:
        state_.SetHealthy(e.a, true);
        return policy_->OnDeviceHealth(e.a, true);
      case EventType::kMassRestart:
        return MassRestart();
      case EventType::kSample:
        return Sample();
      case EventType::kKubeletArrive:
        return KubeletArrive(e);
      case EventType::kHandoff: {
        Vm& vm = vms_[e.a];
        if (vm.state != Vm::State::kStarting || vm.gen != e.b) return absl::OkStatus();
        return policy_->OnHandoff(vm.info, vm.pod_uid);
      }
      case EventType::kVmRunning:
        return VmRunning(e);
      case EventType::kPodFailed:
        return PodFailed(e);
      case EventType::kNodeReboot:
        return NodeReboot(e.a);
      case EventType::kNodeBack:
        return NodeBack(e.a);
    }
    return absl::InternalError("unknown event");
  }

  // --- Workload ------------------------------------------------------------
  absl::Status Create(Vm& vm) {
    RETURN_IF_ERROR(policy_->OnVmCreated(vm.info));
    const VmGroupSpec& g = s_.vm_groups[vm.info.group];
    RETURN_IF_ERROR(WantStart(vm));
    if (g.lifetime) {
      queue_.Push(now_ + g.lifetime->Sample(vm.rng), EventType::kVmDelete, vm.info.id);
    }
    return absl::OkStatus();
  }

  absl::Status WantStart(Vm& vm) {
    const VmGroupSpec& g = s_.vm_groups[vm.info.group];
    if (g.run) {
      queue_.Push(now_ + std::max<SimTime>(1, g.run->Sample(vm.rng)),
                  EventType::kVmWantStop, vm.info.id, vm.epoch);
    }
    return RequestStart(vm, 0);
  }

  absl::Status WantStop(Vm& vm) {
    const VmGroupSpec& g = s_.vm_groups[vm.info.group];
    queue_.Push(now_ + std::max<SimTime>(1, g.stop.Sample(vm.rng)),
                EventType::kVmWantStart, vm.info.id, vm.epoch);
    return Halt(vm, "VM stopped while pending");
  }

  absl::Status Delete(Vm& vm) {
    RETURN_IF_ERROR(Halt(vm, "VM deleted while pending"));
    RETURN_IF_ERROR(policy_->OnVmDeleted(vm.info));
    vm.deleted = true;
    // A deleted VM is replaced by a new one of its group, keeping the
    // population constant.
    const int id = NewVm(vm.info.group);
    queue_.Push(now_, EventType::kVmCreate, id);
    return absl::OkStatus();
  }

  absl::Status MassRestart() {
    for (Vm& vm : vms_) {
      // VMs that are meant to be stopped stay stopped; the rest stop now and
      // come back after their own delay, so they restart in random order.
      if (vm.deleted || vm.state == Vm::State::kStopped) continue;
      ++vm.epoch;
      RETURN_IF_ERROR(Halt(vm, "VM stopped while pending"));
      queue_.Push(now_ + s_.mass_restart_down.Sample(vm.rng), EventType::kVmWantStart,
                  vm.info.id, vm.epoch);
    }
    queue_.Push(now_ + std::max<SimTime>(1, s_.mass_restart_every->Sample(mass_rng_)),
                EventType::kMassRestart);
    return absl::OkStatus();
  }

  static bool Running(const Vm& vm) { return vm.state == Vm::State::kRunning; }

  // The VM's pod goes away: running (or starting) -> stopped, pending ->
  // given up.
  absl::Status Halt(Vm& vm, std::string_view why_pending) {
    if (vm.state == Vm::State::kRunning || vm.state == Vm::State::kStarting) {
      return StopPod(vm);
    }
    if (vm.state == Vm::State::kPending) {
      ++m_.unplaced;
      ++m_.unplaced_reasons[vm.last_reason.empty() ? std::string(why_pending)
                                                   : vm.last_reason];
      vm.state = Vm::State::kStopped;
      ++vm.gen;
    }
    return absl::OkStatus();
  }

  absl::Status StopPod(Vm& vm) {
    state_.Vacate(vm.node, vm.info.shape, vm.devices);
    vm.state = Vm::State::kStopped;
    ++vm.gen;  // Whatever the start path had scheduled for this pod is void.
    vm.node = -1;
    vm.devices.clear();
    return policy_->OnVmStopped(vm.info, vm.pod_uid);
  }

  // --- Scheduling ----------------------------------------------------------
  absl::Status RequestStart(Vm& vm, SimTime first_attempt_after) {
    if (vm.state != Vm::State::kStopped) return absl::OkStatus();
    ++m_.start_requests;
    vm.state = Vm::State::kPending;
    vm.requested_at = now_;
    vm.attempts = 0;
    vm.last_reason.clear();
    ++vm.gen;
    ++vm.pods;
    vm.pod_name = absl::StrCat("virt-launcher-", vm.info.name, "-", vm.pods);
    vm.pod_uid = absl::StrFormat("%08x-sim-%s-%d", vm.info.id, vm.info.name, vm.pods);
    if (first_attempt_after > 0) {
      queue_.Push(now_ + first_attempt_after, EventType::kRetry, vm.info.id, vm.gen);
      return absl::OkStatus();
    }
    return TryPlace(vm);
  }

  absl::Status TryPlace(Vm& vm) {
    const StartPathSpec& sp = s_.start_path;
    // Start-path model: kube-scheduler's scheduling cycle takes one pod at a
    // time; a pod whose turn has not come waits in the active queue.
    if (sp.enabled && now_ < scheduler_free_) {
      queue_.Push(scheduler_free_, EventType::kRetry, vm.info.id, vm.gen);
      return absl::OkStatus();
    }
    ++vm.attempts;
    ++m_.attempts;
    ASSIGN_OR_RETURN(Placement p, policy_->Place(vm.info, vm.pod_name, vm.pod_uid));
    const SchedulerSpec& sch = s_.scheduler;
    SimTime cost = sch.cycle +
                   (static_cast<SimTime>(p.nodes_scanned) + p.extender_nodes) *
                       sch.per_node_ns / 1000 +
                   p.extender_calls * sch.extender_call;
    if (sp.enabled) scheduler_free_ = now_ + cost;
    if (!p.placed) {
      ++m_.failed_attempts;
      if (vm.storm >= 0) ++m_.storms[vm.storm].failed_attempts;
      if (p.reason.empty()) p.reason = "unschedulable";
      ++m_.failed_attempt_reasons[p.reason];
      vm.last_reason = std::move(p.reason);
      queue_.Push(now_ + RetryDelay(vm.attempts, sp), EventType::kRetry, vm.info.id, vm.gen);
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(CheckPlacement(vm, p));
    state_.Occupy(vm.info.id, p.node, vm.info.shape, p.devices);
    if (sp.enabled) {
      vm.state = Vm::State::kStarting;
      // The binding cycle runs on its own (asynchronously); DRA's PreBind
      // writes the claim's status first.
      const SimTime bound = now_ + cost + sch.bind +
                            (style_.handoff == HandoffKind::kDra ? sp.claim_write : 0);
      start_->DevicesClaimed(p.node, now_, p.devices);
      queue_.Push(bound + sp.kubelet_watch, EventType::kKubeletArrive, vm.info.id, vm.gen);
    } else {
      vm.state = Vm::State::kRunning;
    }
    vm.node = p.node;
    vm.devices = p.devices;
    m_.latencies.push_back(now_ - vm.requested_at + cost + sch.bind);
    if (vm.attempts > 1) ++m_.placed_after_wait;
    if (vm.placed_before) {
      ++m_.restarts;
      ++window_restarts_;
      if (vm.last_node == p.node) ++m_.same_node;
      if (vm.last_devices == p.devices) {
        ++m_.same_device;
        ++window_same_;
      }
    } else {
      ++m_.first_starts;
    }
    if (options_.trace) {
      std::string t = absl::StrCat(now_, " ", vm.info.name, " ", c_.nodes[p.node].name);
      for (int d : p.devices) absl::StrAppend(&t, " ", c_.devices[d].address.ToString());
      m_.trace.push_back(std::move(t));
    }
    vm.placed_before = true;
    vm.last_node = p.node;
    vm.last_devices = p.devices;
    return absl::OkStatus();
  }

  // A policy may only hand out free, healthy devices of the right class on
  // one Ready node: anything else is a bug in the policy (or the allocator).
  absl::Status CheckPlacement(const Vm& vm, const Placement& p) const {
    auto bad = [&](std::string_view what) {
      return absl::InternalError(absl::StrCat(policy_name_, " placed ", vm.info.name,
                                              " on ", c_.nodes[p.node].name, ": ",
                                              Sv(what)));
    };
    if (p.node < 0 || !state_.node_up[p.node]) return bad("node not ready");
    if (static_cast<int>(p.devices.size()) != vm.info.shape.device_count) {
      return bad(absl::StrCat(p.devices.size(), " devices for a request of ",
                              vm.info.shape.device_count));
    }
    for (int d : p.devices) {
      const SimDevice& dev = c_.devices[d];
      if (dev.node != p.node) return bad("device on another node");
      if (dev.class_index != vm.info.shape.class_index) return bad("wrong class");
      if (!state_.DeviceFree(d)) {
        return bad(absl::StrCat("device ", dev.address.ToString(), " is in use or unhealthy"));
      }
    }
    return absl::OkStatus();
  }

  // --- Start path (start_path.h) -------------------------------------------
  absl::Status KubeletArrive(const Event& e) {
    Vm& vm = vms_[e.a];
    if (vm.state != Vm::State::kStarting || vm.gen != e.b) return absl::OkStatus();
    const PodTimeline tl = start_->Start(vm.node, now_, vm.devices);
    if (tl.failed) {
      queue_.Push(tl.admitted, EventType::kPodFailed, vm.info.id, vm.gen);
      return absl::OkStatus();
    }
    if (style_.confirms_handoff) {
      queue_.Push(tl.handoff, EventType::kHandoff, vm.info.id, vm.gen);
    }
    queue_.Push(tl.running, EventType::kVmRunning, vm.info.id, vm.gen);
    return absl::OkStatus();
  }

  absl::Status VmRunning(const Event& e) {
    Vm& vm = vms_[e.a];
    if (vm.state != Vm::State::kStarting || vm.gen != e.b) return absl::OkStatus();
    vm.state = Vm::State::kRunning;
    if (vm.storm >= 0) {
      StormMetrics& sm = m_.storms[vm.storm];
      sm.recovery.push_back(now_ - vm.storm_ready);
      if (vm.devices == vm.storm_devices) ++sm.same_device;
      vm.storm = -1;
    }
    return absl::OkStatus();
  }

  // kubelet refused the pod (pdc-node's Allocate found a device still off
  // vfio-pci after its wait): the pod fails, KubeVirt makes the next one.
  absl::Status PodFailed(const Event& e) {
    Vm& vm = vms_[e.a];
    if (vm.state != Vm::State::kStarting || vm.gen != e.b) return absl::OkStatus();
    ++m_.admission_failures;
    if (vm.storm >= 0) ++m_.storms[vm.storm].admission_failures;
    RETURN_IF_ERROR(StopPod(vm));
    return RequestStart(vm, s_.start_path.pod_recreate);
  }

  // Devices of `node` that the policy keeps for VMs (pdc's claims), in
  // address order: what pdc-node binds to vfio-pci when it comes up.
  std::vector<int> ClaimedOn(int node) const {
    std::vector<int> out;
    const SimNode& n = c_.nodes[node];
    for (int d = n.first_device; d < n.first_device + n.device_count; ++d) {
      if (policy_->Holds(d)) out.push_back(d);
    }
    return out;
  }

  absl::Status NodeReboot(int r) {
    StormMetrics& sm = m_.storms[r];
    for (int node : reboot_nodes_[r]) {
      if (!state_.node_up[node]) continue;
      for (int id : RunningOn(node)) {
        Vm& vm = vms_[id];
        vm.storm = r;
        vm.storm_devices = vm.devices;
        ++sm.vms;
        RETURN_IF_ERROR(StopPod(vm));
        storm_victims_.emplace_back(r, id);
      }
      state_.SetNodeUp(node, false);
      RETURN_IF_ERROR(policy_->OnNodeDown(node));
    }
    queue_.Push(now_ + s_.node_reboots[r].down, EventType::kNodeBack, r);
    return absl::OkStatus();
  }

  absl::Status NodeBack(int r) {
    for (int node : reboot_nodes_[r]) {
      if (state_.node_up[node]) continue;
      state_.SetNodeUp(node, true);
      RETURN_IF_ERROR(policy_->OnNodeUp(node));
      start_->NodeReady(node, now_, ClaimedOn(node));
    }
    // virt-controller makes each VM's new pod once its host is Ready, in VM
    // order.
    std::vector<int> ids;
    for (const auto& [storm, id] : storm_victims_) {
      if (storm == r) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    for (int id : ids) {
      Vm& vm = vms_[id];
      if (vm.deleted || vm.storm != r) continue;
      vm.storm_ready = now_;
      RETURN_IF_ERROR(RequestStart(vm, 0));
    }
    return absl::OkStatus();
  }

  // --- Failures ------------------------------------------------------------
  absl::Status NodeFail(const Event& e) {
    int node = e.a;
    SimTime repair = 0;
    if (node < 0) {
      node = static_cast<int>(node_rng_.Below(c_.nodes.size()));
      repair = s_.node_failures.repair.Sample(node_rng_);
      queue_.Push(now_ + std::max<SimTime>(1, s_.node_failures.every->Sample(node_rng_)),
                  EventType::kNodeFail, -1);
    } else {
      repair = s_.node_failure_list[e.b - 1].repair_after;
    }
    if (!state_.node_up[node]) return absl::OkStatus();
    queue_.Push(now_ + std::max<SimTime>(1, repair), EventType::kNodeRepair, node);
    std::vector<int> victims = RunningOn(node);
    for (int id : victims) RETURN_IF_ERROR(StopPod(vms_[id]));
    state_.SetNodeUp(node, false);
    const int lost_before = policy_->LostClaims();
    RETURN_IF_ERROR(policy_->OnNodeDown(node));
    m_.vms_killed_node_failure += victims.size();
    if (policy_->HasPersistentClaims()) {
      m_.claims_lost += std::max(0, policy_->LostClaims() - lost_before);
    } else {
      m_.claims_lost += victims.size();
    }
    for (int id : victims) RETURN_IF_ERROR(RequestStart(vms_[id], kNodeFailureEviction));
    return absl::OkStatus();
  }

  absl::Status NodeRepair(int node) {
    state_.SetNodeUp(node, true);
    const int lost_before = policy_->LostClaims();
    RETURN_IF_ERROR(policy_->OnNodeUp(node));
    if (start_) start_->NodeReady(node, now_, ClaimedOn(node));
    m_.claims_recovered += std::max(0, lost_before - policy_->LostClaims());
    return absl::OkStatus();
  }

  absl::Status DeviceFail() {
    const int d = static_cast<int>(device_rng_.Below(c_.devices.size()));
    const SimTime repair = s_.device_failures.repair.Sample(device_rng_);
    queue_.Push(now_ + std::max<SimTime>(1, s_.device_failures.every->Sample(device_rng_)),
                EventType::kDeviceFail, -1);
    if (!state_.device_healthy[d]) return absl::OkStatus();
    queue_.Push(now_ + std::max<SimTime>(1, repair), EventType::kDeviceRepair, d);
    const int user = state_.device_user[d];
    if (user >= 0) RETURN_IF_ERROR(StopPod(vms_[user]));
    state_.SetHealthy(d, false);
    RETURN_IF_ERROR(policy_->OnDeviceHealth(d, false));
    if (user >= 0) {
      ++m_.vms_killed_device_failure;
      RETURN_IF_ERROR(RequestStart(vms_[user], 0));
    }
    return absl::OkStatus();
  }

  std::vector<int> RunningOn(int node) const {
    std::vector<int> out;
    const SimNode& n = c_.nodes[node];
    for (int d = n.first_device; d < n.first_device + n.device_count; ++d) {
      if (state_.device_user[d] >= 0) out.push_back(state_.device_user[d]);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // --- Samples -------------------------------------------------------------
  absl::Status Sample() {
    RETURN_IF_ERROR(policy_->CheckConsistency());
    SeriesPoint pt;
    pt.time = now_;
    pt.restarts = window_restarts_;
    pt.same_device = window_same_;
    window_restarts_ = window_same_ = 0;
    uint64_t healthy = 0, used = 0, held = 0, free_total = 0, stranded = 0;
    for (size_t n = 0; n < c_.nodes.size(); ++n) {
      const SimNode& node = c_.nodes[n];
      for (size_t cls = 0; cls < node.devices_by_class.size(); ++cls) {
        int free = 0;
        for (int d : node.devices_by_class[cls]) {
          if (!state_.device_healthy[d]) continue;
          ++healthy;
          if (state_.device_user[d] >= 0) {
            ++used;
          } else if (policy_->Holds(d)) {
            ++held;
          } else if (state_.node_up[n]) {
            ++free;
          }
        }
        if (free == 0) continue;
        free_total += free;
        stranded += free - Usable(static_cast<int>(n), static_cast<int>(cls), free);
      }
    }
    pt.utilization = healthy ? static_cast<double>(used) / healthy : 0;
    pt.held_idle = healthy ? static_cast<double>(held) / healthy : 0;
    pt.fragmentation = free_total ? static_cast<double>(stranded) / free_total : 0;
    for (const Vm& vm : vms_) pt.pending += vm.state == Vm::State::kPending;
    pt.lost_claims = static_cast<uint64_t>(policy_->LostClaims());
    m_.series.push_back(pt);
    return absl::OkStatus();
  }

  // Of `free` devices of class `cls` on `node`, how many the largest VM
  // shape asking for that class (most devices; ties: first group) could use
  // as whole VMs, given the node's spare CPU and memory. The rest are
  // stranded: fragmentation is what keeps big requests waiting while the
  // cluster still has free devices in total.
  int Usable(int node, int cls, int free) const {
    const VmGroupSpec* big = nullptr;
    for (const VmGroupSpec& g : s_.vm_groups) {
      if (g.class_index == cls && (big == nullptr || g.device_count > big->device_count)) {
        big = &g;
      }
    }
    if (big == nullptr) return 0;
    const SimNode& n = c_.nodes[node];
    int64_t vms = free / big->device_count;
    if (big->cpu > 0) vms = std::min<int64_t>(vms, (n.cpu - state_.cpu_used[node]) / big->cpu);
    if (big->memory_gib > 0) {
      vms = std::min<int64_t>(vms, (n.memory_gib - state_.mem_used[node]) / big->memory_gib);
    }
    return static_cast<int>(std::max<int64_t>(0, vms)) * big->device_count;
  }

  void Finish() {
    for (const Vm& vm : vms_) m_.pending_at_end += vm.state == Vm::State::kPending;
    std::sort(m_.latencies.begin(), m_.latencies.end());
    for (StormMetrics& sm : m_.storms) std::sort(sm.recovery.begin(), sm.recovery.end());
    m_.counters = policy_->Counters();
    double u = 0, h = 0, f = 0;
    for (const SeriesPoint& p : m_.series) {
      u += p.utilization;
      h += p.held_idle;
      f += p.fragmentation;
    }
    if (!m_.series.empty()) {
      m_.utilization_avg = u / m_.series.size();
      m_.held_idle_avg = h / m_.series.size();
      m_.fragmentation_avg = f / m_.series.size();
    }
  }

  const Scenario& s_;
  const Cluster& c_;
  std::string policy_name_;
  const RunOptions& options_;
  ClusterState state_;
  SimClock clock_;
  std::unique_ptr<Policy> policy_;
  StartStyle style_;
  std::unique_ptr<StartPathModel> start_;  // With scenario start_path only.
  SimTime scheduler_free_ = 0;  // The scheduling cycle is busy until then.
  std::vector<std::vector<int>> reboot_nodes_;  // By node reboot: its nodes.
  std::vector<std::pair<int, int>> storm_victims_;  // (reboot, VM id)
  EventQueue queue_;
  std::vector<Vm> vms_;
  std::vector<int> next_index_;
  Rng node_rng_, device_rng_, mass_rng_;
  SimTime now_ = 0, end_ = 0;
  uint64_t exogenous_ = 0;
  uint64_t window_restarts_ = 0, window_same_ = 0;
  PolicyMetrics m_;
};

// One line on the scheduler's settings, for the report.
std::string SchedulerNote(const SchedulerSpec& sch) {
  auto pct = [](int p) {
    return p == 0 ? std::string("adaptive") : absl::StrCat(p, "%");
  };
  return absl::StrCat(
      "percentageOfNodesToScore: ", pct(sch.percentage_of_nodes_to_score),
      "; pdc: ", pct(sch.pdc_percentage_of_nodes_to_score),
      sch.pdc_node_affinity ? " + node affinity to bound claims" : "",
      ", extender weight ", sch.extender_weight);
}

// What one policy's run leaves behind.
struct PolicyRunResult {
  absl::Status status;
  SimTime end = 0;
  uint64_t exogenous = 0;
  size_t vms = 0;
  PolicyMetrics metrics;
};

PolicyRunResult RunPolicy(const Scenario& scenario, const Cluster& cluster,
                          const std::string& policy, const RunOptions& options) {
  const absl::Time t0 = RealClock()->Now();
  Run run(scenario, cluster, policy, options);
  PolicyRunResult result;
  result.status = run.Execute();
  result.end = run.end();
  result.exogenous = run.exogenous();
  result.vms = run.vm_count();
  result.metrics = std::move(run.metrics());
  result.metrics.wall_seconds = absl::ToDoubleSeconds(RealClock()->Now() - t0);
  return result;
}

// run_one(i) for every policy in `names`, on up to `jobs` threads.
void RunPoliciesOnThreads(const std::vector<std::string>& names, int jobs,
                          const std::function<void(size_t)>& run_one) {
  if (jobs <= 1) {
    for (size_t i = 0; i < names.size(); ++i) run_one(i);
    return;
  }
  // Each run is independent (own cluster state, queue, policy, clock); the
  // shared scenario and cluster are read only. Longest first: the policies
  // that go through the real allocator (pdc, and pdc-http with its HTTP
  // round trips) cost several times a kube-scheduler-only policy, and one
  // started last would run alone at the end. Results stay in `names` order.
  std::vector<size_t> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto cost_rank = [&](size_t i) {
    return names[i] == "pdc-http" ? 0 : names[i] == "pdc" ? 1 : 2;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost_rank(a) < cost_rank(b); });
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < jobs; ++t) {
    threads.emplace_back([&] {
      for (size_t k = next++; k < order.size(); k = next++) run_one(order[k]);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Adds each policy's result to `summary`, in `names` order.
absl::Status AddPolicyResults(const std::vector<std::string>& names,
                              std::vector<PolicyRunResult>& results, RunSummary* summary) {
  for (size_t i = 0; i < names.size(); ++i) {
    PolicyRunResult& r = results[i];
    if (!r.status.ok()) return r.status;
    // Every policy must have seen the same workload; anything else is a leak
    // of policy decisions into the event streams.
    if (!summary->policies.empty() && (r.end != summary->simulated ||
                                       r.exogenous != summary->exogenous_events)) {
      return absl::InternalError(absl::StrCat(
          names[i], " saw ", r.exogenous, " events until ", r.end, " us, ",
          summary->policies[0].policy, " ", summary->exogenous_events, " until ",
          summary->simulated, " us"));
    }
    summary->simulated = r.end;
    summary->exogenous_events = r.exogenous;
    summary->vms = r.vms;
    summary->policies.push_back(std::move(r.metrics));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunSummary> RunScenario(const Scenario& scenario,
                                       const RunOptions& options) {
  const Cluster cluster = Cluster::Build(scenario);
  RunSummary summary;
  summary.scenario = scenario.name;
  summary.seed = scenario.seed;
  summary.nodes = cluster.nodes.size();
  summary.devices = cluster.devices.size();
  summary.scheduler_note = SchedulerNote(scenario.scheduler);
  std::vector<std::string> names = options.policies;
  if (names.empty()) names = AllPolicyNames();
  if (scenario.start_path.enabled &&
      std::find(names.begin(), names.end(), "pdc-http") != names.end()) {
    return absl::InvalidArgumentError(
        "the start-path model (start_path) runs in process only, not with pdc-http");
  }
  std::vector<PolicyRunResult> results(names.size());
  int jobs = options.jobs > 0 ? options.jobs
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  jobs = std::min<int>(jobs, static_cast<int>(names.size()));
  RunPoliciesOnThreads(names, jobs, [&](size_t i) {
    results[i] = RunPolicy(scenario, cluster, names[i], options);
  });
  RETURN_IF_ERROR(AddPolicyResults(names, results, &summary));
  return summary;
}

}  // namespace pdc::sim
