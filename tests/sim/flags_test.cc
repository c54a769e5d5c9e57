// pdc-sim's command line: every accepted form, and every mistake answered
// with an error that names the flag or argument at fault.
#include "sim/flags.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pdc::sim {
namespace {

using ::testing::HasSubstr;

struct Bad {
  std::string name;
  std::vector<std::string> args;
  std::string error;  // Substring of the message.
};

class SimFlagsBadTest : public ::testing::TestWithParam<Bad> {};

TEST_P(SimFlagsBadTest, NamesTheFlag) {
  absl::StatusOr<SimFlags> f = ParseSimFlags(GetParam().args);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, SimFlagsBadTest,
    ::testing::Values(
        Bad{"NoCommand", {}, "missing command"},
        Bad{"UnknownCommand", {"simulate", "a.yaml"}, "unknown command \"simulate\""},
        Bad{"UnknownFlag", {"run", "a.yaml", "--sede", "1"}, "unknown option --sede"},
        Bad{"SeedNotANumber", {"run", "a.yaml", "--seed", "x"}, "--seed needs a number"},
        Bad{"SeedMissing", {"run", "a.yaml", "--seed"}, "--seed needs a number"},
        Bad{"MaxEventsNegative", {"run", "a.yaml", "--max-events", "-1"},
            "--max-events needs a number"},
        Bad{"OutMissing", {"run", "a.yaml", "--out"}, "--out needs a directory"},
        Bad{"UnknownPolicy", {"run", "a.yaml", "--policies", "pdc,kubevirt"},
            "unknown policy \"kubevirt\""},
        Bad{"NoPolicy", {"run", "a.yaml", "--policies", ","}, "--policies needs at least one"},
        Bad{"KubernetesVersion", {"run", "a.yaml", "--kubernetes", "1.33"},
            "--kubernetes needs 1.34, 1.35 or 1.36"},
        Bad{"KubernetesMissing", {"run", "a.yaml", "--kubernetes"},
            "--kubernetes needs 1.34, 1.35 or 1.36"},
        Bad{"JobsZero", {"run", "a.yaml", "--jobs", "0"}, "--jobs needs a number >= 1"},
        Bad{"ExtenderMissing", {"run", "a.yaml", "--extender"}, "--extender needs a URL"},
        Bad{"SpawnMissing", {"run", "a.yaml", "--spawn-extender"},
            "--spawn-extender needs the pdc-extender binary"},
        Bad{"BothExtenders",
            {"run", "a.yaml", "--extender", "http://x", "--spawn-extender", "/bin/e"},
            "--extender and --spawn-extender exclude each other"},
        Bad{"TwoScenarios", {"validate", "a.yaml", "b.yaml"}, "unexpected argument \"b.yaml\""},
        Bad{"NoScenario", {"run", "--seed", "3"}, "missing scenario file"}),
    [](const auto& info) { return info.param.name; });

TEST(SimFlagsTest, ReadsEveryRunFlag) {
  absl::StatusOr<SimFlags> f = ParseSimFlags(
      {"run", "s.yaml", "--out", "o", "--seed", "7", "--max-events", "100", "--policies",
       "pdc,dra,pdc", "--jobs", "3", "--spawn-extender", "/bin/e", "--node-list", "--no-progress",
       "--kubernetes", "1.35"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->command, SimCommand::kRun);
  EXPECT_EQ(f->scenario_path, "s.yaml");
  EXPECT_EQ(f->out_dir, "o");
  EXPECT_EQ(f->seed, 7u);
  EXPECT_EQ(f->max_events, 100u);
  EXPECT_EQ(f->policies, (std::vector<std::string>{"pdc", "dra"}));  // Repeats dropped.
  EXPECT_EQ(f->jobs, 3);
  EXPECT_EQ(f->spawn_path, "/bin/e");
  EXPECT_TRUE(f->http());
  EXPECT_TRUE(f->node_list);
  EXPECT_EQ(f->progress, false);
  EXPECT_EQ(f->kubernetes_minor, 35);
}

TEST(SimFlagsTest, CommandsAndDefaults) {
  absl::StatusOr<SimFlags> v = ParseSimFlags({"validate", "s.yaml"});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->command, SimCommand::kValidate);
  EXPECT_FALSE(v->seed.has_value());
  EXPECT_FALSE(v->progress.has_value());  // The terminal decides.
  EXPECT_FALSE(v->http());

  // Help wins wherever it is, even after a mistake.
  absl::StatusOr<SimFlags> h = ParseSimFlags({"run", "--bogus", "--help"});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->command, SimCommand::kHelp);

  // sweep parses its own flags.
  absl::StatusOr<SimFlags> s = ParseSimFlags({"sweep", "--nodes", "100", "--whatever"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->command, SimCommand::kSweep);
  EXPECT_EQ(s->sweep_args, (std::vector<std::string>{"--nodes", "100", "--whatever"}));
}

}  // namespace
}  // namespace pdc::sim
