// EtcdProcess and EtcdClient against a real etcd: the v3 JSON gateway calls
// the kube-apiserver double is built on, a watch, compaction, and a
// 3-member cluster that keeps serving when one member stops.
#include "tests/testing/etcd_process.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/etcd_client.h"
#include "tests/testing/status_matchers.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;

#define SKIP_WITHOUT_ETCD()                                        \
  if (absl::StatusOr<std::string> bin = EtcdProcess::FindBinary(); \
      !bin.ok()) {                                                 \
    GTEST_SKIP() << bin.status().message();                        \
  }

TEST(EtcdProcessTest, MissingBinaryNamesTheDebianPackage) {
  absl::StatusOr<std::string> bin =
      EtcdProcess::FindBinary("pdc-no-such-etcd-binary");
  EXPECT_THAT(bin,
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("etcd-server")));
  EtcdOptions o;
  o.binary = "pdc-no-such-etcd-binary";
  EXPECT_THAT(EtcdProcess::Start(o),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("etcd-server")));
}

TEST(EtcdProcessTest, KvRangeTxnDeleteAndCompaction) {
  SKIP_WITHOUT_ETCD();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EtcdProcess> etcd, EtcdProcess::Start());
  EtcdClient c(etcd->client_ports());
  ASSERT_OK_AND_ASSIGN(int64_t r1, c.Put("/a/1", "one"));
  ASSERT_OK_AND_ASSIGN(int64_t r2, c.Put("/a/2", std::string("two\0bytes", 9)));
  EXPECT_EQ(r2, r1 + 1);
  ASSERT_OK_AND_ASSIGN(EtcdRangeResult all,
                       c.Range("/a/", EtcdClient::PrefixEnd("/a/")));
  ASSERT_EQ(all.kvs.size(), 2u);
  EXPECT_EQ(all.kvs[1].value, std::string("two\0bytes", 9));
  EXPECT_EQ(all.kvs[0].mod_revision, r1);
  EXPECT_EQ(all.revision, r2);
  // A transaction on mod_revision: the stale one fails, the current one wins.
  ASSERT_OK_AND_ASSIGN(
      EtcdTxnResult stale,
      c.Txn({{"/a/1", EtcdCompare::Target::kModRevision, r1 - 1}},
            {{EtcdOp::Kind::kPut, "/a/1", "x"}},
            {{EtcdOp::Kind::kGet, "/a/1", ""}}));
  EXPECT_FALSE(stale.succeeded);
  ASSERT_EQ(stale.got.size(), 1u);
  EXPECT_EQ(stale.got[0].value, "one");
  ASSERT_OK_AND_ASSIGN(EtcdTxnResult ok,
                       c.Txn({{"/a/1", EtcdCompare::Target::kModRevision, r1}},
                             {{EtcdOp::Kind::kPut, "/a/1", "uno"}}, {}));
  EXPECT_TRUE(ok.succeeded);
  EXPECT_EQ(ok.revision, r2 + 1);
  // Paging: limit 1 says there is more.
  ASSERT_OK_AND_ASSIGN(EtcdRangeResult page,
                       c.Range("/a/", EtcdClient::PrefixEnd("/a/"), 0, 1));
  EXPECT_TRUE(page.more);
  EXPECT_EQ(page.count, 2);
  // The old revision is readable until compacted.
  ASSERT_OK_AND_ASSIGN(EtcdRangeResult old, c.Range("/a/1", "", r1));
  ASSERT_EQ(old.kvs.size(), 1u);
  EXPECT_EQ(old.kvs[0].value, "one");
  int64_t deleted = 0;
  ASSERT_OK_AND_ASSIGN(int64_t r4, c.DeleteRange("/a/2", "", &deleted));
  EXPECT_EQ(deleted, 1);
  ASSERT_OK(c.Compact(r4));
  EXPECT_THAT(c.Range("/a/1", "", r1),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("compacted")));
  EXPECT_THAT(c.Range("/a/1", "", r4 + 100),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("future")));
}

TEST(EtcdProcessTest, WatchStreamsEventsAndIsCancelledWhenCompacted) {
  SKIP_WITHOUT_ETCD();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EtcdProcess> etcd, EtcdProcess::Start());
  EtcdClient c(etcd->client_ports());
  ASSERT_OK_AND_ASSIGN(int64_t r1, c.Put("/w/x", "1"));
  EtcdWatchResponse first;
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<EtcdWatch> w,
      c.Watch("/w/", EtcdClient::PrefixEnd("/w/"), r1, true, false, &first));
  EXPECT_TRUE(first.created);
  ASSERT_OK(c.Put("/w/x", "2").status());
  ASSERT_OK(c.DeleteRange("/w/x").status());
  std::vector<EtcdEvent> events;
  while (events.size() < 3) {
    ASSERT_OK_AND_ASSIGN(EtcdWatchResponse r,
                         w->Next(absl::Now() + absl::Seconds(10)));
    for (EtcdEvent& e : r.events) events.push_back(std::move(e));
  }
  EXPECT_EQ(events[0].kv.value, "1");
  EXPECT_EQ(events[0].kv.create_revision, events[0].kv.mod_revision);
  EXPECT_EQ(events[1].kv.value, "2");
  ASSERT_TRUE(events[1].prev_kv.has_value());
  EXPECT_EQ(events[1].prev_kv->value, "1");
  EXPECT_EQ(events[2].type, EtcdEvent::Type::kDelete);
  ASSERT_TRUE(events[2].prev_kv.has_value());
  EXPECT_EQ(events[2].prev_kv->value, "2");
  // A watch from a compacted revision is cancelled with compact_revision.
  ASSERT_OK_AND_ASSIGN(int64_t now, c.CurrentRevision());
  ASSERT_OK(c.Compact(now));
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<EtcdWatch> old,
      c.Watch("/w/", EtcdClient::PrefixEnd("/w/"), r1, false, false, &first));
  EtcdWatchResponse r = first;
  while (!r.canceled) {
    ASSERT_OK_AND_ASSIGN(r, old->Next(absl::Now() + absl::Seconds(10)));
  }
  EXPECT_EQ(r.compact_revision, now);
}

TEST(EtcdProcessTest, ThreeMemberClusterServesWithOneMemberDown) {
  SKIP_WITHOUT_ETCD();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EtcdProcess> etcd,
                       EtcdProcess::StartCluster(3));
  ASSERT_EQ(etcd->members(), 3);
  EtcdClient c(etcd->client_ports());
  ASSERT_OK(c.Put("/ha/k", "before").status());
  ASSERT_OK(etcd->StopMember(0));
  EXPECT_FALSE(etcd->running(0));
  // The client moves on to a live member; two of three keep the quorum.
  ASSERT_OK(c.Put("/ha/k", "during").status());
  ASSERT_OK(etcd->RestartMember(0));
  EtcdClient only0({etcd->client_port(0)});
  ASSERT_OK_AND_ASSIGN(EtcdRangeResult r, only0.Range("/ha/k"));
  ASSERT_EQ(r.kvs.size(), 1u);
  EXPECT_EQ(r.kvs[0].value, "during");
}

}  // namespace
}  // namespace pdc::testing
