// Randomised multi-threaded test: creates, binds, undos, releases, deletes,
// hand-off confirmations and cancellations, and inventory changes from
// several threads; the invariants hold after every step, and the recovered
// state equals the final one. Plus a single-threaded randomised check that
// the filter's fresh-allocation fast path agrees with the full evaluation.
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "allocator/allocator.h"
#include "allocator/allocator_impl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/allocator/allocator_test_util.h"

namespace pdc::testing {
namespace {

constexpr int kThreads = 4;
constexpr int kStepsPerThread = 1500;
constexpr int kNodeCount = 6;
constexpr int kVms = 24;

std::vector<Device> NodeDevices(int node, std::mt19937& rng, bool randomize) {
  std::vector<Device> devices;
  for (int d = 0; d < 4; ++d) {
    char addr[16];
    std::snprintf(addr, sizeof(addr), "0000:%02x:00.0", 0x10 + d);
    // Devices 2 and 3 share an IOMMU group on odd nodes.
    int group = (node % 2 == 1 && d >= 2) ? 100 : d;
    Device dev = NvmeDevice(addr, group, d / 2);
    if (randomize) {
      std::uniform_int_distribution<int> pick(0, 9);
      int roll = pick(rng);
      if (roll == 0) continue;  // Vanished.
      if (roll == 1) dev.health = DeviceHealth::kUnhealthy;
    }
    devices.push_back(dev);
  }
  return devices;
}

TEST(AllocatorConcurrencyTest, InvariantsHoldUnderRandomConcurrentOperations) {
  FakeClock clock;
  MemoryStore store;
  AllocatorOptions options = TestOptions();
  options.serialize_handoffs = true;
  ASSERT_OK_AND_ASSIGN(auto allocator, Allocator::Open(options, &store, &clock));
  auto* impl = dynamic_cast<AllocatorImpl*>(allocator.get());
  ASSERT_NE(impl, nullptr);
  // Checkpoints in chunks of three items: the other threads' mutations land
  // between the chunks of nearly every checkpoint, and recovery below starts
  // from such a snapshot.
  impl->SetCheckpointChunkForTest(3, nullptr);
  std::mt19937 setup(1);
  for (int n = 0; n < kNodeCount; ++n) {
    ASSERT_OK(allocator->ReplaceInventory(
        Inventory("node-" + std::to_string(n), NodeDevices(n, setup, false))));
  }
  std::vector<std::string> nodes;
  for (int n = 0; n < kNodeCount; ++n) nodes.push_back("node-" + std::to_string(n));
  const std::vector<std::string_view> names(nodes.begin(), nodes.end());

  std::atomic<int> binds{0}, violations{0};
  auto worker = [&](int id) {
    std::mt19937 rng(1000 + id);
    std::uniform_int_distribution<int> op(0, 99), vm(0, kVms - 1), node(0, kNodeCount - 1);
    std::uniform_int_distribution<int> count(1, 2);
    std::vector<BindOutcome> outcomes;
    for (int step = 0; step < kStepsPerThread; ++step) {
      const int o = op(rng);
      const std::string vm_name = "vm" + std::to_string(vm(rng));
      const std::string uid = "uid-" + std::to_string(id) + "-" + std::to_string(step);
      if (o < 45) {
        // Schedule like kube-scheduler: filter, score, bind the best node.
        SchedulingRequest pod = VmPod(vm_name, uid, count(rng));
        FilterResult f = allocator->Filter(pod, names);
        std::vector<int> scores = allocator->Score(pod, names);
        int best = -1;
        for (int i = 0; i < kNodeCount; ++i) {
          if (f.nodes[i].verdict == Verdict::kFits && (best < 0 || scores[i] > scores[best])) {
            best = i;
          }
        }
        if (best >= 0) {
          auto b = allocator->Bind(pod, nodes[best]);
          if (b.ok()) {
            ++binds;
            outcomes.push_back(*std::move(b));
          }
        }
      } else if (o < 55 && !outcomes.empty()) {
        EXPECT_OK(allocator->Undo(outcomes.back()));
        EXPECT_OK(allocator->Undo(outcomes.back()));  // Idempotent.
        outcomes.pop_back();
      } else if (o < 65) {
        // The node driver confirms a hand-off, or the pod went away.
        std::vector<PendingHandoff> pending = allocator->PendingHandoffs("");
        if (!pending.empty()) {
          const PendingHandoff& p = pending[op(rng) % pending.size()];
          absl::Status s =
              o < 62 ? allocator->ConfirmHandoff(p.node, p.pod.pod_uid, p.resource_name, p.devices)
                           .status()
                     : allocator->CancelHandoff(p.node, p.pod.pod_uid).status();
          // Another thread may have changed it since the listing.
          EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kNotFound ||
                      s.code() == absl::StatusCode::kFailedPrecondition)
              << s;
        }
      } else if (o < 75) {
        for (const Claim& c : allocator->ListClaims("default")) {
          if (c.spec.owner_vm == vm_name) {
            absl::Status s = allocator->Release(c.key, "");  // May race a delete.
            EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kNotFound) << s;
          }
        }
      } else if (o < 82) {
        auto claims = allocator->ListClaims("default");
        if (!claims.empty()) {
          const Claim& c = claims[op(rng) % claims.size()];
          absl::Status s = allocator->DeleteClaim(c.key, op(rng) < 50);
          EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kFailedPrecondition ||
                      s.code() == absl::StatusCode::kNotFound)
              << s;
        }
      } else if (o < 86) {
        // The administrator releases what deleted Retain claims left.
        const std::string& n = nodes[node(rng)];
        if (auto v = allocator->GetNode(n); v.ok()) {
          for (const ReleasedDevice& r : v->released) {
            absl::Status s = allocator->ReleaseDevice(n, r.address);  // May race.
            EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kNotFound ||
                        s.code() == absl::StatusCode::kFailedPrecondition)
                << s;
          }
        }
      } else if (o < 94) {
        const int n = node(rng);
        EXPECT_OK(allocator->ReplaceInventory(
            Inventory(nodes[n], NodeDevices(n, rng, /*randomize=*/true))));
      } else if (o < 97) {
        absl::Status s = allocator->RemoveNode(nodes[node(rng)]);
        EXPECT_TRUE(s.ok() || s.code() == absl::StatusCode::kNotFound) << s;
      } else {
        EXPECT_OK(allocator->Checkpoint());
      }
      if (std::string bad = impl->CheckInvariantsForTest(); !bad.empty()) {
        ADD_FAILURE() << "thread " << id << " step " << step << ": " << bad;
        ++violations;
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(binds.load(), 100);  // The test did exercise binding.

  const std::vector<Claim> claims = allocator->ListClaims("");
  const uint64_t revision = allocator->revision();
  allocator.reset();
  ASSERT_OK_AND_ASSIGN(auto recovered, Allocator::Open(options, &store, &clock));
  EXPECT_EQ(recovered->revision(), revision);
  EXPECT_EQ(recovered->ListClaims(""), claims);
  EXPECT_EQ(dynamic_cast<AllocatorImpl*>(recovered.get())->CheckInvariantsForTest(), "");
}

// Filter and Score answer fresh, unpinned requests from a small per-node
// table (NodeHot) when there are at most kHotClasses device classes. A twin
// allocator with more classes (the extra ones match no device) always takes
// the full evaluation; driven through the same random history, both must
// give identical verdicts, reasons, messages and scores.
TEST(AllocatorFastPathTest, FastPathAgreesWithTheFullEvaluation) {
  FakeClock clock;
  MemoryStore fast_store, full_store;
  AllocatorOptions fast_options = TestOptions();
  fast_options.serialize_handoffs = true;
  AllocatorOptions full_options = fast_options;
  for (int i = 0; i < 3; ++i) {
    full_options.device_classes.push_back(DeviceClass{
        "example.com/unused-" + std::to_string(i),
        {PciSelector{0xabcd, static_cast<uint16_t>(i), std::nullopt}}});
  }
  ASSERT_GT(full_options.device_classes.size(), kHotClasses);
  ASSERT_OK_AND_ASSIGN(auto fast, Allocator::Open(fast_options, &fast_store, &clock));
  ASSERT_OK_AND_ASSIGN(auto full, Allocator::Open(full_options, &full_store, &clock));
  Allocator* both[] = {fast.get(), full.get()};
  std::mt19937 rng(7);
  std::vector<std::string> nodes;
  for (int n = 0; n < kNodeCount; ++n) nodes.push_back("node-" + std::to_string(n));
  nodes.push_back("node-never-reported");
  const std::vector<std::string_view> names(nodes.begin(), nodes.end());
  std::uniform_int_distribution<int> op(0, 99), vm(0, kVms - 1), node(0, kNodeCount - 1);
  std::uniform_int_distribution<int> count(1, 3);
  int fits = 0, insufficient = 0, other = 0;
  for (int step = 0; step < 3000; ++step) {
    const int o = op(rng);
    if (o < 10) {
      const int n = node(rng);
      const NodeInventory inv = Inventory(nodes[n], NodeDevices(n, rng, true));
      for (Allocator* a : both) ASSERT_OK(a->ReplaceInventory(inv));
    } else if (o < 13) {
      clock.Advance(absl::Seconds(25));  // Some nodes go stale.
    } else if (o < 25) {
      std::vector<PendingHandoff> pending = fast->PendingHandoffs("");
      ASSERT_EQ(pending, full->PendingHandoffs(""));
      if (!pending.empty()) {
        const PendingHandoff& p = pending[op(rng) % pending.size()];
        for (Allocator* a : both) {
          ASSERT_OK(a->ConfirmHandoff(p.node, p.pod.pod_uid, p.resource_name, p.devices)
                        .status());
        }
      }
    } else if (o < 35) {
      for (const Claim& c : fast->ListClaims("default")) {
        if (op(rng) < 20) {
          for (Allocator* a : both) ASSERT_OK(a->DeleteClaim(c.key, /*force=*/true));
        }
      }
    } else if (o < 45) {
      // The administrator releases some of what deleted Retain claims left;
      // the rest stays Released, so the fast path meets held devices too.
      for (const NodeView& v : fast->ListNodes()) {
        for (const ReleasedDevice& r : v.released) {
          if (op(rng) < 50) continue;
          for (Allocator* a : both) ASSERT_OK(a->ReleaseDevice(v.name, r.address));
        }
      }
    }
    SchedulingRequest pod = VmPod("vm" + std::to_string(vm(rng)), "uid-" + std::to_string(step),
                                  count(rng));
    FilterResult f = fast->Filter(pod, names);
    FilterResult g = full->Filter(pod, names);
    ASSERT_EQ(fast->Score(pod, names), full->Score(pod, names)) << "step " << step;
    for (size_t i = 0; i < nodes.size(); ++i) {
      ASSERT_EQ(f.nodes[i].verdict, g.nodes[i].verdict) << "step " << step << " " << nodes[i];
      ASSERT_EQ(f.nodes[i].reason, g.nodes[i].reason) << "step " << step << " " << nodes[i];
      ASSERT_EQ(f.MessageFor(i), g.MessageFor(i)) << "step " << step << " " << nodes[i];
      if (f.nodes[i].verdict == Verdict::kFits) {
        ++fits;
      } else if (f.nodes[i].reason == FilterReason::kInsufficient) {
        ++insufficient;
      } else {
        ++other;
      }
    }
    if (o >= 50) {
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (f.nodes[i].verdict == Verdict::kFits) {
          for (Allocator* a : both) ASSERT_OK(a->Bind(pod, nodes[i]).status());
          break;
        }
      }
    }
  }
  // Every kind of answer was exercised.
  EXPECT_GT(fits, 500);
  EXPECT_GT(insufficient, 500);
  EXPECT_GT(other, 500);
}

}  // namespace
}  // namespace pdc::testing
