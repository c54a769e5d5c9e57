// EventCorrelator and the input checks of event_recorder.h, without an
// apiserver: which Record() becomes a new Event, which a count + 1 of one
// already sent, which the spam filter drops; and that no reason, message or
// object name a caller passes can make an invalid Event.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "kube/event_recorder.h"
#include "model/names.h"
#include "gtest/gtest.h"

namespace pdc::extender {
namespace {

using Action = kube::EventDecision::Action;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

// The apiserver's rule for object names (model/names.h).
bool IsDnsSubdomain(const std::string& s) { return model::IsDns1123Subdomain(s).empty(); }

kube::EventRecord Event(std::string reason, std::string message, absl::Time t,
                  std::string name = "virt-launcher-vm1-x7k2p", std::string uid = "uid-1") {
  kube::EventRecord e;
  e.involved = {"v1", "Pod", "ns1", std::move(name), std::move(uid)};
  e.type = kube::EventType::kNormal;
  e.reason = std::move(reason);
  e.message = std::move(message);
  e.time = t;
  return e;
}

TEST(EventInputTest, ReasonBecomesUpperCamelCase) {
  struct Row {
    std::string in;
    std::string want;
  };
  const std::vector<Row> rows = {
      {"ClaimBound", "ClaimBound"},
      {"claimBound", "ClaimBound"},
      {"claim bound", "ClaimBound"},
      {"claim_bound-now", "ClaimBoundNow"},
      {"Device/Conflict!", "DeviceConflict"},
      {"42Lost", "Reason42Lost"},
      {"", "Unspecified"},
      {" \t\n\"{}", "Unspecified"},
      {"Cl\xC3\xA4imBound", "ClImBound"},  // Non-ASCII letters are separators.
      {std::string(200, 'a'), "A" + std::string(127, 'a')},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(kube::SanitizeEventReason(r.in), r.want) << "input: " << r.in;
    EXPECT_LE(kube::SanitizeEventReason(r.in).size(), kube::kMaxEventReason);
  }
}

TEST(EventInputTest, MessageBecomesBoundedUtf8) {
  const std::string fffd = "\xEF\xBF\xBD";
  struct Row {
    std::string in;
    size_t max;
    std::string want;
  };
  const std::vector<Row> rows = {
      {"plain text", 1024, "plain text"},
      {"line\nbreak \"quoted\"", 1024, "line\nbreak \"quoted\""},  // JSON escapes these.
      {"caf\xC3\xA9", 1024, "caf\xC3\xA9"},
      {"bad \xFF byte", 1024, "bad " + fffd + " byte"},
      {"overlong \xC0\xAF", 1024, "overlong " + fffd + fffd},
      {"surrogate \xED\xA0\x80", 1024, "surrogate " + fffd + fffd + fffd},
      {"cut \xE2\x82", 1024, "cut " + fffd + fffd},
      // Cut between characters: "é" is two bytes, so 5 bytes hold two.
      {"\xC3\xA9\xC3\xA9\xC3\xA9", 5, "\xC3\xA9\xC3\xA9"},
      // A replacement is three bytes and is not split either.
      {"ab\xFF", 4, "ab"},
      {"\xF0\x9F\x98\x80!", 4, "\xF0\x9F\x98\x80"},
      {"\xF0\x9F\x98\x80!", 3, ""},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(kube::SanitizeUtf8(r.in, r.max), r.want) << "input: " << r.in;
  }
  const std::string long_message(3000, 'x');
  EXPECT_EQ(kube::SanitizeUtf8(long_message, kube::kMaxEventMessage).size(), kube::kMaxEventMessage);
}

TEST(EventNameTest, ClientGoFormatAndAlwaysValid) {
  // client-go: fmt.Sprintf("%v.%x", ref.Name, t.UnixNano()).
  EXPECT_EQ(kube::EventName("pod-a", 0x179b4f3a2c5e8d00), "pod-a.179b4f3a2c5e8d00");
  EXPECT_EQ(kube::EventName("claim.with.dots", 255), "claim.with.dots.ff");
  struct Row {
    std::string in;
    std::string want_prefix;
  };
  const std::vector<Row> rows = {
      {"Pod_A", "pod-a"},
      {"-lead-and-trail-", "lead-and-trail"},
      {"a..b", "a.b"},
      {"a.-b-.c", "a.b.c"},
      {"", "event"},
      {"???", "event"},
      {"\xC3\xA9t\xC3\xA9", "t"},
  };
  for (const Row& r : rows) {
    const std::string name = kube::EventName(r.in, 1);
    EXPECT_EQ(name, r.want_prefix + ".1") << "input: " << r.in;
    EXPECT_TRUE(IsDnsSubdomain(name)) << name;
  }
  // A 253-character object name still leaves a valid name, suffix intact.
  const std::string longest = std::string(230, 'a') + "-" + std::string(22, 'b');
  const std::string name = kube::EventName(longest, 0x179b4f3a2c5e8d00);
  EXPECT_LE(name.size(), 253u);
  EXPECT_TRUE(IsDnsSubdomain(name)) << name;
  EXPECT_TRUE(name.ends_with(".179b4f3a2c5e8d00")) << name;
  // Truncation that ends on '-' drops it.
  const std::string dash = std::string(235, 'a') + "-bbbbbbbbbbbbbbbbbbbbbb";
  EXPECT_TRUE(IsDnsSubdomain(kube::EventName(dash, 0x179b4f3a2c5e8d00)));
}

TEST(EventCorrelatorTest, RepeatWithinWindowIsPatchOfTheSameEvent) {
  kube::EventCorrelator c;
  const kube::EventDecision first = c.Correlate(Event("ClaimBound", "bound to node-a", kT0));
  EXPECT_EQ(first.action, Action::kCreate);
  EXPECT_EQ(first.name, kube::EventName("virt-launcher-vm1-x7k2p", absl::ToUnixNanos(kT0)));
  EXPECT_EQ(first.count, 1);
  EXPECT_EQ(first.first_timestamp, kT0);
  EXPECT_EQ(first.last_timestamp, kT0);

  const kube::EventDecision second =
      c.Correlate(Event("ClaimBound", "bound to node-a", kT0 + absl::Minutes(9)));
  EXPECT_EQ(second.action, Action::kPatch);
  EXPECT_EQ(second.name, first.name);
  EXPECT_EQ(second.count, 2);
  EXPECT_EQ(second.first_timestamp, kT0);
  EXPECT_EQ(second.last_timestamp, kT0 + absl::Minutes(9));

  // The window runs from the last occurrence: 9 + 9 minutes is still one.
  const kube::EventDecision third =
      c.Correlate(Event("ClaimBound", "bound to node-a", kT0 + absl::Minutes(18)));
  EXPECT_EQ(third.action, Action::kPatch);
  EXPECT_EQ(third.count, 3);

  // Exactly the window after the last one still counts (client-go starts
  // over only when the interval exceeds it).
  const kube::EventDecision fourth =
      c.Correlate(Event("ClaimBound", "bound to node-a", kT0 + absl::Minutes(28)));
  EXPECT_EQ(fourth.action, Action::kPatch);
  EXPECT_EQ(fourth.count, 4);
}

TEST(EventCorrelatorTest, RepeatAfterWindowIsNewEvent) {
  kube::EventCorrelator c;
  const kube::EventDecision first = c.Correlate(Event("ClaimLost", "node gone", kT0));
  const absl::Time later = kT0 + absl::Minutes(10) + absl::Seconds(1);
  const kube::EventDecision again = c.Correlate(Event("ClaimLost", "node gone", later));
  EXPECT_EQ(again.action, Action::kCreate);
  EXPECT_NE(again.name, first.name);
  EXPECT_EQ(again.count, 1);
  EXPECT_EQ(again.first_timestamp, later);
}

TEST(EventCorrelatorTest, KeyIsObjectTypeReasonAndMessage) {
  kube::EventCorrelator c;
  ASSERT_EQ(c.Correlate(Event("ClaimBound", "m", kT0)).action, Action::kCreate);
  struct Row {
    std::string what;
    kube::EventRecord e;
  };
  std::vector<Row> rows = {
      {"other message", Event("ClaimBound", "m2", kT0)},
      {"other reason", Event("ClaimLost", "m", kT0)},
      {"other uid (a new pod of the same name)",
       Event("ClaimBound", "m", kT0, "virt-launcher-vm1-x7k2p", "uid-2")},
      {"other name", Event("ClaimBound", "m", kT0, "pod-b")},
  };
  kube::EventRecord warning = Event("ClaimBound", "m", kT0);
  warning.type = kube::EventType::kWarning;
  rows.push_back({"other type", warning});
  kube::EventRecord claim = Event("ClaimBound", "m", kT0);
  claim.involved.kind = "PersistentDeviceClaim";
  rows.push_back({"other kind", claim});
  for (const Row& r : rows) {
    EXPECT_EQ(c.Correlate(r.e).action, Action::kCreate) << r.what;
  }
  EXPECT_EQ(c.Correlate(Event("ClaimBound", "m", kT0)).action, Action::kPatch);
}

TEST(EventCorrelatorTest, NamesStayUniqueWhenTheClockStandsStill) {
  kube::EventCorrelator c;
  std::vector<std::string> names;
  for (int i = 0; i < 5; ++i) {
    names.push_back(c.Correlate(Event("ClaimBound", absl::StrCat("m", i), kT0)).name);
  }
  for (size_t i = 1; i < names.size(); ++i) EXPECT_NE(names[i - 1], names[i]);
  EXPECT_EQ(names[0], kube::EventName("virt-launcher-vm1-x7k2p", absl::ToUnixNanos(kT0)));
  EXPECT_EQ(names[1], kube::EventName("virt-launcher-vm1-x7k2p", absl::ToUnixNanos(kT0) + 1));
}

TEST(EventCorrelatorTest, SpamFilterPerObjectBurstThenRefill) {
  kube::EventCorrelator c;  // client-go's defaults: 25, then one per 5 minutes.
  int sent = 0;
  for (int i = 0; i < 30; ++i) {
    if (c.Correlate(Event("ClaimBound", absl::StrCat("m", i), kT0)).action != Action::kSkip) ++sent;
  }
  EXPECT_EQ(sent, 25);
  // Another object has its own bucket.
  EXPECT_EQ(c.Correlate(Event("ClaimBound", "m", kT0, "pod-b", "uid-b")).action, Action::kCreate);
  // Repeats spend tokens too.
  EXPECT_EQ(c.Correlate(Event("ClaimBound", "m0", kT0 + absl::Minutes(1))).action, Action::kSkip);
  // One token after 5 minutes, only one.
  EXPECT_NE(c.Correlate(Event("ClaimBound", "x", kT0 + absl::Minutes(5))).action, Action::kSkip);
  EXPECT_EQ(c.Correlate(Event("ClaimBound", "y", kT0 + absl::Minutes(5))).action, Action::kSkip);
  // The bucket refills to the burst, not beyond.
  int after_hours = 0;
  for (int i = 0; i < 40; ++i) {
    if (c.Correlate(Event("ClaimBound", absl::StrCat("z", i), kT0 + absl::Hours(10))).action !=
        Action::kSkip) {
      ++after_hours;
    }
  }
  EXPECT_EQ(after_hours, 25);
}

TEST(EventCorrelatorTest, SkippedRepeatsStillCountInTheEvent) {
  kube::CorrelatorOptions o;
  o.spam_burst = 2;
  kube::EventCorrelator c(o);
  EXPECT_EQ(c.Correlate(Event("ClaimLost", "m", kT0)).action, Action::kCreate);
  EXPECT_EQ(c.Correlate(Event("ClaimLost", "m", kT0)).action, Action::kPatch);
  EXPECT_EQ(c.Correlate(Event("ClaimLost", "m", kT0)).action, Action::kSkip);
  EXPECT_EQ(c.Correlate(Event("ClaimLost", "m", kT0)).action, Action::kSkip);
  const kube::EventDecision d = c.Correlate(Event("ClaimLost", "m", kT0 + absl::Minutes(5)));
  EXPECT_EQ(d.action, Action::kPatch);
  EXPECT_EQ(d.count, 5);
}

TEST(EventCorrelatorTest, RemembersAtMostMaxEntriesLeastRecentFirst) {
  kube::CorrelatorOptions o;
  o.max_entries = 3;
  kube::EventCorrelator c(o);
  for (int i = 0; i < 5; ++i) {
    c.Correlate(Event("ClaimBound", "m", kT0, absl::StrCat("pod-", i), absl::StrCat("uid-", i)));
  }
  EXPECT_EQ(c.observations(), 3u);
  EXPECT_EQ(c.buckets(), 3u);
  // pod-4 is remembered; pod-0 was forgotten, so its repeat is a new Event.
  EXPECT_EQ(c.Correlate(Event("ClaimBound", "m", kT0, "pod-4", "uid-4")).action, Action::kPatch);
  EXPECT_EQ(c.Correlate(Event("ClaimBound", "m", kT0, "pod-0", "uid-0")).action, Action::kCreate);
}

}  // namespace
}  // namespace pdc::extender
