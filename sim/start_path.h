// The start path of a VM's pod once kube-scheduler has placed it, in
// simulated time, for the scenarios that set `start_path` (boot storms). The
// engine (simulation.cc) drives it; this class only keeps what serialises on
// a node and computes when each step ends. What every mode shares:
//   scheduling cycle (one pod at a time, cluster-wide: the engine)
//   -> binding cycle (bind; DRA: + the claim status write in PreBind)
//   -> kubelet's pod watch delivers the pod
//   -> kubelet admission: one pod at a time per node, in arrival order
//      (kubelet's HandlePodAdditions sorts a batch by creation time and
//      admits pods in turn; pkg/kubelet/kubelet.go)
//   -> the devices reach the pod (where the modes differ, below)
//   -> virt-launcher and QEMU start: the VM runs.
// Where the modes differ:
//   device plugin: kubelet's device manager calls Allocate inside admission
//     (pkg/kubelet/cm/devicemanager, the topology manager's admit handler),
//     so a slow Allocate holds every later pod of the node. pdc-node's
//     Allocate waits up to `allocate_vfio_wait` for the pod's devices to be
//     on vfio-pci (its reconcile loop binds claimed devices, one at a time)
//     and the pod fails admission beyond it; pdc's gate (one pending
//     hand-off per node and resource) is the real allocator's, opened by the
//     confirmation this model times. KubeVirt's own PCI device plugin serves
//     devices bound at boot.
//   DRA: admission does not call the driver; kubelet prepares the pod's
//     claims when it syncs the pod (pkg/kubelet/cm/dra/manager.go), pods in
//     parallel, and the driver binds each claim's devices to vfio-pci on its
//     own (a device stays there until the host reboots).
// Thread-safety: not synchronised; one per simulation run.
#ifndef PDC_SIM_START_PATH_H_
#define PDC_SIM_START_PATH_H_

#include <vector>

#include "sim/cluster.h"
#include "sim/policy.h"
#include "sim/rng.h"
#include "sim/scenario.h"

namespace pdc::sim {

// When each step of one pod's start ends.
struct PodTimeline {
  SimTime admitted = 0;  // kubelet admission done (device plugin: with Allocate)
  SimTime handoff = 0;   // devices handed over (DP: Allocate answered + confirmed; DRA: prepared)
  SimTime running = 0;   // QEMU started
  bool failed = false;   // admission failed at `admitted` (device not on vfio-pci in time)
};

class StartPathModel {
 public:
  // `seed` for the random durations (vfio-pci bind, QEMU start).
  StartPathModel(const StartPathSpec& spec, const Cluster& cluster, StartStyle style,
                 uint64_t seed);

  // A node is Ready (at boot, or back from a reboot or failure) at `ready`:
  // its devices are on their boot driver again, except with
  // VfioBinding::kAtBoot, and its kubelet has nothing queued. kNodeAgent:
  // pdc-node binds `claimed` (its claims' devices) one at a time from then.
  void NodeReady(int node, SimTime ready, const std::vector<int>& claimed);

  // A pod was bound at `t` with `devices` on `node`: kNodeAgent queues those
  // not yet on vfio-pci to pdc-node's binder.
  void DevicesClaimed(int node, SimTime t, const std::vector<int>& devices);

  // The pod reaches kubelet at `arrive`; admits it after the node's earlier
  // pods and returns its timeline.
  PodTimeline Start(int node, SimTime arrive, const std::vector<int>& devices);

  // When `device` is (or will be) on vfio-pci; -1: not bound.
  SimTime VfioReadyAt(int device) const { return vfio_ready_[device]; }
  // When the node's kubelet is free to admit the next pod.
  SimTime AdmissionFreeAt(int node) const { return admit_free_[node]; }

 private:
  SimTime Bind() { return spec_.vfio_bind.Sample(rng_); }

  const StartPathSpec spec_;
  const Cluster& cluster_;
  const StartStyle style_;
  Rng rng_;
  std::vector<SimTime> admit_free_;  // By node.
  std::vector<SimTime> agent_free_;  // By node: pdc-node's binder.
  std::vector<SimTime> vfio_ready_;  // By device; -1 not on vfio-pci.
};

}  // namespace pdc::sim

#endif  // PDC_SIM_START_PATH_H_
