// The REST codecs as every client reads them (docs/rest-api.md): the node
// driver's calls (inventory, allocations, hand-off confirmation) and the
// points where pdc-node, pdcctl and pdc-extender used to read the wire
// differently: a missing `handedOff`, the case of keys, the claim count limit.
#include "api/rest_json.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/handoff_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/allocations.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/status_matchers.h"

namespace pdc::api {
namespace {

using ::pdc::testing::Addr;
using ::pdc::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

NodeInventory OneDevice() {
  return pdc::testing::Inventory(
      "node-a", {pdc::testing::NvmeDevice("0000:3b:00.0", 12, -1, "SN1")});
}

absl::StatusOr<NodeAllocations> DecodeAllocations(std::string_view body) {
  absl::StatusOr<NodeAllocationsReply> r = ParseNodeAllocations(body);
  if (!r.ok()) return r.status();
  return r->allocations;
}

TEST(NodeDriverJsonTest, EncodesInventoryAsTheRestApiSays) {
  EXPECT_EQ(WriteInventory(OneDevice()),
            R"({"node":"node-a","devices":[{"address":"0000:3b:00.0","vendor":"1b36",)"
            R"("device":"0010","class":"010802","iommuGroup":12,"numaNode":-1,"serial":"SN1",)"
            R"("driver":"nvme","healthy":true}]})");
}

// The node driver's acknowledgements of handed-back drives: written only
// when there are some, read back sorted, each a non-empty identity.
TEST(NodeDriverJsonTest, ReturnedAcknowledgementsRoundTripAndAreChecked) {
  NodeInventory inv = OneDevice();
  EXPECT_THAT(WriteInventory(inv), Not(HasSubstr("returned")));
  inv.returned = {"SN1", "0000:5e:00.0"};
  const std::string body = WriteInventory(inv);
  EXPECT_THAT(body, HasSubstr(R"("returned":["SN1","0000:5e:00.0"])"));
  ASSERT_OK_AND_ASSIGN(NodeInventory back, ParseInventory(body, "node-a"));
  EXPECT_THAT(back.returned, ElementsAre("0000:5e:00.0", "SN1"));
  struct Case {
    std::string returned;
    std::string error;
  } cases[] = {
      {R"("x")", "returned: must be an array"},
      {R"([1])", "returned[0]: must be a string"},
      {R"([""])", "returned[0]: must not be empty"},
  };
  for (const Case& c : cases) {
    const std::string in = absl::StrCat(R"({"node":"node-a","devices":[],"returned":)",
                                        c.returned, "}");
    EXPECT_THAT(ParseInventory(in, "node-a"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.error)))
        << c.returned;
  }
}

// An unhealthy device says which check refused it; a healthy one says
// nothing, and a reason the API does not have is refused by name.
TEST(NodeDriverJsonTest, UnhealthyReasonRoundTripsAndIsChecked) {
  NodeInventory inv = OneDevice();
  inv.devices[0].health = DeviceHealth::kUnhealthy;
  inv.devices[0].unhealthy_reason = UnhealthyReason::kHostInUse;
  const std::string body = WriteInventory(inv);
  EXPECT_THAT(body, HasSubstr(R"("healthy":false,"unhealthyReason":"HostInUse"})"));
  ASSERT_OK_AND_ASSIGN(NodeInventory back, ParseInventory(body, "node-a"));
  EXPECT_EQ(back, inv);

  struct Case {
    std::string device_tail;  // After "address".
    absl::StatusOr<UnhealthyReason> want;
  } cases[] = {
      {R"("healthy":false)", UnhealthyReason::kUnspecified},
      {R"("healthy":false,"unhealthyReason":"UnverifiedIdentity")",
       UnhealthyReason::kUnverifiedIdentity},
      {R"("healthy":true)", UnhealthyReason::kNone},
      {R"("healthy":true,"unhealthyReason":"HostInUse")",
       absl::InvalidArgumentError(
           "devices[0].unhealthyReason: is set but the device is healthy")},
      {R"("healthy":false,"unhealthyReason":"Tired")",
       absl::InvalidArgumentError(
           "devices[0].unhealthyReason: \"Tired\" must be one of Unspecified, NoIommuGroup, "
           "UnexpectedDriver, Erasing, AmbiguousIdentity, HostInUse, UnverifiedIdentity")},
      {R"("healthy":false,"unhealthyReason":"")", UnhealthyReason::kUnspecified},
  };
  for (const Case& c : cases) {
    const std::string in = absl::StrCat(
        R"({"node":"node-a","devices":[{"address":"0000:3b:00.0","vendor":"1b36",)",
        R"("device":"0010","class":"010802",)", c.device_tail, "}]}");
    absl::StatusOr<NodeInventory> got = ParseInventory(in, "node-a");
    if (!c.want.ok()) {
      EXPECT_THAT(got, StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr(c.want.status().message())))
          << in;
      continue;
    }
    ASSERT_OK(got.status()) << in;
    EXPECT_EQ(got->devices[0].unhealthy_reason, *c.want) << in;
  }
}

TEST(NodeDriverJsonTest, DecodesAllocations) {
  ASSERT_OK_AND_ASSIGN(
      NodeAllocations a,
      DecodeAllocations(R"({"node":"node-a","version":17,"claimed":[
        {"address":"0000:5e:00.0","claim":"default/b","resourceName":"r","reclaimPolicy":"Retain","reservedFor":null},
        {"address":"0000:3b:00.0","claim":"default/a","resourceName":"r","reclaimPolicy":"Delete",
         "reservedFor":{"vm":"vm1","podName":"p","podUid":"u"},"handedOff":false}],
        "returnToHost":["0000:af:00.0"]})"));
  EXPECT_EQ(a.version, 17u);
  ASSERT_EQ(a.claimed.size(), 2u);  // Sorted by address.
  EXPECT_EQ(a.claimed[0], (NodeAllocation{Addr("0000:3b:00.0"), ClaimKey{"default", "a"}, "r",
                                          ReclaimPolicy::kDelete, Reservation{"vm1", "p", "u"},
                                          true}));
  EXPECT_EQ(a.claimed[1].reclaim_policy, ReclaimPolicy::kRetain);
  EXPECT_FALSE(a.claimed[1].reserved_for.has_value());
  EXPECT_FALSE(a.claimed[1].handoff_pending);
  EXPECT_EQ(a.return_to_host, std::vector<PciAddress>{Addr("0000:af:00.0")});
}

// docs/rest-api.md §4.5: `handedOff` per claimed entry. Absent or null it
// reads as handed off (§1: absent and null mean the same; an extender from
// before hand-offs sends neither), for every client alike.
TEST(NodeDriverJsonTest, HandedOffAbsentOrNullMeansHandedOff) {
  struct Case {
    std::string handed_off;  // The member as written, "" = absent.
    bool reserved;
    bool pending;
  } cases[] = {
      {R"(,"handedOff":true)", true, false},  {R"(,"handedOff":false)", true, true},
      {"", true, false},                       {R"(,"handedOff":null)", true, false},
      {R"(,"handedOff":true)", false, false}, {R"(,"handedOff":false)", false, false},
      {"", false, false},
  };
  for (const Case& c : cases) {
    const std::string reserved_for =
        c.reserved ? R"({"vm":"vm1","podName":"p1","podUid":"u1"})" : "null";
    const std::string body =
        R"({"node":"node-a","version":3,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a",)"
        R"("resourceName":"r","reservedFor":)" + reserved_for + c.handed_off + "}]}";
    ASSERT_OK_AND_ASSIGN(NodeAllocations a, DecodeAllocations(body));
    ASSERT_EQ(a.claimed.size(), 1u) << body;
    EXPECT_EQ(a.claimed[0].handoff_pending, c.pending) << body;
    EXPECT_EQ(a.claimed[0].reserved_for.has_value(), c.reserved) << body;
    if (c.reserved) {
      EXPECT_EQ(a.claimed[0].reserved_for, (Reservation{"vm1", "p1", "u1"}));
    }
  }
}

// docs/rest-api.md §4.5: `handoffIndex`, a reserved device's place in its
// pod's hand-off order; absent (an extender from before it) reads as 0, and
// it is written back as read.
TEST(NodeDriverJsonTest, HandoffIndexIsReadAndWritten) {
  struct Case {
    std::string member;  // As written, "" = absent.
    absl::StatusCode code;
    uint32_t index;
  } cases[] = {
      {"", absl::StatusCode::kOk, 0},
      {R"(,"handoffIndex":null)", absl::StatusCode::kOk, 0},
      {R"(,"handoffIndex":3)", absl::StatusCode::kOk, 3},
      {R"(,"handoffIndex":4095)", absl::StatusCode::kOk, 4095},
      {R"(,"handoffIndex":4096)", absl::StatusCode::kInvalidArgument, 0},
      {R"(,"handoffIndex":-1)", absl::StatusCode::kInvalidArgument, 0},
      {R"(,"handoffIndex":"1")", absl::StatusCode::kInvalidArgument, 0},
  };
  for (const Case& c : cases) {
    const std::string body =
        R"({"node":"node-a","version":3,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a",)"
        R"("resourceName":"r","reservedFor":{"vm":"vm1","podName":"p1","podUid":"u1"},)"
        R"("handedOff":false)" + c.member + "}]}";
    absl::StatusOr<NodeAllocations> a = DecodeAllocations(body);
    ASSERT_EQ(a.status().code(), c.code) << body << ": " << a.status();
    if (!a.ok()) {
      EXPECT_THAT(std::string(a.status().message()), HasSubstr("claimed[0].handoffIndex"));
      continue;
    }
    EXPECT_EQ(a->claimed[0].handoff_index, c.index) << body;
    ASSERT_OK_AND_ASSIGN(NodeAllocations back,
                         DecodeAllocations(WriteNodeAllocations("node-a", *a)));
    EXPECT_EQ(back, *a) << body;
  }
}

// docs/rest-api.md §1: keys match exactly first, then ASCII case-insensitively
// (as Go's encoding/json), in every codec; the exact spelling wins.
TEST(NodeDriverJsonTest, KeysMatchExactlyThenIgnoringCase) {
  struct Case {
    std::string body;
    uint64_t version;
    bool pending;
  } cases[] = {
      {R"({"version":4,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a","reservedFor":{"podUid":"u"},"handedOff":false}]})",
       4, true},
      {R"({"Version":5,"Claimed":[{"Address":"0000:3b:00.0","CLAIM":"ns/a","ReservedFor":{"PodUID":"u"},"HandedOff":false}]})",
       5, true},
      {R"({"VERSION":6,"version":7,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a","reservedFor":{"podUid":"u"},"HANDEDOFF":true,"handedOff":false}]})",
       7, true},
  };
  for (const Case& c : cases) {
    ASSERT_OK_AND_ASSIGN(NodeAllocations a, DecodeAllocations(c.body));
    EXPECT_EQ(a.version, c.version) << c.body;
    ASSERT_EQ(a.claimed.size(), 1u) << c.body;
    EXPECT_EQ(a.claimed[0].claim, (ClaimKey{"ns", "a"})) << c.body;
    EXPECT_EQ(a.claimed[0].handoff_pending, c.pending) << c.body;
    ASSERT_TRUE(a.claimed[0].reserved_for.has_value()) << c.body;
    EXPECT_EQ(a.claimed[0].reserved_for->pod_uid, "u") << c.body;
  }
}

TEST(NodeDriverJsonTest, EncodesHandoffAsHandoffApiSays) {
  const HandoffConfirm c{"u1", "devices.kubevirt.io/nvme",
                         {Addr("0000:3b:00.0"), Addr("0000:5e:00.0")}};
  EXPECT_EQ(WriteHandoffConfirm(c),
            R"({"podUid":"u1","resourceName":"devices.kubevirt.io/nvme",)"
            R"("devices":["0000:3b:00.0","0000:5e:00.0"]})");
}

TEST(NodeDriverJsonTest, MalformedAllocationsNameTheField) {
  struct Case {
    std::string json;
    std::string field;
  } cases[] = {
      {"[]", "not a JSON object"},
      {R"({"claimed":[]})", "version"},
      {R"({"version":-1})", "version"},
      {R"({"version":1,"claimed":{}})", "claimed"},
      {R"({"version":1,"claimed":[{"address":7}]})", "claimed[0].address"},
      {R"({"version":1,"claimed":[{"address":"../../x"}]})", "claimed[0].address"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0"}]})", "claimed[0].claim"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a","reclaimPolicy":"Keep"}]})",
       "claimed[0].reclaimPolicy"},
      {R"({"version":1,"returnToHost":["0000:3b:00.0",3]})", "returnToHost[1]"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a","reservedFor":"u"}]})",
       "claimed[0].reservedFor"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a","reservedFor":{"podUid":1}}]})",
       "claimed[0].reservedFor.podUid"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a","handedOff":"yes"}]})",
       "claimed[0].handedOff"},
      // Claim keys and resource names the server could not have written.
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","claim":"ns/"}]})",
       "claimed[0].claim"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","claim":"NS/a"}]})",
       "claimed[0].claim"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a\nb"}]})",
       "claimed[0].claim"},
      {absl::StrCat(R"({"version":1,"claimed":[{"address":"0000:3b:00.0","claim":"ns/)",
                    std::string(254, 'a'), R"("}]})"),
       "claimed[0].claim"},
      {R"({"version":1,"claimed":[{"address":"0000:3b:00.0","claim":"ns/a","resourceName":"no slash"}]})",
       "claimed[0].resourceName"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(DecodeAllocations(c.json),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.field)))
        << c.json;
  }
}

// docs/rest-api.md §3.3: `count` is 1..256, the same limit in the codec and
// in the allocator (kMaxClaimCount); the codec answers 422 naming `count`.
TEST(ClaimCreateJsonTest, CountLimitAtTheBoundary) {
  EXPECT_EQ(kMaxClaimCount, 256);
  struct Case {
    std::string count;
    bool ok;
  } cases[] = {
      {"0", false}, {"1", true}, {"255", true}, {"256", true},
      {"257", false}, {"1024", false}, {"1025", false}, {"-1", false},
  };
  for (const Case& c : cases) {
    const std::string body =
        R"({"name":"d","resourceName":"devices.kubevirt.io/nvme","count":)" + c.count + "}";
    absl::StatusOr<ClaimCreate> parsed = ParseClaimCreate(body, "default");
    if (c.ok) {
      ASSERT_TRUE(parsed.ok()) << body << ": " << parsed.status();
      EXPECT_EQ(parsed->spec.count, std::stoi(c.count));
    } else {
      EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("count: must be between 1 and 256")))
          << body;
      EXPECT_EQ(json::FieldOf(parsed.status()), "count") << body;
      EXPECT_EQ(json::HttpStatusFor(parsed.status()), 422) << body;
    }
  }
}

// A template claim restored by hand keeps its VM's UID (docs/rest-api.md §3.3).
TEST(ClaimCreateJsonTest, OwnerVmUidRoundTrips) {
  ClaimCreate c;
  c.key = {"default", "vm1-nvme"};
  c.spec.resource_name = "devices.kubevirt.io/nvme";
  c.spec.owner_vm = "vm1";
  c.spec.owner_vm_uid = "5b2d3c1a-0000-4000-8000-00000000a001";
  ASSERT_OK_AND_ASSIGN(ClaimCreate back, ParseClaimCreate(WriteClaimCreate(c), "default"));
  EXPECT_EQ(back.spec, c.spec);
  c.spec.owner_vm_uid.clear();
  EXPECT_THAT(WriteClaimCreate(c), Not(HasSubstr("ownerVMUid")));
}

// A claim as a client reads it: a count the server could not have written
// (outside 1..256, or beyond int32 where a cast would wrap it) is refused.
TEST(ClaimJsonTest, ParsedCountIsBounded) {
  for (const auto& [count, ok] : std::vector<std::pair<std::string, bool>>{
           {"1", true}, {"256", true}, {"0", false}, {"-1", false}, {"257", false},
           {"4294967297", false}, {"-4294967295", false}, {"9223372036854775807", false}}) {
    absl::StatusOr<Claim> c = ParseClaim(absl::StrCat(R"({"name":"a","count":)", count, "}"));
    EXPECT_EQ(c.ok(), ok) << count;
    if (!ok) {
      EXPECT_EQ(json::FieldOf(c.status()), "count") << count;
    }
  }
}

// A client (pdcctl, pdc-node) reading a claim or an allocation refuses
// strings the server could not have written, so it never shows or logs them.
TEST(ClaimJsonTest, ParsedStringsAreBounded) {
  const std::string huge(1 << 20, 'x');
  struct Row {
    std::string body, field;
  };
  for (const Row& r : {
           Row{absl::StrCat(R"({"uid":")", huge, "\"}"), "uid"},
           Row{R"({"namespace":"A"})", "namespace"},
           Row{absl::StrCat(R"({"name":")", huge, "\"}"), "name"},
           Row{R"({"resourceName":"no/such/name"})", "resourceName"},
           Row{absl::StrCat(R"({"serial":")", huge, "\"}"), "serial"},
           Row{R"({"ownerVM":"VM"})", "ownerVM"},
           Row{absl::StrCat(R"({"status":{"lostReason":")", huge, "\"}}"), "status.lostReason"},
           Row{R"({"status":{"handedOffTo":"a b"}})", "status.handedOffTo"},
           Row{R"({"status":{"reservedFor":{"podUid":"a b"}}})", "status.reservedFor.podUid"},
           Row{R"({"status":{"reservedFor":{"vmUid":"a b"}}})", "status.reservedFor.vmUid"},
           Row{R"({"status":{"reservedFor":{"vmiUid":"a b"}}})", "status.reservedFor.vmiUid"},
           Row{absl::StrCat(R"({"ownerVM":"vm1","ownerVMUid":")", huge, "\"}"), "ownerVMUid"},
           Row{R"({"status":{"devices":[{"address":"0000:3b:00.0","serial":"S\u0007"}]}})",
               "status.devices[0].serial"},
       }) {
    absl::StatusOr<Claim> c = ParseClaim(r.body);
    ASSERT_FALSE(c.ok()) << r.field;
    EXPECT_EQ(json::FieldOf(c.status()), r.field);
    EXPECT_LT(c.status().message().size(), 1024u) << r.field;
  }
  EXPECT_OK(ParseClaim(R"({"namespace":"default","name":"a","uid":"8d6c2f9e-1b1a-4c53-9f0e-2d3c4b5a6f70","status":{"reservedFor":{"vm":"vm1","podName":"p","podUid":"u-1"}}})")
                .status());
}

// Strings the server keeps and logs are bounded where they enter.
TEST(RestJsonBoundsTest, ServerSideStringsAreBounded) {
  const std::string huge(1 << 20, 's');
  auto inventory = [](const std::string& device_fields) {
    return absl::StrCat(
        R"({"node":"node-a","devices":[{"address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":"010802")",
        device_fields, "}]}");
  };
  struct Row {
    std::string what;
    absl::Status status;
    std::string field;
  };
  const Row rows[] = {
      {"serial 65", ParseInventory(inventory(absl::StrCat(R"(,"serial":")", std::string(65, 'S'), "\"")), "node-a").status(),
       "devices[0].serial"},
      {"serial control", ParseInventory(inventory(R"(,"serial":"S\nN")"), "node-a").status(),
       "devices[0].serial"},
      {"driver space", ParseInventory(inventory(R"(,"driver":"vfio pci")"), "node-a").status(),
       "devices[0].driver"},
      {"driver huge", ParseInventory(inventory(absl::StrCat(R"(,"driver":")", huge, "\"")), "node-a").status(),
       "devices[0].driver"},
      {"node huge", ParseInventory(absl::StrCat(R"({"node":")", huge, "\"}"), "node-a").status(), "node"},
      {"class huge", ParseInventory(absl::StrCat(R"({"node":"node-a","devices":[{"address":"0000:3b:00.0","vendor":"1b36","device":"0010","class":")", huge, "\"}]}"), "node-a").status(),
       "devices[0].class"},
      {"address huge", ParseInventory(absl::StrCat(R"({"node":"node-a","devices":[{"address":")", huge, "\"}]}"), "node-a").status(),
       "devices[0].address"},
      {"claim serial", ParseClaimCreate(absl::StrCat(R"({"name":"c","resourceName":"x.io/y","serial":")", huge, "\"}"), "default").status(),
       "serial"},
      {"claim resource", ParseClaimCreate(absl::StrCat(R"({"name":"c","resourceName":")", huge, "\"}"), "default").status(),
       "resourceName"},
      {"claim policy", ParseClaimCreate(absl::StrCat(R"({"name":"c","resourceName":"x.io/y","reclaimPolicy":")", huge, "\"}"), "default").status(),
       "reclaimPolicy"},
      {"claim owner uid", ParseClaimCreate(absl::StrCat(R"({"name":"c","resourceName":"x.io/y","ownerVM":"vm1","ownerVMUid":")", huge, "\"}"), "default").status(),
       "ownerVMUid"},
      {"claim owner uid alone", ParseClaimCreate(R"({"name":"c","resourceName":"x.io/y","ownerVMUid":"u"})", "default").status(),
       "ownerVMUid"},
      {"claim namespace", ParseClaimCreate(absl::StrCat(R"({"name":"c","resourceName":"x.io/y","namespace":")", huge, "\"}"), "default").status(),
       "namespace"},
      {"handoff uid", ParseHandoffConfirm(absl::StrCat(R"({"podUid":")", huge, R"(","resourceName":"x.io/y","devices":["0000:3b:00.0"]})")).status(),
       "podUid"},
      {"handoff resource", ParseHandoffConfirm(R"({"podUid":"u","resourceName":"no slash allowed/x/y","devices":["0000:3b:00.0"]})").status(),
       "resourceName"},
  };
  for (const Row& r : rows) {
    ASSERT_FALSE(r.status.ok()) << r.what;
    EXPECT_EQ(json::FieldOf(r.status), r.field) << r.what << ": " << r.status;
    EXPECT_EQ(json::HttpStatusFor(r.status), 422) << r.what;
    EXPECT_LT(r.status.message().size(), 1024u) << r.what;
  }
  // At the bounds: accepted.
  EXPECT_OK(ParseInventory(inventory(absl::StrCat(R"(,"serial":"  SN 1)", std::string(58, 'S'),
                                                  R"(","driver":"vfio-pci")")),
                           "node-a")
                .status());
}

TEST(ClaimJsonTest, ClaimListRoundTrips) {
  Claim a;
  a.key = {"default", "a"};
  a.uid = "uid-a";
  a.spec.resource_name = "devices.kubevirt.io/nvme";
  a.status.phase = ClaimPhase::kBound;
  a.status.node = "node-a";
  a.status.devices = {BoundDevice{Addr("0000:3b:00.0"), "SN1"}};
  a.status.reserved_for = Reservation{"vm1", "p1", "u1"};
  Claim b;
  b.key = {"other", "b"};
  b.spec.resource_name = "devices.kubevirt.io/nvme";
  b.spec.count = 2;
  ASSERT_OK_AND_ASSIGN(std::vector<Claim> claims, ParseClaimList(WriteClaimList({a, b})));
  EXPECT_EQ(claims, (std::vector<Claim>{a, b}));
  ASSERT_OK_AND_ASSIGN(Claim one, ParseClaim(std::string_view(WriteClaim(a))));
  EXPECT_EQ(one, a);
  // VM UIDs (Kubernetes mode) appear only when known, and round-trip.
  EXPECT_THAT(WriteClaim(a), Not(HasSubstr("Uid\":\"\"")));
  EXPECT_THAT(WriteClaim(a), Not(HasSubstr("vmUid")));
  a.spec.owner_vm = "vm1";
  a.spec.owner_vm_uid = "vm-uid-1";
  a.status.reserved_for->vm_uid = "vm-uid-1";
  EXPECT_THAT(WriteClaim(a), HasSubstr(R"("ownerVM":"vm1","ownerVMUid":"vm-uid-1")"));
  EXPECT_THAT(WriteClaim(a), HasSubstr(R"("podUid":"u1","vmUid":"vm-uid-1"})"));
  ASSERT_OK_AND_ASSIGN(one, ParseClaim(std::string_view(WriteClaim(a))));
  EXPECT_EQ(one, a);
  // So does the VMI's UID of the reservation.
  a.status.reserved_for->vmi_uid = "vmi-uid-1";
  EXPECT_THAT(WriteClaim(a), HasSubstr(R"("vmUid":"vm-uid-1","vmiUid":"vmi-uid-1"})"));
  ASSERT_OK_AND_ASSIGN(one, ParseClaim(std::string_view(WriteClaim(a))));
  EXPECT_EQ(one, a);
  EXPECT_THAT(ParseClaimList(R"({"items":[{"status":{"phase":"Gone"}}]})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("items[0]")));
}

TEST(HandoffJsonTest, ClaimKeysOfConfirmationAndRelease) {
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimKey> confirmed,
                       ParseClaimKeys(WriteHandoffConfirmed("node-a", {"u1", "r", {}},
                                                            {{"default", "a"}, {"default", "b"}}),
                                      "claims"));
  EXPECT_EQ(confirmed, (std::vector<ClaimKey>{{"default", "a"}, {"default", "b"}}));
  ASSERT_OK_AND_ASSIGN(std::vector<ClaimKey> released,
                       ParseClaimKeys(WriteReleased({{"ns", "c"}}), "released"));
  EXPECT_EQ(released, (std::vector<ClaimKey>{{"ns", "c"}}));
  EXPECT_THAT(ParseClaimKeys(R"({"released":["no-slash"]})", "released"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("released[0]")));
}

// Node and device listings: what the server writes reads back the same,
// keys match exactly and then ignoring ASCII case, and a wrong value names
// its field.
TEST(NodeListJsonTest, ListingsRoundTrip) {
  NodeView a{"node-a", pdc::testing::Inventory("node-a", {pdc::testing::NvmeDevice("0000:3b:00.0", 12, 0),
                                                     pdc::testing::NvmeDevice("0000:5e:00.0", -1)}),
             true, absl::FromUnixSeconds(1'700'000'000), {}, {}};
  NodeView b{"node-b", pdc::testing::Inventory("node-b", {}), false, absl::InfinitePast(), {}, {}};
  Claim c;
  c.key = {"vms", "vm1-nvme"};
  c.status.node = "node-a";
  c.status.devices = {BoundDevice{Addr("0000:5e:00.0"), ""}};
  const std::vector<DeviceListing> listed = ListDevices({a, b}, {c});
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].claim, std::nullopt);
  EXPECT_EQ(listed[1].claim, c.key);

  const std::vector<NodeSummary> nodes = {SummaryOf(a), SummaryOf(b)};
  EXPECT_EQ(nodes[0].devices, 2u);
  ASSERT_OK_AND_ASSIGN(std::vector<NodeSummary> nodes_back, ParseNodeList(WriteNodeList(nodes)));
  EXPECT_EQ(nodes_back, nodes);
  ASSERT_OK_AND_ASSIGN(std::vector<DeviceListing> listed_back,
                       ParseDeviceList(WriteDeviceList(listed)));
  EXPECT_EQ(listed_back, listed);
  const NodeDetail detail{SummaryOf(a), listed};
  ASSERT_OK_AND_ASSIGN(NodeDetail detail_back, ParseNodeDetail(WriteNodeDetail(detail)));
  EXPECT_EQ(detail_back, detail);
}

// Each device's state: a claim's, waiting to return to its host driver,
// Released (with the deleted claim), unhealthy, or free.
TEST(NodeListJsonTest, ListingsSayEachDevicesState) {
  Device unhealthy = pdc::testing::NvmeDevice("0000:af:00.0", 15);
  MarkUnhealthy(unhealthy, UnhealthyReason::kHostInUse);
  NodeView a{"node-a",
             pdc::testing::Inventory("node-a", {pdc::testing::NvmeDevice("0000:3b:00.0", 12),
                                           pdc::testing::NvmeDevice("0000:5e:00.0", 13),
                                           pdc::testing::NvmeDevice("0000:86:00.0", 14), unhealthy,
                                           pdc::testing::NvmeDevice("0000:d8:00.0", 16)}),
             true, absl::InfinitePast(), {}, {}};
  a.return_to_host = {Addr("0000:5e:00.0")};
  a.released = {ReleasedDevice{Addr("0000:86:00.0"), "SN", {"vms", "old"}},
                ReleasedDevice{Addr("0000:ee:00.0"), "SN2", {"vms", "gone"}}};
  Claim c;
  c.key = {"vms", "vm1-nvme"};
  c.status.node = "node-a";
  c.status.devices = {BoundDevice{Addr("0000:3b:00.0"), ""}};
  const std::vector<DeviceListing> listed = ListDevices({a}, {c});
  struct Want {
    DeviceState state;
    std::string_view name;
    std::optional<ClaimKey> released_from;
  };
  const Want want[] = {
      {DeviceState::kAllocated, "Allocated", std::nullopt},
      {DeviceState::kReturning, "ReturningToHost", std::nullopt},
      {DeviceState::kReleased, "Released", ClaimKey{"vms", "old"}},
      {DeviceState::kUnhealthy, "Unhealthy", std::nullopt},
      {DeviceState::kFree, "Free", std::nullopt},
  };
  ASSERT_EQ(listed.size(), std::size(want));
  for (size_t i = 0; i < listed.size(); ++i) {
    EXPECT_EQ(listed[i].state, want[i].state) << i;
    EXPECT_EQ(ToString(listed[i].state), want[i].name) << i;
    EXPECT_EQ(listed[i].released_from, want[i].released_from) << i;
  }
  const std::string body = WriteDeviceList(listed);
  EXPECT_THAT(body, HasSubstr(R"("claim":null,"state":"Released","releasedFrom":"vms/old"})"));
  ASSERT_OK_AND_ASSIGN(std::vector<DeviceListing> back, ParseDeviceList(body));
  EXPECT_EQ(back, listed);

  // From a server before states: implied by the claim and the health.
  ASSERT_OK_AND_ASSIGN(back, ParseDeviceList(R"({"items": [
      {"node": "n", "address": "0000:01:00.0", "vendor": "1b36", "device": "0010",
       "class": "010802", "iommuGroup": 1, "claim": "ns/a"},
      {"node": "n", "address": "0000:02:00.0", "vendor": "1b36", "device": "0010",
       "class": "010802", "iommuGroup": 2, "claim": null},
      {"node": "n", "address": "0000:03:00.0", "vendor": "1b36", "device": "0010",
       "class": "010802", "iommuGroup": 3, "healthy": false}]})"));
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].state, DeviceState::kAllocated);
  EXPECT_EQ(back[1].state, DeviceState::kFree);
  EXPECT_EQ(back[2].state, DeviceState::kUnhealthy);
}

TEST(NodeListJsonTest, KeysMatchExactlyThenIgnoringCase) {
  const NodeSummary want{"node-a", true, absl::FromUnixSeconds(1'700'000'000 - 12), 4};
  for (const char* body : {
           R"({"items": [{"name": "node-a", "reporting": true, "lastReport": "2023-11-14T22:13:08Z", "devices": 4}]})",
           R"({"Items": [{"Name": "node-a", "REPORTING": true, "LastReport": "2023-11-14T22:13:08Z", "Devices": 4}]})",
           R"({"items": [{"NAME": "node-x", "name": "node-a", "reporting": true, "lastReport": "2023-11-14T22:13:08Z", "devices": 4}]})",
       }) {
    ASSERT_OK_AND_ASSIGN(std::vector<NodeSummary> nodes, ParseNodeList(body));
    EXPECT_EQ(nodes, std::vector<NodeSummary>{want}) << body;
  }
}

TEST(NodeListJsonTest, WrongValuesNameTheirField) {
  struct Case {
    std::string body;
    std::string field;
  } cases[] = {
      {R"([1])", ""},
      {R"({"items": {}})", "items"},
      {R"({"items": [7]})", "items[0]"},
      {R"({"items": [{"reporting": true}]})", "items[0].name"},
      {R"({"items": [{"name": "n", "lastReport": "yesterday"}]})", "items[0].lastReport"},
      {R"({"items": [{"name": "n", "devices": -1}]})", "items[0].devices"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<NodeSummary>> r = ParseNodeList(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(json::FieldOf(r.status()), c.field) << c.body << ": " << r.status();
  }
  EXPECT_EQ(json::FieldOf(ParseDeviceList(R"({"items": [{"node": "n", "address": "0000:01:00.0",
      "vendor": "1b36", "device": "0010", "class": "010802", "claim": "no-slash"}]})")
                              .status()),
            "items[0].claim");
  EXPECT_THAT(ParseDeviceList(R"({"items": [{"node": "n", "address": "0000:01:00.0",
      "vendor": "1b36", "device": "0010", "class": "010802", "state": "Scrubbed"}]})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("items[0].state: \"Scrubbed\" must be Free, Allocated, "
                                 "Unhealthy, ReturningToHost or Released")));
  EXPECT_EQ(json::FieldOf(ParseDeviceList(R"({"items": [{"node": "n", "address": "0000:01:00.0",
      "vendor": "1b36", "device": "0010", "class": "010802", "releasedFrom": "x"}]})")
                              .status()),
            "items[0].releasedFrom");
  EXPECT_EQ(json::FieldOf(ParseDeviceList(R"({"items": [{"address": "0000:01:00.0",
      "vendor": "1b36", "device": "0010", "class": "010802"}]})")
                              .status()),
            "items[0].node");
  EXPECT_EQ(json::FieldOf(ParseNodeDetail(R"({"name": "n", "devices": [{"address": "bad"}]})")
                              .status()),
            "devices[0].address");
}

}  // namespace
}  // namespace pdc::api
