#include "common/log_format.h"

#include <ctime>
#include <utility>

#include "common/strings.h"
#include "spdlog/details/log_msg.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace pdc {
namespace {

// The code point of the well-formed multi-byte sequence of `n` bytes at s[i].
char32_t DecodeUtf8(std::string_view s, size_t i, size_t n) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  switch (n) {
    case 2: return (char32_t{b(0)} & 0x1F) << 6 | (b(1) & 0x3F);
    case 3: return (char32_t{b(0)} & 0x0F) << 12 | (b(1) & 0x3F) << 6 | (b(2) & 0x3F);
    default:
      return (char32_t{b(0)} & 0x07) << 18 | (b(1) & 0x3F) << 12 | (b(2) & 0x3F) << 6 |
             (b(3) & 0x3F);
  }
}

// Code points a terminal or log viewer may take for a line break, or that
// reorder what is shown (bidirectional controls): a text log line shows them
// escaped, so no message can fake a second line or hide what it says.
bool IsDeceptiveInText(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) ||      // C1 controls, NEL among them.
         cp == 0x2028 || cp == 0x2029 ||    // Line and paragraph separators.
         cp == 0x200E || cp == 0x200F ||    // Left-to-right / right-to-left marks.
         (cp >= 0x202A && cp <= 0x202E) ||  // Bidirectional embeddings, overrides.
         (cp >= 0x2066 && cp <= 0x2069);    // Bidirectional isolates.
}

// What a message is escaped for: a JSON string (JsonEscape) or one line of
// a text log (TextEscape).
enum class EscapeFor { kJson, kText };

template <typename Out>
void EscapeInto(std::string_view s, EscapeFor mode, Out& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  const bool json = mode == EscapeFor::kJson;
  // JSON takes DEL as it is and needs '"' escaped; a text line shows quotes
  // as they are and escapes DEL.
  const auto plain = [json](unsigned char c) {
    return c >= 0x20 && c != '\\' && (json ? c != '"' && c < 0x80 : c < 0x7F);
  };
  size_t i = 0;
  while (i < s.size()) {
    // Copy the longest run that needs nothing.
    size_t j = i;
    while (j < s.size() && plain(static_cast<unsigned char>(s[j]))) ++j;
    out.append(s.data() + i, s.data() + j);
    i = j;
    if (i == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const size_t n = Utf8SequenceLength(s, i); n != 0) {
        const char32_t cp = DecodeUtf8(s, i, n);
        if (!json && IsDeceptiveInText(cp)) {
          const char u[6] = {'\\', 'u', kHex[(cp >> 12) & 15], kHex[(cp >> 8) & 15],
                             kHex[(cp >> 4) & 15], kHex[cp & 15]};
          out.append(u, u + 6);
        } else {
          out.append(s.data() + i, s.data() + i + n);
        }
        i += n;
        continue;
      }
      if (json) {  // Not UTF-8: U+FFFD keeps the JSON valid.
        out.append(kReplacement.data(), kReplacement.data() + kReplacement.size());
        ++i;
        continue;
      }
      // Not UTF-8, in text: the byte itself as \xNN, so nothing of it is lost.
    }
    const char* esc = nullptr;
    switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      case '\b': esc = json ? "\\b" : nullptr; break;
      case '\f': esc = json ? "\\f" : nullptr; break;
      default: break;
    }
    if (esc != nullptr) {
      out.append(esc, esc + 2);
    } else if (json) {
      const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(u, u + 6);
    } else {
      const char x[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
      out.append(x, x + 4);
    }
    ++i;
  }
}

// std::string has no append(first, last) for pointers in all the forms
// fmt's buffer has; this adapter gives both the same shape.
struct StringSink {
  std::string* s;
  void append(const char* first, const char* last) { s->append(first, last); }
};

// %* in a pattern: the message, JSON-escaped.
class EscapedMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    EscapeInto(std::string_view(msg.payload.data(), msg.payload.size()), EscapeFor::kJson, dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedMessageFlag>();
  }
};

// %* in a text pattern: the message with line breaks, control characters
// and bidirectional controls escaped (TextEscape).
class TextEscapedMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    EscapeInto(std::string_view(msg.payload.data(), msg.payload.size()), EscapeFor::kText, dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<TextEscapedMessageFlag>();
  }
};

}  // namespace

std::string TextEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  StringSink sink{&out};
  EscapeInto(s, EscapeFor::kText, sink);
  return out;
}

void AppendJsonEscaped(std::string_view s, std::string* out) {
  StringSink sink{out};
  EscapeInto(s, EscapeFor::kJson, sink);
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  AppendJsonEscaped(s, &out);
  return out;
}

std::unique_ptr<spdlog::formatter> MakeLogFormatter(bool json,
                                                    std::string_view logger) {
  if (!json) {
    auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    f->add_flag<TextEscapedMessageFlag>('*');
    f->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %L %*");
    return f;
  }
  // The logger name goes into the pattern, so its '%' must be doubled too.
  std::string name;
  for (char c : JsonEscape(logger)) {
    name += c;
    if (c == '%') name += '%';
  }
  auto f = std::make_unique<spdlog::pattern_formatter>(
      spdlog::pattern_time_type::utc);
  f->add_flag<EscapedMessageFlag>('*');
  f->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":")" +
                 name + R"(","msg":"%*"})");
  return f;
}

void InstallLogging(std::string_view program, bool json, const std::string& level) {
  const std::string name(program);
  // Replacing the default logger: a logger of the same name from an earlier
  // call would make spdlog refuse the new one.
  spdlog::drop(name);
  spdlog::set_default_logger(spdlog::stderr_color_mt(name));
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_formatter(MakeLogFormatter(json, program));
}

}  // namespace pdc
