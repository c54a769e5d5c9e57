// The JSON log format: every line is one valid JSON object whatever the
// message holds (quotes, backslashes, newlines, control bytes, invalid UTF-8),
// and the message comes back out of a JSON parser as it went in (invalid
// UTF-8 bytes as U+FFFD).
#include "common/log_format.h"

#include <memory>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "rapidjson/encodings.h"
#include "rapidjson/error/en.h"
#include "spdlog/logger.h"
#include "spdlog/sinks/ostream_sink.h"

namespace pdc {
namespace {

using ::testing::MatchesRegex;

struct EscapeCase {
  std::string name;
  std::string in;
  std::string escaped;  // What JsonEscape writes.
  std::string decoded;  // What a JSON parser reads back.
};

class JsonEscapeTest : public ::testing::TestWithParam<EscapeCase> {};

TEST_P(JsonEscapeTest, EscapesAndRoundTrips) {
  const EscapeCase& t = GetParam();
  const std::string escaped = JsonEscape(t.in);
  EXPECT_EQ(escaped, t.escaped);
  const std::string literal = "\"" + escaped + "\"";
  rapidjson::Document doc;
  // Validate the encoding too: an invalid byte must never reach the output.
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(literal.c_str(), literal.size());
  ASSERT_FALSE(doc.HasParseError())
      << rapidjson::GetParseError_En(doc.GetParseError()) << " in " << literal;
  ASSERT_TRUE(doc.IsString());
  EXPECT_EQ(std::string(doc.GetString(), doc.GetStringLength()), t.decoded);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JsonEscapeTest,
    ::testing::Values(
        EscapeCase{"Plain", "bind vm=default/vm1 node=node-a",
                   "bind vm=default/vm1 node=node-a", "bind vm=default/vm1 node=node-a"},
        EscapeCase{"Quotes", R"(claim "data" not found)", R"(claim \"data\" not found)",
                   R"(claim "data" not found)"},
        EscapeCase{"Backslash", R"(C:\path)", R"(C:\\path)", R"(C:\path)"},
        EscapeCase{"Newline", "line1\nline2\r\t", R"(line1\nline2\r\t)", "line1\nline2\r\t"},
        EscapeCase{"Control", std::string("a\x01" "b\x1f" "c\x7f", 6),
                   "a\\u0001b\\u001fc\x7f", std::string("a\x01" "b\x1f" "c\x7f", 6)},
        EscapeCase{"Nul", std::string("a\0b", 3), "a\\u0000b", std::string("a\0b", 3)},
        EscapeCase{"ValidUtf8", "gr\xC3\xBC\xC3\x9F \xE2\x82\xAC \xF0\x9F\x98\x80",
                   "gr\xC3\xBC\xC3\x9F \xE2\x82\xAC \xF0\x9F\x98\x80",
                   "gr\xC3\xBC\xC3\x9F \xE2\x82\xAC \xF0\x9F\x98\x80"},
        EscapeCase{"InvalidByte", "a\xFF" "b", "a\xEF\xBF\xBD" "b", "a\xEF\xBF\xBD" "b"},
        EscapeCase{"TruncatedSequence", "a\xE2\x82", "a\xEF\xBF\xBD\xEF\xBF\xBD",
                   "a\xEF\xBF\xBD\xEF\xBF\xBD"},
        EscapeCase{"Overlong", "\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD",
                   "\xEF\xBF\xBD\xEF\xBF\xBD"},
        EscapeCase{"Surrogate", "\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD",
                   "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}),
    [](const ::testing::TestParamInfo<EscapeCase>& i) { return i.param.name; });

std::string LogOneLine(bool json, const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  spdlog::logger logger("pdc-extender", sink);
  logger.set_formatter(MakeLogFormatter(json, "pdc-extender"));
  logger.warn("bind {} failed: {}", "default/virt-launcher-vm1", message);
  return out.str();
}

TEST(JsonLogTest, EveryLineIsOneJsonObjectWithTheMessageIntact) {
  const std::string evil =
      "Kubernetes API: pods \"virt-launcher\" is forbidden:\n\tuser \\ \x01 \xFF 100%";
  const std::string line = LogOneLine(true, evil);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  const std::string body = line.substr(0, line.size() - 1);
  EXPECT_EQ(body.find('\n'), std::string::npos) << "one line per message";
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(body.c_str(), body.size());
  ASSERT_FALSE(doc.HasParseError())
      << rapidjson::GetParseError_En(doc.GetParseError()) << " in " << body;
  ASSERT_TRUE(doc.IsObject());
  EXPECT_STREQ(doc["level"].GetString(), "warning");
  EXPECT_STREQ(doc["logger"].GetString(), "pdc-extender");
  EXPECT_THAT(doc["time"].GetString(),
              MatchesRegex(R"(20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9:]+\.[0-9]{6}Z)"));
  const std::string want =
      "bind default/virt-launcher-vm1 failed: Kubernetes API: pods "
      "\"virt-launcher\" is forbidden:\n\tuser \\ \x01 \xEF\xBF\xBD 100%";
  EXPECT_EQ(std::string(doc["msg"].GetString(), doc["msg"].GetStringLength()), want);
}

TEST(JsonLogTest, LoggerNameIsEscapedToo) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  spdlog::logger logger("x", sink);
  logger.set_formatter(MakeLogFormatter(true, "pdc \"%v\""));
  logger.info("hello");
  rapidjson::Document doc;
  const std::string line = out.str();
  doc.Parse(line.c_str(), line.size());
  ASSERT_FALSE(doc.HasParseError()) << line;
  EXPECT_STREQ(doc["logger"].GetString(), "pdc \"%v\"");
  EXPECT_STREQ(doc["msg"].GetString(), "hello");
}

struct TextCase {
  std::string name;
  std::string in;
  std::string escaped;
};

class TextEscapeTest : public ::testing::TestWithParam<TextCase> {};

TEST_P(TextEscapeTest, OneLineNothingHidden) {
  const TextCase& t = GetParam();
  EXPECT_EQ(TextEscape(t.in), t.escaped);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TextEscapeTest,
    ::testing::Values(
        TextCase{"Plain", "bind vm=default/vm1 \"quoted\"", "bind vm=default/vm1 \"quoted\""},
        TextCase{"ForgedLine", "vm1\n2026-11-30T08:00:00.000Z I bind ok",
                 "vm1\\n2026-11-30T08:00:00.000Z I bind ok"},
        TextCase{"CarriageReturnTab", "a\rb\tc", "a\\rb\\tc"},
        TextCase{"Backslash", "a\\nb", "a\\\\nb"},
        TextCase{"Controls", std::string("a\0b\x1b[31mc\x7f", 10), "a\\x00b\\x1b[31mc\\x7f"},
        TextCase{"InvalidUtf8", "a\xFF\xC0\xAF", "a\\xff\\xc0\\xaf"},
        TextCase{"ValidUtf8", "gr\xC3\xBC\xC3\x9F \xF0\x9F\x98\x80", "gr\xC3\xBC\xC3\x9F \xF0\x9F\x98\x80"},
        TextCase{"NextLine", "a\xC2\x85" "b", "a\\u0085b"},
        TextCase{"LineSeparator", "a\xE2\x80\xA8" "b\xE2\x80\xA9", "a\\u2028b\\u2029"},
        TextCase{"BidiOverride", "vm-\xE2\x80\xAE" "gnp.exe", "vm-\\u202egnp.exe"},
        TextCase{"BidiIsolate", "\xE2\x81\xA6x\xE2\x81\xA9", "\\u2066x\\u2069"}),
    [](const ::testing::TestParamInfo<TextCase>& i) { return i.param.name; });

TEST(JsonLogTest, TextFormatEscapesWhatCouldForgeALine) {
  const std::string line =
      LogOneLine(false, "no such pod\n2026-11-30T08:00:00.000Z I bind default/vm2 ok");
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_THAT(line, ::testing::HasSubstr("no such pod\\n2026-11-30T08:00:00.000Z I bind"));
}

TEST(JsonLogTest, TextFormatIsOneReadableLine) {
  const std::string line = LogOneLine(false, "no such pod");
  EXPECT_THAT(line, MatchesRegex(R"([0-9T:.-]+Z W bind default/virt-launcher-vm1 failed: no such pod
)"));
}

}  // namespace
}  // namespace pdc
