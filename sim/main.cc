// pdc-sim: compares device placement policies (KubeVirt's device plugin,
// Kubernetes DRA, pdc) on a simulated cluster. See `pdc-sim --help`.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/policy.h"
#include "sim/report.h"
#include "sim/scenario.h"
#include "sim/simulation.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;   // the run itself failed (a bug, an I/O error)
constexpr int kExitUsage = 2;    // bad command line
constexpr int kExitScenario = 3; // the scenario file is missing or invalid

constexpr char kHelp[] = R"(pdc-sim: compare device placement policies for KubeVirt VMs on a simulated cluster

usage:
  pdc-sim run <scenario.yaml> [--out DIR] [--seed N] [--policies LIST]
                              [--max-events N] [--progress|--no-progress]
  pdc-sim validate <scenario.yaml>
  pdc-sim --help

run       simulates the scenario once per policy (same workload and failures for
          each), prints a table, and writes into DIR (default out/<scenario>):
            summary.csv summary.json timeseries.csv reasons.csv
            same_device.svg utilization.svg
validate  checks a scenario and exits

options:
  --out DIR          output directory (created if missing)
  --seed N           override the scenario's random seed
  --policies LIST    comma-separated, default device-plugin,dra,pdc
                       device-plugin  KubeVirt today: any free device, forgotten at stop
                       dra            Kubernetes >= 1.31 DRA: allocation cleared at stop,
                                      first-fit at the next start
                       pdc            persistent device claims (the real allocator core)
  --max-events N     stop after N workload/failure events (overrides the scenario)
  --progress         progress on stderr even when it is not a terminal
  --no-progress      no progress output

The same scenario and seed give byte-identical output files.
exit codes: 0 ok, 1 run failed, 2 usage error, 3 invalid scenario
)";

int Usage(const std::string& why) {
  std::cerr << "pdc-sim: " << why << "\nrun `pdc-sim --help` for usage\n";
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return Usage("missing command");
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h" || a == "help") {
      std::cout << kHelp;
      return kExitOk;
    }
  }
  const std::string command = args[0];
  if (command != "run" && command != "validate") {
    return Usage("unknown command \"" + command + "\"");
  }
  std::string scenario_path, out_dir;
  std::optional<uint64_t> seed, max_events;
  std::vector<std::string> policies;
  int progress = isatty(STDERR_FILENO) ? 1 : 0;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--out") {
      if (!value(&out_dir)) return Usage("--out needs a directory");
    } else if (a == "--seed") {
      uint64_t n = 0;
      if (!value(&v) || !absl::SimpleAtoi(v, &n)) return Usage("--seed needs a number");
      seed = n;
    } else if (a == "--max-events") {
      uint64_t n = 0;
      if (!value(&v) || !absl::SimpleAtoi(v, &n)) return Usage("--max-events needs a number");
      max_events = n;
    } else if (a == "--policies") {
      if (!value(&v)) return Usage("--policies needs a list");
      for (absl::string_view p : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        const std::string name(p);
        const auto& known = pdc::sim::AllPolicyNames();
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          return Usage("unknown policy \"" + name + "\" (known: device-plugin, dra, pdc)");
        }
        if (std::find(policies.begin(), policies.end(), name) == policies.end()) {
          policies.push_back(name);
        }
      }
      if (policies.empty()) return Usage("--policies needs at least one policy");
    } else if (a == "--progress") {
      progress = 1;
    } else if (a == "--no-progress") {
      progress = 0;
    } else if (!a.empty() && a[0] == '-') {
      return Usage("unknown option " + a);
    } else if (scenario_path.empty()) {
      scenario_path = a;
    } else {
      return Usage("unexpected argument \"" + a + "\"");
    }
  }
  if (scenario_path.empty()) return Usage("missing scenario file");

  absl::StatusOr<pdc::sim::Scenario> scenario = pdc::sim::LoadScenarioFile(scenario_path);
  if (!scenario.ok()) {
    std::cerr << "pdc-sim: " << scenario.status().message() << "\n";
    return kExitScenario;
  }
  if (command == "validate") {
    std::cout << scenario_path << ": ok (" << scenario->name << ")\n";
    return kExitOk;
  }
  if (seed) scenario->seed = *seed;
  if (max_events) scenario->max_events = *max_events;
  if (out_dir.empty()) out_dir = "out/" + scenario->name;

  pdc::sim::RunOptions options;
  options.policies = policies;
  if (progress) {
    // Progress goes to stderr only; it is the one place wall time may show.
    options.progress = [](std::string_view policy, double done) {
      std::fprintf(stderr, "\r[pdc-sim] %-14.*s %5.1f%%", static_cast<int>(policy.size()),
                   policy.data(), done * 100);
      std::fflush(stderr);
    };
  }
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<pdc::sim::RunSummary> run = pdc::sim::RunScenario(*scenario, options);
  if (progress) std::fprintf(stderr, "\r%40s\r", "");
  if (!run.ok()) {
    std::cerr << "pdc-sim: run failed: " << run.status() << "\n";
    return kExitFailed;
  }
  std::cout << pdc::sim::FormatTable(*run);
  std::vector<std::string> written;
  if (absl::Status s = pdc::sim::WriteReport(*run, out_dir, &written); !s.ok()) {
    std::cerr << "pdc-sim: " << s << "\n";
    return kExitFailed;
  }
  std::cout << "\nwrote " << out_dir << "/{" << absl::StrJoin(written, ",") << "}\n";
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (progress) std::fprintf(stderr, "[pdc-sim] done in %.2f s wall\n", secs);
  return kExitOk;
}
