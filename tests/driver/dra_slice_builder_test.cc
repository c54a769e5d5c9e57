// SliceBuilder: ResourceSlices of one class on one node (stable names across
// a renumbering, withheld devices, generation).
#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "driver/dra/dra_driver.h"
#include "driver/dra/slice_builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "tests/driver/fake_dra_claims.h"
#include "tests/driver/test_util.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/status_matchers.h"

namespace pdc::driver::dra {
namespace {

using pdc::testing::IsOk;
using pdc::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

SliceDeviceInput Input(const std::string& address, const std::string& serial, int group) {
  SliceDeviceInput in;
  in.device.address = *PciAddress::Parse(address);
  in.device.vendor_id = 0x1b36;
  in.device.device_id = 0x0010;
  in.device.class_code = 0x010802;
  in.device.iommu_group = group;
  in.device.numa_node = 0;
  in.device.serial = serial;
  in.device.driver = "nvme";
  in.model = "QEMU NVMe Ctrl";
  in.pcie_root = "pci0000:00";
  return in;
}

TEST(DeviceNameFromSerialTest, ADnsLabelThatKeepsSerialsApart) {
  struct Case {
    std::string serial;
    std::string prefix;
  };
  for (const Case& c : std::vector<Case>{
           {"S3EVNX0K123456", "s3evnx0k123456-"},
           {"  PHLJ 9123/00A  ", "phlj-9123-00a-"},
           {"nguid:0123456789abcdef0123456789abcdef", "nguid-0123456789abcdef0123456789abcdef-"},
           {"___", "dev-"},
       }) {
    const std::string name = DeviceNameFromSerial(c.serial);
    EXPECT_THAT(name, ::testing::StartsWith(c.prefix)) << c.serial;
    EXPECT_LE(name.size(), 63u);
    EXPECT_TRUE(absl::ascii_isalnum(name.front()) && absl::ascii_isalnum(name.back())) << name;
    for (char ch : name) {
      EXPECT_TRUE(absl::ascii_islower(ch) || absl::ascii_isdigit(ch) || ch == '-') << name;
    }
  }
  EXPECT_NE(DeviceNameFromSerial("AB-1"), DeviceNameFromSerial("ab-1"));
  EXPECT_NE(DeviceNameFromSerial("AB 1"), DeviceNameFromSerial("AB-1"));
  EXPECT_EQ(DeviceNameFromSerial(std::string(200, 'X')).size(), 63u);
  EXPECT_EQ(DeviceNameFromSerial(""), "");
}

TEST(PcieRootTest, TheRootComplexOfTheSysfsPath) {
  EXPECT_EQ(PcieRootFromSysfsPath("devices/pci0000:00/0000:00:01.0/0000:03:00.0"), "pci0000:00");
  EXPECT_EQ(PcieRootFromSysfsPath("devices/pci0001:80/0001:80:02.0/0001:81:00.0"), "pci0001:80");
  EXPECT_EQ(PcieRootFromSysfsPath("devices/platform/x"), "");
  EXPECT_EQ(PcieRootFromSysfsPath("bus/pci/devices/0000:03:00.0"), "");
}

TEST(SliceBuilderTest, OnePoolPerNodeWithStandardAttributes) {
  SliceBuilder builder("nvme.pdc.kubevirt.io", "node-1");
  SliceDeviceInput in = Input("0000:03:00.0", "S1", 12);
  in.capacity_bytes = 1000204886016;
  SliceSet set = builder.Build({in});
  ASSERT_EQ(set.slices.size(), 1u);
  const std::string name = DeviceNameFromSerial("S1");
  EXPECT_EQ(
      set.slices[0],
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":)"
      R"("node-1-nvme.pdc.kubevirt.io-0"},"spec":{"driver":"nvme.pdc.kubevirt.io","pool":)"
      R"({"name":"node-1","generation":1,"resourceSliceCount":1},"nodeName":"node-1",)"
      R"("devices":[{"name":")" +
          name +
          R"(","attributes":{"resource.kubernetes.io/pciBusID":)"
          R"({"string":"0000:03:00.0"},"resource.kubernetes.io/pcieRoot":{"string":"pci0000:00"},)"
          R"("deviceID":{"string":"0010"},"iommuGroup":{"int":12},"model":{"string":)"
          R"("QEMU NVMe Ctrl"},"numaNode":{"int":0},"serial":{"string":"S1"},"vendorID":)"
          R"({"string":"1b36"}},"capacity":{"size":{"value":"1000204886016"}}}]}})");
  EXPECT_EQ(builder.Find(name).value().ToString(), "0000:03:00.0");
  EXPECT_THAT(builder.Find("nvme-nope").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST(SliceBuilderTest, ARenumberingKeepsNamesAndMovesAddresses) {
  SliceBuilder builder("nvme.pdc.kubevirt.io", "node-1");
  SliceSet before =
      builder.Build({Input("0000:03:00.0", "S1", 12), Input("0000:04:00.0", "S2", 13)});
  EXPECT_EQ(before.generation, 1);
  const std::string s1 = DeviceNameFromSerial("S1");
  const std::string s2 = DeviceNameFromSerial("S2");
  // After a reboot the drives swapped slots.
  SliceSet after =
      builder.Build({Input("0000:03:00.0", "S2", 12), Input("0000:04:00.0", "S1", 13)});
  EXPECT_TRUE(after.changed);
  EXPECT_EQ(after.generation, 2);
  EXPECT_EQ(builder.Find(s1).value().ToString(), "0000:04:00.0");
  EXPECT_EQ(builder.Find(s2).value().ToString(), "0000:03:00.0");
  rapidjson::Document doc;
  doc.Parse(after.slices[0].c_str());
  ASSERT_TRUE(doc.IsObject());
  const auto& devices = doc["spec"]["devices"];
  ASSERT_EQ(devices.Size(), 2u);
  std::vector<std::string> names = {devices[0]["name"].GetString(), devices[1]["name"].GetString()};
  std::sort(names.begin(), names.end());
  std::vector<std::string> expected = {s1, s2};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
}

TEST(SliceBuilderTest, GenerationMovesOnlyWhenTheContentDoes) {
  SliceBuilder builder("d.example.com", "n", 7);  // The apiserver held 6.
  EXPECT_EQ(builder.Build({Input("0000:03:00.0", "S1", 12)}).generation, 7);
  SliceSet same = builder.Build({Input("0000:03:00.0", "S1", 12)});
  EXPECT_FALSE(same.changed);
  EXPECT_EQ(same.generation, 7);
  SliceDeviceInput moved = Input("0000:03:00.0", "S1", 12);
  moved.device.numa_node = 1;
  EXPECT_EQ(builder.Build({moved}).generation, 8);
  SliceSet empty = builder.Build({});
  EXPECT_EQ(empty.generation, 9);
  ASSERT_EQ(empty.slices.size(), 1u);  // An empty pool is still said.
  EXPECT_THAT(empty.slices[0], HasSubstr(R"("devices":[])"));
  EXPECT_THAT(builder.Find(DeviceNameFromSerial("S1")).status(),
              StatusIs(absl::StatusCode::kNotFound));
}

// A claim allocated a device withdrawn since is told why.
TEST(SliceBuilderTest, FindSaysWhyADeviceWasWithdrawn) {
  SliceBuilder builder("d.example.com", "n");
  SliceDeviceInput used = Input("0000:03:00.0", "S1", 12);
  MarkUnhealthy(used.device, UnhealthyReason::kHostInUse);
  SliceDeviceInput freed = Input("0000:04:00.0", "S2", 13);
  freed.withheld_reason = "being erased";
  builder.Build({used, freed});
  EXPECT_THAT(builder.Find(DeviceNameFromSerial("S1")).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("(withdrawn: HostInUse)")));
  EXPECT_THAT(builder.Find(DeviceNameFromSerial("S2")).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("(withdrawn: being erased)")));
}

TEST(SliceBuilderTest, WithholdsDevicesThatMustNotBeHandedOut) {
  SliceBuilder builder("d.example.com", "n");
  std::vector<SliceDeviceInput> inputs;
  for (auto [addr, reason] : std::vector<std::pair<std::string, UnhealthyReason>>{
           {"0000:01:00.0", UnhealthyReason::kHostInUse},
           {"0000:02:00.0", UnhealthyReason::kErasing},
           {"0000:05:00.0", UnhealthyReason::kUnverifiedIdentity}}) {
    SliceDeviceInput in = Input(addr, "SN-" + addr, 1);
    MarkUnhealthy(in.device, reason);
    inputs.push_back(in);
  }
  inputs.push_back(Input("0000:06:00.0", "", 6));     // No serial.
  inputs.push_back(Input("0000:07:00.0", "OK1", 7));  // Published.
  SliceSet set = builder.Build(inputs);
  EXPECT_THAT(set.withheld, ElementsAre("0000:01:00.0: HostInUse", "0000:02:00.0: Erasing",
                                        "0000:05:00.0: UnverifiedIdentity",
                                        "0000:06:00.0: no serial to name it by"));
  rapidjson::Document doc;
  doc.Parse(set.slices[0].c_str());
  ASSERT_EQ(doc["spec"]["devices"].Size(), 1u);
  EXPECT_EQ(std::string(doc["spec"]["devices"][0]["name"].GetString()),
            DeviceNameFromSerial("OK1"));
}

TEST(SliceBuilderTest, ManyDevicesSpreadOverSlicesOfOnePool) {
  SliceBuilder builder("d.example.com", "n");
  std::vector<SliceDeviceInput> inputs;
  for (int i = 0; i < 200; ++i) {
    char addr[16];
    std::snprintf(addr, sizeof(addr), "0000:%02x:%02x.0", 1 + i / 32, i % 32);
    inputs.push_back(Input(addr, "SN" + std::to_string(i), i));
  }
  SliceSet set = builder.Build(inputs);
  ASSERT_EQ(set.slices.size(), 2u);
  size_t total = 0;
  for (const std::string& s : set.slices) {
    rapidjson::Document doc;
    doc.Parse(s.c_str());
    ASSERT_TRUE(doc.IsObject());
    EXPECT_EQ(doc["spec"]["pool"]["resourceSliceCount"].GetInt(), 2);
    EXPECT_EQ(doc["spec"]["pool"]["generation"].GetInt(), 1);
    EXPECT_LE(doc["spec"]["devices"].Size(), kMaxDevicesPerSlice);
    total += doc["spec"]["devices"].Size();
  }
  EXPECT_EQ(total, 200u);
  EXPECT_THAT(set.names, ElementsAre("n-d.example.com-0", "n-d.example.com-1"));
}

class FakePublisher : public SlicePublisher {
 public:
  absl::StatusOr<int64_t> CurrentGeneration(const std::string&, const std::string&) override {
    return apiserver_generation;
  }
  absl::Status Publish(const std::string& driver, const std::string& node,
                       const SliceSet& set) override {
    published.push_back(set);
    return fail ? absl::UnavailableError("apiserver down") : absl::OkStatus();
  }
  int64_t apiserver_generation = 0;
  bool fail = false;
  std::vector<SliceSet> published;
};

class FakeNoClaims : public ClaimSource {
 public:
  absl::StatusOr<ResourceClaimView> Get(std::string_view, std::string_view) override {
    return absl::NotFoundError("none");
  }
};

// The driver of one class publishes its slices from pdc-node's inventory.
TEST(DraDriverTest, PublishesFromTheInventoryAboveTheApiserversGeneration) {
  testing::FakeHost host;
  host.kernel.AddDevice({.address = "0000:03:00.0", .group = 12, .driver = "nvme", .serial = "S1"});
  auto journal = BindJournal::Open(host.tmp.Join("vfio-journal"));
  ASSERT_THAT(journal.status(), IsOk());
  pdc::testing::FakeClock clock;
  BinderOptions bo;
  bo.classes = {testing::NvmeClass()};
  bo.clock = &clock;
  VfioBinder binder(&host.kernel, &host.dev, &host.proc, journal->get(), bo);
  FakeNoClaims claims;
  FakePublisher publisher;
  publisher.apiserver_generation = 6;  // A previous pdc-node published up to 6.
  DraDriverOptions o{"nvme.pdc.kubevirt.io",    "node-1",
                     testing::NvmeClass(),      host.tmp.Join("registry"),
                     host.tmp.Join("plugins"),  host.tmp.Join("cdi"),
                     host.tmp.Join("metadata"), host.tmp.Join("dra-prepared"),
                     host.tmp.Join("dra-holders")};
  testing::FakeDraClaims index;
  auto driver = DraDriver::Create(o, &claims, &index, &binder, journal->get(),
                                  HostView{&host.kernel, &host.dev, &host.proc, "self/mountinfo"},
                                  &publisher);
  ASSERT_THAT(driver.status(), IsOk());

  NodeInventory inventory{"node-1", {}};
  Device d;
  d.address = *PciAddress::Parse("0000:03:00.0");
  d.vendor_id = 0x1b36;
  d.device_id = 0x0010;
  d.class_code = 0x010802;
  d.iommu_group = 12;
  d.serial = "S1";
  d.driver = "nvme";
  Device other = d;  // Another class's device is not this driver's.
  other.address = *PciAddress::Parse("0000:05:00.0");
  other.vendor_id = 0x10de;
  other.serial = "G1";
  inventory.devices = {d, other};
  (*driver)->OnAllocations(NodeAllocations{});  // pdc-extender holds none of them.
  (*driver)->OnInventory(inventory);
  ASSERT_EQ(publisher.published.size(), 1u);
  EXPECT_EQ(publisher.published[0].generation, 7);
  const std::string& slice = publisher.published[0].slices[0];
  EXPECT_THAT(slice, HasSubstr(R"("resource.kubernetes.io/pcieRoot":{"string":"pci0000:00"})"));
  EXPECT_THAT(slice, HasSubstr(R"("model":{"string":"QEMU NVMe Ctrl"})"));
  // The namespaces' bytes while nvme showed them (one of 1 GiB).
  EXPECT_THAT(slice, HasSubstr(R"("capacity":{"size":{"value":"1073741824"}})"));
  EXPECT_THAT(slice, ::testing::Not(HasSubstr("0000:05:00.0")));

  (*driver)->OnInventory(inventory);  // Nothing changed: nothing written.
  EXPECT_EQ(publisher.published.size(), 1u);
  // Prepared: on vfio-pci sysfs shows no model any more; the slice stays
  // (a claim is allocated it: a device on vfio-pci for no claim is not
  // offered, device_reclaimer.h).
  index.Allocate("vms", "disk-a", "uid-1", "nvme.pdc.kubevirt.io", "node-1",
                 {DeviceNameFromSerial("S1")});
  ASSERT_THAT(binder.Bind({d.address}).status(), IsOk());
  inventory.devices[0].driver = "vfio-pci";
  (*driver)->OnInventory(inventory);
  EXPECT_EQ(publisher.published.size(), 1u);

  MarkUnhealthy(inventory.devices[0], UnhealthyReason::kHostInUse);
  publisher.fail = true;
  (*driver)->OnInventory(inventory);  // Withdrawn; the write fails...
  ASSERT_EQ(publisher.published.size(), 2u);
  EXPECT_EQ(publisher.published[1].generation, 8);
  EXPECT_THAT(publisher.published[1].slices[0], HasSubstr(R"("devices":[])"));
  publisher.fail = false;
  (*driver)->OnInventory(inventory);  // ...and is written again next pass.
  ASSERT_EQ(publisher.published.size(), 3u);
  EXPECT_EQ(publisher.published[2].generation, 8);
  (*driver)->OnInventory(inventory);
  EXPECT_EQ(publisher.published.size(), 3u);
}

}  // namespace
}  // namespace pdc::driver::dra
