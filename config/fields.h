// Internal to config/: the table of configuration fields. Each field is
// named by its dotted YAML path and knows how to decode itself from a YAML
// node (file or flag) and how to print its value back as YAML. The YAML
// walker, the flag parser, --help and FormatConfigYaml all read this one
// table, so a field added here is accepted everywhere at once.
// Thread-safety: the table is immutable after first use.
#ifndef PDC_CONFIG_FIELDS_H_
#define PDC_CONFIG_FIELDS_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "config/config.h"
#include "yaml-cpp/yaml.h"

namespace pdc::config_internal {

// Where the values being decoded come from, for error messages.
struct DecodeContext {
  std::string origin;      // File name, or "flag --extender.listen".
  bool has_marks = false;  // Nodes carry line/column (loaded from a file).
};

// InvalidArgument "origin[:line:col]: path: problem" (lines 1-based).
absl::Status FieldError(const DecodeContext& ctx, const YAML::Node& at,
                        std::string_view path, std::string_view problem);

struct FieldSpec {
  std::string path;   // "extender.listen"
  bool list = false;  // A flag value is parsed as YAML (flow list).
  std::function<absl::Status(const DecodeContext&, const YAML::Node&,
                             PdcConfig*)>
      set;
  std::function<std::string(const PdcConfig&)> format;  // YAML value text.
};

// Every field, in the order of config/pdc.example.yaml (grouped by section).
const std::vector<FieldSpec>& Fields();
const FieldSpec* FindField(std::string_view path);
// True when `path` is a section ("extender", "extender.tls").
bool IsSection(std::string_view path);
// " (did you mean \"extender.listen\"?)" for a near miss, else "".
std::string Suggestion(std::string_view unknown_path);

// A YAML double-quoted string.
std::string QuoteYaml(std::string_view s);

}  // namespace pdc::config_internal

#endif  // PDC_CONFIG_FIELDS_H_
