#include "config/config.h"

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/temp_dir.h"

namespace pdc {
namespace {

using ::pdc::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::optional<std::string> NoEnv(std::string_view) { return std::nullopt; }

absl::StatusOr<PdcConfig> Load(std::vector<std::string> args,
                               Component component = Component::kExtender) {
  ASSIGN_OR_RETURN(ConfigFlags flags, ParseConfigFlags(args));
  return LoadConfig(flags, component, NoEnv);
}

absl::StatusOr<PdcConfig> FromYaml(std::string_view yaml,
                                   Component component = Component::kExtender) {
  PdcConfig c;
  RETURN_IF_ERROR(ApplyYaml(yaml, "pdc.yaml", &c));
  RETURN_IF_ERROR(Validate(c, component));
  return c;
}

TEST(ConfigTest, Defaults) {
  ASSERT_OK_AND_ASSIGN(PdcConfig c, Load({}));
  EXPECT_EQ(c.extender.listen, "127.0.0.1:8888");
  EXPECT_FALSE(c.extender.allow_unauthenticated);
  EXPECT_EQ(c.extender.scheduler_path_prefix, "/scheduler");
  EXPECT_EQ(c.extender.max_body_bytes, uint64_t{16} << 20);
  EXPECT_EQ(c.extender.max_connections, 32768);
  EXPECT_EQ(c.extender.data_dir, "/var/lib/pdc");
  EXPECT_EQ(c.extender.store, StoreKind::kFile);
  EXPECT_EQ(c.extender.allocator.node_stale_after, absl::Seconds(60));
  EXPECT_EQ(c.extender.allocator.scoring, ScoringPolicy::kBinPack);
  EXPECT_EQ(c.extender.allocator.template_reclaim_policy, ReclaimPolicy::kRetain);
  // The hand-off gate ships on, and the allocator's own default is the same
  // declaration (config holds an AllocatorOptions, no copy that can drift).
  EXPECT_TRUE(c.extender.allocator.serialize_handoffs);
  EXPECT_TRUE(ToAllocatorOptions(c).serialize_handoffs);
  EXPECT_EQ(c.extender.kubernetes.mode, KubernetesMode::kNone);
  EXPECT_EQ(c.node.sysfs_root, "/sys");
  EXPECT_EQ(c.node.dev_root, "/dev");
  EXPECT_EQ(c.node.state_dir, "/var/lib/pdc-node");
  EXPECT_EQ(c.node.pod_resources_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
  ASSERT_EQ(c.device_classes.size(), 1u);
  EXPECT_EQ(c.device_classes[0].resource_name, "devices.kubevirt.io/nvme");
  EXPECT_THAT(
      c.device_classes[0].selectors,
      ::testing::ElementsAre(PciSelector{0x1b36, 0x0010, std::nullopt},
                             PciSelector{0x8086, 0x5845, std::nullopt}));
}

TEST(ConfigTest, ExampleFileShowsExactlyTheDefaults) {
  PdcConfig from_example;
  ASSERT_OK(ApplyYamlFile(PDC_EXAMPLE_CONFIG, &from_example));
  EXPECT_EQ(FormatConfigYaml(from_example), FormatConfigYaml(PdcConfig()));
}

TEST(ConfigTest, FormatRoundTrips) {
  ASSERT_OK_AND_ASSIGN(
      PdcConfig c,
      Load({"--extender.listen=127.0.0.1:9", "--extender.tokenFile=a\"b\\c",
            "--extender.maxBodyBytes=1000000", "--node.heartbeatInterval=1h30m",
            "--extender.nodeStaleAfter=2h",
            "--deviceClasses=[{resourceName: x.io/fpga, selectors: "
            "[\"10ee:9038\"], classCode: \"120000\", hostDrivers: [xdma, xclmgmt]}]"}));
  PdcConfig back;
  ASSERT_OK(ApplyYaml(FormatConfigYaml(c), "formatted", &back));
  EXPECT_EQ(FormatConfigYaml(back), FormatConfigYaml(c));
  EXPECT_EQ(back.extender.token_file, "a\"b\\c");
  EXPECT_EQ(back.node.heartbeat_interval, absl::Minutes(90));
  ASSERT_EQ(back.device_classes.size(), 1u);
  EXPECT_EQ(back.device_classes[0].selectors[0].class_code, 0x120000u);
  EXPECT_THAT(back.device_classes[0].host_drivers, ::testing::ElementsAre("xdma", "xclmgmt"));
}

TEST(ConfigTest, AClassInDraModeHasADriverName) {
  ASSERT_OK_AND_ASSIGN(
      PdcConfig c,
      FromYaml("deviceClasses:\n"
               "  - resourceName: devices.kubevirt.io/nvme\n"
               "    selectors: [\"1b36:0010\"]\n"
               "    mode: dra\n"
               "  - resourceName: example.com/fpga\n"
               "    selectors: [\"10ee:9038\"]\n"
               "    mode: dra\n"
               "    draDriverName: fpga.example.com\n"
               "    draReclaimPolicy: Retain\n"
               "  - resourceName: example.com/gpu\n"
               "    selectors: [\"10de:1eb8\"]\n"
               "    mode: devicePlugin\n"
               "node:\n  nodeName: node-1\n",
               Component::kNode));
  ASSERT_EQ(c.dra_classes.size(), 2u);
  EXPECT_EQ(c.dra_classes.at("devices.kubevirt.io/nvme").driver_name, "nvme.pdc.kubevirt.io");
  EXPECT_EQ(c.dra_classes.at("example.com/fpga").driver_name, "fpga.example.com");
  EXPECT_EQ(c.dra_classes.at("devices.kubevirt.io/nvme").reclaim_policy, ReclaimPolicy::kDelete);
  EXPECT_EQ(c.dra_classes.at("example.com/fpga").reclaim_policy, ReclaimPolicy::kRetain);
  EXPECT_FALSE(c.dra_classes.contains("example.com/gpu"));
  PdcConfig back;
  ASSERT_OK(ApplyYaml(FormatConfigYaml(c), "formatted", &back));
  EXPECT_EQ(back.dra_classes, c.dra_classes);
  EXPECT_TRUE(PdcConfig().dra_classes.empty());  // devicePlugin by default.
}

TEST(ConfigTest, DraErrorsNameTheField) {
  const std::string two = "deviceClasses:\n"
                          "  - resourceName: a.io/x\n"
                          "    selectors: [\"1b36:0010\"]\n"
                          "    mode: dra\n"
                          "  - resourceName: a.io/y\n"
                          "    selectors: [\"1b36:0011\"]\n"
                          "    mode: dra\n";
  struct Case {
    std::string yaml;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {"deviceClasses:\n  - resourceName: a.io/x\n    selectors: [\"1b36:0010\"]\n"
            "    mode: DRA\n",
            "deviceClasses[0].mode: \"DRA\" is not devicePlugin or dra"},
           {"deviceClasses:\n  - resourceName: a.io/x\n    selectors: [\"1b36:0010\"]\n"
            "    draDriverName: x.example.com\n",
            "deviceClasses[0].draDriverName: only a class in mode dra"},
           {"deviceClasses:\n  - resourceName: a.io/x\n    selectors: [\"1b36:0010\"]\n"
            "    draReclaimPolicy: Delete\n",
            "deviceClasses[0].draReclaimPolicy: only a class in mode dra"},
           {"deviceClasses:\n  - resourceName: a.io/x\n    selectors: [\"1b36:0010\"]\n"
            "    mode: dra\n    draReclaimPolicy: delete\n",
            "deviceClasses[0].draReclaimPolicy: \"delete\" is not Delete or Retain"},
           {"deviceClasses:\n  - resourceName: a.io/x\n    selectors: [\"1b36:0010\"]\n"
            "    mode: dra\n    draDriverName: Not_A.Name\n",
            "deviceClasses[0].draDriverName: \"Not_A.Name\" is not a DRA driver name"},
           {two, "deviceClasses[1].draDriverName: \"nvme.pdc.kubevirt.io\" is already the "
                 "driver of a.io/x"},
           {"node:\n  cdiDir: run/cdi\n", "node.cdiDir: \"run/cdi\" is not an absolute path"},
       }) {
    absl::StatusOr<PdcConfig> got = FromYaml(
        c.yaml.find("node:") == 0 ? c.yaml + "  nodeName: node-1\n"
                                  : c.yaml + "node:\n  nodeName: node-1\n",
        Component::kNode);
    EXPECT_THAT(got.status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.want)))
        << c.yaml;
  }
}

TEST(ConfigTest, FileThenFlagsOverride) {
  pdc::testing::TempDir dir;
  const std::string path = dir.Join("pdc.yaml");
  std::ofstream(path) << "logLevel: debug\n"
                         "extender:\n"
                         "  listen: 127.0.0.1:7000\n"
                         "  workerThreads: 8\n"
                         "  scoring: spread\n"
                         "  nodeStaleAfter: 5m\n"
                         "node:\n"
                         "  nodeName: node-a\n"
                         "deviceClasses:\n"
                         "  - resourceName: devices.kubevirt.io/nvme\n"
                         "    selectors: [1b36:0010]\n";
  ASSERT_OK_AND_ASSIGN(PdcConfig c,
                       Load({"--config=" + path, "--extender.workerThreads=16",
                             "--extender.store", "memory"}));
  EXPECT_EQ(c.log_level, "debug");                  // file
  EXPECT_EQ(c.extender.listen, "127.0.0.1:7000");   // file
  EXPECT_EQ(c.extender.worker_threads, 16);         // flag beats file
  EXPECT_EQ(c.extender.store, StoreKind::kMemory);  // flag, "--x value" form
  EXPECT_EQ(c.extender.allocator.scoring, ScoringPolicy::kSpread);
  EXPECT_EQ(c.extender.allocator.node_stale_after, absl::Minutes(5));
  EXPECT_EQ(c.node.node_name, "node-a");
  ASSERT_EQ(c.device_classes.size(), 1u);  // The file's list replaces defaults.
  EXPECT_EQ(c.device_classes[0].selectors.size(), 1u);

  AllocatorOptions o = ToAllocatorOptions(c);
  EXPECT_EQ(o.scoring, ScoringPolicy::kSpread);
  EXPECT_EQ(o.node_stale_after, absl::Minutes(5));
  EXPECT_EQ(o.device_classes.size(), 1u);
}

TEST(ConfigTest, NodeNameComesFromEnvironmentWhenUnset) {
  ASSERT_OK_AND_ASSIGN(ConfigFlags flags, ParseConfigFlags({}));
  auto env = [](std::string_view name) -> std::optional<std::string> {
    if (name == "NODE_NAME") return "worker-3";
    return std::nullopt;
  };
  ASSERT_OK_AND_ASSIGN(PdcConfig c, LoadConfig(flags, Component::kNode, env));
  EXPECT_EQ(c.node.node_name, "worker-3");

  ASSERT_OK_AND_ASSIGN(flags, ParseConfigFlags({"--node.nodeName=explicit"}));
  ASSERT_OK_AND_ASSIGN(c, LoadConfig(flags, Component::kNode, env));
  EXPECT_EQ(c.node.node_name, "explicit");

  EXPECT_THAT(Load({}, Component::kNode),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node.nodeName: empty and $NODE_NAME")));
}

// Every error names its field (and for the file, line and column).
TEST(ConfigTest, ErrorsNameTheField) {
  struct Case {
    std::string yaml;
    Component component;
    std::string want;
  };
  const Case cases[] = {
      {"deviceClasses:\n"
       "  - resourceName: devices.kubevirt.io/nvme\n"
       "    selectors: [\"1b36:0010\"]\n"
       "  - resourceName: devices.kubevirt.io/other\n"
       "    selectors: [\"1b36:00g0\"]\n",
       Component::kExtender,
       "pdc.yaml:5:17: deviceClasses[1].selectors[0]: \"1b36:00g0\" is not "
       "vendor:device in hex"},
      {"deviceClasses:\n"
       "  - resourceName: nvme\n"
       "    selectors: [\"1b36:0010\"]\n",
       Component::kExtender,
       "deviceClasses[0].resourceName: \"nvme\" is not a resource name"},
      {"deviceClasses:\n"
       "  - resourceName: a.io/x\n"
       "    selectors: [\"1b36:0010\"]\n"
       "  - resourceName: a.io/y\n"
       "    selectors: [\"1b36:0010\"]\n",
       Component::kExtender,
       "deviceClasses[1].selectors[0]: 1b36:0010 is already selected by "
       "deviceClasses[0]"},
      {"deviceClasses:\n"
       "  - resourceName: a.io/x\n"
       "    selectors: [\"1b36:0010\"]\n"
       "    classCode: 0108\n",
       Component::kExtender,
       "pdc.yaml:4:16: deviceClasses[0].classCode: \"0108\" is not a PCI class "
       "code"},
      {"deviceClasses:\n"
       "  - resourceName: a.io/x\n"
       "    selectors: [\"1b36:0010\"]\n"
       "    hostDrivers: [\"nvidia\", \"../nouveau\"]\n",
       Component::kExtender,
       "pdc.yaml:4:29: deviceClasses[0].hostDrivers[1]: \"../nouveau\" is not a kernel driver "
       "name"},
      {"deviceClasses:\n"
       "  - resourceName: a.io/x\n"
       "    selectors: [\"1b36:0010\"]\n"
       "    hostDrivers: [vfio-pci]\n",
       Component::kExtender,
       "deviceClasses[0].hostDrivers[0]: vfio-pci is where pdc-node moves devices to"},
      {"deviceClasses:\n"
       "  - resourceName: a.io/x\n"
       "    selectors: [\"1b36:0010\"]\n"
       "    hostDrivers: nvidia\n",
       Component::kExtender,
       "deviceClasses[0].hostDrivers: want a list of kernel driver names, got a value"},
      {"deviceClasses: []\n", Component::kExtender,
       "deviceClasses: at least one device class is required"},
      {"deviceClasses:\n  - resourceName: a.io/x\n    selector: []\n",
       Component::kExtender,
       "pdc.yaml:3:5: deviceClasses[0].selector: unknown field"},
      {"extender:\n  workerThreads: many\n", Component::kExtender,
       "pdc.yaml:2:18: extender.workerThreads: \"many\" is not an integer"},
      {"extender:\n  workerThreads: 0\n", Component::kExtender,
       "extender.workerThreads: must be between 1 and 1024, got 0"},
      {"extender:\n  readTimeout: 30\n", Component::kExtender,
       "pdc.yaml:2:16: extender.readTimeout: \"30\" is not a duration"},
      {"extender:\n  nodeStaleAfter: -5s\n", Component::kExtender,
       "extender.nodeStaleAfter: must be positive"},
      {"extender:\n  maxBodyBytes: 12Q\n", Component::kExtender,
       "extender.maxBodyBytes: \"12Q\" is not a size in bytes"},
      {"extender:\n  scoring: random\n", Component::kExtender,
       "pdc.yaml:2:12: extender.scoring: \"random\" is not one of binpack, "
       "spread"},
      {"extender:\n  templateReclaimPolicy: retain\n", Component::kExtender,
       "extender.templateReclaimPolicy: \"retain\" is not one of Retain, "
       "Delete"},
      {"extender:\n  listen: 8888\n", Component::kExtender,
       "extender.listen: \"8888\" is not host:port"},
      {"extender:\n  schedulerPathPrefix: scheduler\n", Component::kExtender,
       "extender.schedulerPathPrefix: \"scheduler\" must start with /"},
      {"extender:\n  tls:\n    certFile: /c.pem\n", Component::kExtender,
       "extender.tls.keyFile: required when extender.tls.certFile is set"},
      {"extender:\n  tls:\n    clientCAFile: /ca.pem\n", Component::kExtender,
       "extender.tls.clientCAFile: needs extender.tls.certFile"},
      {"extender:\n  webhook:\n    listen: 0.0.0.0:8443\n", Component::kExtender,
       "extender.webhook.certFile: required when extender.webhook.listen is set"},
      {"extender:\n  webhook:\n    listen: 0.0.0.0:8443\n    certFile: /c\n",
       Component::kExtender, "extender.webhook.keyFile: required when"},
      {"extender:\n  webhook:\n    listen: nope\n", Component::kExtender,
       "extender.webhook.listen: \"nope\" is not host:port"},
      {"extender:\n  webhook:\n    certFile: /c\n    keyFile: /k\n", Component::kExtender,
       "extender.webhook.listen: required when extender.webhook.certFile"},
      {"extender:\n  listen: 127.0.0.1:8888\n  webhook:\n    listen: 127.0.0.1:8888\n"
       "    certFile: /c\n    keyFile: /k\n",
       Component::kExtender, "the webhook needs its own port"},
      {"extender:\n  kubernetes:\n    mode: kubeconfig\n", Component::kExtender,
       "extender.kubernetes.kubeconfig: required when"},
      {"extender:\n  kubernetes:\n    mode: outside\n", Component::kExtender,
       "extender.kubernetes.mode: \"outside\" is not one of none, in-cluster, "
       "kubeconfig"},
      {"extender:\n  store: etcd\n", Component::kExtender,
       "extender.store: \"etcd\" is not one of file, memory"},
      {"logLevel: verbose\n", Component::kExtender,
       "logLevel: \"verbose\" is not one of trace"},
      {"logFormat: xml\n", Component::kExtender,
       "logFormat: \"xml\" is not one of text, json"},
      {"extender:\n  listen: [a, b]\n", Component::kExtender,
       "extender.listen: want a single value, got a list"},
      {"extender: 5\n", Component::kExtender,
       "pdc.yaml:1:11: extender: is a section"},
      {"node:\n  nodeName: Node_A\n", Component::kNode,
       "node.nodeName: \"Node_A\" is not a Kubernetes node name"},
      {"node:\n  nodeName: a\n  extenderURL: pdc:8888\n", Component::kNode,
       "node.extenderURL: \"pdc:8888\" is not an http:// or https:// URL"},
      {"node:\n  nodeName: a\n  heartbeatInterval: 90s\n", Component::kNode,
       "node.heartbeatInterval: 1m30s must be shorter than "
       "extender.nodeStaleAfter (1m)"},
      {"node:\n  nodeName: a\n  metricsListen: nope\n", Component::kNode,
       "node.metricsListen: \"nope\" is not host:port"},
      {"node:\n  nodeName: a\n  allowSriov: maybe\n", Component::kNode,
       "node.allowSriov: \"maybe\" is not one of true, false"},
      {"node:\n  nodeName: a\n  podResourcesSocket: kubelet.sock\n", Component::kNode,
       "node.podResourcesSocket: \"kubelet.sock\" is not an absolute path"},
      {"node:\n  nodeName: a\n  tls:\n    keyFile: /k.pem\n", Component::kNode,
       "node.tls.certFile: required when node.tls.keyFile is set"},
      {"extender:\n  nodeAuth:\n    serviceAccount: pdc-node\n", Component::kExtender,
       "extender.nodeAuth.serviceAccount: \"pdc-node\" is not <namespace>/<name>"},
      {"extender:\n  nodeAuth:\n    serviceAccount: Pdc/pdc-node\n", Component::kExtender,
       "extender.nodeAuth.serviceAccount namespace"},
      {"extender:\n  nodeAuth:\n    serviceAccount: pdc-system/pdc-node\n",
       Component::kExtender,
       "extender.nodeAuth.serviceAccount: needs a Kubernetes API to send TokenReviews to"},
      {"extender:\n  kubernetes:\n    mode: in-cluster\n  nodeAuth:\n"
       "    serviceAccount: pdc-system/pdc-node\n    audience: \"\"\n",
       Component::kExtender, "extender.nodeAuth.audience: required with"},
      {"extender:\n  nodeAuth:\n    cacheTTL: 2h\n", Component::kExtender,
       "extender.nodeAuth.cacheTTL: must be between 1s and 1h, got 2h"},
      {"extender:\n  nodeAuth:\n    cacheSize: 1\n", Component::kExtender,
       "extender.nodeAuth.cacheSize: must be between 16 and 1000000, got 1"},
      {"extender:\n  nodeAuth:\n    reviewTimeout: 1m\n", Component::kExtender,
       "extender.nodeAuth.reviewTimeout: must be between 100ms and 30s, got 1m"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(FromYaml(c.yaml, c.component),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.want)))
        << c.yaml;
  }
}

// The host-use check's switches (docs/operations.md): refused unless set.
TEST(ConfigTest, HostUseSwitchesDefaultToRefusing) {
  PdcConfig c;
  EXPECT_FALSE(c.node.allow_shared_nvme);
  EXPECT_FALSE(c.node.allow_sriov);
  ASSERT_OK(ApplyYaml("node:\n  allowSharedNvme: true\n  allowSriov: true\n", "pdc.yaml", &c));
  EXPECT_TRUE(c.node.allow_shared_nvme);
  EXPECT_TRUE(c.node.allow_sriov);
}

// The erase of a deleted claim's NVMe drive stays on vfio-pci unless
// switched off.
TEST(ConfigTest, EraseOnVfioDefaultsToOn) {
  PdcConfig c;
  EXPECT_TRUE(c.node.erase_on_vfio);
  ASSERT_OK(ApplyYaml("node:\n  eraseOnVfio: false\n", "pdc.yaml", &c));
  EXPECT_FALSE(c.node.erase_on_vfio);
}

TEST(ConfigTest, UnknownKeysAreRejectedWithASuggestion) {
  EXPECT_THAT(FromYaml("extender:\n  lsten: 0.0.0.0:1\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("pdc.yaml:2:3: extender.lsten: unknown field "
                                 "(did you mean \"extender.listen\"?)")));
  EXPECT_THAT(FromYaml("colour: blue\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("pdc.yaml:1:1: colour: unknown field")));
  EXPECT_THAT(FromYaml("logLevel: info\nlogLevel: debug\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("pdc.yaml:2:1: logLevel: duplicate field")));
}

TEST(ConfigTest, YamlSyntaxErrorNamesFileLineAndColumn) {
  pdc::testing::TempDir dir;
  const std::string path = dir.Join("broken.yaml");
  std::ofstream(path) << "extender:\n  listen: a\n   store: b: c\n";
  EXPECT_THAT(
      Load({"--config=" + path}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(path + ":3:9: YAML syntax error: illegal map value")));
  EXPECT_THAT(
      FromYaml("extender:\n  listen: [1, 2\n"),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("pdc.yaml:3:1: YAML syntax error: end of sequence flow")));
  EXPECT_THAT(Load({"--config=" + dir.Join("missing.yaml")}),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("missing.yaml\": No such file")));
}

TEST(ConfigTest, FlagErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string want;
  };
  const Case cases[] = {
      {{"--extender.lisen=1"},
       "unknown flag --extender.lisen (did you mean \"extender.listen\"?)"},
      {{"--verbose"}, "unknown flag --verbose"},
      {{"listen"}, "unexpected argument \"listen\""},
      {{"--extender.listen"}, "flag --extender.listen needs a value"},
      {{"--config="}, "flag --config needs a file name"},
      {{"--extender.workerThreads=x"},
       "flag --extender.workerThreads: extender.workerThreads: \"x\" is not an "
       "integer"},
      {{"--deviceClasses=[{resourceName: a.io/b, selectors: [\"zz\"]}]"},
       "flag --deviceClasses: deviceClasses[0].selectors[0]: \"zz\" is not "
       "vendor:device"},
      {{"--deviceClasses=[{"}, "flag --deviceClasses: YAML syntax error"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(Load(c.args),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.want)))
        << c.args[0];
  }
}

TEST(ConfigTest, FlagValuesAreTakenVerbatim) {
  ASSERT_OK_AND_ASSIGN(PdcConfig c, Load({"--extender.tokenFile=#not-a-comment",
                                          "--extender.listen=[::]:8888",
                                          "--extender.allowUnauthenticated=true"}));
  EXPECT_EQ(c.extender.token_file, "#not-a-comment");
  EXPECT_EQ(c.extender.listen, "[::]:8888");
}

// Every interface reachable beyond loopback is authenticated: the REST API
// by the token, the scheduler verbs by a client certificate; or the
// configuration opts out by name.
TEST(ConfigTest, ListenBeyondLoopbackNeedsEveryInterfaceAuthenticated) {
  const std::vector<std::string> token = {"--extender.tokenFile=/t"};
  const std::vector<std::string> mtls = {"--extender.tls.certFile=/c", "--extender.tls.keyFile=/k",
                                         "--extender.tls.clientCAFile=/ca"};
  auto with = [](std::string listen, std::vector<std::vector<std::string>> parts) {
    std::vector<std::string> args = {"--extender.listen=" + listen};
    for (const auto& p : parts) args.insert(args.end(), p.begin(), p.end());
    return args;
  };
  struct Case {
    std::vector<std::string> args;
    std::string error;  // "" = accepted.
  };
  const Case cases[] = {
      // Loopback: nothing required.
      {with("127.0.0.1:8888", {}), ""},
      {with("127.1.2.3:0", {}), ""},
      {with("localhost:8888", {}), ""},
      {with("LocalHost:8888", {}), ""},
      {with("[::1]:8888", {}), ""},
      {with("[::ffff:127.0.0.1]:8888", {}), ""},
      // Beyond loopback: both, or the opt-out.
      {with("0.0.0.0:8888", {token, mtls}), ""},
      {with("10.0.0.1:8888", {token, mtls}), ""},
      {with("0.0.0.0:8888", {{"--extender.allowUnauthenticated=true"}}), ""},
      {with("0.0.0.0:8888", {token, {"--extender.allowUnauthenticated=true"}}), ""},
      {with("0.0.0.0:8888", {}),
       "the REST API needs extender.tokenFile (or extender.nodeAuth); the scheduler verbs need "
       "extender.tls.clientCAFile"},
      // Node identities authenticate the REST API too.
      {with("0.0.0.0:8888", {{"--extender.nodeAuth.tokenDir=/nodes"}, mtls}), ""},
      {with("0.0.0.0:8888", {token}), "the scheduler verbs need extender.tls.clientCAFile"},
      {with("[::]:8888", {mtls}), "the REST API needs extender.tokenFile"},
      {with(":8888", {token}), "is reachable beyond loopback"},
      {with("128.0.0.1:8888", {token}), "is reachable beyond loopback"},
      {with("127.0.0.1.example.com:8888", {token}), "is reachable beyond loopback"},
      {with("pdc-extender:8888", {token}), "allowUnauthenticated: true"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PdcConfig> got = Load(c.args);
    if (c.error.empty()) {
      EXPECT_OK(got.status()) << c.args[0];
    } else {
      EXPECT_THAT(got, StatusIs(absl::StatusCode::kInvalidArgument,
                                AllOf(HasSubstr("extender.listen: "), HasSubstr(c.error))))
          << c.args[0];
    }
  }
  // pdc-node does not listen there: the rule is pdc-extender's.
  EXPECT_OK(Load({"--extender.listen=0.0.0.0:8888", "--node.nodeName=n"}, Component::kNode)
                .status());
}

TEST(ConfigTest, IsLoopbackListen) {
  EXPECT_TRUE(IsLoopbackListen("127.0.0.1:0"));
  EXPECT_TRUE(IsLoopbackListen("[0:0:0:0:0:0:0:1]:1"));
  EXPECT_FALSE(IsLoopbackListen("0.0.0.0:1"));
  EXPECT_FALSE(IsLoopbackListen("[::]:1"));
  EXPECT_FALSE(IsLoopbackListen("[::ffff:10.0.0.1]:1"));
  EXPECT_FALSE(IsLoopbackListen("host:1"));
  EXPECT_FALSE(IsLoopbackListen(":1"));
}

TEST(ConfigTest, HelpListsEveryFieldWithItsDefault) {
  ASSERT_OK_AND_ASSIGN(ConfigFlags flags, ParseConfigFlags({"--help"}));
  EXPECT_TRUE(flags.help);
  const std::string help = ConfigHelp();
  EXPECT_THAT(help, HasSubstr("--extender.listen  (default \"127.0.0.1:8888\")"));
  EXPECT_THAT(help, HasSubstr("--extender.maxBodyBytes  (default 16Mi)"));
  EXPECT_THAT(help, HasSubstr("--node.heartbeatInterval  (default \"10s\")"));
}

TEST(ConfigTest, ParsePciSelector) {
  ASSERT_OK_AND_ASSIGN(PciSelector s, ParsePciSelector("8086:5845"));
  EXPECT_EQ(s.vendor_id, 0x8086);
  EXPECT_EQ(s.device_id, 0x5845);
  EXPECT_EQ(FormatPciSelector(s), "8086:5845");
  for (const char* bad :
       {"8086-5845", "808:5845", "80865845", "8086:58451", "+086:5845", ""}) {
    EXPECT_THAT(ParsePciSelector(bad),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << bad;
  }
}

}  // namespace
}  // namespace pdc

namespace pdc {
namespace {

TEST(ConfigTest, DraKeeperIsOptInAndNeedsAKubernetesApi) {
  ASSERT_OK_AND_ASSIGN(PdcConfig c, FromYaml("extender:\n  store: memory\n"));
  EXPECT_FALSE(c.extender.dra_keeper.enabled);
  EXPECT_EQ(c.extender.dra_keeper.resync_period, absl::Minutes(5));
  EXPECT_THAT(FromYaml("extender:\n  store: memory\n  dra:\n    keeper:\n      enabled: true\n")
                  .status()
                  .message(),
              HasSubstr("extender.dra.keeper.enabled: true needs a Kubernetes API"));
  ASSERT_OK_AND_ASSIGN(
      c, FromYaml("extender:\n  store: memory\n  kubernetes:\n    mode: in-cluster\n"
                  "  dra:\n    keeper:\n      enabled: true\n      resyncPeriod: 30s\n"));
  EXPECT_TRUE(c.extender.dra_keeper.enabled);
  EXPECT_EQ(c.extender.dra_keeper.resync_period, absl::Seconds(30));
  EXPECT_THAT(FromYaml("extender:\n  store: memory\n  dra:\n    keeper:\n      resyncPeriod: 10ms\n")
                  .status()
                  .message(),
              HasSubstr("extender.dra.keeper.resyncPeriod: must be between 100ms and 24h"));
}

}  // namespace
}  // namespace pdc
