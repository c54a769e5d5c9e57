#!/usr/bin/env python3
"""Tests the Helm chart deploy/helm/pdc with the real helm and kubectl:

  1. `helm lint --strict` (default values and the TLS/token variants).
  2. With default values the chart renders the same objects as the kustomize
     base (`kubectl kustomize deploy/`): same kind/namespace/name set, and each
     object equal in full once Helm's bookkeeping labels (helm.sh/chart,
     app.kubernetes.io/managed-by, .../instance, .../version) are removed. A
     mismatch prints a unified diff per object.
  3. Non-default values render as they should (replicas, images, kubelet root
     dir, node selectors, device classes, TLS, the token Secret, another
     namespace), and bad values fail with a message naming the value.
  4. kubeVersion: renders for the oldest supported Kubernetes, refuses older.

    python3 tests/deploy/check_helm.py --repo DIR --kubectl DIR/.tools/bin/kubectl \\
        --helm DIR/.tools/bin/helm

Needs python3-yaml and the kubectl and helm of scripts/install-deps.sh. No
cluster. Exit 0 = passed, 1 = failures.
"""
import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_manifests as cm  # noqa: E402  (shared checks and the tool environment)

FAILURES = cm.FAILURES
check = cm.check

BOOKKEEPING = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version")
RELEASE = "pdc"


class Helm:
    def __init__(self, helm, chart):
        self.helm, self.chart = helm, chart

    def run(self, *args):
        return subprocess.run([self.helm] + list(args), capture_output=True, text=True,
                              env=cm.TOOL_ENV)

    def template(self, *sets, namespace="pdc-system", kube_version=None, values=None):
        """(objects, stderr) of `helm template`; objects None when helm failed."""
        args = ["template", RELEASE, self.chart, "--namespace", namespace, "--include-crds"]
        if kube_version:
            args += ["--kube-version", kube_version]
        if values:
            args += ["--values", values]
        for s in sets:
            args += ["--set", s]
        out = self.run(*args)
        if out.returncode != 0:
            return None, out.stderr.strip()
        return [d for d in yaml.safe_load_all(out.stdout) if d is not None], out.stderr


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, value):
    # Multi-line strings (the configuration files) as literal blocks, so that a
    # diff shows the lines that differ.
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def readable_yaml(o):
    return yaml.dump(o, Dumper=_Dumper, sort_keys=True, width=1000)


def key(o):
    return (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])


def normalised(o):
    o = json.loads(json.dumps(o))
    for field in ("labels", "annotations"):
        d = o["metadata"].get(field)
        if d is None:
            continue
        for k in BOOKKEEPING:
            d.pop(k, None)
        if not d:
            del o["metadata"][field]
    return o


def compare(base, chart, what):
    """Object by object; a readable diff for each difference."""
    b = {key(o): normalised(o) for o in base}
    c = {key(o): normalised(o) for o in chart}
    check(len(b) == len(base) and len(c) == len(chart), f"{what}: duplicate objects")
    def diff(x, y):
        return "".join(difflib.unified_diff(
            readable_yaml(x).splitlines(True), readable_yaml(y).splitlines(True),
            "kustomize base", "helm chart"))

    def unhashed(k):  # a generated ConfigMap's name without its content hash
        return (k[0], k[1], re.sub(r"-[a-z0-9]{10}$", "", k[2])) if k[0] == "ConfigMap" else k

    only_b, only_c = sorted(set(b) - set(c)), sorted(set(c) - set(b))
    for k in only_b:
        check(False, f"{what}: the chart lacks {'/'.join(x for x in k if x)}")
    for k in only_c:
        check(False, f"{what}: the chart has {'/'.join(x for x in k if x)}, the base does not")
    for kb in only_b:  # the same generated ConfigMap with other content: show how
        for kc in only_c:
            if unhashed(kb) == unhashed(kc):
                check(False, f"{what}: {kb[2]} / {kc[2]}: the content differs:\n"
                      f"{diff(b[kb], c[kc])}")
    for k in sorted(set(b) & set(c)):
        if b[k] != c[k]:
            check(False, f"{what}: {'/'.join(x for x in k if x)} differs:\n{diff(b[k], c[k])}")
    return b, c


def find(objs, kind, name):
    for o in objs or []:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    return None


def find_prefix(objs, kind, prefix):
    return [o for o in objs or [] if o["kind"] == kind and o["metadata"]["name"].startswith(prefix)]


def pod_spec(objs, kind, name):
    o = find(objs, kind, name)
    return o["spec"]["template"]["spec"] if o else None


def configs(objs):
    """(pdc.yaml, kube-scheduler-config.yaml) parsed from the rendered ConfigMaps."""
    p = find_prefix(objs, "ConfigMap", "pdc-config-")
    s = find_prefix(objs, "ConfigMap", "pdc-scheduler-config-")
    if not check(len(p) == 1 and len(s) == 1, "one pdc-config-* and one pdc-scheduler-config-*"):
        return {}, {}
    return (yaml.safe_load(p[0]["data"]["pdc.yaml"]),
            yaml.safe_load(s[0]["data"]["kube-scheduler-config.yaml"]))


def mounted_configmaps(objs):
    names = set()
    for kind, name in (("Deployment", "pdc-extender"), ("DaemonSet", "pdc-node"),
                       ("Deployment", "pdc-scheduler")):
        spec = pod_spec(objs, kind, name) or {}
        names |= {v["configMap"]["name"] for v in spec.get("volumes", []) if "configMap" in v}
    return names


def check_consistent(objs, what):
    """What must hold for any values: mounted ConfigMaps exist, volumes and
    mounts agree, TLS settings agree, resource lists agree."""
    rendered_cms = {o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"}
    check(mounted_configmaps(objs) == rendered_cms,
          f"{what}: pods mount {sorted(mounted_configmaps(objs))}, rendered {sorted(rendered_cms)}")
    for kind, name in (("Deployment", "pdc-extender"), ("DaemonSet", "pdc-node"),
                       ("Deployment", "pdc-scheduler")):
        spec = pod_spec(objs, kind, name)
        if check(spec, f"{what}: {kind}/{name} rendered"):
            mounts = {m["name"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
            check(mounts == {v["name"] for v in spec.get("volumes", [])},
                  f"{what}: {name}: volumes and volumeMounts differ")
    pdc, ksc = configs(objs)
    for p in cm.tls_problems(pdc, ksc):
        check(False, f"{what}: {p}")
    names = [c["resourceName"] for c in pdc.get("deviceClasses", [])]
    managed = [m["name"] for e in ksc.get("extenders", []) for m in e.get("managedResources", [])]
    check(names == managed, f"{what}: managedResources {managed} = deviceClasses {names}")
    vap = find(objs, "ValidatingAdmissionPolicy", "pdc-require-pdc-scheduler")
    if vap:
        expr = [v["expression"] for v in vap["spec"]["variables"] if v["name"] == "managed"]
        check(expr == ["[" + ", ".join(f"'{n}'" for n in names) + "]"],
              f"{what}: admission policy's managed list {expr} = deviceClasses {names}")
    return pdc, ksc


def sorted_volumes(ds):
    """A DaemonSet with its volumes and mounts in name order (kustomize
    prepends what a patch adds, the chart appends)."""
    d = normalised(ds)
    spec = d["spec"]["template"]["spec"]
    spec["volumes"].sort(key=lambda v: v["name"])
    for c in spec["containers"]:
        c["volumeMounts"].sort(key=lambda m: m["name"])
    return d


def check_dra(helm, args):
    """deviceClasses[].mode: dra against components/dra and the code's paths."""
    one = ["deviceClasses[0].resourceName=devices.kubevirt.io/nvme",
           "deviceClasses[0].selectors={1b36:0010,8086:5845}", "deviceClasses[0].mode=dra"]
    objs, err = helm.template(*one)
    with tempfile.TemporaryDirectory() as tmp:
        rel = os.path.relpath(os.path.join(args.repo, "deploy"), tmp)
        with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                            "kind": "Kustomization", "resources": [rel],
                            "components": [f"{rel}/components/dra"]}, f)
        base_dra = cm.kustomize(args.kubectl, tmp, "base + components/dra")
    if check(objs is not None, f"helm template (mode dra): {err}"):
        check_consistent(objs, "mode dra")
        cm.check_dra_objects(args.repo, objs, "mode dra")
        a = [o if o["kind"] != "DaemonSet" else sorted_volumes(o) for o in base_dra]
        b = [o if o["kind"] != "DaemonSet" else sorted_volumes(o) for o in objs]
        compare(a, b, "mode dra vs base + components/dra")
    # Another kubelet root: the DRA paths and node.kubeletDir move with it.
    objs, err = helm.template(*one, "node.kubeletRootDir=/var/lib/k0s/kubelet/")
    if check(objs is not None, f"helm template (mode dra, k0s): {err}"):
        pdc, _ = check_consistent(objs, "mode dra, k0s")
        check(pdc.get("node", {}).get("kubeletDir") == "/var/lib/k0s/kubelet",
              f"mode dra, k0s: node.kubeletDir {pdc.get('node', {}).get('kubeletDir')}")
        cm.check_dra_objects(args.repo, objs, "mode dra, k0s")
    # Two classes in DRA mode (one with the default driver) beside one on the
    # device plugin.
    objs, err = helm.template(
        *one, "deviceClasses[1].resourceName=example.com/gpu",
        "deviceClasses[1].selectors={10de:1eb8}", "deviceClasses[1].mode=dra",
        "deviceClasses[1].draDriverName=gpu.pdc.kubevirt.io",
        "deviceClasses[2].resourceName=example.com/fpga", "deviceClasses[2].selectors={1172:5052}")
    if check(objs is not None, f"helm template (two DRA classes): {err}"):
        check_consistent(objs, "two DRA classes")
        got = cm.check_dra_objects(args.repo, objs, "two DRA classes")
        check(got == [("devices.kubevirt.io/nvme", "nvme.pdc.kubevirt.io"),
                      ("example.com/gpu", "gpu.pdc.kubevirt.io")],
              f"two DRA classes: {got}")
    objs, err = helm.template(
        *one, "deviceClasses[1].resourceName=example.com/gpu",
        "deviceClasses[1].selectors={10de:1eb8}", "deviceClasses[1].mode=dra")
    check(objs is None and "deviceClasses[1].draDriverName" in err,
          f"two DRA classes with one driver name must be refused: "
          f"{'success' if objs is not None else err}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--kubectl", required=True)
    ap.add_argument("--helm", required=True)
    args = ap.parse_args()
    if not (cm.require_tool(args.kubectl, "kubectl") & cm.require_tool(args.helm, "helm")):
        return 1
    chart_dir = os.path.join(args.repo, "deploy", "helm", "pdc")
    helm = Helm(args.helm, chart_dir)

    # Chart.yaml as promised; kubeVersion = the README's oldest Kubernetes.
    with open(os.path.join(chart_dir, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    oldest = cm.oldest_kubernetes_minor(args.repo)
    check(chart.get("apiVersion") == "v2" and chart.get("appVersion") == "0.1.0" and
          chart.get("kubeVersion") == f">=1.{oldest}.0-0",
          f"Chart.yaml: apiVersion v2, appVersion 0.1.0, kubeVersion '>=1.{oldest}.0-0': {chart}")

    # 1. helm lint.
    for sets in ([], ["schedulerTLS.enabled=true", "schedulerTLS.clientSecretName=pdc-client",
                      "apiToken.create=true"]):
        out = helm.run("lint", "--strict", chart_dir, "--namespace", "pdc-system",
                       *[a for s in sets for a in ("--set", s)])
        check(out.returncode == 0, f"helm lint --strict {' '.join(sets)}:\n{out.stdout}{out.stderr}")

    # 2. Defaults: the same objects as the kustomize base.
    base = cm.kustomize(args.kubectl, os.path.join(args.repo, "deploy"), "deploy")
    objs, err = helm.template(kube_version=f"1.{oldest}.0")
    if check(objs is not None, f"helm template (defaults): {err}"):
        compare(base, objs, "defaults")
        check(len(objs) == len(base) and len(base) > 20,
              f"defaults: {len(objs)} chart objects, {len(base)} base objects")
        for o in objs:
            labels = o["metadata"].get("labels", {})
            if o["kind"] != "CustomResourceDefinition":  # crds/ is not templated
                check(labels.get("app.kubernetes.io/instance") == RELEASE and
                      labels.get("app.kubernetes.io/managed-by") == "Helm",
                      f"{o['kind']}/{o['metadata']['name']}: Helm's labels")
        # What ships: mutual TLS between kube-scheduler and the extender, and
        # no interface left open.
        pdc, ksc = check_consistent(objs, "defaults")
        e = (ksc.get("extenders") or [{}])[0]
        check(str(e.get("urlPrefix", "")).startswith("https://") and
              e.get("tlsConfig", {}).get("certFile") and
              pdc["extender"].get("tls", {}).get("clientCAFile") and
              "allowUnauthenticated" not in pdc["extender"],
              f"defaults: mutual TLS, nothing unauthenticated: {e}, {pdc['extender'].get('tls')}")
        # The kubelet root dir value against the kustomize component for k0s:
        # the same DaemonSet.
        k0s, err = helm.template("node.kubeletRootDir=/var/lib/k0s/kubelet")
        with tempfile.TemporaryDirectory() as tmp:
            rel = os.path.relpath(os.path.join(args.repo, "deploy"), tmp)
            with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
                yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1",
                                "kind": "Kustomization", "resources": [rel],
                                "components": [f"{rel}/components/kubelet-k0s"]}, f)
            base_k0s = cm.kustomize(args.kubectl, tmp, "base + components/kubelet-k0s")
        if check(k0s is not None, f"helm template kubeletRootDir: {err}"):
            a, b = (normalised(find(x, "DaemonSet", "pdc-node")) for x in (base_k0s, k0s))
            for d in (a, b):
                d["spec"]["template"]["spec"]["volumes"].sort(key=lambda v: v["name"])
            check(a == b, "node.kubeletRootDir=/var/lib/k0s/kubelet renders the DaemonSet of the"
                  " base with components/kubelet-k0s")

    # DRA mode: deviceClasses[].mode=dra renders what components/dra adds to
    # the base (the same objects); the defaults render nothing of it.
    if objs is not None:
        check(not [o for o in objs if o["apiVersion"].startswith("resource.k8s.io/")] and
              not find(objs, "ClusterRole", "pdc-node"),
              "defaults: no DRA object (DeviceClass, pdc-node's ClusterRole)")
    check_dra(helm, args)

    # 3. Non-default values.
    objs, err = helm.template(
        "scheduler.replicas=2", "scheduler.image.tag=v1.33.2",
        "scheduler.image.pullPolicy=Always",
        "extender.image.repository=registry.example.com/pdc/pdc-extender",
        "extender.image.tag=0.2.0", "node.image.tag=0.2.1",
        "node.image.pullPolicy=IfNotPresent",
        "node.kubeletRootDir=/var/snap/microk8s/common/var/lib/kubelet/",
        "extender.nodeSelector.node-role\\.kubernetes\\.io/control-plane=",
        "node.nodeSelector.pdc\\.kubevirt\\.io/enabled=null",
        "node.nodeSelector.vm-host=yes")
    if check(objs is not None, f"helm template (non-default): {err}"):
        sched = find(objs, "Deployment", "pdc-scheduler")
        ext = pod_spec(objs, "Deployment", "pdc-extender")
        node = pod_spec(objs, "DaemonSet", "pdc-node")
        check(sched["spec"]["replicas"] == 2, "scheduler.replicas=2")
        c = sched["spec"]["template"]["spec"]["containers"][0]
        check(c["image"] == "registry.k8s.io/kube-scheduler:v1.33.2" and
              c.get("imagePullPolicy") == "Always", f"scheduler image: {c['image']}")
        check(find(objs, "Deployment", "pdc-extender")["spec"]["replicas"] == 3,
              "the extender runs three replicas, one leader")
        c = ext["containers"][0]
        check(c["image"] == "registry.example.com/pdc/pdc-extender:0.2.0" and
              "imagePullPolicy" not in c, f"extender image: {c['image']}")
        c = node["containers"][0]
        check(c["image"] == "pdc/pdc-node:0.2.1" and c.get("imagePullPolicy") == "IfNotPresent",
              f"node image: {c['image']}")
        hp = {v["name"]: v["hostPath"]["path"] for v in node["volumes"] if "hostPath" in v}
        check(hp.get("device-plugins") ==
              "/var/snap/microk8s/common/var/lib/kubelet/device-plugins",
              f"kubeletRootDir: device-plugins hostPath {hp.get('device-plugins')}")
        check(hp.get("pod-resources") ==
              "/var/snap/microk8s/common/var/lib/kubelet/pod-resources",
              f"kubeletRootDir: pod-resources hostPath {hp.get('pod-resources')}")
        mounts = {m["name"]: m["mountPath"] for m in node["containers"][0]["volumeMounts"]}
        check(mounts.get("device-plugins") == "/var/lib/kubelet/device-plugins" and
              mounts.get("pod-resources") == "/var/lib/kubelet/pod-resources",
              "kubeletRootDir moves the hostPaths only")
        check(ext.get("nodeSelector") == {"node-role.kubernetes.io/control-plane": ""},
              f"extender.nodeSelector: {ext.get('nodeSelector')}")
        check(node.get("nodeSelector") == {"kubernetes.io/os": "linux", "vm-host": "yes"},
              f"node.nodeSelector (a default key removed with null): {node.get('nodeSelector')}")
        check(not any(o["kind"] == "PersistentVolumeClaim" for o in objs),
              "store: kubernetes needs no volume: the chart renders no PersistentVolumeClaim")
        check_consistent(objs, "non-default")

    # Device classes: three resources reach pdc.yaml, the scheduler, the
    # admission policy, and a new ConfigMap name rolls the pods.
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump({"deviceClasses": [
            {"resourceName": "devices.kubevirt.io/nvme", "selectors": ["1b36:0010"]},
            {"resourceName": "devices.kubevirt.io/fpga", "selectors": ["1172:5052", "10ee:903f"]},
            {"resourceName": "example.com/gpu", "selectors": ["10de:1eb8"]}]}, f)
        classes_file = f.name
    try:
        objs, err = helm.template(values=classes_file)
    finally:
        os.unlink(classes_file)
    if check(objs is not None, f"helm template (device classes): {err}"):
        pdc, _ = check_consistent(objs, "device classes")
        check([(c["resourceName"], c["selectors"]) for c in pdc.get("deviceClasses", [])] ==
              [("devices.kubevirt.io/nvme", ["1b36:0010"]),
               ("devices.kubevirt.io/fpga", ["1172:5052", "10ee:903f"]),
               ("example.com/gpu", ["10de:1eb8"])], f"deviceClasses: {pdc.get('deviceClasses')}")
        default_cms = {o["metadata"]["name"] for o in base if o["kind"] == "ConfigMap"}
        new_cms = {o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"}
        check(len(default_cms & new_cms) == 0, "other device classes: new ConfigMap names")

    # TLS between kube-scheduler and the extender, with mutual TLS.
    objs, err = helm.template("schedulerTLS.enabled=true", "schedulerTLS.secretName=ext-tls",
                              "schedulerTLS.clientSecretName=sched-client")
    if check(objs is not None, f"helm template (TLS): {err}"):
        pdc, ksc = check_consistent(objs, "TLS")
        e = (ksc.get("extenders") or [{}])[0]
        check(e.get("urlPrefix") == "https://pdc-extender.pdc-system.svc:8888/scheduler" and
              e.get("enableHTTPS") is True and
              e.get("tlsConfig", {}).get("caFile") == "/var/run/pdc/tls/ca.crt" and
              e["tlsConfig"].get("certFile") == "/var/run/pdc/client-tls/tls.crt",
              f"TLS: scheduler extender stanza {e}")
        check(pdc["extender"].get("tls") == {"certFile": "/var/run/pdc/tls/tls.crt",
                                             "keyFile": "/var/run/pdc/tls/tls.key",
                                             "clientCAFile": "/var/run/pdc/client-tls/ca.crt"},
              f"TLS: extender.tls {pdc['extender'].get('tls')}")
        # Every interface is authenticated now: no opt-out left.
        check("allowUnauthenticated" not in pdc["extender"],
              "mutual TLS: extender.allowUnauthenticated dropped")
        check(pdc["node"].get("extenderURL") == "https://pdc-extender.pdc-system.svc:8888" and
              pdc["node"].get("tls") == {"caFile": "/var/run/pdc/tls/ca.crt"},
              f"TLS: node {pdc['node']}")

        def secret_items(spec):
            return {v["secret"]["secretName"]: sorted(i["key"] for i in v["secret"].get("items", []))
                    for v in spec["volumes"] if "secret" in v}
        ext = pod_spec(objs, "Deployment", "pdc-extender")
        check(secret_items(ext).get("ext-tls") == ["ca.crt", "tls.crt", "tls.key"] and
              secret_items(ext).get("sched-client") == ["ca.crt"],
              f"TLS: extender mounts {secret_items(ext)}")
        for kind, name in (("DaemonSet", "pdc-node"), ("Deployment", "pdc-scheduler")):
            items = secret_items(pod_spec(objs, kind, name))
            check(items.get("ext-tls") == ["ca.crt"],
                  f"TLS: {name} mounts only ca.crt of the serving Secret: {items}")
        check(secret_items(pod_spec(objs, "Deployment", "pdc-scheduler")).get("sched-client") ==
              ["tls.crt", "tls.key"], "TLS: pdc-scheduler mounts its client certificate")
        probes = [ext["containers"][0][p]["httpGet"].get("scheme")
                  for p in ("startupProbe", "readinessProbe", "livenessProbe")]
        check(probes == ["HTTPS"] * 3, f"TLS: extender probes use HTTPS: {probes}")

    # Plain HTTP, the opt-out: the scheduler verbs are then open, and the
    # configuration says so.
    objs, err = helm.template("schedulerTLS.enabled=false", "schedulerTLS.clientSecretName=")
    if check(objs is not None, f"helm template (plain HTTP): {err}"):
        pdc, ksc = check_consistent(objs, "plain HTTP")
        check(pdc["extender"].get("allowUnauthenticated") is True and "tls" not in pdc["extender"]
              and ksc["extenders"][0]["urlPrefix"].startswith("http://"),
              f"plain HTTP: {pdc['extender']}")

    # The token Secret, and another namespace.
    objs, err = helm.template("apiToken.create=true", "apiToken.secretName=my-token",
                              namespace="virt-devices")
    if check(objs is not None, f"helm template (token, namespace): {err}"):
        sec = find(objs, "Secret", "my-token")
        check(sec and sec["metadata"]["namespace"] == "virt-devices" and
              len(sec["data"].get("token", "")) >= 64, f"apiToken.create: {sec}")
        ext = pod_spec(objs, "Deployment", "pdc-extender")
        check({"name": "api-token", "secret": {"secretName": "my-token"}} in ext["volumes"],
              "apiToken.secretName is mounted")
        pdc, ksc = check_consistent(objs, "namespace")
        check(pdc["node"]["extenderURL"] == "https://pdc-extender.virt-devices.svc:8888" and
              ksc["extenders"][0]["urlPrefix"] ==
              "https://pdc-extender.virt-devices.svc:8888/scheduler" and
              ksc["leaderElection"]["resourceNamespace"] == "virt-devices",
              "the release namespace reaches the URLs and the Lease")
        check(pdc["extender"]["nodeAuth"]["serviceAccount"] == "virt-devices/pdc-node",
              "the release namespace reaches extender.nodeAuth.serviceAccount")
        for o in objs:
            ns = o["metadata"].get("namespace")
            if o["kind"] == "RoleBinding" and ns == "kube-system":
                continue
            check(ns in (None, "virt-devices"), f"{o['kind']}/{o['metadata']['name']} in {ns}")
            for s in o.get("subjects", []):
                check(s.get("namespace") == "virt-devices", f"{o['metadata']['name']}: subject {s}")

    # Bad values fail and say which value.
    for sets, want in ((["deviceClasses=null"], "deviceClasses"),
                       (["deviceClasses[0].resourceName=a/b", "deviceClasses[0].selectors={1:2}",
                         "deviceClasses[0].mode=DRA"], "deviceClasses[0].mode"),
                       (["deviceClasses[0].resourceName=a/b", "deviceClasses[0].selectors={1:2}",
                         "deviceClasses[0].draDriverName=x.example.com"],
                        "deviceClasses[0].draDriverName needs mode: dra"),
                       (["deviceClasses[0].resourceName=x"], "deviceClasses[0]"),
                       (["schedulerTLS.enabled=true", "schedulerTLS.secretName="],
                        "schedulerTLS.secretName"),
                       (["schedulerTLS.enabled=false", "schedulerTLS.clientSecretName=x"],
                        "schedulerTLS.enabled"),
                       (["node.kubeletRootDir=var/lib/kubelet"], "node.kubeletRootDir"),
                       (["scheduler.image.tag="], "scheduler.image.tag"),
                       (["apiToken.secretName="], "apiToken.secretName")):
        objs, err = helm.template(*sets)
        check(objs is None and want in err, f"--set {' '.join(sets)}: want a failure naming"
              f" {want}, got {'success' if objs is not None else err}")

    # 4. kubeVersion: the oldest supported minor renders, the one before is refused.
    objs, err = helm.template(kube_version=f"1.{oldest - 1}.9")
    check(objs is None and "kubeVersion" in err or objs is None and "Kubernetes" in err,
          f"Kubernetes 1.{oldest - 1} must be refused by kubeVersion: {err}")

    # NOTES.txt names the next steps.
    out = helm.run("install", RELEASE, chart_dir, "--dry-run=client", "--namespace",
                   "pdc-system")
    notes = out.stdout[out.stdout.find("NOTES:"):] if "NOTES:" in out.stdout else ""
    for want in ("kubevirt-enable-pdc.py", "pdc.kubevirt.io/enabled=true",
                 "kubectl apply -f deploy/kubevirt/claim-nvme-data.yaml", "kubectl get pdc",
                 "pdcctl get devices"):
        check(want in notes, f"NOTES.txt mentions {want!r}: {out.stderr.strip()}")
    # The version skew warning: helm's own view of the cluster in a client dry
    # run is newer than 1.31, so the default kube-scheduler is too old for it;
    # a matching tag silences the warning.
    m = re.search(r"kube-scheduler v1\.\d+\.\d+ on a Kubernetes\s+1\.(\d+) control plane", notes)
    if check(m, f"NOTES.txt warns about kube-scheduler's version skew:\n{notes}"):
        out = helm.run("install", RELEASE, chart_dir, "--dry-run=client", "--namespace",
                       "pdc-system", "--set", f"scheduler.image.tag=v1.{m.group(1)}.0")
        check("NOTES:" in out.stdout and "WARNING" not in out.stdout,
              "NOTES.txt: no warning when kube-scheduler matches the control plane")

    for f in FAILURES:
        print("FAIL:", f)
    print(f"check_helm: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
