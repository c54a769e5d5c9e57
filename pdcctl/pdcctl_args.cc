#include "pdcctl/pdcctl_args.h"

#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

}  // namespace

std::string Usage() {
  return R"(pdcctl: manage persistent device claims of a pdc-extender.

Usage:
  pdcctl get claims [NAME] [-n NAMESPACE | -A] [-o table|json]
  pdcctl get nodes [-o table|json]
  pdcctl get devices [--node NODE] [-o table|json]
  pdcctl describe claim NAME [-n NAMESPACE]
  pdcctl create claim NAME --resource RESOURCE [--count N] [--node NODE]
                [--serial SERIAL] [--address 0000:3b:00.0]
                [--reclaim-policy Retain|Delete] [-n NAMESPACE]
  pdcctl delete claim NAME [--force] [-n NAMESPACE]
  pdcctl release claim NAME [--pod-uid UID] [-n NAMESPACE]
  pdcctl release device NODE ADDRESS
         offer a Released device (its deleted claim's data is still on it)
         to any claim again
  pdcctl release device NODE ADDRESS --to NAMESPACE/NAME
         hand a Released device over: claims of NAMESPACE may pin it (only
         claims of its deleted claim's namespace may, until then)
  pdcctl release device NODE ADDRESS --abandon-erase
         end the erase of a device whose Delete claim waits for it (the
         erase will not finish): the device is held Released for no claim
         until you release it or hand it over
  pdcctl get handoffs [--node NODE] [-o table|json]
         VM pods bound to a node and still waiting for their devices
  pdcctl get draclaims [-n NAMESPACE | -A] [-o table|json]
         the DRA ResourceClaims the claim keeper follows: the VM each is
         kept for, its node, device and serial, and whether it is persisted
  pdcctl delete handoff POD_UID --node NODE
         the pod went away before it started: free the node for the next VM

Flags:
  -n, --namespace NS     namespace (default "default")
  -A, --all-namespaces   get claims or draclaims in every namespace
  -o, --output FORMAT    table (default) or json
      --server URL       pdc-extender URL (default $PDC_SERVER, else
                         http://127.0.0.1:8888)
      --token-file FILE  bearer token (every call when the extender has one)
      --timeout DURATION request timeout (default 30s)
  -h, --help             this text

Exit codes: 0 ok, 1 the extender refused or failed the request,
2 bad command line, 3 the extender could not be reached.
)";
}

absl::StatusOr<Command> ParseArgs(absl::Span<const std::string> args,
                                  std::optional<std::string> env_server) {
  Command cmd;
  std::vector<std::string> positional;
  std::optional<std::string> server_flag;
  // Which create-only / delete-only flags were given, to reject them
  // elsewhere instead of silently ignoring them.
  std::vector<std::string> create_flags;
  bool force_given = false;
  bool pod_uid_given = false;
  bool node_given = false;

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      cmd.verb = Verb::kHelp;
      return cmd;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    if (name == "-A" || name == "--all-namespaces") {
      cmd.all_namespaces = true;
      continue;
    }
    if (name == "--force") {
      cmd.force = true;
      force_given = true;
      continue;
    }
    if (name == "--abandon-erase") {
      cmd.abandon_erase = true;
      continue;
    }
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (inline_value.has_value()) return *inline_value;
      if (i + 1 >= args.size()) {
        return UsageError(absl::StrCat("flag ", name, " needs a value"));
      }
      return args[++i];
    };
    absl::StatusOr<std::string> v;
    if (name == "-n" || name == "--namespace") {
      if (!(v = value()).ok()) return v.status();
      cmd.ns = *v;
    } else if (name == "-o" || name == "--output") {
      if (!(v = value()).ok()) return v.status();
      if (*v == "table" || *v == "wide") {
        cmd.output = Output::kTable;
      } else if (*v == "json") {
        cmd.output = Output::kJson;
      } else {
        return UsageError(
            absl::StrCat("--output must be table or json, not \"", *v, "\""));
      }
    } else if (name == "--server" || name == "-s") {
      if (!(v = value()).ok()) return v.status();
      server_flag = *v;
    } else if (name == "--token-file") {
      if (!(v = value()).ok()) return v.status();
      cmd.token_file = *v;
    } else if (name == "--timeout") {
      if (!(v = value()).ok()) return v.status();
      if (!absl::ParseDuration(Sv(*v), &cmd.timeout) ||
          cmd.timeout <= absl::ZeroDuration()) {
        return UsageError(
            absl::StrCat("--timeout must be a positive duration "
                         "like 30s, not \"",
                         *v, "\""));
      }
    } else if (name == "--resource") {
      if (!(v = value()).ok()) return v.status();
      cmd.resource = *v;
      create_flags.push_back(name);
    } else if (name == "--count") {
      if (!(v = value()).ok()) return v.status();
      if (!absl::SimpleAtoi(Sv(*v), &cmd.count) || cmd.count < 1) {
        return UsageError(absl::StrCat(
            "--count must be a whole number >= 1, not \"", *v, "\""));
      }
      create_flags.push_back(name);
    } else if (name == "--node") {
      if (!(v = value()).ok()) return v.status();
      cmd.node = *v;
      node_given = true;
    } else if (name == "--serial") {
      if (!(v = value()).ok()) return v.status();
      cmd.serial = *v;
      create_flags.push_back(name);
    } else if (name == "--address") {
      if (!(v = value()).ok()) return v.status();
      absl::StatusOr<PciAddress> address = PciAddress::Parse(*v);
      if (!address.ok()) {
        return UsageError(absl::StrCat("--address: ", address.status().message()));
      }
      cmd.address = *address;
      create_flags.push_back(name);
    } else if (name == "--reclaim-policy") {
      if (!(v = value()).ok()) return v.status();
      if (*v == ToString(ReclaimPolicy::kRetain)) {
        cmd.reclaim_policy = ReclaimPolicy::kRetain;
      } else if (*v == ToString(ReclaimPolicy::kDelete)) {
        cmd.reclaim_policy = ReclaimPolicy::kDelete;
      } else {
        return UsageError(absl::StrCat(
            "--reclaim-policy must be Retain or Delete, not \"", *v, "\""));
      }
      create_flags.push_back(name);
    } else if (name == "--to") {
      if (!(v = value()).ok()) return v.status();
      const size_t slash = v->find('/');
      if (slash == std::string::npos || slash == 0 || slash + 1 == v->size() ||
          !IsSafeName(v->substr(0, slash)) || !IsSafeName(v->substr(slash + 1))) {
        return UsageError(absl::StrCat("--to must be NAMESPACE/NAME of a claim, not \"", *v,
                                       "\""));
      }
      cmd.hand_over_to = ClaimKey{v->substr(0, slash), v->substr(slash + 1)};
    } else if (name == "--pod-uid") {
      if (!(v = value()).ok()) return v.status();
      cmd.pod_uid = *v;
      pod_uid_given = true;
    } else {
      return UsageError(absl::StrCat("unknown flag ", name));
    }
  }

  cmd.server =
      server_flag.value_or(env_server.has_value() && !env_server->empty()
                               ? *env_server
                               : std::string(kDefaultServer));
  if (positional.empty()) {
    return UsageError(
        "missing command (get, describe, create, delete, release)");
  }
  const std::string& verb = positional[0];
  if (verb == "help") {
    cmd.verb = Verb::kHelp;
    return cmd;
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
  const bool device_release = cmd.verb == Verb::kRelease && cmd.kind == Kind::kDevices;
  if (positional.size() > (device_release ? 4u : 3u)) {
    return UsageError(absl::StrCat("unexpected argument \"",
                                   positional[device_release ? 4 : 3], "\""));
  }
  if (positional.size() == 3) cmd.name = positional[2];

  const bool handoff_cancel = cmd.verb == Verb::kDelete && cmd.kind == Kind::kHandoffs;
  if (device_release) {
    if (positional.size() != 4) {
      return UsageError("release device needs the NODE and the device's PCI ADDRESS");
    }
    if (node_given) return UsageError("release device takes the node as NODE, not --node");
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
  } else if (handoff_cancel) {
    if (cmd.name.empty()) return UsageError("delete handoff needs the POD_UID");
    if (cmd.node.empty()) return UsageError("delete handoff needs --node NODE");
  } else {
    if (cmd.kind != Kind::kClaims) {
      return UsageError(absl::StrCat(verb, cmd.verb == Verb::kRelease
                                               ? " works on claims and devices only"
                                               : " works on claims only"));
    }
    if (cmd.name.empty()) {
      return UsageError(absl::StrCat(verb, " claim needs a NAME"));
    }
  }
  if (!cmd.name.empty() && !IsSafeName(cmd.name)) {
    return UsageError(absl::StrCat("\"", cmd.name, "\" is not a valid name"));
  }
  if (!IsSafeName(cmd.ns)) {
    return UsageError(
        absl::StrCat("\"", cmd.ns, "\" is not a valid namespace"));
  }
  if (cmd.all_namespaces &&
      !(cmd.verb == Verb::kGet && (cmd.kind == Kind::kClaims || cmd.kind == Kind::kDraClaims) &&
        cmd.name.empty())) {
    return UsageError("-A/--all-namespaces only works with \"get claims\" and \"get draclaims\"");
  }
  if (cmd.verb == Verb::kCreate) {
    if (cmd.resource.empty()) {
      return UsageError(
          "create claim needs --resource, e.g. --resource "
          "devices.kubevirt.io/nvme");
    }
  } else if (!create_flags.empty()) {
    return UsageError(
        absl::StrCat(create_flags[0], " only works with create claim"));
  }
  if (node_given && cmd.verb != Verb::kCreate && !handoff_cancel && !device_release &&
      !(cmd.verb == Verb::kGet &&
        (cmd.kind == Kind::kDevices || cmd.kind == Kind::kHandoffs))) {
    return UsageError(
        "--node only works with create claim, get devices, get handoffs and delete handoff");
  }
  if (!cmd.node.empty() && !IsSafeName(cmd.node)) {
    return UsageError(absl::StrCat("\"", cmd.node, "\" is not a valid node name"));
  }
  if (force_given && cmd.verb != Verb::kDelete) {
    return UsageError("--force only works with delete claim");
  }
  if (pod_uid_given && (cmd.verb != Verb::kRelease || device_release)) {
    return UsageError("--pod-uid only works with release claim");
  }
  if ((cmd.hand_over_to.has_value() || cmd.abandon_erase) && !device_release) {
    return UsageError(absl::StrCat(cmd.abandon_erase ? "--abandon-erase" : "--to",
                                   " only works with release device"));
  }
  if (cmd.hand_over_to.has_value() && cmd.abandon_erase) {
    return UsageError("--to and --abandon-erase are two decisions; give one");
  }
  return cmd;
}

}  // namespace pdc::pdcctl
