#include "sim/flags.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "sim/policy.h"

namespace pdc::sim {
namespace {

absl::Status Usage(const std::string& why) { return absl::InvalidArgumentError(why); }

// Stores one flag of run/validate into `f`. `value` is the word after the
// flag, nullptr when the command line ends first (the flag's own message
// then says what it needs).
using RunFlagSetter = absl::Status (*)(const std::string* value, SimFlags& f);

struct RunFlagSpec {
  bool takes_value;
  RunFlagSetter set;
};

absl::Status SetNumber(const std::string* v, std::optional<uint64_t>* out,
                       const std::string& flag) {
  uint64_t n = 0;
  if (v == nullptr || !absl::SimpleAtoi(*v, &n)) return Usage(flag + " needs a number");
  *out = n;
  return absl::OkStatus();
}

absl::Status SetPolicies(const std::string* v, SimFlags& f) {
  if (v == nullptr) return Usage("--policies needs a list");
  for (absl::string_view p : absl::StrSplit(*v, ',', absl::SkipEmpty())) {
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
  return absl::OkStatus();
}

absl::Status SetKubernetes(const std::string* v, SimFlags& f) {
  if (v == nullptr || (*v != "1.34" && *v != "1.35" && *v != "1.36")) {
    return Usage("--kubernetes needs 1.34, 1.35 or 1.36");
  }
  int minor = 0;
  (void)absl::SimpleAtoi(v->substr(2), &minor);
  f.kubernetes_minor = minor;
  return absl::OkStatus();
}

// The flags of run and validate (sweep reads its own).
const std::map<std::string_view, RunFlagSpec>& RunFlags() {
  using V = const std::string*;
  static const auto* const kFlags = new std::map<std::string_view, RunFlagSpec>{
      {"--out", {true, [](V v, SimFlags& f) {
         if (v == nullptr) return Usage("--out needs a directory");
         f.out_dir = *v;
         return absl::OkStatus();
       }}},
      {"--seed", {true, [](V v, SimFlags& f) { return SetNumber(v, &f.seed, "--seed"); }}},
      {"--max-events",
       {true, [](V v, SimFlags& f) { return SetNumber(v, &f.max_events, "--max-events"); }}},
      {"--policies", {true, SetPolicies}},
      {"--kubernetes", {true, SetKubernetes}},
      {"--jobs", {true, [](V v, SimFlags& f) {
         if (v == nullptr || !absl::SimpleAtoi(*v, &f.jobs) || f.jobs < 1) {
           return Usage("--jobs needs a number >= 1");
         }
         return absl::OkStatus();
       }}},
      {"--extender", {true, [](V v, SimFlags& f) {
         if (v == nullptr) return Usage("--extender needs a URL");
         f.extender_url = *v;
         return absl::OkStatus();
       }}},
      {"--spawn-extender", {true, [](V v, SimFlags& f) {
         if (v == nullptr) return Usage("--spawn-extender needs the pdc-extender binary");
         f.spawn_path = *v;
         return absl::OkStatus();
       }}},
      {"--node-list", {false, [](V, SimFlags& f) {
         f.node_list = true;
         return absl::OkStatus();
       }}},
      {"--progress", {false, [](V, SimFlags& f) {
         f.progress = true;
         return absl::OkStatus();
       }}},
      {"--no-progress", {false, [](V, SimFlags& f) {
         f.progress = false;
         return absl::OkStatus();
       }}},
  };
  return *kFlags;
}

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
    if (auto flag = RunFlags().find(a); flag != RunFlags().end()) {
      const std::string* value = nullptr;
      if (flag->second.takes_value && i + 1 < args.size()) value = &args[++i];
      if (absl::Status s = flag->second.set(value, f); !s.ok()) return s;
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
