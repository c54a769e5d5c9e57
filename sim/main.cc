// pdc-sim: compares device placement policies (KubeVirt's device plugin,
// Kubernetes DRA, pdc) on a simulated cluster. See `pdc-sim --help`.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "sim/cluster.h"
#include "sim/extender_process.h"
#include "sim/flags.h"
#include "sim/http_report.h"
#include "sim/http_stats.h"
#include "sim/policy.h"
#include "sim/report.h"
#include "sim/sweep.h"
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
                              [--max-events N] [--jobs N] [--kubernetes 1.34|1.35|1.36]
                              [--progress|--no-progress]
                              [--extender URL | --spawn-extender PATH] [--node-list]
  pdc-sim sweep [--nodes 100,1000,5000,10000] [--pods N] [--binders N]
                [--percentage P] [--extender URL | --spawn-extender PATH]
                [--node-list] [--out DIR]
  pdc-sim validate <scenario.yaml>
  pdc-sim --help

run       simulates the scenario once per policy (same workload and failures for
          each), prints a table, and writes into DIR (default out/<scenario>):
            summary.csv summary.json timeseries.csv reasons.csv
            same_device.svg utilization.svg
          and, for scenarios with node reboots, boot_storm.csv and
          boot_storm_<reboot>.svg (VMs running again over time, per policy)
sweep     load-generates against pdc-extender like kube-scheduler (filter and
          prioritize sequential, binds concurrent on --binders connections,
          then pdc-node's hand-off) for each node count, and prints how
          filter/prioritize/bind latency grows; writes sweep.csv, sweep.json
validate  checks a scenario and exits

options:
  --out DIR          output directory (created if missing)
  --seed N           override the scenario's random seed
  --policies LIST    comma-separated, default device-plugin,dra,pdc,pdc-dra
                       device-plugin  KubeVirt today: any free device, forgotten at stop
                       dra            Kubernetes >= 1.31 DRA: allocation cleared at stop,
                                      first-fit at the next start
                       pdc            persistent device claims (the real allocator core),
                                      device plugin mode
                       pdc-dra        pdc's DRA mode: the keeper keeps each VM's
                                      ResourceClaim allocated (a model: no DRA
                                      scheduling double drives it)
  --max-events N     stop after N workload/failure events (overrides the scenario)
  --kubernetes V     pdc-dra's resourceclaim controller: 1.34 and 1.35 stop syncing a
                     claim with the VM's entry (the keeper prunes pods), 1.36 keeps
                     it and prunes pods (default: the scenario's dra.kubernetes, 1.36)
  --jobs N           run up to N policies at once, one thread each (default: one per
                     core; the output does not depend on it)

HTTP mode (run): also runs policy pdc-http, pdc driven through a pdc-extender over
HTTP exactly as kube-scheduler and pdc-node drive it, and checks it decides exactly
what the in-process pdc decides; prints per-verb latency and writes
http_latency.csv/.json (wall-clock: these two files differ between runs).
  --extender URL         an already running pdc-extender (its deviceClasses must
                         match the scenario; use a fresh one: claims persist)
  --spawn-extender PATH  start PATH (a pdc-extender binary) on 127.0.0.1, a free
                         port and a temporary data dir with the embedded file store;
                         stopped with SIGTERM at the end
  --node-list            send full NodeLists (nodeCacheCapable: false) instead of
                         NodeNames
  --progress         progress on stderr even when it is not a terminal
  --no-progress      no progress output

The same scenario and seed give byte-identical output files.
exit codes: 0 ok, 1 run failed, 2 usage error, 3 invalid scenario
)";

int Usage(const std::string& why) {
  std::cerr << "pdc-sim: " << why << "\nrun `pdc-sim --help` for usage\n";
  return kExitUsage;
}

// HTTP mode: adds pdc-http (and the in-process pdc it is compared with) to
// the policies and, with --spawn-extender, starts the pdc-extender it drives.
absl::Status SetUpHttpMode(const pdc::sim::SimFlags& flags, const pdc::sim::Scenario& scenario,
                           pdc::sim::RunOptions* options, pdc::sim::HttpModeOptions* http_options,
                           pdc::sim::HttpStats* http_stats,
                           std::unique_ptr<pdc::sim::ExtenderProcess>* spawned) {
  if (options->policies.empty()) options->policies = pdc::sim::AllPolicyNames();
  // The comparison needs the in-process pdc next to pdc-http.
  if (std::find(options->policies.begin(), options->policies.end(), "pdc") ==
      options->policies.end()) {
    options->policies.push_back("pdc");
  }
  options->policies.push_back("pdc-http");
  options->trace = true;
  http_options->node_list = flags.node_list;
  http_options->url = flags.extender_url;
  if (!flags.spawn_path.empty()) {
    pdc::sim::ExtenderProcessOptions eo;
    eo.binary = flags.spawn_path;
    eo.device_classes = pdc::sim::Cluster::Build(scenario).DeviceClasses(scenario);
    eo.spread = scenario.scheduler.pdc_spread;
    absl::StatusOr<std::unique_ptr<pdc::sim::ExtenderProcess>> p =
        pdc::sim::ExtenderProcess::Start(eo);
    if (!p.ok()) return p.status();
    *spawned = *std::move(p);
    http_options->url = (*spawned)->url();
    std::cout << "started pdc-extender (pid " << (*spawned)->pid() << ") at " << (*spawned)->url()
              << ", embedded file store in " << (*spawned)->data_dir() << "\n";
  }
  options->http = http_options;
  options->http_stats = http_stats;
  return absl::OkStatus();
}

// Stops a spawned pdc-extender; false when it did not stop cleanly (said on
// stderr). `stop_note` gets the line to print after the report.
bool StopSpawnedExtender(pdc::sim::ExtenderProcess& spawned, std::string* stop_note) {
  absl::StatusOr<int> stopped = spawned.Stop();
  if (!stopped.ok() || *stopped != 0) {
    std::cerr << "pdc-sim: pdc-extender did not stop cleanly: "
              << (stopped.ok() ? absl::StrCat("exit status ", *stopped)
                               : std::string(stopped.status().message()))
              << "\n";
    return false;
  }
  *stop_note = "stopped pdc-extender (SIGTERM, exit status 0)\n";
  return true;
}

// HTTP mode's part of the report: throughput, per-verb latency, the answers
// checked and the comparison with the in-process pdc; writes
// http_latency.csv/.json. True when every answer was well-formed and pdc-http
// decided exactly what the in-process pdc decided.
absl::StatusOr<bool> ReportHttpRun(const pdc::sim::RunSummary& run, const pdc::sim::HttpStats& http_stats,
                  const std::string& url, bool node_list, const std::string& out_dir,
                  std::vector<std::string>* written) {
  double wall = 0;
  uint64_t placements = 0;
  for (const pdc::sim::PolicyMetrics& m : run.policies) {
    if (m.policy != "pdc-http") continue;
    wall = m.wall_seconds;
    placements = m.first_starts + m.restarts;
  }
  const std::vector<pdc::sim::VerbSummary> verbs = http_stats.Summaries();
  std::cout << "\npdc-http: " << url << ", "
            << (node_list ? "NodeList" : "nodeCacheCapable (NodeNames)") << ", "
            << http_stats.requests_total() << " requests, " << placements
            << " placements in " << absl::StrFormat("%.2f", wall) << " s wall ("
            << absl::StrFormat("%.0f", wall > 0 ? placements / wall : 0.0)
            << " placements/s, "
            << absl::StrFormat("%.0f", wall > 0 ? http_stats.requests_total() / wall : 0.0)
            << " requests/s)\n"
            << pdc::sim::FormatVerbTable(verbs);
  const uint64_t bad = http_stats.malformed_total();
  std::cout << "answers checked: " << http_stats.requests_total() << ", malformed: " << bad
            << "\n";
  for (const std::string& e : http_stats.malformed_examples()) std::cout << "  " << e << "\n";
  const pdc::sim::HttpComparison cmp = pdc::sim::CompareHttpWithInProcess(run);
  std::cout << cmp.text;
  RETURN_IF_ERROR(pdc::sim::WriteHttpReport(verbs, wall, placements, out_dir, written));
  return bad == 0 && cmp.identical;
}

// `run`: simulates the scenario once per policy, prints the table and writes
// the report. Returns the exit code.
int RunScenarioCommand(const pdc::sim::SimFlags& flags, const pdc::sim::Scenario& scenario,
                       const std::string& out_dir) {
  const bool http = flags.http();
  const int progress = flags.progress.value_or(isatty(STDERR_FILENO) != 0) ? 1 : 0;
  pdc::sim::RunOptions options;
  options.policies = flags.policies;
  options.jobs = flags.jobs;
  pdc::sim::HttpModeOptions http_options;
  pdc::sim::HttpStats http_stats;
  std::unique_ptr<pdc::sim::ExtenderProcess> spawned;
  if (http) {
    if (absl::Status s =
            SetUpHttpMode(flags, scenario, &options, &http_options, &http_stats, &spawned);
        !s.ok()) {
      std::cerr << "pdc-sim: " << s.message() << "\n";
      return kExitFailed;
    }
  }
  if (progress) {
    // Progress goes to stderr only; it is the one place wall time may show.
    options.progress = [](std::string_view policy, double done) {
      std::fprintf(stderr, "\r[pdc-sim] %-14.*s %5.1f%%", static_cast<int>(policy.size()),
                   policy.data(), done * 100);
      std::fflush(stderr);
    };
  }
  const absl::Time started = pdc::RealClock()->Now();
  absl::StatusOr<pdc::sim::RunSummary> run = pdc::sim::RunScenario(scenario, options);
  if (progress) std::fprintf(stderr, "\r%40s\r", "");
  int exit_code = kExitOk;
  std::string stop_note;
  if (spawned != nullptr && !StopSpawnedExtender(*spawned, &stop_note)) exit_code = kExitFailed;
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
  if (http) {
    absl::StatusOr<bool> checked =
        ReportHttpRun(*run, http_stats, http_options.url, flags.node_list, out_dir, &written);
    if (!checked.ok()) {
      std::cerr << "pdc-sim: " << checked.status() << "\n";
      return kExitFailed;
    }
    if (!*checked) exit_code = kExitFailed;
  }
  std::cout << "\nwrote " << out_dir << "/{" << absl::StrJoin(written, ",") << "}\n"
            << stop_note;
  const double secs = absl::ToDoubleSeconds(pdc::RealClock()->Now() - started);
  if (progress) std::fprintf(stderr, "[pdc-sim] done in %.2f s wall\n", secs);
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<pdc::sim::SimFlags> flags =
      pdc::sim::ParseSimFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) return Usage(std::string(flags.status().message()));
  if (flags->command == pdc::sim::SimCommand::kHelp) {
    std::cout << kHelp;
    return kExitOk;
  }
  if (flags->command == pdc::sim::SimCommand::kSweep) return pdc::sim::SweepMain(flags->sweep_args);
  absl::StatusOr<pdc::sim::Scenario> scenario = pdc::sim::LoadScenarioFile(flags->scenario_path);
  if (!scenario.ok()) {
    std::cerr << "pdc-sim: " << scenario.status().message() << "\n";
    return kExitScenario;
  }
  if (flags->command == pdc::sim::SimCommand::kValidate) {
    std::cout << flags->scenario_path << ": ok (" << scenario->name << ")\n";
    return kExitOk;
  }
  if (flags->seed) scenario->seed = *flags->seed;
  if (flags->max_events) scenario->max_events = *flags->max_events;
  if (flags->kubernetes_minor) scenario->dra.kubernetes_minor = *flags->kubernetes_minor;
  const std::string out_dir = flags->out_dir.empty() ? "out/" + scenario->name : flags->out_dir;
  return RunScenarioCommand(*flags, *scenario, out_dir);
}
