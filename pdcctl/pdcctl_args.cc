#include "pdcctl/pdcctl_args.h"

#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::pdcctl {
namespace {

absl::Status UsageError(std::string_view problem) {
  return absl::InvalidArgumentError(std::string(problem));
}

std::optional<Kind> ParseKind(std::string_view s) {
  static const std::map<std::string_view, Kind> kKinds = {
      {"claims", Kind::kClaims},   {"claim", Kind::kClaims},
      {"pdc", Kind::kClaims},      {"nodes", Kind::kNodes},
      {"node", Kind::kNodes},      {"no", Kind::kNodes},
      {"devices", Kind::kDevices}, {"device", Kind::kDevices},
      {"dev", Kind::kDevices},     {"handoffs", Kind::kHandoffs},
      {"handoff", Kind::kHandoffs},
      {"draclaims", Kind::kDraClaims}, {"draclaim", Kind::kDraClaims},
      {"resourceclaims", Kind::kDraClaims}, {"resourceclaim", Kind::kDraClaims},
  };
  auto it = kKinds.find(s);
  if (it == kKinds.end()) return std::nullopt;
  return it->second;
}

// Object names go into URL paths; the server enforces DNS-1123, we only
// keep out what would change the path's meaning.
bool IsSafeName(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c == '/' || c == '?' || c == '#' || c == '%' || c == ' ' || c < 0x21) {
      return false;
    }
  }
  return true;
}

// "release device NODE ADDRESS": the node and the address are positional.
bool IsDeviceRelease(const Command& cmd) {
  return cmd.verb == Verb::kRelease && cmd.kind == Kind::kDevices;
}

// "delete handoff POD_UID --node NODE".
bool IsHandoffCancel(const Command& cmd) {
  return cmd.verb == Verb::kDelete && cmd.kind == Kind::kHandoffs;
}

// The command line as it is read: the Command being filled, the words that
// are not flags, and which flags were given, so that a flag given to a
// command it does not belong to is rejected instead of silently ignored.
struct ParseState {
  Command cmd;
  std::vector<std::string> positional;
  std::optional<std::string> server_flag;
  std::vector<std::string> create_flags;  // Create-only flags, as given.
  bool force_given = false;
  bool pod_uid_given = false;
  bool node_given = false;
};

// Stores one flag's value (`value` is "" for a flag without one). `flag` is
// the name as given, for messages.
using FlagSetter = absl::Status (*)(std::string_view flag, const std::string& value,
                                    ParseState& st);

struct FlagSpec {
  bool takes_value;
  FlagSetter set;
};

absl::Status SetOutput(std::string_view, const std::string& v, ParseState& st) {
  if (v == "table" || v == "wide") {
    st.cmd.output = Output::kTable;
  } else if (v == "json") {
    st.cmd.output = Output::kJson;
  } else {
    return UsageError(absl::StrCat("--output must be table or json, not \"", v, "\""));
  }
  return absl::OkStatus();
}

absl::Status SetTimeout(std::string_view, const std::string& v, ParseState& st) {
  if (!absl::ParseDuration(Sv(v), &st.cmd.timeout) || st.cmd.timeout <= absl::ZeroDuration()) {
    return UsageError(
        absl::StrCat("--timeout must be a positive duration like 30s, not \"", v, "\""));
  }
  return absl::OkStatus();
}

absl::Status SetCount(std::string_view flag, const std::string& v, ParseState& st) {
  if (!absl::SimpleAtoi(Sv(v), &st.cmd.count) || st.cmd.count < 1) {
    return UsageError(absl::StrCat("--count must be a whole number >= 1, not \"", v, "\""));
  }
  st.create_flags.emplace_back(flag);
  return absl::OkStatus();
}

absl::Status SetAddress(std::string_view flag, const std::string& v, ParseState& st) {
  absl::StatusOr<PciAddress> address = PciAddress::Parse(v);
  if (!address.ok()) {
    return UsageError(absl::StrCat("--address: ", address.status().message()));
  }
  st.cmd.address = *address;
  st.create_flags.emplace_back(flag);
  return absl::OkStatus();
}

absl::Status SetReclaimPolicy(std::string_view flag, const std::string& v, ParseState& st) {
  if (v == ToString(ReclaimPolicy::kRetain)) {
    st.cmd.reclaim_policy = ReclaimPolicy::kRetain;
  } else if (v == ToString(ReclaimPolicy::kDelete)) {
    st.cmd.reclaim_policy = ReclaimPolicy::kDelete;
  } else {
    return UsageError(
        absl::StrCat("--reclaim-policy must be Retain or Delete, not \"", v, "\""));
  }
  st.create_flags.emplace_back(flag);
  return absl::OkStatus();
}

absl::Status SetHandOverTo(std::string_view, const std::string& v, ParseState& st) {
  const size_t slash = v.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == v.size() ||
      !IsSafeName(v.substr(0, slash)) || !IsSafeName(v.substr(slash + 1))) {
    return UsageError(absl::StrCat("--to must be NAMESPACE/NAME of a claim, not \"", v, "\""));
  }
  st.cmd.hand_over_to = ClaimKey{v.substr(0, slash), v.substr(slash + 1)};
  return absl::OkStatus();
}

absl::Status SetAllNamespaces(std::string_view, const std::string&, ParseState& st) {
  st.cmd.all_namespaces = true;
  return absl::OkStatus();
}

absl::Status SetNamespace(std::string_view, const std::string& v, ParseState& st) {
  st.cmd.ns = v;
  return absl::OkStatus();
}

absl::Status SetServer(std::string_view, const std::string& v, ParseState& st) {
  st.server_flag = v;
  return absl::OkStatus();
}

// Every flag pdcctl knows, by each of its names (-h/--help are read first).
const std::map<std::string_view, FlagSpec>& Flags() {
  using V = const std::string&;
  static const auto* const kFlags = new std::map<std::string_view, FlagSpec>{
      {"-A", {false, SetAllNamespaces}},
      {"--all-namespaces", {false, SetAllNamespaces}},
      {"--force", {false, [](std::string_view, V, ParseState& st) {
         st.cmd.force = st.force_given = true;
         return absl::OkStatus();
       }}},
      {"--abandon-erase", {false, [](std::string_view, V, ParseState& st) {
         st.cmd.abandon_erase = true;
         return absl::OkStatus();
       }}},
      {"-n", {true, SetNamespace}},
      {"--namespace", {true, SetNamespace}},
      {"-o", {true, SetOutput}},
      {"--output", {true, SetOutput}},
      {"-s", {true, SetServer}},
      {"--server", {true, SetServer}},
      {"--token-file", {true, [](std::string_view, V v, ParseState& st) {
         st.cmd.token_file = v;
         return absl::OkStatus();
       }}},
      {"--timeout", {true, SetTimeout}},
      {"--resource", {true, [](std::string_view flag, V v, ParseState& st) {
         st.cmd.resource = v;
         st.create_flags.emplace_back(flag);
         return absl::OkStatus();
       }}},
      {"--count", {true, SetCount}},
      {"--node", {true, [](std::string_view, V v, ParseState& st) {
         st.cmd.node = v;
         st.node_given = true;
         return absl::OkStatus();
       }}},
      {"--serial", {true, [](std::string_view flag, V v, ParseState& st) {
         st.cmd.serial = v;
         st.create_flags.emplace_back(flag);
         return absl::OkStatus();
       }}},
      {"--address", {true, SetAddress}},
      {"--reclaim-policy", {true, SetReclaimPolicy}},
      {"--to", {true, SetHandOverTo}},
      {"--pod-uid", {true, [](std::string_view, V v, ParseState& st) {
         st.cmd.pod_uid = v;
         st.pod_uid_given = true;
         return absl::OkStatus();
       }}},
  };
  return *kFlags;
}

// Reads flags and positional words into `st`. Returns true when -h/--help
// was given (the rest of the line is then not read).
absl::StatusOr<bool> ReadArgs(absl::Span<const std::string> args, ParseState& st) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") return true;
    if (arg.size() < 2 || arg[0] != '-') {
      st.positional.push_back(arg);
      continue;
    }
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    auto flag = Flags().find(name);
    if (flag == Flags().end()) return UsageError(absl::StrCat("unknown flag ", name));
    std::string value;
    if (flag->second.takes_value) {
      if (inline_value.has_value()) {
        value = *inline_value;
      } else if (i + 1 >= args.size()) {
        return UsageError(absl::StrCat("flag ", name, " needs a value"));
      } else {
        value = args[++i];
      }
    }
    RETURN_IF_ERROR(flag->second.set(name, value, st));
  }
  return false;
}

// The command words: verb, kind and, when given, the name. Sets cmd.verb to
// kHelp for "help" (nothing else is then read).
absl::Status ParseCommandWords(ParseState& st) {
  Command& cmd = st.cmd;
  const std::vector<std::string>& positional = st.positional;
  if (positional.empty()) {
    return UsageError("missing command (get, describe, create, delete, release)");
  }
  const std::string& verb = positional[0];
  if (verb == "help") {
    cmd.verb = Verb::kHelp;
    return absl::OkStatus();
  }
  static const std::map<std::string_view, Verb> kVerbs = {
      {"get", Verb::kGet},         {"describe", Verb::kDescribe},
      {"create", Verb::kCreate},   {"delete", Verb::kDelete},
      {"release", Verb::kRelease},
  };
  auto vit = kVerbs.find(verb);
  if (vit == kVerbs.end()) {
    return UsageError(absl::StrCat("unknown command \"", verb,
                                   "\" (want get, describe, create, delete, "
                                   "release)"));
  }
  cmd.verb = vit->second;
  if (positional.size() < 2) {
    return UsageError(
        absl::StrCat(verb, " needs a resource type, e.g. \"", verb,
                     cmd.verb == Verb::kGet ? " claims\"" : " claim NAME\""));
  }
  const std::optional<Kind> kind = ParseKind(positional[1]);
  if (!kind.has_value()) {
    return UsageError(absl::StrCat("unknown resource type \"", positional[1],
                                   "\" (want claims, nodes, devices, handoffs or draclaims)"));
  }
  cmd.kind = *kind;
  const bool device_release = IsDeviceRelease(cmd);
  if (positional.size() > (device_release ? 4u : 3u)) {
    return UsageError(absl::StrCat("unexpected argument \"",
                                   positional[device_release ? 4 : 3], "\""));
  }
  if (positional.size() == 3) cmd.name = positional[2];
  return absl::OkStatus();
}

// What the verb and kind need besides themselves: a name, a node, an
// address; and that the names given are valid.
absl::Status CheckOperands(ParseState& st) {
  Command& cmd = st.cmd;
  const std::vector<std::string>& positional = st.positional;
  const std::string& verb = positional[0];
  if (IsDeviceRelease(cmd)) {
    if (positional.size() != 4) {
      return UsageError("release device needs the NODE and the device's PCI ADDRESS");
    }
    if (st.node_given) return UsageError("release device takes the node as NODE, not --node");
    cmd.name.clear();
    cmd.node = positional[2];
    absl::StatusOr<PciAddress> a = PciAddress::Parse(positional[3]);
    if (!a.ok()) {
      return UsageError(absl::StrCat("\"", positional[3],
                                     "\" is not a PCI address (e.g. 0000:3b:00.0)"));
    }
    cmd.address = *a;
  } else if (cmd.verb == Verb::kGet) {
    if ((cmd.kind == Kind::kDevices || cmd.kind == Kind::kHandoffs) && !cmd.name.empty()) {
      return UsageError(absl::StrCat("get ", positional[1],
                                     " takes no name; use --node NODE to filter"));
    }
    if (cmd.kind == Kind::kDraClaims && !cmd.name.empty()) {
      return UsageError(absl::StrCat("get ", positional[1],
                                     " takes no name; use -n NAMESPACE or -A to filter"));
    }
  } else if (IsHandoffCancel(cmd)) {
    if (cmd.name.empty()) return UsageError("delete handoff needs the POD_UID");
    if (cmd.node.empty()) return UsageError("delete handoff needs --node NODE");
  } else {
    if (cmd.kind != Kind::kClaims) {
      return UsageError(absl::StrCat(verb, cmd.verb == Verb::kRelease
                                               ? " works on claims and devices only"
                                               : " works on claims only"));
    }
    if (cmd.name.empty()) return UsageError(absl::StrCat(verb, " claim needs a NAME"));
  }
  if (!cmd.name.empty() && !IsSafeName(cmd.name)) {
    return UsageError(absl::StrCat("\"", cmd.name, "\" is not a valid name"));
  }
  if (!IsSafeName(cmd.ns)) {
    return UsageError(absl::StrCat("\"", cmd.ns, "\" is not a valid namespace"));
  }
  return absl::OkStatus();
}

// Rejects a flag given to a command it does not belong to.
absl::Status CheckFlagsFitCommand(const ParseState& st) {
  const Command& cmd = st.cmd;
  const bool device_release = IsDeviceRelease(cmd);
  if (cmd.all_namespaces &&
      !(cmd.verb == Verb::kGet && (cmd.kind == Kind::kClaims || cmd.kind == Kind::kDraClaims) &&
        cmd.name.empty())) {
    return UsageError("-A/--all-namespaces only works with \"get claims\" and \"get draclaims\"");
  }
  if (cmd.verb == Verb::kCreate) {
    if (cmd.resource.empty()) {
      return UsageError("create claim needs --resource, e.g. --resource devices.kubevirt.io/nvme");
    }
  } else if (!st.create_flags.empty()) {
    return UsageError(absl::StrCat(st.create_flags[0], " only works with create claim"));
  }
  if (st.node_given && cmd.verb != Verb::kCreate && !IsHandoffCancel(cmd) && !device_release &&
      !(cmd.verb == Verb::kGet &&
        (cmd.kind == Kind::kDevices || cmd.kind == Kind::kHandoffs))) {
    return UsageError(
        "--node only works with create claim, get devices, get handoffs and delete handoff");
  }
  if (!cmd.node.empty() && !IsSafeName(cmd.node)) {
    return UsageError(absl::StrCat("\"", cmd.node, "\" is not a valid node name"));
  }
  if (st.force_given && cmd.verb != Verb::kDelete) {
    return UsageError("--force only works with delete claim");
  }
  if (st.pod_uid_given && (cmd.verb != Verb::kRelease || device_release)) {
    return UsageError("--pod-uid only works with release claim");
  }
  if ((cmd.hand_over_to.has_value() || cmd.abandon_erase) && !device_release) {
    return UsageError(absl::StrCat(cmd.abandon_erase ? "--abandon-erase" : "--to",
                                   " only works with release device"));
  }
  if (cmd.hand_over_to.has_value() && cmd.abandon_erase) {
    return UsageError("--to and --abandon-erase are two decisions; give one");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Command> ParseArgs(absl::Span<const std::string> args,
                                  std::optional<std::string> env_server) {
  ParseState st;
  ASSIGN_OR_RETURN(const bool help, ReadArgs(args, st));
  if (help) {
    st.cmd.verb = Verb::kHelp;
    return st.cmd;
  }
  st.cmd.server =
      st.server_flag.value_or(env_server.has_value() && !env_server->empty()
                                  ? *env_server
                                  : std::string(kDefaultServer));
  RETURN_IF_ERROR(ParseCommandWords(st));
  if (st.cmd.verb == Verb::kHelp) return st.cmd;
  RETURN_IF_ERROR(CheckOperands(st));
  RETURN_IF_ERROR(CheckFlagsFitCommand(st));
  return st.cmd;
}

}  // namespace pdc::pdcctl
