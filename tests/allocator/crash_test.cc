// Crash test of the allocator on the file store: a forked child binds VMs to
// NVMe claims as fast as it can and reports every acknowledged change down a
// pipe (several binder threads, so group commit is under test too); the
// parent SIGKILLs it at a random moment, recovers the data
// directory in-process and checks that every acknowledged bind survived with
// its node and devices and that no device is in two claims. The same
// directory carries on into the next cycle, so recovery of recovered stores,
// checkpoints and torn-tail repair are exercised too.
//
// PDC_CRASH_CYCLES (default 20) sets the number of cycles, PDC_CRASH_SEED the
// seed (default: random, printed so a failure can be replayed).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "allocator/allocator.h"
#include "allocator/file_store.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc {
namespace {

constexpr char kNamespace[] = "default";
constexpr int kNodes = 4;
constexpr int kDevicesPerNode = 5;
constexpr int kWorkers = 3;  // Concurrent binders: group commit under kill.

using ::pdc::testing::kNvme;
using ::pdc::testing::NvmeDevice;
using ::pdc::testing::QemuNvmeSelector;

AllocatorOptions Options() {
  AllocatorOptions options;
  options.serialize_handoffs = false;  // No node driver confirms hand-offs here.
  options.device_classes.push_back(DeviceClass{kNvme, {QemuNvmeSelector()}});
  options.checkpoint_every_records = 40;
  return options;
}

std::string NodeName(int i) { return absl::StrCat("node-", i); }

// kDevicesPerNode drives already on vfio-pci at 0000:1x:00.0, each in its
// own IOMMU group, alternating between two NUMA nodes.
NodeInventory NodeWithDrives(int node) {
  NodeInventory inv;
  inv.node = NodeName(node);
  for (int i = 0; i < kDevicesPerNode; ++i) {
    Device d = NvmeDevice(PciAddress(0, static_cast<uint8_t>(0x10 + i), 0, 0),
                          20 + i, i % 2, absl::StrCat("SN-", node, "-", i));
    d.driver = "vfio-pci";
    inv.devices.push_back(d);
  }
  return inv;
}

// --- The child ---------------------------------------------------------------

// Lines on the pipe: "B <claim> <node> <addr,addr>" a bind is durable;
// "I <claim>" a removal (Undo, DeleteClaim) starts; "R <claim>" it is durable.
// "E <message>" the child hit an unexpected error.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  void Line(const std::string& line) {
    std::string buf = line + "\n";  // < PIPE_BUF: one atomic write.
    while (::write(fd_, buf.data(), buf.size()) < 0 && errno == EINTR) {
    }
  }
  [[noreturn]] void Die(const std::string& what, const absl::Status& s) {
    Line(absl::StrCat("E ", what, ": ", s.ToString()));
    ::_exit(3);
  }

 private:
  int fd_;
};

std::string Devices(const std::vector<PciAddress>& devices) {
  std::vector<std::string> parts;
  for (PciAddress a : devices) parts.push_back(a.ToString());
  return absl::StrJoin(parts, ",");
}

// What an administrator and pdc-node do for devices of deleted claims
// (docs/design.md §4.7), so that capacity comes back: Released devices are
// released, devices to return are reported back on their host driver. Other
// workers may do the same at once: losing that race is fine.
void Reclaim(Allocator& a, Reporter& out) {
  for (int n = 0; n < kNodes; ++n) {
    absl::StatusOr<NodeView> v = a.GetNode(NodeName(n));
    if (!v.ok()) out.Die("get node", v.status());
    for (const ReleasedDevice& r : v->released) {
      absl::Status s = a.ReleaseDevice(NodeName(n), r.address);
      if (!s.ok() && !absl::IsFailedPrecondition(s) && !absl::IsNotFound(s)) {
        out.Die("release device", s);
      }
    }
    if (v->return_to_host.empty()) continue;
    // The node driver hands each returning drive back and acknowledges it
    // by its identity (serial, else address), as pdc-node does.
    NodeInventory inv = NodeWithDrives(n);
    for (Device& d : inv.devices) {
      if (std::find(v->return_to_host.begin(), v->return_to_host.end(), d.address) !=
          v->return_to_host.end()) {
        d.driver = "nvme";
        inv.returned.push_back(d.serial.empty() ? d.address.ToString() : d.serial);
      }
    }
    std::sort(inv.returned.begin(), inv.returned.end());
    if (absl::Status s = a.ReplaceInventory(std::move(inv)); !s.ok()) out.Die("inventory", s);
  }
}

// One binder thread of the child. It removes only claims it bound itself, so
// its lines about a claim reach the pipe in the order the changes were made.
void Worker(Allocator& a, Reporter& out, uint64_t seed, int cycle, int worker) {
  std::mt19937_64 rng(seed);
  std::vector<BindOutcome> mine;  // Binds of this worker not yet removed.
  for (int i = 0;; ++i) {
    const int op = static_cast<int>(rng() % 100);
    if (op < 55 || mine.empty()) {
      ClaimKey key{kNamespace, absl::StrCat("c", cycle, "-", worker, "-", i)};
      ClaimSpec spec;
      spec.resource_name = kNvme;
      spec.count = rng() % 4 == 0 ? 2 : 1;
      spec.reclaim_policy =
          rng() % 2 ? ReclaimPolicy::kDelete : ReclaimPolicy::kRetain;
      if (auto c = a.CreateClaim(key, spec); !c.ok())
        out.Die("create claim", c.status());
      SchedulingRequest req;
      req.ns = kNamespace;
      req.vm = absl::StrCat("vm", cycle, "-", worker, "-", i);
      req.pod_name = "virt-launcher-" + req.vm;
      req.pod_uid = absl::StrCat("uid-", cycle, "-", worker, "-", i);
      req.claim_names = {key.name};
      req.resources = {{kNvme, spec.count}};
      bool bound = false;
      const int start = static_cast<int>(rng() % kNodes);
      for (int k = 0; k < kNodes && !bound; ++k) {
        const std::string node = NodeName((start + k) % kNodes);
        absl::StatusOr<BindOutcome> b = a.Bind(req, node);
        if (!b.ok()) {
          if (b.status().code() == absl::StatusCode::kFailedPrecondition ||
              b.status().code() == absl::StatusCode::kAborted) {
            continue;  // Full, or another worker was faster: next node.
          }
          out.Die("bind", b.status());
        }
        out.Line(absl::StrCat("B ", key.ToString(), " ", b->node, " ",
                              Devices(b->claims.at(0).devices)));
        mine.push_back(*std::move(b));
        bound = true;
      }
      if (!bound) {
        // Everything is full: drop the pending claim again, and free what
        // deleted claims hold.
        if (absl::Status s = a.DeleteClaim(key, true); !s.ok())
          out.Die("delete", s);
        Reclaim(a, out);
      }
    } else if (op < 95) {
      const size_t pick = rng() % mine.size();
      const BindOutcome outcome = mine[pick];
      mine.erase(mine.begin() + static_cast<long>(pick));
      const ClaimKey& key = outcome.claims.at(0).key;
      out.Line("I " + key.ToString());
      if (op < 70) {
        if (absl::Status s = a.Undo(outcome); !s.ok()) out.Die("undo", s);
      } else {
        if (absl::Status s = a.DeleteClaim(key, true); !s.ok())
          out.Die("delete", s);
      }
      out.Line("R " + key.ToString());
    } else {
      if (absl::Status s = a.Checkpoint(); !s.ok()) out.Die("checkpoint", s);
    }
    if (a.CheckpointDue()) {
      if (absl::Status s = a.Checkpoint(); !s.ok()) out.Die("checkpoint", s);
    }
  }
}

// The child: recovers, reports inventory, removes about half of the claims
// earlier cycles left (so devices free up), then binds with kWorkers threads
// until it is killed.
[[noreturn]] void RunChild(const std::string& dir, uint64_t seed, int cycle,
                           int fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  Reporter out(fd);
  std::mt19937_64 rng(seed);
  auto store = FileStore::Open(dir);
  if (!store.ok()) out.Die("open store", store.status());
  auto alloc = Allocator::Open(Options(), store->get(), RealClock());
  if (!alloc.ok()) out.Die("open allocator", alloc.status());
  Allocator& a = **alloc;
  for (int n = 0; n < kNodes; ++n) {
    if (absl::Status s = a.ReplaceInventory(NodeWithDrives(n)); !s.ok()) {
      out.Die("inventory", s);
    }
  }
  for (const Claim& c : a.ListClaims(kNamespace)) {
    if (rng() % 2) continue;
    out.Line("I " + c.key.ToString());
    if (absl::Status s = a.DeleteClaim(c.key, true); !s.ok())
      out.Die("delete", s);
    out.Line("R " + c.key.ToString());
  }
  Reclaim(a, out);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back(Worker, std::ref(a), std::ref(out), rng(), cycle, w);
  }
  for (std::thread& t : workers) t.join();  // Never: workers run until killed.
  ::_exit(4);
}

// --- The parent
// ----------------------------------------------------------------

struct Binding {
  std::string node;
  std::string devices;
};

// What the child acknowledged, folded into what recovery must show.
struct Expectation {
  std::map<std::string, Binding> bound;
  std::set<std::string> uncertain;  // A removal started, not acknowledged.
  int acks = 0;
  std::string error;

  void Apply(const std::string& line) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f[0] == "E") {
      error = line;
    } else if (f[0] == "B" && f.size() == 4) {
      bound[f[1]] = Binding{f[2], f[3]};
      uncertain.erase(f[1]);
      ++acks;
    } else if (f[0] == "I" && f.size() == 2) {
      uncertain.insert(f[1]);
    } else if (f[0] == "R" && f.size() == 2) {
      bound.erase(f[1]);
      uncertain.erase(f[1]);
      ++acks;
    } else {
      error = "bad line from the child: " + line;
    }
  }
};

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  uint64_t out = 0;
  if (v != nullptr && absl::SimpleAtoi(v, &out)) return out;
  return fallback;
}

// Appends garbage to the last log segment: what a crash in the middle of an
// unacknowledged append leaves behind.
void TearTheTail(const std::string& dir, std::mt19937_64& rng) {
  auto names = ListDirectory(dir);
  ASSERT_OK(names.status());
  std::string last;
  for (const std::string& n : *names) {
    if (wal::ParseSegmentFileName(n)) last = n;
  }
  ASSERT_FALSE(last.empty());
  const std::string path = dir + "/" + last;
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  std::string junk(1 + rng() % 300, '\0');
  if (rng() % 2) {
    for (char& c : junk) c = static_cast<char>(rng());
  }
  ASSERT_EQ(::write(fd, junk.data(), junk.size()),
            static_cast<ssize_t>(junk.size()));
  ::close(fd);
}

TEST(AllocatorCrashTest, AcknowledgedBindsSurviveSigkill) {
  const uint64_t cycles = EnvOr("PDC_CRASH_CYCLES", 20);
  const uint64_t seed = EnvOr("PDC_CRASH_SEED", std::random_device{}());
  std::cout << "crash test: PDC_CRASH_SEED=" << seed
            << " PDC_CRASH_CYCLES=" << cycles << std::endl;
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  testing::TempDir tmp;
  const std::string dir = tmp.Join("data");
  Expectation expect;
  int torn_reported = 0;

  for (uint64_t cycle = 0; cycle < cycles; ++cycle) {
    SCOPED_TRACE(absl::StrCat("cycle ", cycle, " seed ", seed));
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    const uint64_t child_seed = rng();
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      RunChild(dir, child_seed, static_cast<int>(cycle), fds[1]);
    }
    ::close(fds[1]);
    // Kill after a random number of acknowledgements; the child is in the
    // middle of whatever it does next.
    const int kill_after = 1 + static_cast<int>(rng() % 60);
    const int acks_before = expect.acks;
    bool killed = false;
    std::string pending;
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(fds[0], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // EOF: the child is gone and all it wrote is read.
      pending.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = pending.find('\n')) != std::string::npos) {
        expect.Apply(pending.substr(0, nl));
        pending.erase(0, nl + 1);
      }
      if (!killed &&
          (expect.acks - acks_before >= kill_after || !expect.error.empty())) {
        ::kill(pid, SIGKILL);
        killed = true;
      }
    }
    ::close(fds[0]);
    int wstatus = 0;
    ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
    ASSERT_THAT(expect.error, ::testing::IsEmpty());
    ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
        << "child ended on its own, status " << wstatus;

    const bool tear = rng() % 3 == 0;
    if (tear) TearTheTail(dir, rng);

    // Recover in-process and check.
    ASSERT_OK_AND_ASSIGN(auto store, FileStore::Open(dir));
    RecoveryReport report;
    ASSERT_OK_AND_ASSIGN(auto alloc, Allocator::Open(Options(), store.get(),
                                                     RealClock(), &report));
    if (tear) {
      EXPECT_THAT(report.torn_tail, ::testing::Not(::testing::IsEmpty()));
    }
    if (!report.torn_tail.empty()) ++torn_reported;
    std::map<std::string, Claim> claims;
    std::set<std::pair<std::string, PciAddress>> used;
    for (Claim& c : alloc->ListClaims("")) {
      for (const BoundDevice& d : c.status.devices) {
        EXPECT_TRUE(used.insert({c.status.node, d.address}).second)
            << d.address.ToString() << " on " << c.status.node
            << " is in two claims";
      }
      claims[c.key.ToString()] = std::move(c);
    }
    for (const auto& [key, want] : expect.bound) {
      auto it = claims.find(key);
      const bool uncertain = expect.uncertain.count(key) > 0;
      if (it == claims.end() ||
          it->second.status.phase == ClaimPhase::kPending) {
        EXPECT_TRUE(uncertain) << "acknowledged bind of " << key << " is lost";
        continue;
      }
      std::vector<PciAddress> devices;
      for (const BoundDevice& d : it->second.status.devices)
        devices.push_back(d.address);
      EXPECT_EQ(it->second.status.phase, ClaimPhase::kBound) << key;
      EXPECT_EQ(it->second.status.node, want.node) << key;
      EXPECT_EQ(Devices(devices), want.devices) << key;
    }
    // What recovery shows is the truth the next child starts from.
    expect.bound.clear();
    expect.uncertain.clear();
    for (const auto& [key, c] : claims) {
      if (c.status.phase != ClaimPhase::kBound) continue;
      std::vector<PciAddress> devices;
      for (const BoundDevice& d : c.status.devices)
        devices.push_back(d.address);
      expect.bound[key] = Binding{c.status.node, Devices(devices)};
    }
    if (HasFailure()) return;
  }
  std::cout << "crash test: " << cycles << " cycles, " << expect.acks
            << " acknowledged changes, " << torn_reported
            << " torn tails recovered" << std::endl;
}

}  // namespace
}  // namespace pdc
