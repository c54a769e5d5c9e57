// kube-scheduler filter through pdc-extender, at 500 and 5000 candidate node
// names (nodeCacheCapable), for a fresh VM (a template claim to place) and a
// restarted VM (a bound claim: the sticky path):
//   BM_RouterFilter     Router::Handle, no sockets;
//   BM_JsonFloor        the bare cost of parsing the same request and writing
//                       the same answer with RapidJSON: the floor the router
//                       is compared against (target <= 1.5x);
//   BM_LoopbackFilter   a keep-alive load generator (one blocking loopback
//                       socket with TCP_NODELAY, as Go's net/http client in
//                       kube-scheduler uses, one request at a time) against a
//                       one-worker-thread server with metrics on: p50/p99
//                       latency, requests/s on the connection, and
//                       requests/s per core of server CPU (targets p99 <= 2 ms
//                       at 5000 names, >= 1000 req/s per core).
// Args: {nodes, bound (0/1)}.
//   BM_RouterFilterMix / BM_JsonFloorMix   the router and its floor at 5000
//                       names for a fresh VM, per node-state mix (Mix
//                       below; arg: the mix), so that no kind of node makes
//                       the answer cost more than its own bytes.
// The generator is deliberately not
// pdc_http_client: that client runs an io_context per call and does not set
// TCP_NODELAY, and its cost would be counted as the server's.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "allocator/allocator.h"
#include "api/json_util.h"
#include "bench/bench_extender.h"
#include "benchmark/benchmark.h"
#include "common/metrics.h"
#include "extender/extender_context.h"
#include "extender/extender_metrics.h"
#include "extender/router.h"
#include "extender/router_server.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "tests/testing/fake_clock.h"

namespace pdc::extender {
namespace {

namespace json = api::json;

constexpr const char* kNvme = BenchExtender::kNvme;

std::string NodeName(int i) { return absl::StrCat("node-", 10000 + i); }

std::string Pod(const std::string& uid) {
  return absl::StrCat(
      R"({"metadata":{"name":"virt-launcher-vm1-x7k2p","namespace":"default","uid":")", uid,
      R"(","labels":{"kubevirt.io":"virt-launcher","vm.kubevirt.io/name":"vm1"},"annotations":{"kubevirt.io/domain":"vm1"},"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"vm1","uid":"7f0c","controller":true,"blockOwnerDeletion":true}]},"spec":{"containers":[{"name":"compute","image":"quay.io/kubevirt/virt-launcher:v1.3.0","resources":{"limits":{"devices.kubevirt.io/kvm":"1","devices.kubevirt.io/nvme":"1"},"requests":{"cpu":"100m","devices.kubevirt.io/kvm":"1","devices.kubevirt.io/nvme":"1","memory":"2294Mi"}}}]},"status":{"phase":"Pending"}})");
}

std::string Args(int nodes, const std::string& uid) {
  std::string out = absl::StrCat(R"({"Pod":)", Pod(uid), R"(,"Nodes":null,"NodeNames":[)");
  for (int i = 0; i < nodes; ++i) {
    absl::StrAppend(&out, i ? "," : "", "\"", NodeName(i), "\"");
  }
  absl::StrAppend(&out, "]}");
  return out;
}

// Two NVMe drives on `node`, serials SN<serial>-0/1.
NodeInventory TwoDrives(const std::string& node, int serial, DeviceHealth health) {
  NodeInventory inv;
  inv.node = node;
  for (int d = 0; d < 2; ++d) {
    Device dev;
    dev.address = PciAddress(0, static_cast<uint8_t>(0x3b + d), 0, 0);
    dev.vendor_id = 0x1b36;
    dev.device_id = 0x0010;
    dev.class_code = 0x010802;
    dev.iommu_group = 10 + d;
    dev.health = health;
    dev.serial = absl::StrCat("SN", serial, "-", d);
    inv.devices.push_back(dev);
  }
  return inv;
}

// A cluster of `nodes` reporting nodes with two NVMe drives each; when
// `bound`, vm1's claim is bound on the middle node (the request then comes
// from its next pod, uid-2).
struct Cluster : BenchExtender {
  Cluster(int nodes, bool bound) : BenchExtender(RealClock()) {
    for (int i = 0; i < nodes; ++i) {
      (void)allocator->ReplaceInventory(TwoDrives(NodeName(i), i, DeviceHealth::kHealthy));
    }
    if (bound) {
      SchedulingRequest r;
      r.ns = "default";
      r.vm = "vm1";
      r.pod_name = "virt-launcher-vm1-x7k2p";
      r.pod_uid = "uid-1";
      r.resources = {{kNvme, 1}};
      (void)allocator->Bind(r, NodeName(nodes / 2));
    }
    body = Args(nodes, bound ? "uid-2" : "uid-1");
  }

  std::string body;
};

// What the candidate nodes of a filter call are, for a fresh VM (one NVMe
// drive from a template claim) unless said otherwise. kEven cycles through
// the five node states (unknown, not reporting, unhealthy, full,
// available) node by node.
enum Mix : int {
  kUnknown = 0,         // No pdc node driver ever reported them.
  kNotReporting = 1,    // Reported once, silent for longer than nodeStaleAfter.
  kUnhealthy = 2,       // Reporting; both drives unhealthy.
  kBoundElsewhere = 3,  // The VM's claim is bound on a node not among them.
  kFull = 4,            // Both drives bound to claims of other running VMs.
  kAvailable = 5,       // Both drives free.
  kEven = 6,
};
constexpr const char* kMixNames[] = {"unknown", "not_reporting", "unhealthy", "bound_elsewhere",
                                     "full",    "available",     "even"};

SchedulingRequest VmRequest(const std::string& vm, const std::string& uid) {
  SchedulingRequest r;
  r.ns = "default";
  r.vm = vm;
  r.pod_name = absl::StrCat("virt-launcher-", vm, "-x7k2p");
  r.pod_uid = uid;
  r.resources = {{kNvme, 1}};
  return r;
}


// `nodes` candidate names in the state `mix` says; the request is vm1's
// first pod (uid-1), or its next pod (uid-2) for kBoundElsewhere.
// The fake clock is a base listed first, so it exists before the extender
// that reads it.
struct MixClock {
  pdc::testing::FakeClock fake_clock;
};

struct MixCluster : MixClock, BenchExtender {
  MixCluster(int nodes, Mix mix) : BenchExtender(&fake_clock) {
    auto state = [mix](int i) { return mix == kEven ? static_cast<Mix>(kEvenStates[i % 5]) : mix; };
    // The silent nodes report first, then time passes beyond nodeStaleAfter.
    for (int i = 0; i < nodes; ++i) {
      if (state(i) == kNotReporting) {
        (void)allocator->ReplaceInventory(TwoDrives(NodeName(i), i, DeviceHealth::kHealthy));
      }
    }
    fake_clock.Advance(absl::Minutes(10));
    int other_vms = 0;
    for (int i = 0; i < nodes; ++i) {
      const Mix s = state(i);
      if (s == kUnknown || s == kNotReporting) continue;
      (void)allocator->ReplaceInventory(TwoDrives(
          NodeName(i), i, s == kUnhealthy ? DeviceHealth::kUnhealthy : DeviceHealth::kHealthy));
      if (s == kFull) {
        for (int d = 0; d < 2; ++d) {
          const std::string vm = absl::StrCat("other-", other_vms++);
          (void)allocator->Bind(VmRequest(vm, "uid-" + vm), NodeName(i));
        }
      }
    }
    if (mix == kBoundElsewhere) {
      const std::string home = "node-home";
      (void)allocator->ReplaceInventory(TwoDrives(home, -1, DeviceHealth::kHealthy));
      (void)allocator->Bind(VmRequest("vm1", "uid-1"), home);
    }
    body = Args(nodes, mix == kBoundElsewhere ? "uid-2" : "uid-1");
  }

  static constexpr int kEvenStates[5] = {kUnknown, kNotReporting, kUnhealthy, kFull, kAvailable};

  std::string body;
};

template <typename C>
void RouterFilter(benchmark::State& state, C& c) {
  size_t out = 0;
  for (auto _ : state) {
    HttpRequest r;
    r.method = "POST";
    r.target = "/scheduler/filter";
    // As the HTTP server hands it over: with the in-situ parse's padding.
    r.body.reserve(c.body.size() + json::kInsituPadding);
    r.body = c.body;
    HttpResponse resp = c.router->Handle(std::move(r));
    out = resp.body.size();
    benchmark::DoNotOptimize(resp.body.data());
  }
  state.counters["response_bytes"] = static_cast<double>(out);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * c.body.size()));
}

void BM_RouterFilter(benchmark::State& state) {
  Cluster c(static_cast<int>(state.range(0)), state.range(1) != 0);
  RouterFilter(state, c);
}

void BM_RouterFilterMix(benchmark::State& state) {
  MixCluster c(5000, static_cast<Mix>(state.range(0)));
  state.SetLabel(kMixNames[state.range(0)]);
  RouterFilter(state, c);
}

void PlainKey(rapidjson::Writer<rapidjson::StringBuffer>& w, std::string_view k) {
  w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}
void PlainStr(rapidjson::Writer<rapidjson::StringBuffer>& w, std::string_view k) {
  w.String(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}

// The floor: parse the same request in situ and write the same answer (the
// verdicts and messages the router produced, computed once beforehand) with
// RapidJSON. No allocator, no validation, no pod extraction.
template <typename C>
void JsonFloor(benchmark::State& state, C& c) {
  // Verdicts per input index, from one real answer.
  HttpRequest once;
  once.method = "POST";
  once.target = "/scheduler/filter";
  once.body = c.body;
  const std::string answer = c.router->Handle(std::move(once)).body;
  rapidjson::Document ans;
  ans.Parse(answer.c_str());
  std::vector<int> verdict;  // 0 pass, 1 failed, 2 unresolvable.
  std::vector<std::string> message;
  {
    std::string copy = c.body;
    rapidjson::Document doc;
    doc.ParseInsitu(copy.data());
    for (const auto& n : doc["NodeNames"].GetArray()) {
      const char* name = n.GetString();
      if (ans["FailedNodes"].HasMember(name)) {
        verdict.push_back(1);
        message.push_back(ans["FailedNodes"][name].GetString());
      } else if (ans["FailedAndUnresolvableNodes"].HasMember(name)) {
        verdict.push_back(2);
        message.push_back(ans["FailedAndUnresolvableNodes"][name].GetString());
      } else {
        verdict.push_back(0);
        message.emplace_back();
      }
    }
  }
  size_t out_size = 0;
  for (auto _ : state) {
    std::string copy;
    copy.reserve(c.body.size() + json::kInsituPadding);
    copy = c.body;
    rapidjson::Document doc;
    doc.ParseInsitu(copy.data());
    const auto& names = doc["NodeNames"];
    std::vector<std::string_view> v;
    v.reserve(names.Size());
    for (const auto& n : names.GetArray()) v.push_back(json::StringOf(n));
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    w.StartObject();
    PlainKey(w, "Nodes");
    w.Null();
    PlainKey(w, "NodeNames");
    w.StartArray();
    for (size_t i = 0; i < v.size(); ++i) {
      if (verdict[i] == 0) PlainStr(w, v[i]);
    }
    w.EndArray();
    for (int kind : {1, 2}) {
      PlainKey(w, kind == 1 ? "FailedNodes" : "FailedAndUnresolvableNodes");
      w.StartObject();
      for (size_t i = 0; i < v.size(); ++i) {
        if (verdict[i] != kind) continue;
        PlainKey(w, v[i]);
        PlainStr(w, message[i]);
      }
      w.EndObject();
    }
    PlainKey(w, "Error");
    PlainStr(w, "");
    w.EndObject();
    std::string out(buf.GetString(), buf.GetSize());
    out_size = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["response_bytes"] = static_cast<double>(out_size);
}

void BM_JsonFloor(benchmark::State& state) {
  Cluster c(static_cast<int>(state.range(0)), state.range(1) != 0);
  JsonFloor(state, c);
}

void BM_JsonFloorMix(benchmark::State& state) {
  MixCluster c(5000, static_cast<Mix>(state.range(0)));
  state.SetLabel(kMixNames[state.range(0)]);
  JsonFloor(state, c);
}

// The allocator's share: Filter alone on pre-split names.
void BM_AllocatorFilter(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Cluster c(n, state.range(1) != 0);
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(NodeName(i));
  std::vector<std::string_view> views(names.begin(), names.end());
  SchedulingRequest r;
  r.ns = "default";
  r.vm = "vm1";
  r.pod_name = "virt-launcher-vm1-x7k2p";
  r.pod_uid = state.range(1) != 0 ? "uid-2" : "uid-1";
  r.resources = {{kNvme, 1}};
  for (auto _ : state) {
    FilterResult f = c.allocator->Filter(r, views);
    benchmark::DoNotOptimize(f.nodes.data());
  }
}

// The keep-alive load generator: one blocking loopback connection, a
// prebuilt request, the response read by its Content-Length.
class KeepAliveClient {
 public:
  explicit KeepAliveClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 &&
          ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~KeepAliveClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }

  // Sends `request` (a complete HTTP/1.1 request) and reads one response.
  // Returns the status code, 0 on a broken connection.
  int RoundTrip(std::string_view request, std::string* body) {
    for (size_t sent = 0; sent < request.size();) {
      ssize_t n = ::send(fd_, request.data() + sent, request.size() - sent,
                         MSG_NOSIGNAL);
      if (n <= 0) return 0;
      sent += static_cast<size_t>(n);
    }
    size_t header_end;
    while ((header_end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return 0;
    }
    const std::string_view head(in_.data(), header_end);
    int status = 0;
    size_t length = 0;
    if (head.size() > 12) status = std::atoi(std::string(head.substr(9, 3)).c_str());
    for (std::string_view key : {"\r\ncontent-length:", "\r\nContent-Length:"}) {
      if (size_t p = head.find(key); p != std::string_view::npos) {
        length = std::strtoul(head.data() + p + key.size(), nullptr, 10);
      }
    }
    const size_t total = header_end + 4 + length;
    while (in_.size() < total) {
      if (!Fill()) return 0;
    }
    body->assign(in_, header_end + 4, length);
    in_.erase(0, total);
    return status;
  }

 private:
  bool Fill() {
    char buf[64 * 1024];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool ok_ = false;
  std::string in_;
};

double CpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void BM_LoopbackFilter(benchmark::State& state) {
  Cluster c(static_cast<int>(state.range(0)), state.range(1) != 0);
  HttpServerOptions so;
  so.threads = 1;
  auto server = StartRouterServer(so, c.router.get(), &c.notifier, c.metrics.get());
  if (!server.ok()) {
    state.SkipWithError(std::string(server.status().message()).c_str());
    return;
  }
  const std::string request = absl::StrCat(
      "POST /scheduler/filter HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "User-Agent: kube-scheduler-bench\r\nContent-Type: application/json\r\n"
      "Content-Length: ", c.body.size(), "\r\n\r\n", c.body);
  KeepAliveClient client((*server)->port());
  if (!client.ok()) {
    state.SkipWithError("cannot connect");
    return;
  }
  std::string body;
  std::vector<double> micros;
  micros.reserve(1 << 16);
  // The process's CPU time minus this (client) thread's is the server's.
  const double process0 = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
  const double client0 = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
  for (auto _ : state) {
    const absl::Time start = absl::Now();
    const int status = client.RoundTrip(request, &body);
    micros.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    if (status != 200) {
      state.SkipWithError("filter failed");
      break;
    }
  }
  const double server_cpu = (CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - process0) -
                            (CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - client0);
  std::sort(micros.begin(), micros.end());
  if (!micros.empty()) {
    state.counters["p50_us"] = micros[micros.size() / 2];
    state.counters["p90_us"] = micros[micros.size() * 90 / 100];
    state.counters["p99_us"] = micros[std::min(micros.size() - 1, micros.size() * 99 / 100)];
    state.counters["max_us"] = micros.back();
  }
  state.counters["req_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  if (server_cpu > 0) {
    state.counters["server_cpu_us"] = 1e6 * server_cpu / static_cast<double>(micros.size());
    state.counters["req_per_core_s"] = static_cast<double>(micros.size()) / server_cpu;
  }
  state.counters["response_bytes"] = static_cast<double>(body.size());
  (*server)->Shutdown();
}

BENCHMARK(BM_RouterFilter)->Args({500, 0})->Args({500, 1})->Args({5000, 0})->Args({5000, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JsonFloor)->Args({500, 0})->Args({500, 1})->Args({5000, 0})->Args({5000, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RouterFilterMix)->DenseRange(kUnknown, kEven)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JsonFloorMix)->DenseRange(kUnknown, kEven)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AllocatorFilter)->Args({500, 0})->Args({500, 1})->Args({5000, 0})->Args({5000, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LoopbackFilter)->Args({500, 0})->Args({500, 1})->Args({5000, 0})->Args({5000, 1})
    ->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(2.0);

}  // namespace
}  // namespace pdc::extender

BENCHMARK_MAIN();
