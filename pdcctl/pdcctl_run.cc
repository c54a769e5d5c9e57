#include "pdcctl/pdcctl_run.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "api/handoff_json.h"
#include "api/rest_json.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "pdcctl/pdcctl_args.h"
#include "pdcctl/pdcctl_format.h"
#include "net/http_client.h"
#include "net/pdc_client.h"

namespace pdc::pdcctl {
namespace {

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read token file \"", path, "\": ", std::strerror(errno)));
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(buf.str()));
}

// get: one list (or one object) of the command's kind.
absl::StatusOr<std::string> ExecuteGet(const Command& cmd, PdcClient& client, absl::Time now,
                                       std::string* note) {
  const bool json = cmd.output == Output::kJson;
  switch (cmd.kind) {
    case Kind::kClaims: {
      if (!cmd.name.empty() && !cmd.all_namespaces) {
        ASSIGN_OR_RETURN(Claim c, client.GetClaim(ClaimKey{cmd.ns, cmd.name}));
        if (json) return PrettyJson(api::WriteClaim(c));
        return ClaimsTable({std::move(c)}, false);
      }
      ASSIGN_OR_RETURN(std::vector<Claim> claims,
                       client.ListClaims(cmd.all_namespaces ? "" : cmd.ns));
      if (json) return PrettyJson(api::WriteClaimList(claims));
      return ClaimsTable(std::move(claims), cmd.all_namespaces);
    }
    case Kind::kNodes: {
      if (!cmd.name.empty()) {
        ASSIGN_OR_RETURN(api::NodeDetail detail, client.GetNode(cmd.name));
        if (json) return PrettyJson(api::WriteNodeDetail(detail));
        return NodesTable({detail.node}, now);
      }
      ASSIGN_OR_RETURN(std::vector<api::NodeSummary> nodes, client.ListNodes());
      if (json) return PrettyJson(api::WriteNodeList(nodes));
      return NodesTable(std::move(nodes), now);
    }
    case Kind::kDevices: {
      ASSIGN_OR_RETURN(std::vector<api::DeviceListing> devices, client.ListDevices());
      if (json) {
        std::erase_if(devices, [&](const api::DeviceListing& l) {
          return !cmd.node.empty() && l.node != cmd.node;
        });
        return PrettyJson(api::WriteDeviceList(devices));
      }
      return DevicesTable(std::move(devices), cmd.node);
    }
    case Kind::kHandoffs: {
      ASSIGN_OR_RETURN(std::vector<PendingHandoff> handoffs, client.ListHandoffs(cmd.node));
      if (json) return PrettyJson(api::WriteHandoffList(handoffs));
      return HandoffsTable(std::move(handoffs));
    }
    case Kind::kDraClaims: {
      ASSIGN_OR_RETURN(api::DraClaimList list, client.ListDraClaims());
      if (!list.note.empty()) *note = list.note;
      std::erase_if(list.items, [&](const api::DraClaimView& c) {
        return !cmd.all_namespaces && c.ns != cmd.ns;
      });
      if (json) return PrettyJson(api::WriteDraClaimList(list));
      return DraClaimsTable(std::move(list.items));
    }
    case Kind::kNone:
      break;
  }
  return std::string();
}

absl::StatusOr<std::string> ExecuteCreate(const Command& cmd, PdcClient& client) {
  api::ClaimCreate create;
  create.key = ClaimKey{cmd.ns, cmd.name};
  create.spec.resource_name = cmd.resource;
  create.spec.count = cmd.count;
  create.spec.node = cmd.node;
  create.spec.serial = cmd.serial;
  create.spec.address = cmd.address;
  create.spec.reclaim_policy = cmd.reclaim_policy;
  ASSIGN_OR_RETURN(Claim c, client.CreateClaim(create));
  if (cmd.output == Output::kJson) return PrettyJson(api::WriteClaim(c));
  return absl::StrCat("claim/", cmd.name, " created\n");
}

// delete claim, or delete handoff (cancel a pod's pending hand-off).
absl::StatusOr<std::string> ExecuteDelete(const Command& cmd, PdcClient& client) {
  const bool json = cmd.output == Output::kJson;
  if (cmd.kind == Kind::kHandoffs) {
    ASSIGN_OR_RETURN(std::vector<ClaimKey> released, client.CancelHandoff(cmd.node, cmd.name));
    if (json) return PrettyJson(api::WriteReleased(released));
    return absl::StrCat("handoff/", cmd.name, " on node ", cmd.node,
                        " cancelled; the pod's claims are released and keep their devices\n");
  }
  ASSIGN_OR_RETURN(Claim c, client.DeleteClaim(ClaimKey{cmd.ns, cmd.name}, cmd.force));
  if (json) return PrettyJson(api::WriteClaim(c));
  return absl::StrCat("claim/", cmd.name, " deleted\n");
}

// release device: hand it over (--to), abandon its erase, or free it.
absl::StatusOr<std::string> ExecuteReleaseDevice(const Command& cmd, PdcClient& client) {
  const bool json = cmd.output == Output::kJson;
  if (cmd.hand_over_to.has_value()) {
    ASSIGN_OR_RETURN(api::NodeDetail detail,
                     client.HandOverDevice(cmd.node, *cmd.address, *cmd.hand_over_to));
    if (json) return PrettyJson(api::WriteNodeDetail(detail));
    return absl::StrCat("device/", cmd.address->ToString(), " on node ", cmd.node,
                        " handed over to claim ", cmd.hand_over_to->ToString(),
                        "; claims of namespace ", cmd.hand_over_to->ns, " may pin it\n");
  }
  if (cmd.abandon_erase) {
    ASSIGN_OR_RETURN(api::NodeDetail detail, client.AbandonErase(cmd.node, *cmd.address));
    if (json) return PrettyJson(api::WriteNodeDetail(detail));
    return absl::StrCat("device/", cmd.address->ToString(), " on node ", cmd.node,
                        ": erase abandoned; held Released for no claim until you release "
                        "it or hand it over\n");
  }
  ASSIGN_OR_RETURN(api::NodeDetail detail, client.ReleaseDevice(cmd.node, *cmd.address));
  if (json) return PrettyJson(api::WriteNodeDetail(detail));
  return absl::StrCat("device/", cmd.address->ToString(), " on node ", cmd.node,
                      " released; any claim may get it now\n");
}

// release claim, or release device.
absl::StatusOr<std::string> ExecuteRelease(const Command& cmd, PdcClient& client) {
  if (cmd.kind == Kind::kDevices) return ExecuteReleaseDevice(cmd, client);
  ASSIGN_OR_RETURN(Claim c, client.ReleaseClaim(ClaimKey{cmd.ns, cmd.name}, cmd.pod_uid));
  if (cmd.output == Output::kJson) return PrettyJson(api::WriteClaim(c));
  return absl::StrCat("claim/", cmd.name, " released\n");
}

// Runs the command through `client`; returns what to print ("" for an empty
// list). -o json prints the value as api/'s writer encodes it, indented.
// `note` gets what the server said about the answer, for stderr ("" none).
absl::StatusOr<std::string> Execute(const Command& cmd, PdcClient& client, absl::Time now,
                                    std::string* note) {
  switch (cmd.verb) {
    case Verb::kGet:
      return ExecuteGet(cmd, client, now, note);
    case Verb::kDescribe: {
      ASSIGN_OR_RETURN(Claim c, client.GetClaim(ClaimKey{cmd.ns, cmd.name}));
      if (cmd.output == Output::kJson) return PrettyJson(api::WriteClaim(c));
      return DescribeClaim(c);
    }
    case Verb::kCreate:
      return ExecuteCreate(cmd, client);
    case Verb::kDelete:
      return ExecuteDelete(cmd, client);
    case Verb::kRelease:
      return ExecuteRelease(cmd, client);
    case Verb::kHelp:
      break;
  }
  return std::string();
}

}  // namespace

int Run(absl::Span<const std::string> args, const Environment& env) {
  std::ostream& out = *env.out;
  std::ostream& err = *env.err;
  absl::StatusOr<Command> cmd = ParseArgs(args, env.pdc_server);
  if (!cmd.ok()) {
    err << "error: " << cmd.status().message()
        << "\nRun 'pdcctl --help' for usage.\n";
    return kExitUsage;
  }
  if (cmd->verb == Verb::kHelp) {
    out << Usage();
    return kExitOk;
  }

  HttpClientOptions options;
  options.base_url = cmd->server;
  options.timeout = cmd->timeout;
  options.user_agent = "pdcctl";
  if (!cmd->token_file.empty()) {
    absl::StatusOr<std::string> token = ReadToken(cmd->token_file);
    if (!token.ok()) {
      err << "error: " << token.status().message() << "\n";
      return kExitUsage;
    }
    options.bearer_token = *token;
  }
  absl::StatusOr<std::unique_ptr<HttpClient>> client =
      HttpClient::Create(options);
  if (!client.ok()) {
    err << "error: --server: " << client.status().message() << "\n";
    return kExitUsage;
  }

  PdcClient pdc(*std::move(client));
  std::string note;
  absl::StatusOr<std::string> text = Execute(*cmd, pdc, env.now, &note);
  if (!note.empty()) err << "note: " << note << "\n";
  if (!text.ok()) {
    if (std::optional<Refusal> refusal = RefusalOf(text.status())) {
      // The server said no: its own words.
      err << "error: "
          << (refusal->message.empty() ? absl::StrCat("HTTP ", refusal->http_status)
                                       : refusal->message)
          << "\n";
      return kExitServerError;
    }
    err << "error: " << text.status().message() << "\n";
    if (absl::IsUnavailable(text.status()) || absl::IsDeadlineExceeded(text.status())) {
      err << "Is pdc-extender running? Point pdcctl at it with --server URL "
             "or PDC_SERVER.\n";
      return kExitUnreachable;
    }
    return kExitServerError;
  }
  if (text->empty()) {
    if ((cmd->kind == Kind::kClaims || cmd->kind == Kind::kDraClaims) && !cmd->all_namespaces) {
      err << "No resources found in " << cmd->ns << " namespace.\n";
    } else {
      err << "No resources found\n";
    }
    return kExitOk;
  }
  out << *text;
  return kExitOk;
}

}  // namespace pdc::pdcctl
