// pdc-extender as a child process on a temp data dir, driven over real
// sockets like kube-scheduler and a node driver would: a VM keeps its node
// across a stop/start (new pod UID) and across kill -9 of the extender.
#include <sys/wait.h>

#include <memory>
#include <string>

#include "absl/strings/str_replace.h"
#include "net/http_client.h"
#include "tests/extender/extender_fixture.h"
#include "tests/testing/extender_process.h"
#include "tests/testing/temp_dir.h"

namespace pdc::extender::testing {
namespace {

using ::testing::HasSubstr;

// pdc-extender on `data_dir`, with one more flag.
class ExtenderProcess : public pdc::testing::ExtenderProcess {
 public:
  explicit ExtenderProcess(const std::string& data_dir,
                           const std::string& extra_flag = "--logLevel=warn")
      : pdc::testing::ExtenderProcess(
            PDC_EXTENDER_BINARY,
            {"--extender.listen=127.0.0.1:0", "--extender.dataDir=" + data_dir,
             "--extender.workerThreads=2", extra_flag}) {}
};

constexpr char kInventoryTemplate[] =
    R"({"node":"NODE","devices":[{"address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":12,"numaNode":0,"serial":"NODE-0","driver":"nvme","healthy":true},{"address":"0000:5e:00.0","vendor":"1b36","device":"0010","class":"010802","iommuGroup":13,"numaNode":0,"serial":"NODE-1","driver":"nvme","healthy":true}]})";

void ReportAll(HttpClient& c) {
  for (const std::string node : {"node-a", "node-b", "node-c"}) {
    std::string body = absl::StrReplaceAll(kInventoryTemplate, {{"NODE", node}});
    auto r = c.Put(absl::StrCat("/v1/nodes/", node, "/inventory"), body);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->status, 200) << r->body;
  }
}

std::string Filter(HttpClient& c, const std::string& uid) {
  auto r = c.Post("/scheduler/filter",
                  NamesArgs(VirtLauncherPod("vm1", uid), {"node-a", "node-b", "node-c"}));
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->body : "";
}

TEST(ExtenderProcessTest, VmKeepsItsNodeAcrossRestartsAndKill9) {
  pdc::testing::TempDir dir;
  {
    ExtenderProcess p(dir.path());
    ASSERT_NE(p.port(), 0) << "pdc-extender did not start";
    auto c = p.Client();
    ASSERT_NE(c, nullptr);
    ReportAll(*c);
    // First start: every node fits; the scheduler picks node-b.
    EXPECT_THAT(Filter(*c, "uid-1"), HasSubstr(R"("NodeNames":["node-a","node-b","node-c"])"));
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse b,
                         c->Post("/scheduler/bind", BindArgs("vm1", "uid-1", "node-b")));
    ASSERT_EQ(b.body, R"({"Error":""})");
    // Stop + start: a new pod UID; only the holder passes.
    const std::string second = Filter(*c, "uid-2");
    EXPECT_THAT(second, HasSubstr(R"("NodeNames":["node-b"])"));
    EXPECT_THAT(second, HasSubstr("is bound to node node-b"));
    ASSERT_OK_AND_ASSIGN(
        pdc::HttpResponse prio,
        c->Post("/scheduler/prioritize",
                NamesArgs(VirtLauncherPod("vm1", "uid-2"), {"node-a", "node-b"})));
    EXPECT_EQ(prio.body, R"([{"Host":"node-a","Score":0},{"Host":"node-b","Score":10}])");
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse b2,
                         c->Post("/scheduler/bind", BindArgs("vm1", "uid-2", "node-b")));
    ASSERT_EQ(b2.body, R"({"Error":""})");
    const int status = p.Kill(SIGKILL);
    EXPECT_TRUE(WIFSIGNALED(status));
  }
  {
    ExtenderProcess p(dir.path());
    ASSERT_NE(p.port(), 0) << "pdc-extender did not restart on the same data dir";
    auto c = p.Client();
    ASSERT_NE(c, nullptr);
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse claim,
                         c->Get("/v1/namespaces/default/claims/vm1-nvme"));
    EXPECT_THAT(claim.body,
                HasSubstr(R"("phase":"Bound","node":"node-b","devices":[{"address":"0000:3b:00.0","serial":"node-b-0"}])"));
    EXPECT_THAT(claim.body, HasSubstr(R"("podUid":"uid-2")"));
    ReportAll(*c);  // The node drivers' next heartbeats.
    const std::string third = Filter(*c, "uid-3");
    EXPECT_THAT(third, HasSubstr(R"("NodeNames":["node-b"])"));
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse b3,
                         c->Post("/scheduler/bind", BindArgs("vm1", "uid-3", "node-b")));
    EXPECT_EQ(b3.body, R"({"Error":""})");
    ASSERT_OK_AND_ASSIGN(pdc::HttpResponse alloc, c->Get("/v1/nodes/node-b/allocations"));
    EXPECT_THAT(alloc.body, HasSubstr(R"("podUid":"uid-3")"));
    // SIGTERM: a clean exit.
    const int status = p.Kill(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  {
    // And after the clean stop (which wrote a checkpoint), once more.
    ExtenderProcess p(dir.path());
    ASSERT_NE(p.port(), 0);
    auto c = p.Client();
    ReportAll(*c);
    EXPECT_THAT(Filter(*c, "uid-4"), HasSubstr(R"("NodeNames":["node-b"])"));
  }
}

TEST(ExtenderProcessTest, BadFlagStopsStartUp) {
  pdc::testing::TempDir dir;
  ExtenderProcess p(dir.path(), "--extender.readTimeout=soon");
  EXPECT_EQ(p.port(), 0);
  const int status = p.Kill(0);  // Already exiting: just reap it.
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace pdc::extender::testing
