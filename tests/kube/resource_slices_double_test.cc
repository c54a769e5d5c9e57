// resource.k8s.io/v1 ResourceSlices and DeviceClasses on the kube-apiserver
// double (kube_resource_slices.h): cluster-scoped serving (no namespaced
// paths, no metadata.namespace, field selectors on spec.nodeName), and the
// validation a DRA driver's publication and a DeviceClass meet in
// kube-apiserver, one table row per rule.
#include <string>
#include <vector>

#include "tests/kube/kube_test_util.h"
#include "tests/testing/kube_resource_slices.h"

namespace pdc::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kSlicesPath[] = "/apis/resource.k8s.io/v1/resourceslices";
constexpr char kClassesPath[] = "/apis/resource.k8s.io/v1/deviceclasses";

// A valid device; `extra` is appended inside the object.
std::string SliceDevice(std::string_view name, std::string_view extra = "") {
  return Cat(R"({"name":")", name,
             R"(","attributes":{"resource.kubernetes.io/pciBusID":{"string":"0000:3b:00.0"},)",
             R"("numaNode":{"int":0},"model":{"string":"QEMU NVMe Ctrl"}},)",
             R"("capacity":{"size":{"value":"1Gi"}})", extra, "}");
}

// A slice of node `node` with `devices` (a JSON array body) and `spec_extra`
// appended inside spec.
std::string SliceJson(std::string_view name, std::string_view devices,
                      std::string_view spec_extra = R"(,"nodeName":"node-a")",
                      std::string_view pool = R"({"name":"node-a","generation":1,"resourceSliceCount":1})") {
  return Cat(R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":")",
             name, R"("},"spec":{"driver":"nvme.pdc.kubevirt.io","pool":)", pool,
             spec_extra, R"(,"devices":[)", devices, "]}}");
}

class ResourceSlicesDoubleTest : public KubeDoubleTest {
 protected:
  // Cluster-scoped: names unique to the test instead of a namespace.
  std::string Name(std::string_view base) const { return Cat(ns_, "-", base); }
};

TEST_F(ResourceSlicesDoubleTest, ServedClusterScoped) {
  const std::string a = Name("a"), b = Name("b");
  KubeReply r = Call("POST", kSlicesPath, SliceJson(a, SliceDevice("dev-0")));
  ASSERT_EQ(r.status, 201) << r.text;
  EXPECT_EQ(r.json["metadata"].FindMember("namespace"), r.json["metadata"].MemberEnd());
  // A namespace in the body is dropped, as rest.BeforeCreate does.
  std::string with_ns = SliceJson(b, SliceDevice("dev-0"), R"(,"nodeName":"node-b")",
                                  R"({"name":"node-b","generation":1,"resourceSliceCount":1})");
  with_ns.replace(with_ns.find(R"("name":")"), 0, R"("namespace":"x",)");
  r = Call("POST", kSlicesPath, with_ns);
  ASSERT_EQ(r.status, 201) << r.text;
  EXPECT_EQ(r.json["metadata"].FindMember("namespace"), r.json["metadata"].MemberEnd());

  EXPECT_EQ(Call("GET", Cat(kSlicesPath, "/", a)).status, 200);
  // There is no namespaced path of a cluster-scoped resource.
  EXPECT_EQ(Call("GET", Cat("/apis/resource.k8s.io/v1/namespaces/", ns_, "/resourceslices/", a))
                .status,
            404);
  EXPECT_EQ(Call("POST", Cat("/apis/resource.k8s.io/v1/namespaces/", ns_, "/resourceslices"),
                 SliceJson(Name("c"), SliceDevice("dev-0")))
                .status,
            404);
  // The field selector a driver lists its node's slices with.
  r = Call("GET", Cat(kSlicesPath, "?fieldSelector=spec.nodeName%3Dnode-b"));
  ASSERT_EQ(r.status, 200) << r.text;
  std::vector<std::string> names;
  for (const kube::Value& item : r.json["items"].GetArray()) {
    names.push_back(kube::GetString(item, {"metadata", "name"}));
  }
  EXPECT_THAT(names, ::testing::Contains(b));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains(a)));

  // Update with the resourceVersion read, then delete.
  r = Call("GET", Cat(kSlicesPath, "/", a));
  kube::Document d;
  d.CopyFrom(r.json, d.GetAllocator());
  kube::Set(d, {"spec", "pool", "generation"}, kube::Value(int64_t{2}), d.GetAllocator());
  r = Call("PUT", Cat(kSlicesPath, "/", a), kube::ToJson(d));
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(kube::GetInt(r.json, {"spec", "pool", "generation"}), 2);
  EXPECT_EQ(Call("PUT", Cat(kSlicesPath, "/", a), kube::ToJson(d)).status, 409);
  EXPECT_EQ(Call("DELETE", Cat(kSlicesPath, "/", a)).status, 200);
  EXPECT_EQ(Call("DELETE", Cat(kSlicesPath, "/", b)).status, 200);
  EXPECT_EQ(Call("GET", Cat(kSlicesPath, "/", a)).status, 404);
}

TEST_F(ResourceSlicesDoubleTest, SliceValidation) {
  std::string devices_129, devices_128;
  for (int i = 0; i < 129; ++i) {
    if (i > 0) devices_129 += ",";
    devices_129 += SliceDevice(Cat("dev-", i));
    if (i < 128) devices_128 = devices_129;
  }
  std::string attrs_33;
  for (int i = 0; i < 33; ++i) attrs_33 += Cat(i ? "," : "", R"("a)", i, R"(":{"int":1})");
  const std::string kPool = R"({"name":"node-a","generation":1,"resourceSliceCount":1})";
  struct Case {
    std::string what;
    std::string body;
    std::string want;  // "" = accepted
  };
  const std::vector<Case> cases = {
      {"a valid slice", SliceJson("ok", SliceDevice("dev-0")), ""},
      {"128 devices", SliceJson("ok", devices_128), ""},
      {"no devices", SliceJson("ok", ""), ""},
      {"a domain-qualified version attribute and a bool",
       SliceJson("ok", R"({"name":"d","attributes":{"example.com/fw":{"version":"1.0.0"},)"
                       R"("hot":{"bool":true}}})"),
       ""},
      {"no driver",
       Cat(R"({"metadata":{"name":"x"},"spec":{"pool":)", kPool, R"(,"nodeName":"n"}})"),
       "spec.driver: Required value"},
      {"a driver that is not a DNS subdomain",
       Cat(R"({"metadata":{"name":"x"},"spec":{"driver":"nvme_pdc","pool":)", kPool,
           R"(,"nodeName":"n"}})"),
       "spec.driver: Invalid value: \"nvme_pdc\""},
      {"a driver of 64 characters",
       Cat(R"({"metadata":{"name":"x"},"spec":{"driver":")", std::string(64, 'a'),
           R"(","pool":)", kPool, R"(,"nodeName":"n"}})"),
       "spec.driver: Too long: may not be more than 63 bytes"},
      {"no pool", R"({"metadata":{"name":"x"},"spec":{"driver":"d.example.com","nodeName":"n"}})",
       "spec.pool: Required value"},
      {"a pool without a name",
       SliceJson("x", "", R"(,"nodeName":"n")", R"({"generation":1,"resourceSliceCount":1})"),
       "spec.pool.name: Required value"},
      {"a pool name part that is not a DNS subdomain",
       SliceJson("x", "", R"(,"nodeName":"n")",
                 R"({"name":"a/B","generation":1,"resourceSliceCount":1})"),
       "spec.pool.name: Invalid value: \"B\""},
      {"resourceSliceCount 0",
       SliceJson("x", "", R"(,"nodeName":"n")", R"({"name":"a","generation":1,"resourceSliceCount":0})"),
       "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"},
      {"no resourceSliceCount",
       SliceJson("x", "", R"(,"nodeName":"n")", R"({"name":"a","generation":1})"),
       "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"},
      {"a negative generation",
       SliceJson("x", "", R"(,"nodeName":"n")", R"({"name":"a","generation":-1,"resourceSliceCount":1})"),
       "spec.pool.generation: Invalid value: -1"},
      {"no node field", SliceJson("x", "", ""),
       "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
       "`perDeviceNodeSelection` is required"},
      {"nodeName and allNodes", SliceJson("x", "", R"(,"nodeName":"n","allNodes":true)"),
       "but multiple fields are set"},
      {"an empty nodeName", SliceJson("x", "", R"(,"nodeName":"")"),
       "spec.nodeName: Invalid value: \"\": must be either unset or set to a non-empty string"},
      {"allNodes false", SliceJson("x", "", R"(,"allNodes":false)"),
       "spec.allNodes: Invalid value: false: must be either unset or set to true"},
      {"allNodes alone", SliceJson("ok", SliceDevice("dev-0"), R"(,"allNodes":true)"), ""},
      {"a node selector with two terms",
       SliceJson("x", "", R"(,"nodeSelector":{"nodeSelectorTerms":[{},{}]})"),
       "spec.nodeSelector.nodeSelectorTerms: Invalid value"},
      {"129 devices", SliceJson("x", devices_129),
       "spec.devices: Too many: 129: must have at most 128 items"},
      {"128 devices, one tainted",
       SliceJson("x", std::string(devices_128).replace(
                          devices_128.find(R"("name":"dev-0")"), 0,
                          R"("taints":[{"key":"k","effect":"NoSchedule"}],)")),
       "spec.devices: Too many: 128: must have at most 64 items"},
      {"a device name that is not a DNS label", SliceJson("x", SliceDevice("Dev.0")),
       "spec.devices[0].name: Invalid value: \"Dev.0\""},
      {"a device without a name", SliceJson("x", R"({"attributes":{}})"),
       "spec.devices[0].name: Required value"},
      {"two devices of one name",
       SliceJson("x", Cat(SliceDevice("dev-0"), ",", SliceDevice("dev-0"))),
       "spec.devices[1]: Duplicate value: \"dev-0\""},
      {"33 attributes", SliceJson("x", Cat(R"({"name":"d","attributes":{)", attrs_33, "}}")),
       "the total number of attributes and capacities must not exceed 32"},
      {"an attribute name that is not a C identifier",
       SliceJson("x", R"({"name":"d","attributes":{"numa-node":{"int":1}}})"),
       "spec.devices[0].attributes[numa-node]: Invalid value: \"numa-node\": a valid C identifier"},
      {"an attribute name of 33 characters",
       SliceJson("x", Cat(R"({"name":"d","attributes":{")", std::string(33, 'a'),
                          R"(":{"int":1}}})")),
       "Too long: may not be more than 32 bytes"},
      {"an attribute domain that is not a DNS subdomain",
       SliceJson("x", R"({"name":"d","attributes":{"ex_ample.com/a":{"int":1}}})"),
       "attributes[ex_ample.com/a]: Invalid value: \"ex_ample.com\""},
      {"an attribute with an empty domain",
       SliceJson("x", R"({"name":"d","attributes":{"/a":{"int":1}}})"),
       "the domain must not be empty"},
      {"an attribute with two values",
       SliceJson("x", R"({"name":"d","attributes":{"a":{"int":1,"string":"x"}}})"),
       "attributes[a]: Invalid value: {\"int\":1,\"string\":\"x\"}: exactly one value must be "
       "specified"},
      {"an attribute without a value", SliceJson("x", R"({"name":"d","attributes":{"a":{}}})"),
       "exactly one value must be specified"},
      {"a string attribute of 65 characters",
       SliceJson("x", Cat(R"({"name":"d","attributes":{"a":{"string":")", std::string(65, 'x'),
                          R"("}}})")),
       "attributes[a].string: Too long: may not be more than 64 bytes"},
      {"a version that is not semver",
       SliceJson("x", R"({"name":"d","attributes":{"fw":{"version":"1.2"}}})"),
       "attributes[fw].version: Invalid value: \"1.2\": must be a string compatible with "
       "semver.org spec 2.0.0"},
      {"a semver version", SliceJson("ok", R"({"name":"d","attributes":{"fw":{"version":"1.2.3-rc.1+b5"}}})"),
       ""},
      {"a capacity without a value", SliceJson("x", R"({"name":"d","capacity":{"size":{}}})"),
       "capacity[size].value: Required value"},
      {"a device nodeName without perDeviceNodeSelection",
       SliceJson("x", R"({"name":"d","nodeName":"n"})"),
       "can only be set if `perDeviceNodeSelection` is set to true"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::string body = c.body;
    // Each case its own object name.
    const std::string name = Name(Cat("v", n++));
    const size_t at = body.find(R"("metadata":{"name":")");
    ASSERT_NE(at, std::string::npos);
    const size_t start = at + std::string(R"("metadata":{"name":")").size();
    body.replace(start, body.find('"', start) - start, name);
    KubeReply r = Call("POST", kSlicesPath, body);
    if (c.want.empty()) {
      EXPECT_EQ(r.status, 201) << r.text;
      Call("DELETE", Cat(kSlicesPath, "/", name));
    } else {
      EXPECT_EQ(r.status, 422) << r.text;
      EXPECT_THAT(r.Str({"message"}),
                  HasSubstr(Cat("ResourceSlice.resource.k8s.io \"", name, "\" is invalid: ")));
      EXPECT_THAT(r.Str({"message"}), HasSubstr(c.want));
    }
  }
}

TEST_F(ResourceSlicesDoubleTest, DriverPoolAndNodeAreImmutable) {
  const std::string name = Name("s");
  ASSERT_EQ(Call("POST", kSlicesPath, SliceJson(name, SliceDevice("dev-0"))).status, 201);
  struct Case {
    std::vector<std::string_view> path;
    std::string value;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {{"spec", "driver"}, "other.example.com", "spec.driver: Invalid value: "
                                                     "\"other.example.com\": field is immutable"},
           {{"spec", "pool", "name"}, "node-b", "spec.pool.name: Invalid value: \"node-b\": "
                                                "field is immutable"},
           {{"spec", "nodeName"}, "node-b", "spec.nodeName: Invalid value: \"node-b\": field "
                                            "is immutable"}}) {
    SCOPED_TRACE(c.want);
    KubeReply got = Call("GET", Cat(kSlicesPath, "/", name));
    kube::Document d;
    d.CopyFrom(got.json, d.GetAllocator());
    if (c.path.size() == 2) {
      kube::SetString(d, {c.path[0], c.path[1]}, c.value, d.GetAllocator());
    } else {
      kube::SetString(d, {c.path[0], c.path[1], c.path[2]}, c.value, d.GetAllocator());
    }
    KubeReply r = Call("PUT", Cat(kSlicesPath, "/", name), kube::ToJson(d));
    EXPECT_EQ(r.status, 422) << r.text;
    EXPECT_THAT(r.Str({"message"}), HasSubstr(c.want));
  }
  Call("DELETE", Cat(kSlicesPath, "/", name));
}

TEST_F(ResourceSlicesDoubleTest, DeviceClassValidation) {
  auto cls = [](std::string_view selectors) {
    return Cat(R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"x"},)",
               R"("spec":{"selectors":)", selectors, "}}");
  };
  std::string sel_33 = "[";
  for (int i = 0; i < 33; ++i) sel_33 += Cat(i ? "," : "", R"({"cel":{"expression":"true"}})");
  sel_33 += "]";
  struct Case {
    std::string what;
    std::string body;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"the driver selector of deploy/",
       cls(R"([{"cel":{"expression":"device.driver == \"nvme.pdc.kubevirt.io\""}}])"), ""},
      {"no spec", R"({"metadata":{"name":"x"}})", ""},
      {"a selector without cel", cls(R"([{}])"), "spec.selectors[0].cel: Required value"},
      {"an empty expression", cls(R"([{"cel":{"expression":""}}])"),
       "spec.selectors[0].cel.expression: Required value"},
      {"an expression over 10 KiB",
       cls(Cat(R"([{"cel":{"expression":")", std::string(10 * 1024 + 1, 'x'), R"("}}])")),
       "spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes"},
      {"33 selectors", cls(sel_33), "spec.selectors: Too many: 33: must have at most 32 items"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string name = Name(Cat("class", n++));
    std::string body = c.body;
    body.replace(body.find(R"("name":"x")"), 10, Cat(R"("name":")", name, R"(")"));
    KubeReply r = Call("POST", kClassesPath, body);
    if (c.want.empty()) {
      EXPECT_EQ(r.status, 201) << r.text;
      EXPECT_EQ(r.json["metadata"].FindMember("namespace"), r.json["metadata"].MemberEnd());
      EXPECT_EQ(Call("GET", Cat(kClassesPath, "/", name)).status, 200);
      EXPECT_EQ(Call("DELETE", Cat(kClassesPath, "/", name)).status, 200);
    } else {
      EXPECT_EQ(r.status, 422) << r.text;
      EXPECT_THAT(r.Str({"message"}),
                  HasSubstr(Cat("DeviceClass.resource.k8s.io \"", name, "\" is invalid: ")));
      EXPECT_THAT(r.Str({"message"}), HasSubstr(c.want));
    }
  }
}

}  // namespace
}  // namespace pdc::testing
