// The files pdc-node's DRA driver writes: the CDI spec (byte for byte, CDI
// 0.5.0), the KEP-5304 device metadata (metadata.resource.k8s.io/v1alpha1),
// the prepared-claims checkpoint (torn tails, corrupt lines), and the
// ResourceClaim decoder.
#include <fstream>
#include <string>

#include "common/file_util.h"
#include "driver/dra/cdi_spec.h"
#include "driver/dra/claim_source.h"
#include "driver/dra/device_metadata.h"
#include "driver/dra/prepared_checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc::driver::dra {
namespace {

using pdc::testing::IsOk;
using pdc::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(CdiSpecTest, ByteExactForOneDeviceWithMetadataMount) {
  CdiDevice d;
  d.name = CdiDeviceName("5c1e2f0a-1111-4222-8333-944455556666", "nvme-s1-0a1b2c3d");
  d.device_nodes = {"/dev/vfio/vfio", "/dev/vfio/12"};
  d.env = {"PCI_RESOURCE_DEVICES_KUBEVIRT_IO_NVME=0000:03:00.0"};
  d.mounts = {{"/var/run/pdc/dra-metadata/u/disk/nvme.pdc.kubevirt.io-metadata.json",
               "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/c/disk/"
               "nvme.pdc.kubevirt.io-metadata.json"}};
  absl::StatusOr<std::string> spec = CdiSpecJson(CdiKind("nvme.pdc.kubevirt.io"), {d});
  ASSERT_THAT(spec.status(), IsOk());
  EXPECT_EQ(*spec,
            R"({"cdiVersion":"0.5.0","kind":"nvme.pdc.kubevirt.io/claim","devices":[{"name":)"
            R"("5c1e2f0a-1111-4222-8333-944455556666-nvme-s1-0a1b2c3d","containerEdits":{"env":)"
            R"(["PCI_RESOURCE_DEVICES_KUBEVIRT_IO_NVME=0000:03:00.0"],"deviceNodes":[{"path":)"
            R"("/dev/vfio/vfio"},{"path":"/dev/vfio/12"}],"mounts":[{"hostPath":)"
            R"("/var/run/pdc/dra-metadata/u/disk/nvme.pdc.kubevirt.io-metadata.json",)"
            R"("containerPath":"/var/run/kubernetes.io/dra-device-attributes/resourceclaims/c/)"
            R"(disk/nvme.pdc.kubevirt.io-metadata.json","options":["ro","nosuid","nodev",)"
            R"("bind"]}]}}]})"
            "\n");
  EXPECT_EQ(CdiDeviceId("nvme.pdc.kubevirt.io/claim", "u-d"), "nvme.pdc.kubevirt.io/claim=u-d");
  EXPECT_EQ(CdiSpecPath("/var/run/cdi", "nvme.pdc.kubevirt.io", "u"),
            "/var/run/cdi/pdc-nvme.pdc.kubevirt.io-u.json");
}

TEST(CdiSpecTest, RefusesWhatTheSpecForbids) {
  struct Case {
    std::string kind;
    std::string name;
  };
  for (const Case& c : std::vector<Case>{
           {"nvme.pdc.kubevirt.io/claim", "-starts-with-dash"},
           {"nvme.pdc.kubevirt.io/claim", "ends-with-dot."},
           {"nvme.pdc.kubevirt.io/claim", "has space"},
           {"nvme.pdc.kubevirt.io/claim", ""},
           {"Upper.Vendor/claim", "ok"},
           {"novendor", "ok"},
           {"a..b/claim", "ok"},
           {"vendor.io/cl/ass", "ok"},
       }) {
    CdiDevice d;
    d.name = c.name;
    EXPECT_THAT(CdiSpecJson(c.kind, {d}).status(), StatusIs(absl::StatusCode::kInvalidArgument))
        << c.kind << " " << c.name;
  }
  EXPECT_THAT(CdiSpecJson("vendor.io/claim", {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DeviceMetadataTest, ByteExactForAClaimNamedByThePod) {
  MetadataClaim claim{"vms", "disk-a", "5c1e2f0a-1111-4222-8333-944455556666", std::nullopt};
  MetadataRequest request{"disk",
                          {{"nvme.pdc.kubevirt.io", "node-1", "nvme-s1-0a1b2c3d", "0000:03:00.0"}}};
  EXPECT_EQ(DeviceMetadataJson(claim, request),
            R"({"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io/v1alpha1",)"
            R"("metadata":{"name":"disk-a","namespace":"vms","uid":)"
            R"("5c1e2f0a-1111-4222-8333-944455556666"},"requests":[{"name":"disk","devices":)"
            R"([{"driver":"nvme.pdc.kubevirt.io","pool":"node-1","name":"nvme-s1-0a1b2c3d",)"
            R"("attributes":{"resource.kubernetes.io/pciBusID":{"string":"0000:03:00.0"}}}]}]})"
            "\n");
  EXPECT_EQ(MetadataContainerDir(claim, "disk"),
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/disk-a/disk");
  EXPECT_EQ(MetadataFileName("nvme.pdc.kubevirt.io"), "nvme.pdc.kubevirt.io-metadata.json");
}

TEST(DeviceMetadataTest, ATemplateClaimIsFoundUnderItsPodClaimName) {
  MetadataClaim claim{"vms", "vm-a-disk-x7k2p", "u1", std::string("disk")};
  MetadataRequest request{"req/fast", {}};
  EXPECT_EQ(DeviceMetadataJson(claim, request),
            R"({"kind":"DeviceMetadata","apiVersion":"metadata.resource.k8s.io/v1alpha1",)"
            R"("metadata":{"name":"vm-a-disk-x7k2p","namespace":"vms","uid":"u1"},)"
            R"("podClaimName":"disk","requests":[{"name":"req/fast"}]})"
            "\n");
  EXPECT_EQ(MetadataContainerDir(claim, "req/fast"),
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/disk/req");
}

PreparedClaim Claim(const std::string& uid, int devices) {
  PreparedClaim c{uid, "vms", "claim-" + uid, {}};
  for (int i = 0; i < devices; ++i) {
    c.devices.push_back({"disk", "node-1", "nvme-" + std::to_string(i),
                         *PciAddress::Parse("0000:0" + std::to_string(i + 1) + ":00.0")});
  }
  return c;
}

TEST(PreparedCheckpointTest, SurvivesAReopen) {
  pdc::testing::TempDir tmp;
  const std::string path = tmp.path() + "/prepared";
  {
    auto cp = PreparedCheckpoint::Open(path);
    ASSERT_THAT(cp.status(), IsOk());
    EXPECT_THAT((*cp)->Claims(), IsEmpty());
    ASSERT_THAT((*cp)->Put(Claim("u2", 2)), IsOk());
    ASSERT_THAT((*cp)->Put(Claim("u1", 0)), IsOk());
    ASSERT_THAT((*cp)->Put(Claim("u3", 1)), IsOk());
    ASSERT_THAT((*cp)->Remove("u3"), IsOk());
    ASSERT_THAT((*cp)->Remove("absent"), IsOk());
  }
  auto cp = PreparedCheckpoint::Open(path);
  ASSERT_THAT(cp.status(), IsOk());
  EXPECT_THAT((*cp)->Claims(), ElementsAre(Claim("u1", 0), Claim("u2", 2)));
  EXPECT_THAT((*cp)->problems(), IsEmpty());
  EXPECT_EQ((*cp)->Get("u2"), Claim("u2", 2));
  EXPECT_EQ((*cp)->Get("u3"), std::nullopt);
}

// Damage done to a file with lines `a` (u1) and `b` (u2) and what is left.
TEST(PreparedCheckpointTest, ATornOrCorruptLineIsSkippedAndNamed) {
  const std::string header = std::string(kPreparedCheckpointHeader) + "\n";
  const std::string a = PreparedCheckpoint::EncodeLine(Claim("u1", 1));
  const std::string b = PreparedCheckpoint::EncodeLine(Claim("u2", 2));
  std::string flipped = b;
  flipped[flipped.size() - 3] ^= 0x01;  // A bit of the last address.
  struct Case {
    std::string name;
    std::string content;
    std::vector<std::string> uids;
    int problems;
  };
  for (const Case& c : std::vector<Case>{
           {"intact", header + a + "\n" + b + "\n", {"u1", "u2"}, 0},
           {"torn tail", header + a + "\n" + b.substr(0, b.size() / 2), {"u1"}, 1},
           {"tail without newline", header + a + "\n" + b, {"u1", "u2"}, 0},
           {"flipped bit", header + flipped + "\n" + a + "\n", {"u1"}, 1},
           {"garbage line", header + "zzzz\n" + a + "\n", {"u1"}, 1},
           {"empty line", header + "\n" + a + "\n", {"u1"}, 1},
           {"header only", header, {}, 0},
       }) {
    pdc::testing::TempDir tmp;
    const std::string path = tmp.path() + "/prepared";
    ASSERT_THAT(WriteFileAtomically(path, c.content), IsOk());
    auto cp = PreparedCheckpoint::Open(path);
    ASSERT_THAT(cp.status(), IsOk()) << c.name;
    std::vector<std::string> uids;
    for (const PreparedClaim& claim : (*cp)->Claims()) uids.push_back(claim.uid);
    EXPECT_EQ(uids, c.uids) << c.name;
    EXPECT_EQ((*cp)->problems().size(), static_cast<size_t>(c.problems)) << c.name;
    for (const std::string& p : (*cp)->problems()) EXPECT_THAT(p, HasSubstr("line ")) << c.name;
    // The next write leaves a clean file.
    ASSERT_THAT((*cp)->Put(Claim("u9", 1)), IsOk());
    auto again = PreparedCheckpoint::Open(path);
    ASSERT_THAT(again.status(), IsOk());
    EXPECT_THAT((*again)->problems(), IsEmpty()) << c.name;
  }
}

TEST(PreparedCheckpointTest, AnUnknownHeaderIsDataLoss) {
  pdc::testing::TempDir tmp;
  const std::string path = tmp.path() + "/prepared";
  ASSERT_THAT(WriteFileAtomically(path, "pdc-dra-prepared v9\n"), IsOk());
  EXPECT_THAT(PreparedCheckpoint::Open(path).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("line 1")));
}

TEST(PreparedCheckpointTest, RefusesFieldsThatWouldBreakTheFormat) {
  pdc::testing::TempDir tmp;
  auto cp = PreparedCheckpoint::Open(tmp.path() + "/prepared");
  ASSERT_THAT(cp.status(), IsOk());
  PreparedClaim bad = Claim("u 1", 0);
  EXPECT_THAT((*cp)->Put(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  bad = Claim("u1", 1);
  bad.devices[0].device = "a,b";
  EXPECT_THAT((*cp)->Put(bad), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT((*cp)->Claims(), IsEmpty());
}

TEST(PreparedCheckpointTest, AFailedWriteLeavesMemoryAsTheDisk) {
  pdc::testing::TempDir tmp;
  auto cp = PreparedCheckpoint::Open(tmp.path() + "/missing-dir/prepared");
  ASSERT_THAT(cp.status(), IsOk());
  EXPECT_FALSE((*cp)->Put(Claim("u1", 1)).ok());
  EXPECT_EQ((*cp)->Get("u1"), std::nullopt);
}

TEST(ParseResourceClaimTest, ReadsUidPodClaimNameAndResults) {
  absl::StatusOr<ResourceClaimView> v = ParseResourceClaim(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "vm-a-disk-x", "namespace": "vms", "uid": "u1",
                 "annotations": {"resource.kubernetes.io/pod-claim-name": "disk"}},
    "spec": {"devices": {"requests": [{"name": "disk"}]}},
    "status": {"allocation": {"devices": {"results": [
      {"request": "disk", "driver": "nvme.pdc.kubevirt.io", "pool": "node-1", "device": "d1"},
      {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "g0"}]},
      "nodeSelector": {}},
      "reservedFor": [{"resource": "pods", "name": "p", "uid": "p1"},
                      {"apiGroup": "kubevirt.io", "resource": "virtualmachines", "name": "vm",
                       "uid": "v1"}]}})");
  ASSERT_THAT(v.status(), IsOk());
  EXPECT_EQ(v->uid, "u1");
  EXPECT_EQ(v->pod_claim_name, "disk");
  EXPECT_TRUE(v->allocated);
  EXPECT_THAT(v->devices,
              ElementsAre(AllocatedDevice{"disk", "nvme.pdc.kubevirt.io", "node-1", "d1"},
                          AllocatedDevice{"gpu", "gpu.example.com", "node-1", "g0"}));
}

TEST(ParseResourceClaimTest, MalformedClaimsNameTheField) {
  struct Case {
    std::string json;
    std::string field;
  };
  for (const Case& c : std::vector<Case>{
           {R"([])", ""},
           {R"({"metadata": {"name": "c", "namespace": "n"}})", "metadata.uid"},
           {R"({"metadata": {"name": "c", "namespace": "n", "uid": 7}})", "metadata.uid"},
           {R"({"metadata": {"name": "c", "namespace": "n", "uid": "u"},
                "status": {"allocation": {"devices": {"results": [{"request": "r"}]}}}})",
            "status.allocation.devices.results[0].driver"},
           {R"({"metadata": {"name": "c", "namespace": "n", "uid": "u"},
                "status": {"allocation": {"devices": {"results": [7]}}}})",
            "status.allocation.devices.results[0]"},
       }) {
    absl::StatusOr<ResourceClaimView> v = ParseResourceClaim(c.json);
    EXPECT_THAT(v.status(), StatusIs(absl::StatusCode::kInvalidArgument)) << c.json;
    if (!c.field.empty()) {
      EXPECT_THAT(std::string(v.status().message()), HasSubstr(c.field)) << c.json;
    }
  }
  absl::StatusOr<ResourceClaimView> unallocated =
      ParseResourceClaim(R"({"metadata": {"name": "c", "namespace": "n", "uid": "u"}})");
  ASSERT_THAT(unallocated.status(), IsOk());
  EXPECT_FALSE(unallocated->allocated);
}

}  // namespace
}  // namespace pdc::driver::dra
