// The command line of pdc-sim (see `pdc-sim --help`): the command and the
// flags of `run` and `validate`, parsed without touching the process (no
// output, no exit), so every way to get it wrong is table-tested. `sweep`
// parses its own flags (sweep.h); they are passed through.
// Thread-safety: pure functions.
#ifndef PDC_SIM_FLAGS_H_
#define PDC_SIM_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pdc::sim {

enum class SimCommand { kHelp, kRun, kValidate, kSweep };

struct SimFlags {
  SimCommand command = SimCommand::kHelp;
  std::vector<std::string> sweep_args;  // kSweep: everything after "sweep".
  // run, validate:
  std::string scenario_path;
  std::string out_dir;  // "" = out/<scenario name>.
  std::optional<uint64_t> seed;
  std::optional<uint64_t> max_events;
  std::vector<std::string> policies;  // Known names, no repeats; "" = all.
  int jobs = 0;                       // 0 = one per core.
  // --kubernetes 1.34|1.35|1.36: pdc-dra's resourceclaim-controller
  // behaviour, overriding the scenario's dra.kubernetes.
  std::optional<int> kubernetes_minor;
  std::string extender_url;           // --extender
  std::string spawn_path;             // --spawn-extender
  bool node_list = false;
  std::optional<bool> progress;  // Unset: when stderr is a terminal.

  // HTTP mode: a pdc-extender to drive (running or spawned).
  bool http() const { return !extender_url.empty() || !spawn_path.empty(); }
};

// `args` without the program name. A usage error is InvalidArgument whose
// message names the flag or argument ("--seed needs a number").
absl::StatusOr<SimFlags> ParseSimFlags(const std::vector<std::string>& args);

}  // namespace pdc::sim

#endif  // PDC_SIM_FLAGS_H_
