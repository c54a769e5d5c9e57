#include "model/names.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/strings.h"

namespace pdc::model {
namespace {

// The formats and messages of k8s.io/apimachinery/pkg/util/validation.
constexpr char kLabelFmt[] = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
constexpr char kLabelMsg[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character";
constexpr char kSubdomainFmt[] =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
constexpr char kSubdomainMsg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character";
constexpr char kQualifiedNameFmt[] = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
constexpr char kQualifiedNameMsg[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";
constexpr size_t kMessageValueBytes = 80;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// validation.RegexError: the message, the examples, and the regex.
std::string RegexError(std::string_view msg, std::string_view fmt,
                       std::initializer_list<std::string_view> examples) {
  std::string out(msg);
  out += " (e.g. ";
  bool first = true;
  for (std::string_view e : examples) {
    absl::StrAppend(&out, first ? "" : " or ", "'", Sv(e), "', ");
    first = false;
  }
  absl::StrAppend(&out, "regex used for validation is '", Sv(fmt), "')");
  return out;
}

std::string MaxLenError(size_t n) { return absl::StrCat("must be no more than ", n, " characters"); }

// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ without a regex engine.
bool MatchesLabel(std::string_view s) {
  if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

// The subdomain regex: labels (of any length) joined by single dots.
bool MatchesSubdomain(std::string_view s) {
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    if (!MatchesLabel(s.substr(start, dot == std::string_view::npos ? dot : dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool MatchesQualifiedNamePart(std::string_view s) {
  if (s.empty() || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

std::string Problem(std::string_view value, std::string_view what,
                    const std::vector<std::string>& problems) {
  if (problems.empty()) return "";
  return absl::StrCat(QuoteForMessage(value), " is not a valid ", Sv(what), ": ",
                      absl::StrJoin(problems, "; "));
}

absl::Status Invalid(std::string_view field, const std::string& problem) {
  if (problem.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(Sv(field), ": ", problem));
}

}  // namespace

std::vector<std::string> IsDns1123Label(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123LabelMaxLength) errs.push_back(MaxLenError(kDns1123LabelMaxLength));
  if (!MatchesLabel(value)) {
    if (MatchesSubdomain(value)) {
      // A valid subdomain that is not a valid label: it has dots.
      errs.push_back("must not contain dots");
    } else {
      errs.push_back(RegexError(kLabelMsg, kLabelFmt, {"my-name", "123-abc"}));
    }
  }
  return errs;
}

std::vector<std::string> IsDns1123Subdomain(std::string_view value) {
  std::vector<std::string> errs;
  if (value.size() > kDns1123SubdomainMaxLength) {
    errs.push_back(MaxLenError(kDns1123SubdomainMaxLength));
  }
  if (!MatchesSubdomain(value)) {
    errs.push_back(RegexError(kSubdomainMsg, kSubdomainFmt, {"example.com"}));
  }
  return errs;
}

std::vector<std::string> IsQualifiedName(std::string_view value) {
  std::vector<std::string> errs;
  std::string_view name = value;
  const size_t slash = value.find('/');
  if (slash != std::string_view::npos) {
    if (value.find('/', slash + 1) != std::string_view::npos) {
      errs.push_back(absl::StrCat(
          "a qualified name ",
          RegexError(kQualifiedNameMsg, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"}),
          " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
      return errs;
    }
    const std::string_view prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty()) {
      errs.push_back("prefix part must be non-empty");
    } else {
      for (const std::string& e : IsDns1123Subdomain(prefix)) {
        errs.push_back(absl::StrCat("prefix part ", e));
      }
    }
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > kQualifiedNameMaxLength) {
    errs.push_back(absl::StrCat("name part ", MaxLenError(kQualifiedNameMaxLength)));
  }
  if (!MatchesQualifiedNamePart(name)) {
    errs.push_back(absl::StrCat(
        "name part ",
        RegexError(kQualifiedNameMsg, kQualifiedNameFmt, {"MyName", "my.name", "123-abc"})));
  }
  return errs;
}

std::string ObjectNameProblem(std::string_view value) {
  if (value.empty()) return Problem(value, "name", {"must not be empty"});
  return Problem(value, "name", IsDns1123Subdomain(value));
}

std::string NamespaceProblem(std::string_view value) {
  if (value.empty()) return Problem(value, "namespace", {"must not be empty"});
  return Problem(value, "namespace", IsDns1123Label(value));
}

absl::Status ValidateObjectName(std::string_view field, std::string_view value) {
  return Invalid(field, ObjectNameProblem(value));
}

absl::Status ValidateNamespace(std::string_view field, std::string_view value) {
  return Invalid(field, NamespaceProblem(value));
}

absl::Status ValidateQualifiedName(std::string_view field, std::string_view value) {
  return Invalid(field, Problem(value, "qualified name", IsQualifiedName(value)));
}

std::string QuoteForMessage(std::string_view value) {
  if (value.size() <= kMessageValueBytes) {
    return absl::StrCat("\"", absl::CHexEscape(Sv(value)), "\"");
  }
  return absl::StrCat("\"", absl::CHexEscape(Sv(value.substr(0, kMessageValueBytes))),
                      "\"... (", value.size(), " bytes)");
}

}  // namespace pdc::model
