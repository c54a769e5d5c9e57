// What one inventory report costs pdc-extender while every node of the
// cluster has its allocations long-poll parked (pdc-node keeps one
// `GET /v1/nodes/{node}/allocations?since=V&wait=S` open at all times):
//   BM_HeartbeatUnchanged  a heartbeat: the same inventory again;
//   BM_HeartbeatChanged    a report that changes the node (one device's
//                          health flips), as after a device failure.
// Args: {nodes, topics}; one parked poll per node. topics = 1 parks each poll
// on its node's topic, as the server does; 0 parks it without a topic, so
// that every commit wakes every poll: what pdc-extender did before polls had
// topics (the "before" figures of bench/README.md).
//
// The polls are parked the way the HTTP server parks them (net/http_server.cc
// Park/Dispatch): the Router answers with a LongPoll, the poll subscribes to
// the Notifier, and a wake runs the Router again, which either answers (the
// node's version moved: the poll is reissued with the new `since`, as
// pdc-node does) or parks again. Wakes are queued and run after the report,
// as the server's posted callbacks run on its worker threads; each iteration
// is one report plus every wake it caused, on this one thread, so its time is
// the CPU the report costs. Sockets and Asio are left out: they add a
// constant per wake, not per report. Counters per report: `wakes` (Router
// runs of parked polls), `answered` (polls that got a new version).
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_extender.h"
#include "benchmark/benchmark.h"
#include "common/notifier.h"
#include "extender/router.h"

namespace pdc::extender {
namespace {

std::string NodeName(int i) { return absl::StrCat("node-", 10000 + i); }

// The REST body of node `i`'s inventory (docs/rest-api.md §4.1): two NVMe
// drives; `healthy` is the first drive's health.
std::string InventoryBody(int i, bool healthy) {
  std::string out = absl::StrCat(R"({"node":")", NodeName(i), R"(","devices":[)");
  for (int d = 0; d < 2; ++d) {
    absl::StrAppend(&out, d ? "," : "", R"({"address":"0000:)", absl::Hex(0x3b + d),
                    R"(:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":)",
                    10 + d, R"(,"numaNode":0,"serial":"SN)", i, "-", d,
                    R"(","driver":"vfio-pci","healthy":)",
                    d == 0 && !healthy ? "false" : "true", "}");
  }
  absl::StrAppend(&out, "]}");
  return out;
}

// The `version` of an allocations answer; 0 when absent.
uint64_t VersionOf(const std::string& body) {
  constexpr std::string_view kKey = R"("version":)";
  const size_t p = body.find(kKey);
  if (p == std::string::npos) return 0;
  return std::strtoull(body.c_str() + p + kKey.size(), nullptr, 10);
}

struct Cluster : BenchExtender {
  explicit Cluster(int nodes) : BenchExtender(RealClock()), nodes(nodes) {
    router->SetReady(true);
    for (int i = 0; i < nodes; ++i) Put(i, true);
  }

  int Put(int i, bool healthy) {
    HttpRequest r;
    r.method = "PUT";
    r.target = absl::StrCat("/v1/nodes/", NodeName(i), "/inventory");
    r.body = InventoryBody(i, healthy);
    return router->Handle(std::move(r)).status;
  }

  const int nodes;
};

// One parked allocations long-poll per node, run as the HTTP server runs
// them.
class ParkedPolls {
 public:
  ParkedPolls(Cluster* c, bool topics)
      : c_(c), topics_(topics), polls_(static_cast<size_t>(c->nodes)) {
    for (int i = 0; i < c_->nodes; ++i) Dispatch(i);
    Drain();
  }
  ~ParkedPolls() {
    for (Poll& p : polls_) {
      if (p.subscription != 0) c_->notifier.Cancel(p.subscription);
    }
  }

  // Runs every queued wake (and what it causes) to the end.
  void Drain() {
    while (!ready_.empty()) {
      const int i = ready_.front();
      ready_.pop_front();
      polls_[static_cast<size_t>(i)].subscription = 0;
      ++wakes_;
      Dispatch(i);
    }
  }

  size_t parked() const { return c_->notifier.pending(); }
  uint64_t wakes() const { return wakes_; }
  uint64_t answered() const { return answered_; }

 private:
  struct Poll {
    uint64_t since = 0;
    Notifier::SubscriptionId subscription = 0;
  };

  // The Router's turn for poll `i`: answered (reissued at once with the new
  // version, as pdc-node does) or parked on the notifier.
  void Dispatch(int i) {
    Poll& p = polls_[static_cast<size_t>(i)];
    for (;;) {
      HttpRequest r;
      r.method = "GET";
      r.target = absl::StrCat("/v1/nodes/", NodeName(i), "/allocations?since=", p.since,
                              "&wait=60");
      HttpResponse resp = c_->router->Handle(std::move(r));
      if (resp.long_poll) {
        p.subscription =
            c_->notifier.Subscribe(topics_ ? resp.long_poll->topic : std::string(),
                                   resp.long_poll->seen_version, [this, i] { ready_.push_back(i); });
        return;
      }
      ++answered_;
      p.since = VersionOf(resp.body);
    }
  }

  Cluster* const c_;
  const bool topics_;
  std::vector<Poll> polls_;
  std::deque<int> ready_;  // Woken polls, in wake order.
  uint64_t wakes_ = 0;
  uint64_t answered_ = 0;
};

void Report(benchmark::State& state, bool change) {
  Cluster c(static_cast<int>(state.range(0)));
  ParkedPolls polls(&c, state.range(1) != 0);
  if (polls.parked() != static_cast<size_t>(c.nodes)) {
    state.SkipWithError("not every poll parked");
    return;
  }
  const uint64_t wakes0 = polls.wakes();
  const uint64_t answered0 = polls.answered();
  // Each node's first drive health as last reported.
  std::vector<bool> healthy(static_cast<size_t>(c.nodes), true);
  int node = 0;
  for (auto _ : state) {
    auto h = healthy[static_cast<size_t>(node)];
    if (change) h = !h;
    if (c.Put(node, h) != 200) {
      state.SkipWithError("inventory refused");
      break;
    }
    polls.Drain();
    node = (node + 1) % c.nodes;
  }
  const double reports = static_cast<double>(state.iterations());
  state.counters["wakes"] = static_cast<double>(polls.wakes() - wakes0) / reports;
  state.counters["answered"] = static_cast<double>(polls.answered() - answered0) / reports;
  state.counters["parked"] = static_cast<double>(polls.parked());
}

void BM_HeartbeatUnchanged(benchmark::State& state) { Report(state, false); }
void BM_HeartbeatChanged(benchmark::State& state) { Report(state, true); }

BENCHMARK(BM_HeartbeatUnchanged)
    ->ArgsProduct({{2000, 5000}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_HeartbeatChanged)->ArgsProduct({{2000, 5000}, {0, 1}})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pdc::extender

BENCHMARK_MAIN();
