// Pod -> SchedulingRequest and the small parts of the wire format that the
// router tests do not pin down.
#include "api/scheduler_wire.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/json_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/inventory_builders.h"
#include "tests/testing/scheduler_requests.h"
#include "tests/testing/status_matchers.h"

namespace pdc::api::testing {
namespace {

using ::pdc::testing::kNvme;
using ::pdc::testing::VirtLauncherPod;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

absl::StatusOr<PodRequest> FromText(std::string text) {
  rapidjson::Document doc;
  if (absl::Status s = json::Parse(text, &doc); !s.ok()) return s;
  return PodToRequest(doc, ManagedResources{kNvme, "example.com/fpga"});
}

TEST(PodToRequestTest, VirtLauncherPod) {
  ASSERT_OK_AND_ASSIGN(PodRequest p, FromText(VirtLauncherPod("vm1", "uid-1", 2)));
  EXPECT_FALSE(p.pass_through);
  EXPECT_EQ(p.request.ns, "default");
  EXPECT_EQ(p.request.vm, "vm1");
  // The wire knows the VM by name only; its owner chain's UID is added in
  // Kubernetes mode (extender/vm_directory.h).
  EXPECT_EQ(p.request.vm_uid, "");
  EXPECT_EQ(p.request.pod_name, "virt-launcher-vm1-x7k2p");
  EXPECT_EQ(p.request.pod_uid, "uid-1");
  EXPECT_TRUE(p.request.claim_names.empty());
  // devices.kubevirt.io/kvm is not managed; cpu and memory never are.
  EXPECT_THAT(p.request.resources, ElementsAre(Pair(kNvme, 2)));
}

TEST(PodToRequestTest, VmIdentityFallsBackToDomainThenPodName) {
  ASSERT_OK_AND_ASSIGN(
      PodRequest d,
      FromText(R"({"metadata":{"name":"p1","annotations":{"kubevirt.io/domain":"vmd"}}})"));
  EXPECT_EQ(d.request.vm, "vmd");
  EXPECT_TRUE(d.pass_through);
  ASSERT_OK_AND_ASSIGN(PodRequest n, FromText(R"({"metadata":{"name":"p1"}})"));
  EXPECT_EQ(n.request.vm, "p1");
  EXPECT_EQ(n.request.ns, "default");
}

TEST(PodToRequestTest, ClaimsAnnotationIsTrimmedAndDeduplicated) {
  ASSERT_OK_AND_ASSIGN(
      PodRequest p,
      FromText(R"({"metadata":{"name":"p","namespace":"ns1","annotations":{"pdc.kubevirt.io/claims":" data , fpga0,,data"}}})"));
  EXPECT_THAT(p.request.claim_names, ElementsAre("data", "fpga0"));
  EXPECT_EQ(p.request.ns, "ns1");
  EXPECT_FALSE(p.pass_through);
}

TEST(PodToRequestTest, InitContainersCountAsTheirMaximum) {
  // Effective request = max(sum of containers, max of init containers).
  ASSERT_OK_AND_ASSIGN(
      PodRequest p,
      FromText(R"({"metadata":{"name":"p"},"spec":{
        "initContainers":[
          {"resources":{"limits":{"example.com/fpga":"3"}}},
          {"resources":{"requests":{"example.com/fpga":"1"}}}],
        "containers":[
          {"resources":{"requests":{"devices.kubevirt.io/nvme":1,"example.com/fpga":"1"}}},
          {"resources":{"limits":{"devices.kubevirt.io/nvme":"2"}}}]}})"));
  EXPECT_THAT(p.request.resources,
              ElementsAre(Pair(kNvme, 3), Pair("example.com/fpga", 3)));
}

TEST(PodToRequestTest, UnmanagedQuantitiesAreNotParsed) {
  ASSERT_OK_AND_ASSIGN(
      PodRequest p,
      FromText(R"({"metadata":{"name":"p"},"spec":{"containers":[
        {"resources":{"requests":{"cpu":"250m","hugepages-1Gi":"2Gi","other.io/x":"1k"}}}]}})"));
  EXPECT_TRUE(p.pass_through);
}

TEST(PodToRequestTest, FractionalDeviceQuantityIsRejected) {
  auto p = FromText(R"({"metadata":{"name":"p"},"spec":{"containers":[
        {"resources":{"requests":{"devices.kubevirt.io/nvme":"500m"}}}]}})");
  EXPECT_THAT(p, pdc::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("must be a whole number")));
  EXPECT_EQ(json::HttpStatusFor(p.status()), 422);
}

TEST(PodToRequestTest, DeviceQuantitiesAreKubernetesQuantities) {
  struct Row {
    std::string quantity;  // JSON: a string literal or a number.
    int64_t devices;       // -1: refused.
    std::string says = "";
  };
  for (const Row& r : {
           Row{R"("1")", 1}, Row{R"("1k")", 1000}, Row{R"("4Ki")", 4096}, Row{R"("2e0")", 2},
           Row{R"("1000m")", 1}, Row{R"("1.5k")", 1500}, Row{R"("+1")", 1}, Row{"3", 3},
           Row{"1e3", 1000}, Row{"2.0", 2}, Row{R"("0")", 0},
           Row{R"("0.5")", -1, "must be a whole number"},
           Row{"0.5", -1, "must be a whole number"},
           Row{R"("-1")", -1, "must not be negative"}, Row{"-1", -1, "must not be negative"},
           Row{R"("1E")", -1, "is more than 4096 devices"},
           Row{R"("9223372036854775807")", -1, "is more than 4096 devices"},
           Row{"9223372036854775807", -1, "is more than 4096 devices"},
           Row{"18446744073709551615", -1, "is more than 4096 devices"},
           Row{"1e300", -1, "is more than 4096 devices"},
           Row{R"("4294967297")", -1, "is more than 4096 devices"},
           Row{R"("1Ki ")", -1, "is not a Kubernetes quantity"},
           Row{R"("")", -1, "is not a Kubernetes quantity"},
       }) {
    auto p = FromText(absl::StrCat(
        R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"requests":{"devices.kubevirt.io/nvme":)",
        r.quantity, "}}}]}}"));
    if (r.devices < 0) {
      ASSERT_FALSE(p.ok()) << r.quantity;
      EXPECT_THAT(std::string(p.status().message()), HasSubstr(r.says)) << r.quantity;
      EXPECT_EQ(json::FieldOf(p.status()),
                R"(Pod.spec.containers[0].resources.requests["devices.kubevirt.io/nvme"])");
      EXPECT_EQ(json::HttpStatusFor(p.status()), 422) << r.quantity;
    } else if (r.devices == 0) {
      ASSERT_OK(p.status());
      EXPECT_TRUE(p->pass_through) << r.quantity;
    } else {
      ASSERT_TRUE(p.ok()) << r.quantity << ": " << p.status();
      EXPECT_THAT(p->request.resources, ElementsAre(Pair(kNvme, r.devices))) << r.quantity;
    }
  }
}

TEST(PodToRequestTest, ThePodsTotalIsBoundedToo) {
  // Two containers of 4096 each: each is within the bound, their sum not.
  auto p = FromText(R"({"metadata":{"name":"p"},"spec":{"containers":[
        {"resources":{"requests":{"devices.kubevirt.io/nvme":"4Ki"}}},
        {"resources":{"requests":{"devices.kubevirt.io/nvme":"4096"}}}]}})");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(json::FieldOf(p.status()), "Pod.spec.containers");
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("8192 devices.kubevirt.io/nvme"));
}

TEST(PodToRequestTest, MetadataIsBoundedBeforeItIsKept) {
  const std::string long_uid(129, 'a');
  const std::string long_name(254, 'a');
  struct Row {
    std::string metadata;
    std::string field;
  };
  for (const Row& r : {
           Row{absl::StrCat(R"("name":")", long_name, "\""), "Pod.metadata.name"},
           Row{R"("name":"Not_A_Name")", "Pod.metadata.name"},
           Row{R"("name":"p","namespace":"a.b")", "Pod.metadata.namespace"},
           Row{absl::StrCat(R"("name":"p","uid":")", long_uid, "\""), "Pod.metadata.uid"},
           Row{R"("name":"p","uid":"a b")", "Pod.metadata.uid"},
           Row{R"("name":"p","uid":"a\u0001b")", "Pod.metadata.uid"},
           Row{R"("name":"p","labels":{"vm.kubevirt.io/name":"VM!"})",
               R"(Pod.metadata.labels["vm.kubevirt.io/name"])"},
           Row{absl::StrCat(R"("name":"p","annotations":{"kubevirt.io/domain":")", long_name,
                            "\"}"),
               R"(Pod.metadata.annotations["kubevirt.io/domain"])"},
       }) {
    auto p = FromText(absl::StrCat(R"({"metadata":{)", r.metadata, "}}"));
    ASSERT_FALSE(p.ok()) << r.metadata;
    EXPECT_EQ(json::FieldOf(p.status()), r.field) << r.metadata;
    EXPECT_EQ(json::HttpStatusFor(p.status()), 422) << r.metadata;
    EXPECT_LT(p.status().message().size(), 1024u);
  }
  // At the bounds: accepted.
  ASSERT_OK(FromText(absl::StrCat(R"({"metadata":{"name":")", std::string(253, 'a'),
                                  R"(","uid":")", std::string(128, 'a'), "\"}}")));
  ASSERT_OK(FromText(R"({"metadata":{"name":"p","uid":"8d6c2f9e-1b1a-4c53-9f0e-2d3c4b5a6f70"}})"));
}

TEST(ExtenderArgsTest, NodeNamesAreHeldToANodeNamesLength) {
  const std::string pod = R"({"metadata":{"name":"p"}})";
  const std::string ok(253, 'n');
  const std::string too_long(254, 'n');
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {absl::StrCat(R"({"Pod":)", pod, R"(,"NodeNames":["a",")", too_long, R"("]})"),
            "NodeNames[1]"},
           {absl::StrCat(R"({"Pod":)", pod, R"(,"Nodes":{"items":[{"metadata":{"name":")", too_long,
                         R"("}}]}})"),
            "Nodes.items[0].metadata.name"},
       }) {
    std::string text = body;
    rapidjson::Document doc;
    absl::StatusOr<ExtenderArgs> args = ParseExtenderArgs(text, &doc);
    ASSERT_FALSE(args.ok()) << field;
    EXPECT_EQ(json::FieldOf(args.status()), field);
    EXPECT_LT(args.status().message().size(), 256u);
  }
  std::string text = absl::StrCat(R"({"Pod":)", pod, R"(,"NodeNames":[")", ok, R"("]})");
  rapidjson::Document doc;
  ASSERT_OK(ParseExtenderArgs(text, &doc).status());
}

TEST(ReadBindingArgsTest, EveryFieldIsBounded) {
  auto read = [](std::string text) {
    rapidjson::Document doc;
    EXPECT_OK(json::Parse(text, &doc));
    return ReadBindingArgs(doc);
  };
  ASSERT_OK_AND_ASSIGN(BindingArgs ok, read(R"({"PodName":"p","PodNamespace":"","PodUID":"u","Node":"n"})"));
  EXPECT_EQ(ok.pod_namespace, "default");
  const std::string huge(1 << 20, 'x');
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {absl::StrCat(R"({"PodName":"p","PodNamespace":"d","PodUID":")", huge, R"(","Node":"n"})"),
            "PodUID"},
           {absl::StrCat(R"({"PodName":")", huge, R"(","PodNamespace":"d","PodUID":"u","Node":"n"})"),
            "PodName"},
           {absl::StrCat(R"({"PodName":"p","PodNamespace":")", huge, R"(","PodUID":"u","Node":"n"})"),
            "PodNamespace"},
           {absl::StrCat(R"({"PodName":"p","PodNamespace":"d","PodUID":"u","Node":")", huge, "\"}"),
            "Node"},
       }) {
    absl::StatusOr<BindingArgs> b = read(text);
    ASSERT_FALSE(b.ok()) << field;
    EXPECT_EQ(json::FieldOf(b.status()), field);
    EXPECT_LT(b.status().message().size(), 2048u) << field;
  }
}

TEST(PodToRequestTest, WrongTypesNameTheField) {
  auto p = FromText(R"({"metadata":{"name":"p","annotations":{"pdc.kubevirt.io/claims":5}}})");
  EXPECT_EQ(json::FieldOf(p.status()),
            R"(Pod.metadata.annotations["pdc.kubevirt.io/claims"])");
  EXPECT_EQ(json::HttpStatusFor(p.status()), 400);
  auto c = FromText(R"({"metadata":{"name":"p"},"spec":{"containers":{}}})");
  EXPECT_EQ(json::FieldOf(c.status()), "Pod.spec.containers");
}

TEST(JsonTest, FindPrefersExactMatch) {
  rapidjson::Document doc;
  ASSERT_OK(json::Parse(R"({"node":"lower","Node":"exact"})", &doc));
  EXPECT_EQ(json::StringOf(*json::Find(doc, "Node")), "exact");
  EXPECT_EQ(json::StringOf(*json::Find(doc, "NODE")), "lower");
  EXPECT_EQ(json::Find(doc, "missing"), nullptr);
}

TEST(HostPriorityListTest, ParsesAndRejectsWrongTypes) {
  auto ok = ParseHostPriorityList(R"([{"Host":"a","Score":5},{"host":"b","score":0}])");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0], (std::pair<std::string, int64_t>{"a", 5}));
  EXPECT_EQ((*ok)[1], (std::pair<std::string, int64_t>{"b", 0}));
  auto str = ParseHostPriorityList(R"([{"Host":"a","Score":"5"}])");
  EXPECT_THAT(str, pdc::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("[0].Score: must be an integer")));
  EXPECT_EQ(json::FieldOf(str.status()), "[0].Score");
  EXPECT_FALSE(ParseHostPriorityList(R"([{"Host":"a","Score":11}])").ok());
}

// ParseExtenderArgs keeps NodeNames out of the DOM; it must answer exactly
// as ParseInsitu + ReadExtenderArgs does, whatever the shape of the input.
struct ArgsCase {
  std::string name;
  std::string body;
};

class ParseExtenderArgsTest : public ::testing::TestWithParam<ArgsCase> {};

TEST_P(ParseExtenderArgsTest, SameAnswerAsTheDom) {
  std::string dom_text = GetParam().body;
  std::string sax_text = GetParam().body;
  rapidjson::Document dom_doc, sax_doc;
  absl::StatusOr<ExtenderArgs> want = [&]() -> absl::StatusOr<ExtenderArgs> {
    if (absl::Status s = json::ParseInsitu(dom_text, &dom_doc); !s.ok()) return s;
    return ReadExtenderArgs(dom_doc);
  }();
  absl::StatusOr<ExtenderArgs> got = ParseExtenderArgs(sax_text, &sax_doc);
  ASSERT_EQ(got.ok(), want.ok()) << got.status() << " vs " << want.status();
  if (!want.ok()) {
    EXPECT_EQ(got.status().message(), want.status().message());
    EXPECT_EQ(json::FieldOf(got.status()), json::FieldOf(want.status()));
    EXPECT_EQ(json::HttpStatusFor(got.status()), json::HttpStatusFor(want.status()));
    return;
  }
  EXPECT_EQ(got->node_list_mode, want->node_list_mode);
  EXPECT_EQ(got->node_names, want->node_names);
  EXPECT_EQ(got->node_items.size(), want->node_items.size());
  ASSERT_NE(got->pod, nullptr);
  EXPECT_EQ(json::StringOf(*json::Find(*json::Find(*got->pod, "metadata"), "name")),
            json::StringOf(*json::Find(*json::Find(*want->pod, "metadata"), "name")));
}

const std::string kWirePod = R"({"metadata":{"name":"p","uid":"u"}})";

INSTANTIATE_TEST_SUITE_P(
    Shapes, ParseExtenderArgsTest,
    ::testing::Values(
        ArgsCase{"Names", absl::StrCat(R"({"Pod":)", kWirePod,
                                       R"(,"Nodes":null,"NodeNames":["a","b","c"]})")},
        ArgsCase{"NamesFirst", absl::StrCat(R"({"NodeNames":["a","b"],"Pod":)", kWirePod, "}")},
        ArgsCase{"Empty", absl::StrCat(R"({"Pod":)", kWirePod, R"(,"NodeNames":[]})")},
        ArgsCase{"LowerCase", absl::StrCat(R"({"pod":)", kWirePod, R"(,"nodenames":["x"]})")},
        ArgsCase{"ExactWinsOverLowerCase",
                 absl::StrCat(R"({"Pod":)", kWirePod,
                              R"(,"nodenames":["lower"],"NodeNames":["exact1","exact2"]})")},
        ArgsCase{"RepeatedKey", absl::StrCat(R"({"Pod":)", kWirePod,
                                             R"(,"NodeNames":["first"],"NodeNames":["second"]})")},
        ArgsCase{"EscapedNames",
                 absl::StrCat(R"({"Pod":)", kWirePod, R"(,"NodeNames":["node\u002da","a\"b","c\\d"]})")},
        ArgsCase{"NumberInNames",
                 absl::StrCat(R"({"Pod":)", kWirePod, R"(,"NodeNames":["a",5,"b"]})")},
        ArgsCase{"NestedInNames",
                 absl::StrCat(R"({"Pod":)", kWirePod, R"(,"NodeNames":["a",["b"],{"c":"d"}]})")},
        ArgsCase{"NullInNames", absl::StrCat(R"({"Pod":)", kWirePod, R"(,"NodeNames":[null]})")},
        ArgsCase{"NamesObject", absl::StrCat(R"({"Pod":)", kWirePod, R"(,"NodeNames":{"a":1}})")},
        ArgsCase{"NamesString", absl::StrCat(R"({"Pod":)", kWirePod, R"(,"NodeNames":"a"})")},
        ArgsCase{"NamesNullNodesList",
                 absl::StrCat(R"({"Pod":)", kWirePod,
                              R"(,"NodeNames":null,"Nodes":{"items":[{"metadata":{"name":"n1"}}]}})")},
        ArgsCase{"Both", absl::StrCat(R"({"Pod":)", kWirePod,
                                      R"(,"NodeNames":["a"],"Nodes":{"items":[]}})")},
        ArgsCase{"NamesInsidePodIgnored",
                 R"({"Pod":{"metadata":{"name":"p"},"NodeNames":["inner"]},"NodeNames":["outer"]})"},
        ArgsCase{"MissingPod", R"({"NodeNames":["a"]})"},
        ArgsCase{"RootArray", R"([{"NodeNames":["a"]}])"},
        ArgsCase{"Malformed", R"({"Pod":{},"NodeNames":["a",)"},
        ArgsCase{"TrailingGarbage", R"({"Pod":{},"NodeNames":["a"]} x)"},
        ArgsCase{"EmptyBody", ""}),
    [](const ::testing::TestParamInfo<ArgsCase>& i) { return i.param.name; });

// Names that need escapes (the checked path) and plain ones (copied as
// they are), with every list empty or not.
struct WriteCase {
  std::string name;
  std::string names_json;
  std::vector<size_t> passed;
  std::vector<std::pair<size_t, uint32_t>> failed, unresolvable;
};

class WriteFilterResultTest : public ::testing::TestWithParam<WriteCase> {};

TEST_P(WriteFilterResultTest, NamesModeMatchesTheWriterByteForByte) {
  std::string text = absl::StrCat(R"({"Pod":{"metadata":{"name":"p"}},"NodeNames":)",
                                  GetParam().names_json, "}");
  rapidjson::Document doc;
  ASSERT_OK_AND_ASSIGN(ExtenderArgs args, ParseExtenderArgs(text, &doc));
  FilterOutput out;
  out.quoted_messages = {json::Quote(""), json::Quote("why \"not\"\n")};
  out.passed = GetParam().passed;
  out.failed = GetParam().failed;
  out.unresolvable = GetParam().unresolvable;
  out.error = "";
  // What json::Writer writes for the same answer.
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  json::Key(w, "Nodes");
  w.Null();
  json::Key(w, "NodeNames");
  w.StartArray();
  for (size_t i : out.passed) json::Str(w, args.node_names[i]);
  w.EndArray();
  for (const auto* m : {&out.failed, &out.unresolvable}) {
    json::Key(w, m == &out.failed ? "FailedNodes" : "FailedAndUnresolvableNodes");
    w.StartObject();
    for (const auto& [i, why] : *m) {
      json::Key(w, args.node_names[i]);
      w.Quoted(out.quoted_messages[why]);
    }
    w.EndObject();
  }
  json::Key(w, "Error");
  json::Str(w, out.error);
  w.EndObject();
  EXPECT_EQ(WriteFilterResult(args, out), std::string(json::Output(buf)));
}

const std::string kEscapedNames =
    R"(["a","b\"q","c\\d","e\u0001f","g/h","\u00fcml"])";
const std::string kPlainNames = R"(["node-a","node-b","node-c","n.d","x","gr\u00fcn"])";

INSTANTIATE_TEST_SUITE_P(
    Cases, WriteFilterResultTest,
    ::testing::Values(
        WriteCase{"Escaped", kEscapedNames, {0, 4, 5}, {{1, 1}}, {{2, 1}, {3, 0}}},
        WriteCase{"EscapedAllPass", kEscapedNames, {0, 1, 2, 3, 4, 5}, {}, {}},
        WriteCase{"Plain", kPlainNames, {0, 4, 5}, {{1, 1}}, {{2, 1}, {3, 0}}},
        WriteCase{"PlainAllPass", kPlainNames, {0, 1, 2, 3, 4, 5}, {}, {}},
        WriteCase{"PlainNonePass", kPlainNames, {}, {{0, 1}, {1, 1}}, {{2, 1}, {3, 1}, {4, 0}, {5, 1}}},
        WriteCase{"PlainOnlyFailed", kPlainNames, {}, {{0, 1}}, {}},
        WriteCase{"PlainOnlyUnresolvable", kPlainNames, {}, {}, {{5, 1}}},
        WriteCase{"Empty", "[]", {}, {}, {}},
        // Escapes found wherever they are: last name only, around spaces,
        // an escape that leaves the next name 3 bytes away in the text.
        WriteCase{"EscapeInLastName", R"(["a","b","c\"d"])", {0, 1, 2}, {}, {}},
        WriteCase{"EscapeInFirstName", R"(["\n","b","c"])", {0, 1, 2}, {}, {}},
        WriteCase{"Spaced", R"([ "a" , "b\\c" ,"d" ])", {0, 1, 2}, {}, {}},
        WriteCase{"SpacedPlain", R"([ "a" ,"b",  "d"])", {0, 1, 2}, {}, {}},
        WriteCase{"BackslashThenName", R"(["a\\","b"])", {0, 1}, {}, {}}),
    [](const ::testing::TestParamInfo<WriteCase>& i) { return i.param.name; });

}  // namespace
}  // namespace pdc::api::testing

namespace pdc::api::testing {
namespace {

// RapidJSON's SSE2 scans read up to 15 bytes past the NUL of an in-situ
// text: those bytes must belong to the text's own allocation.
TEST(JsonInsituTest, PaddingIsOwnedByTheText) {
  for (size_t size : {0u, 1u, 15u, 16u, 17u, 4095u, 100000u}) {
    std::string text(size, ' ');
    text.shrink_to_fit();
    json::PadForInsitu(text);
    EXPECT_EQ(text.size(), size);
    EXPECT_GE(text.capacity(), size + json::kInsituPadding);
    EXPECT_EQ(text, std::string(size, ' '));
  }
  // Already padded: no reallocation (the HTTP server reserves the padding).
  std::string body = R"({"a":"b"})";
  body.reserve(body.size() + json::kInsituPadding);
  const char* data = body.data();
  rapidjson::Document doc;
  ASSERT_TRUE(json::ParseInsitu(body, &doc).ok());
  EXPECT_EQ(body.data(), data);
  EXPECT_STREQ(doc["a"].GetString(), "b");
}

}  // namespace
}  // namespace pdc::api::testing
