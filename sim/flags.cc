#include "sim/flags.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "sim/policy.h"

namespace pdc::sim {
namespace {

absl::Status Usage(const std::string& why) { return absl::InvalidArgumentError(why); }

}  // namespace

absl::StatusOr<SimFlags> ParseSimFlags(const std::vector<std::string>& args) {
  SimFlags f;
  if (args.empty()) return Usage("missing command");
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h" || a == "help") {
      f.command = SimCommand::kHelp;
      return f;
    }
  }
  const std::string& command = args[0];
  if (command == "sweep") {
    f.command = SimCommand::kSweep;
    f.sweep_args.assign(args.begin() + 1, args.end());
    return f;
  }
  if (command == "run") {
    f.command = SimCommand::kRun;
  } else if (command == "validate") {
    f.command = SimCommand::kValidate;
  } else {
    return Usage("unknown command \"" + command + "\"");
  }
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "--out") {
      if (!value(&f.out_dir)) return Usage("--out needs a directory");
    } else if (a == "--seed") {
      uint64_t n = 0;
      if (!value(&v) || !absl::SimpleAtoi(v, &n)) return Usage("--seed needs a number");
      f.seed = n;
    } else if (a == "--max-events") {
      uint64_t n = 0;
      if (!value(&v) || !absl::SimpleAtoi(v, &n)) return Usage("--max-events needs a number");
      f.max_events = n;
    } else if (a == "--policies") {
      if (!value(&v)) return Usage("--policies needs a list");
      for (absl::string_view p : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        const std::string name(p);
        const auto& known = AllPolicyNames();
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          return Usage("unknown policy \"" + name + "\" (known: device-plugin, dra, pdc, pdc-dra)");
        }
        if (std::find(f.policies.begin(), f.policies.end(), name) == f.policies.end()) {
          f.policies.push_back(name);
        }
      }
      if (f.policies.empty()) return Usage("--policies needs at least one policy");
    } else if (a == "--kubernetes") {
      if (!value(&v) || (v != "1.34" && v != "1.35" && v != "1.36")) {
        return Usage("--kubernetes needs 1.34, 1.35 or 1.36");
      }
      int minor = 0;
      (void)absl::SimpleAtoi(v.substr(2), &minor);
      f.kubernetes_minor = minor;
    } else if (a == "--jobs") {
      if (!value(&v) || !absl::SimpleAtoi(v, &f.jobs) || f.jobs < 1) {
        return Usage("--jobs needs a number >= 1");
      }
    } else if (a == "--extender") {
      if (!value(&f.extender_url)) return Usage("--extender needs a URL");
    } else if (a == "--spawn-extender") {
      if (!value(&f.spawn_path)) return Usage("--spawn-extender needs the pdc-extender binary");
    } else if (a == "--node-list") {
      f.node_list = true;
    } else if (a == "--progress") {
      f.progress = true;
    } else if (a == "--no-progress") {
      f.progress = false;
    } else if (!a.empty() && a[0] == '-') {
      return Usage("unknown option " + a);
    } else if (f.scenario_path.empty()) {
      f.scenario_path = a;
    } else {
      return Usage("unexpected argument \"" + a + "\"");
    }
  }
  if (f.scenario_path.empty()) return Usage("missing scenario file");
  if (!f.extender_url.empty() && !f.spawn_path.empty()) {
    return Usage("--extender and --spawn-extender exclude each other");
  }
  return f;
}

}  // namespace pdc::sim
