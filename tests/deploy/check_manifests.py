#!/usr/bin/env python3
"""Static checks of deploy/: every file parses, the kustomize bases render
with the real kubectl, the KubeSchedulerConfiguration uses exactly the v1
field names, and the pieces agree with each other and with the code (metric
names, config fields, resource names, paths, ports).

    python3 tests/deploy/check_manifests.py --repo DIR --kubectl DIR/.tools/bin/kubectl
    python3 tests/deploy/check_manifests.py --write-prometheusrule

Needs: python3-yaml (Debian) and the kubectl of scripts/install-deps.sh
(kustomize built in), passed with --kubectl; never one from PATH. No cluster.
Exit status 0 = all checks passed; 1 = failures (each printed).
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import urllib.parse

import yaml

FAILURES = []


def check(cond, message):
    if not cond:
        FAILURES.append(message)
    return cond


# --- k8s.io/kube-scheduler/config/v1 (types.go), JSON names of every field --
# Derived from the Go types' json tags (kubernetes/kubernetes,
# staging/src/k8s.io/kube-scheduler/config/v1/types.go and
# staging/src/k8s.io/component-base/config/v1alpha1/types.go). kube-scheduler
# decodes its configuration strictly: any other key is a start-up error.
# A dict value describes a nested object; a list value [schema] a list of
# objects; None a scalar (or free-form, for pluginConfig args).
PLUGIN = {"name": None, "weight": None}
PLUGIN_SET = {"enabled": [PLUGIN], "disabled": [PLUGIN]}
PLUGINS = {k: PLUGIN_SET for k in (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
    "reserve", "permit", "preBind", "bind", "postBind", "multiPoint",
    "placementGenerate", "placementScore", "placementFeasible", "podGroupPostFilter")}
EXTENDER_TLS = {k: None for k in (
    "insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData",
    "caData")}
EXTENDER = {
    "urlPrefix": None, "filterVerb": None, "preemptVerb": None, "prioritizeVerb": None,
    "weight": None, "bindVerb": None, "enableHTTPS": None, "tlsConfig": EXTENDER_TLS,
    "httpTimeout": None, "nodeCacheCapable": None,
    "managedResources": [{"name": None, "ignoredByScheduler": None}],
    "ignorable": None,
}
KUBE_SCHEDULER_CONFIGURATION = {
    "apiVersion": None, "kind": None,
    "parallelism": None,
    "leaderElection": {k: None for k in (
        "leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
        "resourceName", "resourceNamespace")},
    "clientConnection": {k: None for k in (
        "kubeconfig", "acceptContentTypes", "contentType", "qps", "burst")},
    # DebuggingConfiguration is inlined (json:"").
    "enableProfiling": None, "enableContentionProfiling": None,
    "percentageOfNodesToScore": None, "percentageOfPlacementsToScore": None,
    "podInitialBackoffSeconds": None, "podMaxBackoffSeconds": None,
    "profiles": [{"schedulerName": None, "percentageOfNodesToScore": None,
                  "percentageOfPlacementsToScore": None, "plugins": PLUGINS,
                  "pluginConfig": [{"name": None, "args": None}]}],
    "extenders": [EXTENDER],
    "delayCacheUntilActive": None,
}


def check_keys(obj, schema, path):
    """Every key of obj must be a field of schema, recursively."""
    if schema is None:
        return
    if isinstance(schema, list):
        if check(isinstance(obj, list), f"{path}: want a list, got {type(obj).__name__}"):
            for i, item in enumerate(obj):
                check_keys(item, schema[0], f"{path}[{i}]")
        return
    if not check(isinstance(obj, dict), f"{path}: want an object, got {type(obj).__name__}"):
        return
    for key, value in obj.items():
        if check(key in schema, f"{path}.{key}: not a field of kubescheduler.config.k8s.io/v1"
                 f" (known: {', '.join(sorted(schema))})"):
            check_keys(value, schema[key], f"{path}.{key}")


def load_yaml_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def require_tool(path, name):
    """A tool of scripts/install-deps.sh (.tools/bin); missing is a failure, not a skip."""
    if path and os.path.isfile(path) and os.access(path, os.X_OK):
        return True
    print(f"FAIL: {name} not found at {path!r}: run scripts/install-deps.sh (it installs "
          f"kubectl and helm into .tools/bin); the deploy tests use only that {name}")
    return False


def kustomize(kubectl, path, what=None):
    out = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True,
                         env=TOOL_ENV)
    check(out.returncode == 0,
          f"kubectl kustomize {what or path} failed: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d is not None] \
        if out.returncode == 0 else []


# kubectl and helm must never reach a cluster or read a user's configuration
# from a test.
TOOL_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
            "KUBECONFIG": "/nonexistent/kubeconfig"}


def flatten_keys(obj, prefix=""):
    """Dotted paths of every leaf key of a YAML mapping (lists are leaves)."""
    out = set()
    for k, v in obj.items():
        p = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out |= flatten_keys(v, p + ".")
        else:
            out.add(p)
    return out


def metric_names_in_code(repo):
    """Metric names registered by pdc-extender and pdc-node, from the source."""
    names = set()
    for rel in ("extender/extender_metrics.cc", "extender/main.cc", "driver/node_metrics.cc"):
        path = os.path.join(repo, rel)
        if check(os.path.exists(path), f"{rel} is missing: cannot check metric names"):
            with open(path) as f:
                names |= set(re.findall(r'"(pdc_[a-z0-9_]+)"', f.read()))
    return names


HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names_in_promql(expr):
    """pdc_* metric names an expression selects (label values are skipped)."""
    no_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    return set(re.findall(r'\b(pdc_[a-z0-9_]+)\b', no_strings))


def base_metric(name, known):
    if name in known:
        return name
    for s in HISTOGRAM_SUFFIXES:
        if name.endswith(s) and name[: -len(s)] in known:
            return name[: -len(s)]
    return None


def render_prometheusrule(rules):
    class Literal(str):
        pass

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(
        Literal, lambda d, s: d.represent_scalar("tag:yaml.org,2002:str", s, style="|"))

    def literalize(o):
        if isinstance(o, dict):
            return {k: literalize(v) for k, v in o.items()}
        if isinstance(o, list):
            return [literalize(v) for v in o]
        if isinstance(o, str) and "\n" in o:
            return Literal(o)
        return o

    cr = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
          "metadata": {"name": "pdc", "namespace": "pdc-system",
                       "labels": {"app.kubernetes.io/part-of": "pdc"}},
          "spec": literalize(rules)}
    header = ("# The alert rules of pdc-rules.yaml as a prometheus-operator PrometheusRule.\n"
              "# Same groups, same expressions: tests/deploy/check_manifests.py fails when\n"
              "# the two differ. Regenerate after editing pdc-rules.yaml:\n"
              "#   python3 tests/deploy/check_manifests.py --write-prometheusrule\n")
    return header + yaml.dump(cr, Dumper=Dumper, sort_keys=False, width=100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("--kubectl", help="the kubectl of scripts/install-deps.sh "
                    "(REPO/.tools/bin/kubectl)")
    ap.add_argument("--write-prometheusrule", action="store_true")
    args = ap.parse_args()
    repo = args.repo
    deploy = os.path.join(repo, "deploy")

    rules_path = os.path.join(deploy, "prometheus", "pdc-rules.yaml")
    rules = load_yaml_docs(rules_path)[0]
    if args.write_prometheusrule:
        with open(os.path.join(deploy, "prometheus", "prometheusrule.yaml"), "w") as f:
            f.write(render_prometheusrule(rules))
        return 0

    if not require_tool(args.kubectl, "kubectl"):
        return 1
    kubectl = args.kubectl

    # 1. Every YAML and JSON file under deploy/ parses.
    files = sorted(glob.glob(os.path.join(deploy, "**", "*.yaml"), recursive=True))
    check(len(files) >= 15, f"expected the deploy/ YAML files, found {len(files)}")
    docs_by_file = {}
    for path in files:
        rel = os.path.relpath(path, repo)
        try:
            docs_by_file[rel] = load_yaml_docs(path)
            check(docs_by_file[rel], f"{rel}: no YAML document")
        except yaml.YAMLError as e:
            check(False, f"{rel}: does not parse: {e}")
    for path in sorted(glob.glob(os.path.join(deploy, "**", "*.json"), recursive=True)):
        try:
            with open(path) as f:
                json.load(f)
        except ValueError as e:
            check(False, f"{os.path.relpath(path, repo)}: not JSON: {e}")

    # 2. The kustomize bases render with the real kubectl.
    objs = kustomize(kubectl, deploy, "deploy")
    by_kind = {}
    for o in objs:
        by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
    expected = {
        "Namespace": ["pdc-system"],
        "CustomResourceDefinition": ["persistentdeviceclaims.pdc.kubevirt.io"],
        "ServiceAccount": ["pdc-extender", "pdc-node", "pdc-scheduler"],
        "ClusterRole": ["pdc-extender", "pdc-claims-edit", "pdc-claims-view"],
        "Deployment": ["pdc-extender", "pdc-scheduler"],
        "DaemonSet": ["pdc-node"],
        "Service": ["pdc-extender"],
        "PersistentVolumeClaim": ["pdc-extender-data"],
        "PriorityClass": ["pdc-critical"],
        "ValidatingAdmissionPolicy": ["pdc-require-pdc-scheduler"],
        "ValidatingAdmissionPolicyBinding": ["pdc-require-pdc-scheduler"],
    }
    for kind, names in expected.items():
        for n in names:
            check(n in by_kind.get(kind, {}), f"rendered base lacks {kind}/{n}")
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole",
                      "ClusterRoleBinding", "PriorityClass", "ValidatingAdmissionPolicy",
                      "ValidatingAdmissionPolicyBinding"}
    for o in objs:
        if o["kind"] not in cluster_scoped:
            check(o["metadata"].get("namespace"), f"{o['kind']}/{o['metadata']['name']}"
                  " has no namespace")
        check(o["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "pdc",
              f"{o['kind']}/{o['metadata']['name']} lacks app.kubernetes.io/part-of=pdc")
    rb = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs
          if o["kind"] == "RoleBinding"}
    check(("kube-system", "pdc-scheduler-extension-apiserver-authentication-reader") in rb,
          "the authentication-reader RoleBinding must stay in kube-system")
    prom_objs = kustomize(kubectl, os.path.join(deploy, "prometheus"), "deploy/prometheus")
    check(sorted(o["kind"] for o in prom_objs) == ["PodMonitor", "PodMonitor", "PrometheusRule"],
          "deploy/prometheus renders two PodMonitors and a PrometheusRule")

    configmaps = {n: o for n, o in by_kind.get("ConfigMap", {}).items()}
    sas = set(by_kind.get("ServiceAccount", {}))
    workloads = list(by_kind.get("Deployment", {}).values()) + \
        list(by_kind.get("DaemonSet", {}).values())
    for w in workloads:
        spec = w["spec"]["template"]["spec"]
        name = w["metadata"]["name"]
        check(spec.get("serviceAccountName") in sas, f"{name}: unknown serviceAccountName")
        check(w["spec"]["selector"]["matchLabels"].items()
              <= w["spec"]["template"]["metadata"]["labels"].items(),
              f"{name}: selector does not match the pod labels")
        for v in spec.get("volumes", []):
            if "configMap" in v:
                check(v["configMap"]["name"] in configmaps,
                      f"{name}: volume {v['name']} names a ConfigMap that is not rendered")
            if "persistentVolumeClaim" in v:
                check(v["persistentVolumeClaim"]["claimName"]
                      in by_kind.get("PersistentVolumeClaim", {}),
                      f"{name}: PVC {v['persistentVolumeClaim']['claimName']} not rendered")
        mounts = {m["name"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
        check(mounts == {v["name"] for v in spec.get("volumes", [])},
              f"{name}: volumes and volumeMounts differ")

    # 3. The pdc configuration file: only fields pdc knows (config/pdc.example.yaml
    #    lists every field), and the manifests agree with it.
    pdc_cm = [o for n, o in configmaps.items() if n.startswith("pdc-config-")]
    check(len(pdc_cm) == 1, "one generated ConfigMap pdc-config-<hash>")
    pdc = yaml.safe_load(pdc_cm[0]["data"]["pdc.yaml"]) if pdc_cm else {}
    with open(os.path.join(repo, "config", "pdc.example.yaml")) as f:
        example = yaml.safe_load(f)
    known = flatten_keys(example)
    for k in sorted(flatten_keys(pdc)):
        check(k in known or k.split(".")[0] == "deviceClasses",
              f"deploy/config/pdc.yaml: {k} is not a field of config/pdc.example.yaml")
    ext, node = pdc.get("extender", {}), pdc.get("node", {})
    resource_names = [c["resourceName"] for c in pdc.get("deviceClasses", [])]
    check(resource_names == ["devices.kubevirt.io/nvme"],
          f"deviceClasses resource names: {resource_names}")
    check(ext.get("kubernetes", {}).get("mode") == "in-cluster", "extender runs in-cluster")
    check(ext.get("store") == "file", "the cluster extender uses the durable file store")

    dep = by_kind.get("Deployment", {}).get("pdc-extender")
    svc = by_kind.get("Service", {}).get("pdc-extender")
    listen_port = int(ext.get("listen", ":0").rsplit(":", 1)[1])
    if dep and svc:
        check(dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate",
              "pdc-extender: one replica, strategy Recreate (single-writer store)")
        c = dep["spec"]["template"]["spec"]["containers"][0]
        check(c["ports"][0]["containerPort"] == listen_port,
              "pdc-extender containerPort equals extender.listen")
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        check(mounts.get(ext["dataDir"]) == "data", "extender.dataDir is the PVC mount")
        check(mounts.get(os.path.dirname(ext["tokenFile"])) == "api-token",
              "extender.tokenFile lies in the token Secret mount")
        check(c["readinessProbe"]["httpGet"]["path"] == "/readyz" and
              c["livenessProbe"]["httpGet"]["path"] == "/healthz", "extender probe paths")
        check(any(a == "--config=/etc/pdc/pdc.yaml" for a in c["args"]) and
              mounts.get("/etc/pdc") == "config", "extender reads the mounted pdc.yaml")
        check(svc["spec"]["ports"][0]["port"] == listen_port, "Service port = listen port")
    ds = by_kind.get("DaemonSet", {}).get("pdc-node")
    if ds:
        spec = ds["spec"]["template"]["spec"]
        c = spec["containers"][0]
        check(c["securityContext"].get("privileged") is True, "pdc-node is privileged")
        check(spec.get("hostPID") is True, "pdc-node sees the host's mounts (hostPID)")
        hostpaths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        check(hostpaths.get("sys") == "/sys" and mounts.get("sys") == node["sysfsRoot"],
              "hostPath /sys mounted at node.sysfsRoot")
        check(hostpaths.get("dev-vfio") == "/dev/vfio" and
              mounts.get("dev-vfio") == node["devRoot"] + "/vfio",
              "hostPath /dev/vfio mounted at node.devRoot/vfio")
        check(mounts.get("state") == node["stateDir"] and hostpaths.get("state"),
              "node.stateDir is a hostPath")
        check(spec.get("nodeSelector") and spec.get("tolerations"),
              "pdc-node has a node selector and tolerations")
        check(c["ports"][0]["containerPort"] == int(node["metricsListen"].rsplit(":", 1)[1]),
              "pdc-node metrics port = node.metricsListen")
        env = {e["name"] for e in c.get("env", [])}
        check("NODE_NAME" in env and node.get("nodeName", "") == "",
              "pdc-node takes its node name from $NODE_NAME")
        check(os.path.dirname(node["tokenFile"]) == mounts.get("api-token"),
              "node.tokenFile lies in the token Secret mount")
    svc_url = f"http://pdc-extender.pdc-system.svc:{listen_port}"
    check(node.get("extenderURL") == svc_url, f"node.extenderURL should be {svc_url}")

    # 4. KubeSchedulerConfiguration: exact v1 field names, and the choices.
    sched_cm = [o for n, o in configmaps.items() if n.startswith("pdc-scheduler-config-")]
    check(len(sched_cm) == 1, "one generated ConfigMap pdc-scheduler-config-<hash>")
    ksc = yaml.safe_load(sched_cm[0]["data"]["kube-scheduler-config.yaml"]) if sched_cm else {}
    check(ksc.get("apiVersion") == "kubescheduler.config.k8s.io/v1" and
          ksc.get("kind") == "KubeSchedulerConfiguration", "KubeSchedulerConfiguration v1")
    check_keys(ksc, KUBE_SCHEDULER_CONFIGURATION, "KubeSchedulerConfiguration")
    check(ksc.get("percentageOfNodesToScore") == 100, "percentageOfNodesToScore: 100")
    profiles = [p.get("schedulerName") for p in ksc.get("profiles", [])]
    check(profiles == ["pdc-scheduler"], f"profiles: {profiles}")
    exts = ksc.get("extenders", [])
    if check(len(exts) == 1, "exactly one extender"):
        e = exts[0]
        url = urllib.parse.urlparse(e["urlPrefix"])
        check(f"{url.scheme}://{url.netloc}" == svc_url and
              url.path == ext.get("schedulerPathPrefix"),
              f"urlPrefix {e['urlPrefix']} = Service + extender.schedulerPathPrefix")
        for verb in ("filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb"):
            check(e.get(verb) == verb[: -len("Verb")], f"{verb}: {e.get(verb)}")
        check(isinstance(e.get("weight"), int) and e["weight"] * 10 > 12 * 100,
              "weight: one extender score step must outweigh the default plugins (12 x 100)")
        check(e.get("nodeCacheCapable") is True, "nodeCacheCapable: true")
        check(e.get("ignorable") is False, "ignorable: false")
        check(re.fullmatch(r"[0-9]+(ms|s|m)", str(e.get("httpTimeout", ""))),
              "httpTimeout is a Go duration")
        managed = [m["name"] for m in e.get("managedResources", [])]
        check(managed == resource_names, f"managedResources {managed} = deviceClasses")
        check(all(isinstance(m.get("ignoredByScheduler"), bool)
                  for m in e.get("managedResources", [])),
              "ignoredByScheduler decided explicitly for every resource")
    le = ksc.get("leaderElection", {})
    roles = [o for o in objs if o["kind"] == "Role" and
             o["metadata"]["name"] == "pdc-scheduler-leader-election"]
    check(roles and le.get("resourceNamespace") == roles[0]["metadata"]["namespace"] and
          le.get("resourceName") in roles[0]["rules"][1]["resourceNames"],
          "the leader-election Lease is the one the Role grants")

    # 5. CRD: structural schema, printer columns, claim fields of the REST API.
    crd = by_kind.get("CustomResourceDefinition", {}).get("persistentdeviceclaims.pdc.kubevirt.io")
    if crd:
        v = crd["spec"]["versions"][0]
        check(crd["spec"]["group"] == "pdc.kubevirt.io" and v["name"] == "v1alpha1" and
              crd["spec"]["names"]["kind"] == "PersistentDeviceClaim", "CRD group/version/kind")
        schema = v["schema"]["openAPIV3Schema"]

        def walk(s, path):
            check("type" in s, f"CRD schema {path}: no type (not structural)")
            for k, sub in s.get("properties", {}).items():
                walk(sub, f"{path}.{k}")
            if "items" in s:
                walk(s["items"], f"{path}[]")
        walk(schema, "")
        spec_fields = set(schema["properties"]["spec"]["properties"])
        # The claim JSON of the REST API (POST /v1/namespaces/{ns}/claims), minus
        # name/namespace/uid which are metadata here.
        check(spec_fields == {"resourceName", "count", "node", "serial", "address",
                              "reclaimPolicy", "ownerVM"}, f"CRD spec fields {spec_fields}")
        status = schema["properties"]["status"]["properties"]
        check(set(status) == {"phase", "node", "devices", "lostReason", "reservedFor"},
              f"CRD status fields {set(status)}")
        check(status["phase"]["enum"] == ["Pending", "Bound", "Lost"], "phases")
        check(set(status["reservedFor"]["properties"]) == {"vm", "podName", "podUid"},
              "reservedFor fields")
        cols = {c["name"]: c["jsonPath"] for c in v["additionalPrinterColumns"]}
        for want in ("Phase", "Node", "Devices", "VM", "Age"):
            check(want in cols, f"printer column {want}")
        for name, jp in cols.items():
            node_ = {"type": "object", "properties": {"metadata": {"type": "object"},
                                                      **schema["properties"]}}
            for part in re.sub(r"\[\*\]", "", jp).strip(".").split("."):
                if part == "creationTimestamp":
                    break
                nxt = node_.get("properties", {}).get(part) or \
                    node_.get("items", {}).get("properties", {}).get(part)
                if not check(nxt is not None, f"printer column {name}: {jp} not in schema"):
                    break
                node_ = nxt

    # 6. KubeVirt examples agree with the device classes and the scheduler.
    #    (The KubeVirt CR itself: scripts/kubevirt-enable-pdc.py derives its
    #    entries from deviceClasses; tests/deploy/check_kubevirt_script.py.)
    for rel in ("deploy/kubevirt/vm-named-claim.yaml", "deploy/kubevirt/vm-template-claim.yaml"):
        vm = docs_by_file.get(rel, [{}])[0]
        tspec = vm.get("spec", {}).get("template", {})
        check(tspec.get("spec", {}).get("schedulerName") == "pdc-scheduler",
              f"{rel}: spec.template.spec.schedulerName: pdc-scheduler")
        hds = tspec.get("spec", {}).get("domain", {}).get("devices", {}).get("hostDevices", [])
        check(hds and all(h["deviceName"] in resource_names for h in hds),
              f"{rel}: hostDevices use a managed resource")
        ann = tspec.get("metadata", {}).get("annotations", {})
        if "named" in rel:
            check(ann.get("pdc.kubevirt.io/claims") == "nvme-data",
                  f"{rel}: claims annotation on the template metadata")
        else:
            check("pdc.kubevirt.io/claims" not in ann, f"{rel}: relies on the template")

    # 7. Alert rules: the PrometheusRule CR carries the same groups; every
    #    metric name in rules and dashboard is one the code registers.
    code_metrics = metric_names_in_code(repo)
    check(len(code_metrics) >= 20, f"found only {len(code_metrics)} metric names in the code")
    cr = docs_by_file.get("deploy/prometheus/prometheusrule.yaml", [{}])[0]
    check(cr.get("spec") == rules,
          "prometheusrule.yaml differs from pdc-rules.yaml (run with --write-prometheusrule)")
    exprs = []
    for g in rules["groups"]:
        for r in g["rules"]:
            exprs.append((f"alert {r.get('alert')}", r["expr"]))
            check(r.get("labels", {}).get("severity") in ("critical", "warning"),
                  f"alert {r.get('alert')}: severity")
            check(r.get("annotations", {}).get("summary") and
                  r.get("annotations", {}).get("description"),
                  f"alert {r.get('alert')}: summary and description")
    alerts = {r.get("alert") for g in rules["groups"] for r in g["rules"]}
    for want in ("PdcExtenderDown", "PdcFilterLatencyHigh", "PdcClaimsLost",
                 "PdcNodeDriverNotReporting", "PdcNodeBindFailures", "PdcHandoffStuck"):
        check(want in alerts, f"alert {want} missing")

    sys.path.insert(0, os.path.join(deploy, "dashboards"))
    import generate  # noqa: E402  (deploy/dashboards/generate.py)
    with open(os.path.join(deploy, "dashboards", "pdc.json")) as f:
        check(f.read() == generate.render(),
              "dashboards/pdc.json differs from generate.py output (run generate.py)")
    with open(os.path.join(deploy, "dashboards", "pdc.json")) as f:
        dash = json.load(f)
    ids = [p["id"] for p in dash["panels"]]
    check(len(ids) == len(set(ids)), "dashboard panel ids are unique")
    for p in dash["panels"]:
        for t in p.get("targets", []):
            exprs.append((f"panel {p['title']!r}", t["expr"]))
    used = set()
    for where, e in exprs:
        for name in metric_names_in_promql(e):
            base = base_metric(name, code_metrics)
            if check(base, f"{where}: metric {name} is not registered by pdc-extender or "
                     "pdc-node (extender_metrics.cc, extender/main.cc, node_metrics.cc)"):
                used.add(base)
    for want in ("pdc_http_requests_total", "pdc_http_request_duration_seconds",
                 "pdc_filter_nodes_total", "pdc_binds_total", "pdc_bind_rollbacks_total",
                 "pdc_claims", "pdc_devices", "pdc_node_inventory_age_seconds",
                 "pdc_node_bind_failures_total", "pdc_node_last_report_timestamp_seconds"):
        check(want in used, f"no panel or rule shows {want}")

    for f in FAILURES:
        print("FAIL:", f)
    print(f"check_manifests: {len(FAILURES)} failure(s); {len(objs)} objects rendered, "
          f"{len(files)} YAML files, {len(exprs)} PromQL expressions, "
          f"{len(used)} metrics used of {len(code_metrics)} registered")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
