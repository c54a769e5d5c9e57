#!/usr/bin/env python3
"""Tests scripts/kubevirt-enable-pdc.py: the JSON patch it writes, applied by the
real kubectl (`kubectl patch --local -f CR --type json`), only adds pdc's
feature gate and permitted host devices and keeps everything else; running it
on its own result changes nothing; stale reads are refused; conflicts are
refused with a message.

    python3 tests/deploy/check_kubevirt_script.py --repo DIR --kubectl DIR/.tools/bin/kubectl

Needs python3-yaml and the kubectl of scripts/install-deps.sh. No cluster: every
kubectl call is --local, with an empty KUBECONFIG. Exit 0 = passed, 1 = failures.
"""
import argparse
import contextlib
import copy
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile

import yaml

FAILURES = []


def check(cond, message):
    if not cond:
        FAILURES.append(message)
    return cond


GPU = {"pciVendorSelector": "10DE:1EB8", "resourceName": "nvidia.com/TU104GL_Tesla_T4"}
MDEV = {"mdevNameSelector": "GRID T4-1Q", "resourceName": "nvidia.com/GRID_T4-1Q"}
OTHER_GATES = ["LiveMigration", "Snapshot", "GPU", "CPUManager"]


def kubevirt(spec, rv="4711"):
    return {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
            "metadata": {"name": "kubevirt", "namespace": "kubevirt", "resourceVersion": rv,
                         "uid": "3c0ba2c5-0d6e-4a7e-9d1b-2f1e8f6d1a10"},
            "spec": spec}


class Env:
    def __init__(self, repo, kubectl, tmp):
        self.repo, self.kubectl, self.tmp = repo, kubectl, tmp
        self.script = os.path.join(repo, "scripts", "kubevirt-enable-pdc.py")
        self.pdc_config = os.path.join(repo, "deploy", "config", "pdc.yaml")
        # kubectl must never reach a cluster from a test.
        self.env = {"PATH": "/usr/bin:/bin", "HOME": tmp,
                    "KUBECONFIG": os.path.join(tmp, "no-kubeconfig")}
        self.n = 0

    def write(self, obj, suffix=".yaml"):
        self.n += 1
        path = os.path.join(self.tmp, f"obj{self.n}{suffix}")
        with open(path, "w") as f:
            if suffix == ".json":
                json.dump(obj, f)
            else:
                yaml.safe_dump(obj, f, sort_keys=False)
        return path

    def script_run(self, cr, *extra, pdc_config=None):
        args = [sys.executable, self.script, "--kubevirt-file", self.write(cr),
                "--pdc-config", pdc_config or self.pdc_config, "--kubectl", self.kubectl]
        return subprocess.run(args + list(extra), capture_output=True, text=True, env=self.env)

    def patch_of(self, cr, *extra, pdc_config=None):
        out = self.script_run(cr, "--print-patch", *extra, pdc_config=pdc_config)
        if not check(out.returncode == 0, f"script --print-patch failed: {out.stderr.strip()}"):
            return None
        return json.loads(out.stdout)

    def kubectl_patch(self, cr, patch):
        """(returncode, patched object or stderr) from the real kubectl."""
        out = subprocess.run(
            [self.kubectl, "patch", "--local", "-f", self.write(cr), "--type", "json",
             "--patch", json.dumps(patch), "-o", "json"],
            capture_output=True, text=True, env=self.env)
        if out.returncode != 0:
            return out.returncode, out.stderr.strip()
        return 0, json.loads(out.stdout)


def pdc_devices(repo):
    with open(os.path.join(repo, "deploy", "config", "pdc.yaml")) as f:
        conf = yaml.safe_load(f)
    return [{"pciVendorSelector": s, "resourceName": c["resourceName"],
             "externalResourceProvider": True}
            for c in conf["deviceClasses"] for s in c["selectors"]]


def enable(env, name, cr, want_gates, want_devices, pdc_config=None):
    """Runs the script on cr, applies its patch with kubectl, checks the result,
    and checks that a second run on the result is a no-op. Returns the result."""
    patch = env.patch_of(cr, pdc_config=pdc_config)
    if patch is None:
        return None
    rc, after = env.kubectl_patch(cr, patch)
    if not check(rc == 0, f"{name}: kubectl rejected the script's patch: {after}"):
        return None
    conf = after["spec"]["configuration"]
    check(conf["developerConfiguration"]["featureGates"] == want_gates,
          f"{name}: featureGates {conf['developerConfiguration']['featureGates']}, "
          f"want {want_gates}")
    check(conf["permittedHostDevices"]["pciHostDevices"] == want_devices,
          f"{name}: pciHostDevices {conf['permittedHostDevices']['pciHostDevices']}, "
          f"want {want_devices}")
    # Nothing outside the two lists changed.
    a, b = copy.deepcopy(cr), copy.deepcopy(after)
    for o in (a, b):
        c = o["spec"].setdefault("configuration", {})
        c.setdefault("developerConfiguration", {}).pop("featureGates", None)
        c.setdefault("permittedHostDevices", {}).pop("pciHostDevices", None)
        for k in ("developerConfiguration", "permittedHostDevices"):
            if not c[k]:
                del c[k]
    check(a == b, f"{name}: the patch changed more than the two lists:\n"
          f"  before {json.dumps(a, sort_keys=True)}\n  after  {json.dumps(b, sort_keys=True)}")
    # The script's own view of the result (--print-result, used for its dry-run
    # diff) is what kubectl produced.
    out = env.script_run(cr, "--print-result", pdc_config=pdc_config)
    check(out.returncode == 0 and json.loads(out.stdout) == after,
          f"{name}: --print-result differs from kubectl's result")
    # Idempotent: a second run on the result has nothing to do.
    again = env.patch_of(after, pdc_config=pdc_config)
    check(again == [], f"{name}: second run is not a no-op: {again}")
    dry = env.script_run(after, pdc_config=pdc_config)
    check(dry.returncode == 0 and "Nothing to change." in dry.stdout,
          f"{name}: second dry run should say 'Nothing to change.': {dry.stdout}{dry.stderr}")
    return after


def refused(env, name, cr, want_text, pdc_config=None):
    out = env.script_run(cr, pdc_config=pdc_config)
    check(out.returncode == 1 and want_text in out.stderr,
          f"{name}: want exit 1 with {want_text!r}, got {out.returncode}: {out.stderr.strip()}")


def cluster_path(repo, cr, pdc):
    spec = importlib.util.spec_from_file_location(
        "kubevirt_enable_pdc", os.path.join(repo, "scripts", "kubevirt-enable-pdc.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(os.path.join(repo, "deploy", "config", "pdc.yaml")) as f:
        pdc_yaml = f.read()

    def run(argv, items):
        calls = []

        def fake_kubectl(kubectl, args, stdin=None):
            calls.append(args)
            if args[:2] == ["get", "kubevirts.kubevirt.io"]:
                if len(args) > 2 and not args[2].startswith("-"):
                    return json.dumps(items[0])
                return json.dumps({"kind": "List", "items": items})
            if args[:3] == ["get", "deployment", "pdc-extender"]:
                return json.dumps({"spec": {"template": {"spec": {"volumes": [
                    {"name": "config", "configMap": {"name": "pdc-config-abc"}}]}}}})
            if args[:3] == ["get", "configmap", "pdc-config-abc"]:
                return json.dumps({"data": {"pdc.yaml": pdc_yaml}})
            if args[0] == "patch":
                with open(args[args.index("--patch-file") + 1]) as f:
                    calls[-1] = args + ["=>", json.load(f)]
                return ""
            raise mod.Refused(f"unexpected kubectl call {args}")

        mod.run_kubectl = fake_kubectl
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = mod.main(argv)
        return rc, calls, out.getvalue()

    rc, calls, out = run(["--apply", "--pdc-config-from-cluster"], [cr])
    patches = [c for c in calls if c[0] == "patch"]
    if check(rc == 0 and len(patches) == 1, f"--apply: one kubectl patch, got {calls}\n{out}"):
        p = patches[0]
        check(p[:7] == ["patch", "kubevirts.kubevirt.io", "kubevirt", "-n", "kubevirt",
                        "--type", "json"],
              f"--apply patches the fully qualified resource with a JSON patch: {p}")
        want = mod.plan(cr, pdc)[0]
        check(p[-1] == want and want, "--apply sends the planned patch")
    check(["get", "kubevirts.kubevirt.io", "-A", "-o", "json"] in calls,
          f"the CR is found with kubectl get kubevirts.kubevirt.io -A: {calls}")
    check(["get", "deployment", "pdc-extender", "-n", "pdc-system", "-o", "json"] in calls,
          "--pdc-config-from-cluster reads the installed pdc-extender")
    rc, calls, out = run(["--apply"], [])
    check(rc == 1 and "no KubeVirt CR found" in out, f"no CR: {out}")
    rc, calls, out = run(["--apply"], [cr, cr])
    check(rc == 1 and "several KubeVirt CRs" in out and not any(c[0] == "patch" for c in calls),
          f"two CRs: refused: {out}")
    rc, calls, out = run(["--apply", "--namespace", "kubevirt", "--name", "kubevirt"], [cr])
    check(rc == 0 and calls[0][:3] == ["get", "kubevirts.kubevirt.io", "kubevirt"],
          f"--namespace/--name: {calls}")
    done = mod.apply_patch(cr, mod.plan(cr, pdc)[0])
    rc, calls, out = run(["--apply"], [done])
    check(rc == 0 and "Nothing to change." in out and
          not any(c[0] == "patch" for c in calls), f"--apply on a done CR patches nothing: {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--kubectl", required=True, help="the kubectl of scripts/install-deps.sh")
    args = ap.parse_args()
    if not (os.path.isfile(args.kubectl) and os.access(args.kubectl, os.X_OK)):
        print(f"FAIL: {args.kubectl} is missing: run scripts/install-deps.sh (it installs kubectl"
              " and helm into .tools/bin)")
        return 1
    pdc = pdc_devices(args.repo)
    check(pdc, "deploy/config/pdc.yaml has device classes")

    with tempfile.TemporaryDirectory() as tmp:
        env = Env(args.repo, args.kubectl, tmp)

        # 1. Other gates and other permitted devices (PCI and mediated) survive.
        full = kubevirt({"certificateRotateStrategy": {},
                         "configuration": {
                             "developerConfiguration": {"featureGates": list(OTHER_GATES),
                                                        "memoryOvercommit": 150},
                             "permittedHostDevices": {"pciHostDevices": [GPU],
                                                      "mediatedDevices": [MDEV]},
                             "migrations": {"parallelMigrationsPerCluster": 5}}})
        after_full = enable(env, "CR with other gates and devices", full,
                            OTHER_GATES + ["HostDevices"], [GPU] + pdc)

        # 2. No developerConfiguration / permittedHostDevices, and no
        #    configuration at all.
        enable(env, "CR with an empty configuration", kubevirt({"configuration": {}}),
               ["HostDevices"], pdc)
        enable(env, "CR without configuration", kubevirt({"imagePullPolicy": "IfNotPresent"}),
               ["HostDevices"], pdc)
        enable(env, "CR with empty lists",
               kubevirt({"configuration": {"developerConfiguration": {"featureGates": []},
                                           "permittedHostDevices": {"pciHostDevices": []}}}),
               ["HostDevices"], pdc)
        enable(env, "CR with the gate but no devices",
               kubevirt({"configuration": {
                   "developerConfiguration": {"featureGates": ["HostDevices", "Snapshot"]},
                   "permittedHostDevices": {"mediatedDevices": [MDEV]}}}),
               ["HostDevices", "Snapshot"], pdc)

        # 2b. A class in DRA mode (components/dra's configuration): the
        #     HostDevicesWithDRA gate too, after HostDevices, once.
        dra_config = os.path.join(args.repo, "deploy", "components", "dra", "pdc.yaml")
        enable(env, "DRA: CR with other gates and devices", full,
               OTHER_GATES + ["HostDevices", "HostDevicesWithDRA"], [GPU] + pdc,
               pdc_config=dra_config)
        enable(env, "DRA: CR without configuration", kubevirt({}),
               ["HostDevices", "HostDevicesWithDRA"], pdc, pdc_config=dra_config)
        enable(env, "DRA: CR with HostDevices",
               kubevirt({"configuration": {
                   "developerConfiguration": {"featureGates": ["HostDevices", "Snapshot"]}}}),
               ["HostDevices", "Snapshot", "HostDevicesWithDRA"], pdc, pdc_config=dra_config)
        enable(env, "DRA: CR with both gates",
               kubevirt({"configuration": {"developerConfiguration": {
                   "featureGates": ["HostDevicesWithDRA", "HostDevices"]}}}),
               ["HostDevicesWithDRA", "HostDevices"], pdc, pdc_config=dra_config)
        refused(env, "DRA: HostDevicesWithDRA disabled",
                kubevirt({"configuration": {"developerConfiguration": {
                    "disabledFeatureGates": ["HostDevicesWithDRA"]}}}),
                "HostDevicesWithDRA is listed in developerConfiguration.disabledFeatureGates",
                pdc_config=dra_config)
        # The device plugin configuration never asks for the DRA gate.
        if after_full:
            check("HostDevicesWithDRA" not in
                  after_full["spec"]["configuration"]["developerConfiguration"]["featureGates"],
                  "device plugin classes only: no HostDevicesWithDRA gate")

        # 3. Already has pdc's entries: nothing to change, exit 0.
        if after_full:
            check(env.patch_of(after_full) == [], "CR with pdc's entries: patch is []")

        # 4. A PCI id of pdc that virt-handler serves today is taken over in place
        #    (same position, externalResourceProvider set), the rest kept.
        own = {"pciVendorSelector": pdc[0]["pciVendorSelector"].upper(),
               "resourceName": pdc[0]["resourceName"]}
        taken = enable(env, "takeover from virt-handler",
                       kubevirt({"configuration": {
                           "developerConfiguration": {"featureGates": ["Snapshot"]},
                           "permittedHostDevices": {"pciHostDevices": [GPU, own]}}}),
                       ["Snapshot", "HostDevices"],
                       [GPU, dict(own, externalResourceProvider=True)] + pdc[1:])

        # 5. The patch tests the resourceVersion and the lists: applied to a CR
        #    that changed after it was read, kubectl rejects it.
        patch = env.patch_of(full)
        if patch:
            check(patch[0] == {"op": "test", "path": "/metadata/resourceVersion",
                               "value": "4711"}, f"patch starts with a resourceVersion test: {patch[0]}")
            for p in patch:
                check(p["op"] in ("test", "add") and
                      (p["op"] != "add" or p["path"].endswith("/-")),
                      f"only tests and appends on a CR that has both lists: {p}")
            moved = copy.deepcopy(full)
            moved["metadata"]["resourceVersion"] = "4712"
            rc, err = env.kubectl_patch(moved, patch)
            check(rc != 0 and "test" in err, f"stale resourceVersion must be rejected: {err}")
            edited = copy.deepcopy(full)
            edited["spec"]["configuration"]["developerConfiguration"]["featureGates"].append("VSOCK")
            del edited["metadata"]["resourceVersion"]
            no_rv = [p for p in patch if p["path"] != "/metadata/resourceVersion"]
            rc, err = env.kubectl_patch(edited, no_rv)
            check(rc != 0 and "test" in err,
                  f"a gate list edited since the read must be rejected: {err}")

        # 6. Refusals, each with its reason.
        refused(env, "gate disabled", kubevirt({"configuration": {"developerConfiguration": {
            "disabledFeatureGates": ["HostDevices"]}}}), "disabledFeatureGates")
        refused(env, "same PCI id under another resource name", kubevirt({"configuration": {
            "permittedHostDevices": {"pciHostDevices": [
                {"pciVendorSelector": pdc[0]["pciVendorSelector"],
                 "resourceName": "example.com/other"}]}}}), "One PCI id can back only one")
        refused(env, "virt-handler serves the resource for another PCI id",
                kubevirt({"configuration": {"permittedHostDevices": {"pciHostDevices": [
                    {"pciVendorSelector": "144d:a80a",
                     "resourceName": pdc[0]["resourceName"]}]}}}),
                "only device plugin")
        empty_conf = env.write({"logLevel": "info"})
        refused(env, "no deviceClasses", full, "no deviceClasses", pdc_config=empty_conf)
        out = env.script_run({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
        check(out.returncode == 1 and "not a KubeVirt CR" in out.stderr,
              f"a non-KubeVirt object is refused: {out.stderr.strip()}")
        out = env.script_run(full, "--apply")
        check(out.returncode == 2, "--apply with --kubevirt-file is a usage error")

        # 7. Device classes of another configuration (two classes) are all permitted.
        two = env.write({"deviceClasses": [
            {"resourceName": "devices.kubevirt.io/nvme", "selectors": ["1b36:0010"]},
            {"resourceName": "devices.kubevirt.io/fpga", "selectors": ["1172:5052", "10ee:903f"]}]})
        patch = env.patch_of(full, pdc_config=two)
        if patch:
            rc, after = env.kubectl_patch(full, patch)
            if check(rc == 0, f"two classes: {after}"):
                got = after["spec"]["configuration"]["permittedHostDevices"]["pciHostDevices"]
                check([d["pciVendorSelector"] for d in got] ==
                      ["10DE:1EB8", "1b36:0010", "1172:5052", "10ee:903f"],
                      f"two classes: pciHostDevices {got}")

        # 8. --remove takes out exactly pdc's entries and keeps the gate.
        if after_full:
            patch = env.patch_of(after_full, "--remove")
            if patch:
                rc, removed = env.kubectl_patch(after_full, patch)
                if check(rc == 0, f"--remove: kubectl rejected the patch: {removed}"):
                    want = copy.deepcopy(full)
                    want["spec"]["configuration"]["developerConfiguration"]["featureGates"].append(
                        "HostDevices")
                    check(removed == want, "--remove restores the other devices and keeps the"
                          f" gate: {json.dumps(removed['spec'], sort_keys=True)}")
                    check(env.patch_of(removed, "--remove") == [], "--remove twice is a no-op")
        if taken:
            check(env.patch_of(taken) == [], "takeover result is stable")

        # 9. The dry run shows a diff and changes nothing; JSON input works too.
        out = subprocess.run([sys.executable, env.script, "--kubevirt-file",
                              env.write(full, ".json"), "--pdc-config", env.pdc_config],
                             capture_output=True, text=True, env=env.env)
        check(out.returncode == 0 and "+  - HostDevices" in out.stdout and
              "Dry run: nothing was changed" in out.stdout,
              f"dry run prints the diff: {out.stdout}{out.stderr}")

        # 10. The cluster path (no cluster here): the kubectl calls the script
        #     makes, answered by a stand-in for kubectl inside this process.
        cluster_path(args.repo, full, pdc)

    for f in FAILURES:
        print("FAIL:", f)
    print(f"check_kubevirt_script: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
