// HotTable against a reference map: random puts, erases and batch lookups,
// with the real hash and with poor hashes that force long probe runs, tag
// collisions and backward-shift deletions across the table's wrap-around.
#include "allocator/hot_table.h"

#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"

namespace pdc {
namespace {

NodeHot HotWith(int v) {
  NodeHot h;
  h.has_record = true;
  h.free_single[0] = static_cast<uint16_t>(v);
  h.last_report_ns = v;
  return h;
}

// Every name hashes alike: one probe run, every tag equal.
uint64_t ConstantHash(std::string_view) { return 0xabcdef0123456789ull; }
// Few distinct hashes, so that runs from different homes interleave and wrap.
uint64_t TinyHash(std::string_view name) {
  uint64_t h = 0;
  for (char c : name) h = h * 31 + static_cast<unsigned char>(c);
  return (h % 7) * 0x9e3779b97f4a7c15ull + 13;  // Home slots end near the table's end too.
}

struct HashCase {
  const char* name;
  HotTable::HashFn hash;
  int names;
};

void PrintTo(const HashCase& c, std::ostream* os) { *os << c.name << " hash"; }

class HotTableTest : public ::testing::TestWithParam<HashCase> {};

std::string NameOf(int i) {
  // Some names longer than the inline part of a record.
  if (i % 5 == 0) return absl::StrCat("node-with-a-long-name-", std::string(90, 'x'), "-", i);
  return absl::StrCat("worker-", i);
}

TEST_P(HotTableTest, MatchesAReferenceMapUnderRandomChurn) {
  const HashCase& c = GetParam();
  HotTable table(c.hash);
  std::map<std::string, NodeHot> ref;
  const NodeHot sentinel;  // FindAll must overwrite every element.
  std::mt19937 rng(42);
  std::vector<std::string> pool;
  for (int i = 0; i < c.names; ++i) pool.push_back(NameOf(i));
  for (int step = 0; step < 20 * c.names; ++step) {
    const std::string& name = pool[rng() % pool.size()];
    const int op = static_cast<int>(rng() % 10);
    if (op < 6) {
      const NodeHot h = HotWith(step);
      table.Put(name, h);
      ref[name] = h;
    } else {
      table.Erase(name);
      ref.erase(name);
    }
    ASSERT_EQ(table.size(), ref.size()) << "step " << step;
    if (step % 97 != 0) continue;
    // Every name, known or not, with Find and in one batch with FindAll.
    std::vector<std::string_view> batch(pool.begin(), pool.end());
    batch.push_back("never-put");
    batch.push_back("");
    batch.push_back(pool[0]);  // Repeated names are answered each time.
    std::vector<const NodeHot*> seen(batch.size(), &sentinel);
    table.FindAll(batch, absl::MakeSpan(seen));
    for (size_t i = 0; i < batch.size(); ++i) {
      auto it = ref.find(std::string(batch[i]));
      const NodeHot* found = table.Find(batch[i]);
      ASSERT_EQ(seen[i], found) << batch[i];
      if (it == ref.end()) {
        EXPECT_EQ(found, nullptr) << "step " << step << " " << batch[i];
      } else {
        ASSERT_NE(found, nullptr) << "step " << step << " " << batch[i];
        EXPECT_EQ(*found, it->second) << batch[i];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Hashes, HotTableTest,
                         ::testing::Values(HashCase{"absl", &HotTable::DefaultHash, 3000},
                                           HashCase{"constant", &ConstantHash, 60},
                                           HashCase{"tiny", &TinyHash, 400}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(HotTable, EmptyTableAndEmptyBatch) {
  HotTable table;
  EXPECT_EQ(table.Find("a"), nullptr);
  table.FindAll({}, {});
  const NodeHot sentinel;
  std::vector<std::string_view> one = {"a"};
  std::vector<const NodeHot*> out = {&sentinel};
  table.FindAll(one, absl::MakeSpan(out));
  EXPECT_EQ(out[0], nullptr);
  table.Erase("a");  // Not there: nothing happens.
  EXPECT_EQ(table.size(), 0u);
}

TEST(HotTable, NamesThatShareAPrefixOrDifferInLengthAreDistinct) {
  HotTable table;
  const std::string long_a = std::string(200, 'a');
  const std::string long_b = std::string(199, 'a') + "b";
  table.Put("node", HotWith(1));
  table.Put("node-1", HotWith(2));
  table.Put(long_a, HotWith(3));
  table.Put(long_b, HotWith(4));
  EXPECT_EQ(table.Find("node")->free_single[0], 1);
  EXPECT_EQ(table.Find("node-1")->free_single[0], 2);
  EXPECT_EQ(table.Find(long_a)->free_single[0], 3);
  EXPECT_EQ(table.Find(long_b)->free_single[0], 4);
  EXPECT_EQ(table.Find("nod"), nullptr);
  EXPECT_EQ(table.Find(std::string(199, 'a')), nullptr);
}

}  // namespace
}  // namespace pdc
