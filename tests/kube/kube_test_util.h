// Helpers of the kube-apiserver double's tests: one etcd and one double per
// test binary (a suite fixture), a JSON client, and a watch reader.
#ifndef PDC_TESTS_KUBE_KUBE_TEST_UTIL_H_
#define PDC_TESTS_KUBE_KUBE_TEST_UTIL_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/http_client.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/http_stream.h"
#include "tests/testing/kube_apiserver_double.h"
#include "tests/testing/kube_json.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/sv_strings.h"

namespace pdc::testing {

// One HTTP answer, its body parsed when it is JSON.
struct KubeReply {
  int status = 0;
  std::string text;
  kube::Document json;

  std::string Str(std::initializer_list<std::string_view> path) const {
    return kube::GetString(json, path);
  }
  int64_t Int(std::initializer_list<std::string_view> path) const {
    return kube::GetInt(json, path);
  }
  // metadata.resourceVersion as a number.
  int64_t Rv() const {
    int64_t v = 0;
    Atoi(Str({"metadata", "resourceVersion"}), &v);
    return v;
  }
};

// A watch event read from a stream.
struct WatchEvent {
  std::string type;
  kube::Document object;
  std::string Name() const {
    return kube::GetString(object, {"metadata", "name"});
  }
  int64_t Rv() const {
    int64_t v = 0;
    Atoi(kube::GetString(object, {"metadata", "resourceVersion"}), &v);
    return v;
  }
};

class KubeDoubleTest : public ::testing::Test {
 public:
  static std::string Url() { return api_->url(); }

 protected:
  static void SetUpTestSuite() { StartEtcdAndDouble(1); }
  // etcd with `members` members (1: EtcdProcess::Start) and the double
  // api_ over it; skips the suite when etcd is not installed.
  static void StartEtcdAndDouble(int members) {
    absl::StatusOr<std::string> etcd = EtcdProcess::FindBinary();
    if (!etcd.ok()) {
      skip_reason_ = new std::string(etcd.status().message());
      return;
    }
    absl::StatusOr<std::unique_ptr<EtcdProcess>> p =
        members == 1 ? EtcdProcess::Start() : EtcdProcess::StartCluster(members);
    ASSERT_TRUE(p.ok()) << p.status();
    etcd_ = p->release();
    absl::StatusOr<std::unique_ptr<KubeApiServerDouble>> api =
        KubeApiServerDouble::Start(etcd_->client_ports(), DoubleOptions());
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = api->release();
  }
  static KubeApiServerOptions DoubleOptions() {
    KubeApiServerOptions o;
    o.bookmark_interval = absl::Milliseconds(200);
    return o;
  }
  static void TearDownTestSuite() {
    delete api_;
    api_ = nullptr;
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    if (skip_reason_ != nullptr) GTEST_SKIP() << *skip_reason_;
    ASSERT_NE(api_, nullptr);
    HttpClientOptions o;
    o.base_url = api_->url();
    o.peer_name = "kube-apiserver double";
    o.timeout = absl::Seconds(10);
    client_ = std::move(HttpClient::Create(o)).value();
    // Every test its own namespace, so tests sharing the double never meet.
    ns_ = absl::StrCat("ns-", ::testing::UnitTest::GetInstance()->random_seed(),
                       "-", ++namespaces_);
  }

  KubeReply Call(std::string_view method, std::string_view target,
                 std::string_view body = {},
                 std::string_view content_type = "application/json") {
    HttpRequestOptions o;
    o.content_type = std::string(content_type);
    absl::StatusOr<HttpResponse> r = client_->Do(method, target, body, o);
    KubeReply out;
    if (!r.ok()) {
      ADD_FAILURE() << method << " " << target << ": " << r.status();
      return out;
    }
    out.status = r->status;
    out.text = r->body;
    out.json.Parse(out.text.data(), out.text.size());
    return out;
  }

  // Paths of this test's namespace.
  std::string Pods(std::string_view rest = "") const {
    return Cat("/api/v1/namespaces/", ns_, "/pods", rest);
  }
  std::string Claims(std::string_view rest = "") const {
    return Cat("/apis/pdc.kubevirt.io/v1alpha1/namespaces/", ns_,
               "/persistentdeviceclaims", rest);
  }
  std::string Vms(std::string_view rest = "") const {
    return Cat("/apis/kubevirt.io/v1/namespaces/", ns_, "/virtualmachines",
               rest);
  }
  std::string Vmis(std::string_view rest = "") const {
    return Cat("/apis/kubevirt.io/v1/namespaces/", ns_,
               "/virtualmachineinstances", rest);
  }

  static std::string ClaimJson(std::string_view name,
                               std::string_view extra = "") {
    return Cat(
        R"({"apiVersion":"pdc.kubevirt.io/v1alpha1","kind":"PersistentDeviceClaim",)",
        R"("metadata":{"name":")", name, R"("},"spec":{"count":1})", extra,
        "}");
  }

  // Creates a claim; fails the test unless 201.
  KubeReply CreateClaim(std::string_view name) {
    KubeReply r = Call("POST", Claims(), ClaimJson(name));
    EXPECT_EQ(r.status, 201) << r.text;
    return r;
  }

  std::unique_ptr<HttpStream> OpenWatch(std::string_view target) {
    absl::StatusOr<std::unique_ptr<HttpStream>> s =
        HttpStream::Open(api_->port(), "GET", target);
    if (!s.ok()) {
      ADD_FAILURE() << "watch " << target << ": " << s.status();
      return nullptr;
    }
    EXPECT_EQ((*s)->status(), 200);
    return std::move(*s);
  }

  // The next event; nullopt (with a test failure unless `expect_end`) when
  // the stream ended or nothing came within 10 s.
  static std::optional<WatchEvent> NextEvent(HttpStream& s,
                                             bool expect_end = false) {
    absl::StatusOr<std::optional<std::string>> line =
        s.ReadLine(absl::Now() + absl::Seconds(10));
    if (!line.ok() || !line->has_value()) {
      if (!expect_end) {
        ADD_FAILURE() << "no watch event: "
                      << (line.ok() ? std::string("stream ended")
                                    : line.status().ToString());
      }
      return std::nullopt;
    }
    WatchEvent e;
    kube::Document d;
    d.Parse((*line)->data(), (*line)->size());
    if (d.HasParseError() || !d.IsObject()) {
      ADD_FAILURE() << "not a JSON event: " << **line;
      return std::nullopt;
    }
    e.type = kube::GetString(d, {"type"});
    if (const kube::Value* o = kube::Find(d, {"object"}); o != nullptr) {
      e.object.CopyFrom(*o, e.object.GetAllocator());
    }
    return e;
  }
  // The next event that is not a BOOKMARK.
  static std::optional<WatchEvent> NextChange(HttpStream& s) {
    for (;;) {
      std::optional<WatchEvent> e = NextEvent(s);
      if (!e.has_value() || e->type != "BOOKMARK") return e;
    }
  }

  static inline EtcdProcess* etcd_ = nullptr;
  static inline KubeApiServerDouble* api_ = nullptr;
  static inline std::string* skip_reason_ = nullptr;
  static inline int namespaces_ = 0;
  std::unique_ptr<HttpClient> client_;
  std::string ns_;
};

}  // namespace pdc::testing

#endif  // PDC_TESTS_KUBE_KUBE_TEST_UTIL_H_
