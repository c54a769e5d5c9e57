#include "api/quantity.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "common/strings.h"
#include "model/names.h"

namespace pdc::api {
namespace {

using u128 = unsigned __int128;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The characters parseQuantityString takes as the start of a suffix.
bool IsSuffixChar(char c) {
  switch (c) {
    case 'e': case 'E': case 'i': case 'n': case 'u': case 'm':
    case 'k': case 'K': case 'M': case 'G': case 'T': case 'P':
      return true;
    default:
      return false;
  }
}

// parseQuantityString's split of a quantity.
struct Parts {
  bool positive = true;
  bool any_digit = false;  // The number part has a digit (zeros count).
  std::string_view num;    // Leading zeros stripped; "" is zero.
  std::string_view denom;  // Digits after the '.'.
  std::string_view suffix;
};

// False where Go answers ErrFormatWrong.
bool Split(std::string_view s, Parts* p) {
  const size_t end = s.size();
  size_t pos = 0;
  if (pos < end && (s[0] == '-' || s[0] == '+')) {
    p->positive = s[0] == '+';
    ++pos;
  }
  while (pos < end && s[pos] == '0') {
    p->any_digit = true;
    ++pos;
  }
  if (pos == end) return true;
  size_t start = pos;
  while (pos < end && IsDigit(s[pos])) ++pos;
  p->num = s.substr(start, pos - start);
  p->any_digit |= !p->num.empty();
  if (pos == end) return true;
  if (s[pos] == '.') {
    start = ++pos;
    while (pos < end && IsDigit(s[pos])) ++pos;
    p->denom = s.substr(start, pos - start);
    p->any_digit |= !p->denom.empty();
    if (pos == end) return true;
  }
  const size_t suffix_start = pos;
  while (pos < end && IsSuffixChar(s[pos])) ++pos;
  if (pos < end) {
    // After the letters: an optional sign and digits to the end.
    if (s[pos] == '-' || s[pos] == '+') ++pos;
    while (pos < end && IsDigit(s[pos])) ++pos;
    if (pos != end) return false;
  }
  p->suffix = s.substr(suffix_start);
  return true;
}

// strconv.ParseInt(s, 10, 64): an optional sign, then at least one digit,
// nothing else, within int64.
bool ParseGoInt64(std::string_view s, int64_t* out) {
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  uint64_t v = 0;
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  for (char c : s) {
    if (!IsDigit(c)) return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (limit - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

// The suffixer's interpret(): base 10 or 2 and the exponent.
bool Interpret(std::string_view suffix, int* base, int32_t* exponent) {
  struct Known {
    std::string_view suffix;
    int base;
    int32_t exponent;
  };
  static constexpr Known kKnown[] = {
      {"", 10, 0},    {"n", 10, -9},  {"u", 10, -6},  {"m", 10, -3},  {"k", 10, 3},
      {"M", 10, 6},   {"G", 10, 9},   {"T", 10, 12},  {"P", 10, 15},  {"E", 10, 18},
      {"Ki", 2, 10},  {"Mi", 2, 20},  {"Gi", 2, 30},  {"Ti", 2, 40},  {"Pi", 2, 50},
      {"Ei", 2, 60},
  };
  for (const Known& k : kKnown) {
    if (k.suffix == suffix) {
      *base = k.base;
      *exponent = k.exponent;
      return true;
    }
  }
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int64_t e = 0;
    if (!ParseGoInt64(suffix.substr(1), &e)) return false;
    *base = 10;
    // Go converts with int32(parsed): the low 32 bits, as C++20 does.
    *exponent = static_cast<int32_t>(e);
    return true;
  }
  return false;
}

// Value of a run of at most 38 decimal digits.
u128 DigitsValue(std::string_view digits) {
  u128 v = 0;
  for (char c : digits) v = v * 10 + static_cast<unsigned>(c - '0');
  return v;
}

}  // namespace

WholeQuantity ParseWholeQuantity(std::string_view text, int64_t max) {
  WholeQuantity out;
  auto fail = [&out](QuantityProblem p) {
    out.problem = p;
    return out;
  };
  if (text.empty()) return fail(QuantityProblem::kSyntax);
  Parts p;
  int base = 10;
  int32_t exponent = 0;
  if (!Split(text, &p) || !Interpret(p.suffix, &base, &exponent)) {
    return fail(QuantityProblem::kSyntax);
  }
  // Go parses a number without a digit through inf.Dec, which refuses it,
  // when the scale is below nano ("e-10", ".e-10"); with a digit it is zero.
  if (!p.any_digit && base == 10 && exponent < -9) return fail(QuantityProblem::kSyntax);

  // The value is D * 10^e10 * 2^b, D the digits of num and denom without
  // leading or trailing zeros.
  std::string digits = absl::StrCat(Sv(p.num), Sv(p.denom));
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return out;  // Zero, whatever its sign.
  const size_t last = digits.find_last_not_of('0');
  const std::string_view d =
      std::string_view(digits).substr(first, last + 1 - first);
  const int64_t e10 = (base == 10 ? int64_t{exponent} : 0) -
                      static_cast<int64_t>(p.denom.size()) +
                      static_cast<int64_t>(digits.size() - 1 - last);
  const int b = base == 2 ? exponent : 0;
  if (!p.positive) return fail(QuantityProblem::kNegative);

  // In nano units, rounded up as Go rounds: n = ceil(D * 10^(e10+9) * 2^b).
  // Anything above max * 10^9 is too large; 10^29 is above every such cap
  // (2^63 * 10^9 < 10^28), so at most 29 digits are ever multiplied out.
  const u128 cap = static_cast<u128>(max) * 1000000000u;
  const int64_t f = e10 + 9;
  const int64_t len = static_cast<int64_t>(d.size());
  u128 whole_part = 0;  // D * 10^f (f >= 0), or the digits above 10^-f.
  uint64_t frac_ceil = 0;  // ceil(rest * 2^b / 10^-f) when f < 0.
  if (f >= 0) {
    if (len + f > 29) return fail(QuantityProblem::kTooLarge);
    whole_part = DigitsValue(d);
    for (int64_t i = 0; i < f; ++i) whole_part *= 10;
  } else {
    const int64_t r = -f;  // Decimal places below nano.
    if (len - r > 29) return fail(QuantityProblem::kTooLarge);
    std::string_view low = d;
    if (len > r) {
      whole_part = DigitsValue(d.substr(0, static_cast<size_t>(len - r)));
      low = d.substr(static_cast<size_t>(len - r));
    }
    // low * 2^b, digit by digit from the right: the carry out of the r
    // places is the floor, a non-zero digit left behind makes it round up.
    // Places above `low`'s digits are zeros: once the carry is zero, so is
    // every digit left.
    uint64_t carry = 0;
    bool remainder = false;
    int64_t place = 0;
    for (auto it = low.rbegin(); it != low.rend(); ++it, ++place) {
      const uint64_t x = (static_cast<uint64_t>(*it - '0') << b) + carry;
      remainder |= x % 10 != 0;
      carry = x / 10;
    }
    for (; place < r && carry != 0; ++place) {
      remainder |= carry % 10 != 0;
      carry /= 10;
    }
    frac_ceil = carry + (remainder ? 1 : 0);
  }
  if (whole_part > (cap >> b)) return fail(QuantityProblem::kTooLarge);
  const u128 nano = (whole_part << b) + frac_ceil;
  if (nano > cap) return fail(QuantityProblem::kTooLarge);
  if (nano % 1000000000u != 0) return fail(QuantityProblem::kNotWhole);
  out.value = static_cast<int64_t>(nano / 1000000000u);
  return out;
}

absl::StatusOr<int64_t> ParseWholeQuantityField(std::string_view text, int64_t max,
                                                std::string_view field,
                                                std::string_view what) {
  const WholeQuantity q = ParseWholeQuantity(text, max);
  const std::string shown = model::QuoteForMessage(text);
  switch (q.problem) {
    case QuantityProblem::kNone:
      return q.value;
    case QuantityProblem::kSyntax:
      return json::FieldError(
          field, absl::StrCat("quantity ", shown,
                              " is not a Kubernetes quantity (a number and a suffix, "
                              "like \"1\", \"2k\" or \"1e3\", without spaces)"));
    case QuantityProblem::kNegative:
      return json::FieldError(field,
                              absl::StrCat("quantity ", shown, " must not be negative"));
    case QuantityProblem::kNotWhole:
      return json::FieldError(
          field, absl::StrCat("quantity ", shown, " of ", Sv(what),
                              " must be a whole number"));
    case QuantityProblem::kTooLarge:
      break;
  }
  return json::FieldError(field, absl::StrCat("quantity ", shown, " is more than ", max,
                                              " ", Sv(what), ", the most allowed"));
}

}  // namespace pdc::api
