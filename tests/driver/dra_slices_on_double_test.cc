// pdc-node's ResourceSlice publication (SliceBuilder + KubeSlicePublisher)
// against the kube-apiserver double on a real etcd, whose ResourceSlice
// validation follows kube-apiserver's (tests/testing/kube_resource_slices.h):
// the slices pdc-node writes are accepted as kube-apiserver would accept
// them, over two slices of one pool, an update and a shrink. Skipped, saying
// why, when etcd is not installed.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "driver/dra/dra_driver.h"
#include "driver/dra/slice_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/kube_http_client.h"
#include "rapidjson/document.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/kube_apiserver_double.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver::dra {
namespace {

using pdc::testing::IsOk;
using pdc::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kDoubleDriver[] = "nvme.pdc.kubevirt.io";

// A healthy NVMe function as discovery reports one, with every attribute the
// builder publishes.
SliceDeviceInput OnDoubleInput(int i) {
  SliceDeviceInput in;
  in.device.address = *PciAddress::Parse(absl::StrFormat("0000:%02x:00.0", 0x10 + i));
  in.device.vendor_id = 0x144d;
  in.device.device_id = 0xa80a;
  in.device.class_code = 0x010802;
  in.device.iommu_group = 40 + i;
  in.device.numa_node = i % 2;
  in.device.serial = absl::StrCat("S64ANS0T5", 10000 + i, "K");
  in.device.driver = "nvme";
  in.model = "SAMSUNG MZQL2960HCJR-00A07";
  in.pcie_root = absl::StrCat("pci0000:", i < 64 ? "00" : "80");
  in.capacity_bytes = uint64_t{960197124096};
  return in;
}

std::vector<SliceDeviceInput> OnDoubleInputs(int n) {
  std::vector<SliceDeviceInput> out;
  for (int i = 0; i < n; ++i) out.push_back(OnDoubleInput(i));
  return out;
}

class DraSlicesOnDoubleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> bin = pdc::testing::EtcdProcess::FindBinary();
    if (!bin.ok()) GTEST_SKIP() << bin.status().message();
    auto etcd = pdc::testing::EtcdProcess::Start();
    ASSERT_THAT(etcd.status(), IsOk());
    etcd_ = std::move(*etcd);
    auto api = pdc::testing::KubeApiServerDouble::Start(etcd_->client_ports());
    ASSERT_THAT(api.status(), IsOk());
    double_ = std::move(*api);
    kube::KubeClientConfig c;
    c.server = double_->url();
    auto connected = kube::KubeApi::Connect(c);
    ASSERT_THAT(connected.status(), IsOk());
    api_ = std::move(*connected);
  }

  // The slices of `node` as the double stores them.
  std::vector<rapidjson::Document> Stored(const std::string& node) {
    auto r = api_->Call("GET",
                        absl::StrCat("/apis/resource.k8s.io/v1/resourceslices?fieldSelector="
                                     "spec.nodeName%3D",
                                     node),
                        "", "", "list slices", absl::Seconds(10));
    std::vector<rapidjson::Document> out;
    if (!r.ok() || r->status != 200) {
      ADD_FAILURE() << (r.ok() ? r->body : r.status().ToString());
      return out;
    }
    rapidjson::Document list;
    list.Parse(r->body.c_str());
    for (const auto& item : list["items"].GetArray()) {
      rapidjson::Document d;
      d.CopyFrom(item, d.GetAllocator());
      out.push_back(std::move(d));
    }
    return out;
  }

  std::unique_ptr<pdc::testing::EtcdProcess> etcd_;
  std::unique_ptr<pdc::testing::KubeApiServerDouble> double_;
  std::unique_ptr<kube::KubeApi> api_;
};

TEST_F(DraSlicesOnDoubleTest, PublishedSlicesPassTheApiserversValidation) {
  KubeSlicePublisher publisher(api_.get(), absl::Seconds(10));
  auto generation = publisher.CurrentGeneration(kDoubleDriver, "node-a");
  ASSERT_THAT(generation.status(), IsOk());
  SliceBuilder builder(kDoubleDriver, "node-a", *generation + 1);

  // 130 devices: two slices of one pool (128 + 2), both accepted.
  SliceSet set = builder.Build(OnDoubleInputs(130));
  ASSERT_EQ(set.slices.size(), 2u);
  ASSERT_THAT(publisher.Publish(kDoubleDriver, "node-a", set), IsOk());
  std::vector<rapidjson::Document> stored = Stored("node-a");
  ASSERT_EQ(stored.size(), 2u);
  size_t devices = 0;
  for (const auto& s : stored) {
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"].GetInt64(), 2);
    EXPECT_EQ(s["spec"]["pool"]["generation"].GetInt64(), set.generation);
    EXPECT_STREQ(s["spec"]["driver"].GetString(), kDoubleDriver);
    devices += s["spec"]["devices"].Size();
  }
  EXPECT_EQ(devices, 130u);

  // A change: the pool's slices replaced at the next generation (updates).
  std::vector<SliceDeviceInput> changed = OnDoubleInputs(130);
  changed[5].device.numa_node = 1 - changed[5].device.numa_node;
  set = builder.Build(changed);
  ASSERT_TRUE(set.changed);
  ASSERT_THAT(publisher.Publish(kDoubleDriver, "node-a", set), IsOk());
  for (const auto& s : Stored("node-a")) {
    EXPECT_EQ(s["spec"]["pool"]["generation"].GetInt64(), set.generation);
  }

  // Fewer devices: one slice, the other deleted.
  set = builder.Build(OnDoubleInputs(3));
  ASSERT_THAT(publisher.Publish(kDoubleDriver, "node-a", set), IsOk());
  stored = Stored("node-a");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0]["spec"]["pool"]["resourceSliceCount"].GetInt64(), 1);
  EXPECT_EQ(stored[0]["spec"]["devices"].Size(), 3u);

  // A restarted pdc-node starts above what the apiserver holds.
  auto again = publisher.CurrentGeneration(kDoubleDriver, "node-a");
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(*again, set.generation);
}

TEST_F(DraSlicesOnDoubleTest, AnInvalidSliceIsRefusedWithTheApiserversReason) {
  // A driver name kube-apiserver refuses (not a DNS subdomain): pdc-node's
  // configuration refuses it too; here it shows the refusal reaches the
  // caller with the field named.
  KubeSlicePublisher publisher(api_.get(), absl::Seconds(10));
  SliceBuilder builder("nvme_pdc", "node-b", 1);
  absl::Status s = publisher.Publish("nvme_pdc", "node-b", builder.Build(OnDoubleInputs(1)));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("spec.driver: Invalid value: \"nvme_pdc\""));
}

}  // namespace
}  // namespace pdc::driver::dra
