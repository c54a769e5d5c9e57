#include "extender/client/pdcctl_run.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "net/http_client.h"
#include "extender/client/pdcctl_args.h"
#include "extender/client/pdcctl_format.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"

namespace pdc::pdcctl {
namespace {

struct Request {
  Request() = default;
  Request(std::string m, std::string t, std::string b = "")
      : method(std::move(m)), target(std::move(t)), body(std::move(b)) {}
  std::string method;
  std::string target;
  std::string body;
};

std::string PercentEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' ||
        c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

std::string ClaimCreateBody(const Command& cmd) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  auto str = [&](const char* key, const std::string& v) {
    w.Key(key);
    w.String(v.data(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  str("name", cmd.name);
  str("resourceName", cmd.resource);
  w.Key("count");
  w.Int(cmd.count);
  str("node", cmd.node);
  str("serial", cmd.serial);
  str("address", cmd.address);
  str("reclaimPolicy", cmd.reclaim_policy);
  w.EndObject();
  return buf.GetString();
}

Request BuildRequest(const Command& cmd) {
  const std::string claims = absl::StrCat("/v1/namespaces/", cmd.ns, "/claims");
  const std::string claim = absl::StrCat(claims, "/", cmd.name);
  switch (cmd.verb) {
    case Verb::kGet:
      if (cmd.kind == Kind::kNodes) {
        return {"GET", cmd.name.empty() ? "/v1/nodes"
                                        : absl::StrCat("/v1/nodes/", cmd.name)};
      }
      if (cmd.kind == Kind::kDevices) return {"GET", "/v1/devices"};
      if (cmd.kind == Kind::kHandoffs) {
        return {"GET", cmd.node.empty() ? "/v1/handoffs"
                                        : absl::StrCat("/v1/nodes/", cmd.node, "/handoffs")};
      }
      if (cmd.all_namespaces) return {"GET", "/v1/claims"};
      return {"GET", cmd.name.empty() ? claims : claim};
    case Verb::kDescribe:
      return {"GET", claim};
    case Verb::kCreate:
      return {"POST", claims, ClaimCreateBody(cmd)};
    case Verb::kDelete:
      if (cmd.kind == Kind::kHandoffs) {
        return {"DELETE", absl::StrCat("/v1/nodes/", cmd.node, "/handoffs/", cmd.name)};
      }
      return {"DELETE", cmd.force ? absl::StrCat(claim, "?force=true") : claim};
    case Verb::kRelease:
      return {"POST", cmd.pod_uid.empty()
                          ? absl::StrCat(claim, "/release")
                          : absl::StrCat(claim, "/release?podUid=",
                                         PercentEncode(cmd.pod_uid))};
    case Verb::kHelp:
      break;
  }
  return {};
}

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

// The table (or text) for a successful answer; "" means an empty list.
absl::StatusOr<std::string> Render(const Command& cmd,
                                   const HttpResponse& response,
                                   absl::Time now) {
  if (cmd.output == Output::kJson) {
    if (response.body.empty()) return std::string();
    return PrettyJson(response.body);
  }
  switch (cmd.verb) {
    case Verb::kGet:
      switch (cmd.kind) {
        case Kind::kClaims:
          return ClaimsTable(response.body, cmd.all_namespaces, now);
        case Kind::kNodes:
          return NodesTable(response.body, now);
        case Kind::kDevices:
          return DevicesTable(response.body, cmd.node);
        case Kind::kHandoffs:
          return HandoffsTable(response.body);
        case Kind::kNone:
          break;
      }
      break;
    case Verb::kDescribe:
      return DescribeClaim(response.body, now);
    case Verb::kCreate:
      return absl::StrCat("claim/", cmd.name, " created\n");
    case Verb::kDelete:
      if (cmd.kind == Kind::kHandoffs) {
        return absl::StrCat("handoff/", cmd.name, " on node ", cmd.node,
                            " cancelled; the pod's claims are released and keep their devices\n");
      }
      return absl::StrCat("claim/", cmd.name, " deleted\n");
    case Verb::kRelease:
      return absl::StrCat("claim/", cmd.name, " released\n");
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

  const Request req = BuildRequest(*cmd);
  absl::StatusOr<HttpResponse> response =
      (*client)->Do(req.method, req.target, req.body);
  if (!response.ok()) {
    err << "error: " << response.status().message() << "\n";
    if (absl::IsUnavailable(response.status()) ||
        absl::IsDeadlineExceeded(response.status())) {
      err << "Is pdc-extender running? Point pdcctl at it with --server URL "
             "or PDC_SERVER.\n";
      return kExitUnreachable;
    }
    return kExitServerError;
  }
  if (response->status < 200 || response->status > 299) {
    err << "error: " << ServerErrorMessage(response->status, response->body)
        << "\n";
    return kExitServerError;
  }
  absl::StatusOr<std::string> text = Render(*cmd, *response, env.now);
  if (!text.ok()) {
    err << "error: " << text.status().message() << "\n";
    return kExitServerError;
  }
  if (text->empty()) {
    if (cmd->kind == Kind::kClaims && !cmd->all_namespaces) {
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
