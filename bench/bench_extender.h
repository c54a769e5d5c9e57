// pdc-extender's Router in-process, wired as ExtenderApp wires it: a memory
// store, an allocator with one NVMe device class, the pod cache, a Notifier
// following the allocator's commits, and metrics (production runs with them,
// so do the benchmarks). For the benchmarks that call Router::Handle without
// sockets; fill the allocator after construction.
// Thread-safety: as its parts.
#ifndef PDC_BENCH_BENCH_EXTENDER_H_
#define PDC_BENCH_BENCH_EXTENDER_H_

#include <memory>

#include "absl/time/time.h"
#include "allocator/allocator.h"
#include "allocator/memory_store.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/notifier.h"
#include "extender/extender_context.h"
#include "extender/extender_metrics.h"
#include "extender/router.h"

namespace pdc::extender {

struct BenchExtender {
  static constexpr char kNvme[] = "devices.kubevirt.io/nvme";

  explicit BenchExtender(Clock* c) : clock(c) {
    AllocatorOptions o;
    o.serialize_handoffs = false;  // No node driver confirms hand-offs here.
    o.device_classes = {DeviceClass{kNvme, {PciSelector{0x1b36, 0x0010, {}}}}};
    allocator = *Allocator::Open(o, &store, clock);
    pods = std::make_unique<PodCache>(clock, 10000, absl::Minutes(10));
    ctx.allocator = allocator.get();
    ctx.clock = clock;
    ctx.pod_cache = pods.get();
    ctx.notifier = &notifier;
    FollowCommits(allocator.get(), &notifier);
    ctx.managed = {kNvme};
    metrics = std::make_unique<ExtenderMetrics>(&registry, allocator.get(), clock, "bench");
    ctx.metrics = metrics.get();
    ctx.registry = &registry;
    router = std::make_unique<Router>(RouterOptions{}, &ctx);
  }

  Clock* const clock;
  MemoryStore store;
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<PodCache> pods;
  Notifier notifier;
  MetricsRegistry registry;
  std::unique_ptr<ExtenderMetrics> metrics;
  ExtenderContext ctx;
  std::unique_ptr<Router> router;
};

}  // namespace pdc::extender

#endif  // PDC_BENCH_BENCH_EXTENDER_H_
