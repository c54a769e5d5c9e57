// Log line formats of every pdc program that logs with spdlog: plain text, or one JSON object per line for log collectors.
//
// spdlog's pattern language cannot escape: a message holding a quote, a
// backslash, a newline or an invalid UTF-8 byte (a pod name, an error text
// from the Kubernetes API, a path) would break the JSON line. The JSON
// format therefore writes the message through a custom pattern flag that
// escapes it (JsonEscape below). The text format escapes too (TextEscape):
// a message is one line however it was made, so a name chosen by whoever
// created a pod cannot forge a log line.
// Thread-safety: MakeLogFormatter is pure; the returned formatter is used by
// spdlog under its sink lock, like any spdlog formatter.
#ifndef PDC_COMMON_LOG_FORMAT_H_
#define PDC_COMMON_LOG_FORMAT_H_

#include <memory>
#include <string>
#include <string_view>

#include "spdlog/formatter.h"

namespace pdc {

// Appends `s` to `out` as the inside of a JSON string literal (no quotes):
// '"' and '\\' escaped, control characters as \n \r \t \b \f or \u00XX, and
// every byte that is not part of well-formed UTF-8 replaced by U+FFFD, so
// the result is valid JSON whatever the input.
void AppendJsonEscaped(std::string_view s, std::string* out);
std::string JsonEscape(std::string_view s);

// `s` for one line of a text log. A backslash becomes two; newline, carriage
// return and tab become \n, \r and \t; every other C0 control, DEL and every
// byte that is not part of well-formed UTF-8 becomes \xNN; C1 controls (NEL
// among them), the Unicode line and paragraph separators and the
// bidirectional controls become \uXXXX. Other UTF-8 passes unchanged.
std::string TextEscape(std::string_view s);

// The formatter for `json` lines:
//   {"time":"2026-11-30T08:00:00.123456Z","level":"info","logger":"<logger>","msg":"<escaped>"}
// or, for text, "2026-11-30T08:00:00.123Z I <message>". Times are UTC.
std::unique_ptr<spdlog::formatter> MakeLogFormatter(bool json,
                                                    std::string_view logger);

// Makes the default logger write to stderr as `program`, at `level` (an
// spdlog level name), as JSON lines or text. Every pdc program calls it
// first, so `logFormat` and `logLevel` mean the same for all of them.
void InstallLogging(std::string_view program, bool json, const std::string& level);

}  // namespace pdc

#endif  // PDC_COMMON_LOG_FORMAT_H_
