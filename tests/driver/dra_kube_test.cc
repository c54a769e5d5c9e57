// pdc-node's DRA driver against an HTTP double of the two kube-apiserver
// resources it uses: ResourceClaims read by name, ResourceSlices written.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "driver/dra/claim_source.h"
#include "driver/dra/dra_driver.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_http_server.h"

namespace pdc::driver::dra {
namespace {

using pdc::testing::IsOk;
using pdc::testing::StatusIs;
using pdc::testing::TestReply;
using pdc::testing::TestRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";

// ResourceSlices by name, with a resourceVersion each; PUT must carry the
// current one (409 otherwise), as kube-apiserver's optimistic concurrency.
class SliceApi {
 public:
  TestReply Handle(const TestRequest& r) {
    absl::MutexLock lock(&mu_);
    log_.push_back(r.method + " " + r.target);
    if (r.target == "/apis/resource.k8s.io/v1/namespaces/vms/resourceclaims/disk-a") {
      return {200, R"({"metadata":{"name":"disk-a","namespace":"vms","uid":"u1"},)"
                   R"("status":{"allocation":{"devices":{"results":[{"request":"disk",)"
                   R"("driver":"d.example.com","pool":"n1","device":"dev-1"}]}}}})"};
    }
    if (absl::StartsWith(r.target, std::string(kSlices) + "?")) {
      std::string items;
      for (const auto& [name, s] : slices_) {
        absl::StrAppend(&items, items.empty() ? "" : ",", s.body);
      }
      return {200, absl::StrCat(R"({"kind":"ResourceSliceList","items":[)", items, "]}")};
    }
    if (r.method == "POST" && r.target == kSlices) {
      rapidjson::Document doc;
      doc.Parse(r.body.c_str());
      const std::string name = doc["metadata"]["name"].GetString();
      if (slices_.contains(name)) return {409, R"({"kind":"Status","reason":"AlreadyExists"})"};
      slices_[name] = {++version_, r.body};
      return {201, r.body};
    }
    const std::string prefix = std::string(kSlices) + "/";
    if (!absl::StartsWith(r.target, prefix)) return {404, R"({"kind":"Status"})"};
    const std::string name = r.target.substr(prefix.size());
    auto it = slices_.find(name);
    if (r.method == "GET") {
      if (it == slices_.end()) return {404, R"({"kind":"Status","reason":"NotFound"})"};
      return {200, WithVersion(it->second)};
    }
    if (r.method == "PUT") {
      if (it == slices_.end()) return {404, R"({"kind":"Status","reason":"NotFound"})"};
      rapidjson::Document doc;
      doc.Parse(r.body.c_str());
      const auto& meta = doc["metadata"];
      if (!meta.HasMember("resourceVersion") ||
          meta["resourceVersion"].GetString() != std::to_string(it->second.version)) {
        return {409, R"({"kind":"Status","reason":"Conflict"})"};
      }
      it->second = {++version_, r.body};
      return {200, r.body};
    }
    if (r.method == "DELETE") {
      if (it == slices_.end()) return {404, R"({"kind":"Status","reason":"NotFound"})"};
      slices_.erase(it);
      return {200, R"({"kind":"Status","status":"Success"})"};
    }
    return {405, R"({"kind":"Status"})"};
  }

  void Put(const std::string& name, const std::string& body) {
    absl::MutexLock lock(&mu_);
    slices_[name] = {++version_, body};
  }
  std::vector<std::string> Names() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> out;
    for (const auto& [name, s] : slices_) out.push_back(name);
    return out;
  }
  std::string Body(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return slices_.at(name).body;
  }
  std::vector<std::string> TakeLog() {
    absl::MutexLock lock(&mu_);
    return std::exchange(log_, {});
  }

 private:
  struct Slice {
    int version = 0;
    std::string body;
  };
  static std::string WithVersion(const Slice& s) {
    rapidjson::Document doc;
    doc.Parse(s.body.c_str());
    const std::string v = std::to_string(s.version);
    doc["metadata"].AddMember("resourceVersion", rapidjson::Value(v.c_str(), doc.GetAllocator()),
                              doc.GetAllocator());
    rapidjson::StringBuffer b;
    rapidjson::Writer<rapidjson::StringBuffer> w(b);
    doc.Accept(w);
    return b.GetString();
  }

  absl::Mutex mu_;
  std::map<std::string, Slice> slices_;
  std::vector<std::string> log_;
  int version_ = 0;
};

class DraKubeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kube::KubeClientConfig c;
    c.server = server_.url();
    auto api = kube::KubeApi::Connect(c);
    ASSERT_THAT(api.status(), IsOk());
    api_ = std::move(*api);
  }
  SliceApi slices_;
  pdc::testing::TestHttpServer server_{[this](const TestRequest& r) { return slices_.Handle(r); }};
  std::unique_ptr<kube::KubeApi> api_;
};

TEST_F(DraKubeTest, ReadsAClaimByNamespaceAndName) {
  KubeClaimSource claims(api_.get(), absl::Seconds(5));
  auto claim = claims.Get("vms", "disk-a");
  ASSERT_THAT(claim.status(), IsOk());
  EXPECT_EQ(claim->uid, "u1");
  EXPECT_THAT(claim->devices, ElementsAre(AllocatedDevice{"disk", "d.example.com", "n1", "dev-1"}));
  EXPECT_THAT(claims.Get("vms", "gone").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("ResourceClaim vms/gone")));
}

TEST_F(DraKubeTest, CreatesUpdatesWithTheResourceVersionAndDeletesStaleSlices) {
  KubeSlicePublisher publisher(api_.get(), absl::Seconds(5));
  // Left by an earlier pdc-node: a second slice of the pool, generation 4.
  slices_.Put("n1-d.example.com-1",
              R"({"metadata":{"name":"n1-d.example.com-1"},"spec":{"driver":"d.example.com",)"
              R"("nodeName":"n1","pool":{"name":"n1","generation":4,"resourceSliceCount":2}}})");
  auto generation = publisher.CurrentGeneration("d.example.com", "n1");
  ASSERT_THAT(generation.status(), IsOk());
  EXPECT_EQ(*generation, 4);

  SliceBuilder builder("d.example.com", "n1", *generation + 1);
  SliceDeviceInput in;
  in.device.address = *PciAddress::Parse("0000:03:00.0");
  in.device.serial = "S1";
  ASSERT_THAT(publisher.Publish("d.example.com", "n1", builder.Build({in})), IsOk());
  EXPECT_THAT(slices_.Names(), ElementsAre("n1-d.example.com-0"));
  EXPECT_THAT(slices_.Body("n1-d.example.com-0"), HasSubstr(R"("generation":5)"));
  slices_.TakeLog();

  in.device.numa_node = 1;
  ASSERT_THAT(publisher.Publish("d.example.com", "n1", builder.Build({in})), IsOk());
  EXPECT_THAT(slices_.Body("n1-d.example.com-0"), HasSubstr(R"("generation":6)"));
  std::vector<std::string> log = slices_.TakeLog();
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log[0], std::string("GET ") + kSlices + "/n1-d.example.com-0");
  EXPECT_EQ(log[1], std::string("PUT ") + kSlices + "/n1-d.example.com-0");
}

}  // namespace
}  // namespace pdc::driver::dra
