// Loading: YAML file and flags onto PdcConfig through the field table.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "config/config.h"
#include "config/fields.h"

namespace pdc {
namespace {

using config_internal::DecodeContext;
using config_internal::FieldError;
using config_internal::FieldSpec;
using config_internal::FindField;
using config_internal::IsSection;

absl::Status WalkMap(const DecodeContext& ctx, const YAML::Node& map,
                     const std::string& prefix, PdcConfig* config) {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    // Copies: the iterator's `->` yields a proxy that dies with the statement,
    // so a reference into it would dangle. A YAML::Node is a cheap handle.
    const YAML::Node key_node = it->first;
    const YAML::Node value = it->second;
    if (!key_node.IsScalar()) {
      return FieldError(ctx, key_node, prefix.empty() ? "(top level)" : prefix,
                        "keys must be plain field names");
    }
    const std::string key = key_node.Scalar();
    const std::string path =
        prefix.empty() ? key : absl::StrCat(prefix, ".", key);
    if (!seen.insert(key).second) {
      return FieldError(ctx, key_node, path, "duplicate field");
    }
    if (const FieldSpec* field = FindField(path)) {
      RETURN_IF_ERROR(field->set(ctx, value, config));
      continue;
    }
    if (IsSection(path)) {
      if (value.IsNull()) continue;
      if (!value.IsMap()) {
        return FieldError(ctx, value, path,
                          "is a section; want a mapping of its fields");
      }
      RETURN_IF_ERROR(WalkMap(ctx, value, path, config));
      continue;
    }
    return FieldError(
        ctx, key_node, path,
        absl::StrCat("unknown field", config_internal::Suggestion(path)));
  }
  return absl::OkStatus();
}

std::string YamlSyntaxError(std::string_view origin,
                            const YAML::ParserException& e) {
  return absl::StrFormat("%s:%d:%d: YAML syntax error: %s", Sv(origin),
                         e.mark.line + 1, e.mark.column + 1, e.msg);
}

}  // namespace

absl::Status ApplyYaml(std::string_view yaml, std::string_view origin,
                       PdcConfig* config) {
  // Decode onto a copy: a failed load leaves *config untouched.
  PdcConfig next = *config;
  const DecodeContext ctx{std::string(origin), /*has_marks=*/true};
  // yaml-cpp reports errors by exception; none leaves this function.
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (root.IsNull()) return absl::OkStatus();  // Empty file: all defaults.
    if (!root.IsMap()) {
      return FieldError(ctx, root, "(top level)",
                        "want a mapping of field names to values");
    }
    RETURN_IF_ERROR(WalkMap(ctx, root, "", &next));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(YamlSyntaxError(origin, e));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(origin), ": cannot read YAML: ", e.what()));
  }
  *config = std::move(next);
  return absl::OkStatus();
}

absl::Status ApplyYamlFile(const std::string& path, PdcConfig* config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string msg = absl::StrCat("cannot read config file \"", path,
                                         "\": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::InvalidArgumentError(msg);
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return ApplyYaml(buf.str(), path, config);
}

absl::Status ApplyOverride(std::string_view path, std::string_view value,
                           PdcConfig* config) {
  const FieldSpec* field = FindField(path);
  const std::string origin = absl::StrCat("flag --", Sv(path));
  if (field == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown flag --", Sv(path), config_internal::Suggestion(path),
        "; --help lists the flags"));
  }
  PdcConfig next = *config;
  const DecodeContext ctx{origin, /*has_marks=*/false};
  try {
    // A list field takes a YAML flow value; anything else is taken verbatim
    // (so "0.0.0.0:8888" or "#x" are not reinterpreted as YAML).
    const YAML::Node node = field->list ? YAML::Load(std::string(value))
                                        : YAML::Node(std::string(value));
    RETURN_IF_ERROR(field->set(ctx, node, &next));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: YAML syntax error at column %d: %s", origin,
                        e.mark.column + 1, e.msg));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", e.what()));
  }
  *config = std::move(next);
  return absl::OkStatus();
}

absl::StatusOr<ConfigFlags> ParseConfigFlags(
    absl::Span<const std::string> args) {
  ConfigFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      flags.help = true;
      continue;
    }
    if (arg.size() < 3 || !arg.starts_with("--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg,
                       "\"; flags look like --config=FILE or "
                       "--extender.listen=0.0.0.0:8888"));
    }
    const size_t eq = arg.find('=');
    const std::string name =
        arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (name != "config" && FindField(name) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag --", name, config_internal::Suggestion(name),
          "; --help lists the flags"));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];  // "--name value"
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", name, " needs a value"));
    }
    if (name == "config") {
      if (value.empty()) {
        return absl::InvalidArgumentError("flag --config needs a file name");
      }
      flags.config_file = value;
    } else {
      flags.overrides.emplace_back(name, value);
    }
  }
  return flags;
}

absl::StatusOr<PdcConfig> LoadConfig(
    const ConfigFlags& flags, Component component,
    const std::function<std::optional<std::string>(std::string_view)>& getenv) {
  PdcConfig config;
  if (!flags.config_file.empty()) {
    RETURN_IF_ERROR(ApplyYamlFile(flags.config_file, &config));
  }
  for (const auto& [path, value] : flags.overrides) {
    RETURN_IF_ERROR(ApplyOverride(path, value, &config));
  }
  if (config.node.node_name.empty()) {
    std::optional<std::string> env;
    if (getenv) {
      env = getenv("NODE_NAME");
    } else if (const char* v = std::getenv("NODE_NAME")) {
      env = v;
    }
    if (env.has_value()) config.node.node_name = *env;
  }
  RETURN_IF_ERROR(Validate(config, component));
  return config;
}

absl::StatusOr<PdcConfig> LoadConfigFromArgs(int argc, char** argv,
                                             Component component, bool* help) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  ASSIGN_OR_RETURN(ConfigFlags flags, ParseConfigFlags(args));
  if (help != nullptr) *help = flags.help;
  if (flags.help) return PdcConfig();
  return LoadConfig(flags, component);
}

std::string FormatConfigYaml(const PdcConfig& config) {
  std::string out;
  std::vector<std::string> open;  // Sections currently open.
  for (const FieldSpec& field : config_internal::Fields()) {
    std::vector<std::string> parts = absl::StrSplit(field.path, '.');
    const std::string leaf = parts.back();
    parts.pop_back();
    size_t common = 0;
    while (common < open.size() && common < parts.size() &&
           open[common] == parts[common]) {
      ++common;
    }
    open.resize(common);
    for (size_t i = common; i < parts.size(); ++i) {
      absl::StrAppend(&out, std::string(2 * i, ' '), parts[i], ":\n");
      open.push_back(parts[i]);
    }
    absl::StrAppend(&out, std::string(2 * parts.size(), ' '), leaf, ": ",
                    field.format(config), "\n");
  }
  return out;
}

std::string ConfigHelp() {
  const PdcConfig defaults;
  std::string out =
      "Flags (each overrides the field of the same dotted path in the YAML "
      "file):\n"
      "  --config=FILE  YAML configuration file (see pdc.example.yaml)\n"
      "  --help         this text\n";
  for (const FieldSpec& field : config_internal::Fields()) {
    absl::StrAppend(&out, "  --", field.path, "  (default ",
                    field.format(defaults), ")\n");
  }
  absl::StrAppend(&out,
                  "node.nodeName defaults to $NODE_NAME. Durations: 500ms, "
                  "60s, 5m, 1h30m. Sizes: 67108864, 64Mi, 1Gi.\n");
  return out;
}

}  // namespace pdc
