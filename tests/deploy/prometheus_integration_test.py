#!/usr/bin/env python3
"""End-to-end check of deploy/'s dashboard and alert rules against real
processes, all on loopback:

  1. builds a fake sysfs tree (fake_node_tree, from tests/driver's FakeKernel)
     and starts a real pdc-node on it (node-a) before the extender is up, so
     its error counters exist;
  2. starts a real pdc-extender with deploy/config/pdc.yaml (the shipped
     ConfigMap content; only paths, ports and Kubernetes access overridden);
  3. starts a real Prometheus (Debian package `prometheus`) scraping both
     every second, with deploy/prometheus/pdc-rules.yaml loaded;
  4. drives a short workload: acts as kube-scheduler (filter, prioritize,
     bind, preempt over the extender protocol), as a second node's driver
     (node-b, REST inventory), and as a user (claims REST API): fresh and
     sticky placements, named and template claims, insufficient devices,
     a Lost claim, a node that stops reporting, a reclaimPolicy Delete claim
     handed back, and pdc-node bind failures on devices it cannot take;
  5. feeds both /metrics outputs to `promtool check metrics`;
  6. runs every dashboard panel query and template-variable query, and every
     alert expression, through Prometheus' HTTP API; fails on any error, on
     any panel without data, on an alert expression whose result is not what
     the scenario implies, on a vector selector in a rule with no series, and
     on a rule that Prometheus itself evaluated with an error;
  7. stops pdc-extender and waits for PdcExtenderDown to become pending.

Exit 0 = pass, 1 = fail, 77 = skipped because a binary target is not built.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
TOKEN = "integration-test-token"
NODE_A_TOKEN = "integration-test-node-a-token"
RATE_INTERVAL = "1m"
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL:", msg, flush=True)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, token=None, timeout=10):
    data = None
    headers = {}
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, socket.timeout) as e:
        return 0, str(e)


def wait_for(what, pred, timeout=30.0, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


class Procs:
    """The processes this test started; stopped by pid, never by name."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = {}

    def start(self, name, argv):
        logf = open(os.path.join(self.tmp, f"{name}.log"), "wb")
        log(f"start {name}: {' '.join(argv)}")
        self.procs[name] = (subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT), logf)
        return self.procs[name][0]

    def alive(self, name):
        return self.procs[name][0].poll() is None

    def stop(self, name):
        p, logf = self.procs.pop(name)
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        logf.close()

    def stop_all(self):
        for name in list(self.procs):
            self.stop(name)

    def tail(self, name, lines=25):
        path = os.path.join(self.tmp, f"{name}.log")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        return ""


# --- the kube-scheduler side of the extender protocol ------------------------
def pod(vm, uid, nvme=1, claims=None):
    res = {"cpu": "100m", "memory": "2294Mi", "devices.kubevirt.io/kvm": "1"}
    lim = {"devices.kubevirt.io/kvm": "1"}
    if nvme:
        res["devices.kubevirt.io/nvme"] = lim["devices.kubevirt.io/nvme"] = str(nvme)
    ann = {"kubevirt.io/domain": vm}
    if claims:
        ann["pdc.kubevirt.io/claims"] = claims
    return {
        "metadata": {"name": f"virt-launcher-{vm}-{uid[:5]}", "namespace": "default",
                     "uid": uid, "labels": {"kubevirt.io": "virt-launcher",
                                            "vm.kubevirt.io/name": vm},
                     "annotations": ann},
        "spec": {"containers": [{"name": "compute",
                                 "resources": {"requests": res, "limits": lim}}],
                 "schedulerName": "pdc-scheduler"},
        "status": {"phase": "Pending"},
    }


class Scheduler:
    def __init__(self, base, prefix):
        self.base = base
        self.url = base + prefix

    def call(self, verb, args):
        code, body = http("POST", f"{self.url}/{verb}", args)
        if code != 200:
            fail(f"{verb}: HTTP {code}: {body[:300]}")
            return {}
        return json.loads(body)

    def filter(self, p, nodes):
        return self.call("filter", {"Pod": p, "Nodes": None, "NodeNames": nodes})

    def schedule(self, p, nodes, pick, expect_error=False):
        """filter -> prioritize -> bind, as kube-scheduler does; returns the
        filter result."""
        f = self.filter(p, nodes)
        ok = f.get("NodeNames") or []
        if pick not in ok:
            fail(f"filter of {p['metadata']['name']}: {pick} not feasible: {f}")
            return f
        self.call("prioritize", {"Pod": p, "Nodes": None, "NodeNames": ok})
        b = self.call("bind", {"PodName": p["metadata"]["name"], "PodNamespace": "default",
                               "PodUID": p["metadata"]["uid"], "Node": pick})
        if bool(b.get("Error")) != expect_error:
            fail(f"bind of {p['metadata']['name']} to {pick}: {b}")
        if not expect_error:
            self.hand_off(p["metadata"]["uid"], pick)
        return f

    def hand_off(self, uid, node):
        """What kubelet's Allocate and pdc-node's device plugin do once the
        pod lands (no kubelet here): confirm the hand-off, which opens the
        extender's per-node gate for the next VM pod."""
        code, body = http("GET", f"{self.base}/v1/nodes/{node}/handoffs", token=TOKEN)
        if code != 200:
            fail(f"GET {node} handoffs: HTTP {code}: {body[:300]}")
            return
        for item in json.loads(body).get("items") or []:
            if item.get("podUid") != uid:
                continue
            check_code(f"confirm hand-off of {uid}", http(
                "POST", f"{self.base}/v1/nodes/{node}/handoffs",
                {"podUid": uid, "resourceName": item["resourceName"], "devices": item["devices"]},
                token=TOKEN), 200)


def nvme(address, group, serial, driver="vfio-pci"):
    return {"address": address, "vendor": "1b36", "device": "0010", "class": "010802",
            "iommuGroup": group, "numaNode": 0, "serial": serial, "driver": driver,
            "healthy": True}


# --- Prometheus -----------------------------------------------------------------
class Prom:
    def __init__(self, base):
        self.base = base

    def api(self, path, **params):
        code, body = http("GET", f"{self.base}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}",
                          timeout=20)
        try:
            doc = json.loads(body)
        except ValueError:
            return None, f"HTTP {code}: {body[:200]}"
        if doc.get("status") != "success":
            return None, f"{doc.get('errorType')}: {doc.get('error')}"
        return doc["data"], None

    def query(self, expr):
        return self.api("query", query=expr)

    def query_range(self, expr, seconds, step="2s"):
        now = time.time()
        return self.api("query_range", query=expr, start=f"{now - seconds:.3f}",
                        end=f"{now:.3f}", step=step)


def has_data(data):
    if data is None:
        return False
    r = data.get("result")
    return bool(r) if isinstance(r, list) else r is not None


def substitute(expr, variables):
    expr = expr.replace("$__rate_interval", RATE_INTERVAL)
    for name, value in sorted(variables.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    if "$" in expr:
        fail(f"unresolved variable in {expr}")
    return expr


VECTOR_SELECTOR = re.compile(r'\b((?:pdc_[a-z0-9_]+|up)\{[^}]*\})')


def check_json_logs(tmp, programs):
    """With the shipped logFormat: json, every line both programs wrote is one JSON object
    naming the program (pdc-node once ignored the setting and wrote text)."""
    for name in programs:
        path = os.path.join(tmp, f"{name}.log")
        with open(path, errors="replace") as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        if not lines:
            fail(f"{name} wrote no log line")
        for i, line in enumerate(lines, 1):
            if name == "pdc-extender" and line.startswith("pdc-extender listening on "):
                continue  # stdout's one line for whoever started it, not a log line
            try:
                obj = json.loads(line)
            except ValueError:
                fail(f"{name}.log line {i} is not JSON although logFormat is json: {line[:200]}")
                break
            if obj.get("logger") != name or not {"time", "level", "msg"} <= obj.keys():
                fail(f"{name}.log line {i} lacks logger={name}, time, level or msg: {line[:200]}")
                break


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--extender", default="")
    ap.add_argument("--node", default="")
    ap.add_argument("--fake-tree", default="")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = ap.parse_args()
    for what, path in (("pdc-extender", args.extender), ("pdc-node", args.node),
                       ("deploy_fake_node_tree", args.fake_tree)):
        if not path or not os.access(path, os.X_OK):
            print(f"SKIP: binary target {what} is not built ({path!r})")
            return SKIP
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            print(f"FAIL: {tool} not found; install the Debian package: apt-get install prometheus")
            return 1

    tmp = tempfile.mkdtemp(prefix="pdc-deploy-it-")
    procs = Procs(tmp)
    try:
        run(args, tmp, procs)
    except Exception as e:  # Reported with the processes' logs below.
        fail(f"{type(e).__name__}: {e}")
    finally:
        if FAILURES:
            for name in ("pdc-extender", "pdc-node", "prometheus"):
                print(f"---- last lines of {name}.log ----\n{procs.tail(name)}")
        procs.stop_all()
        check_json_logs(tmp, ("pdc-extender", "pdc-node"))
        if args.keep or FAILURES:
            print(f"logs and data kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"prometheus_integration_test: {len(FAILURES)} failure(s)")
    return 1 if FAILURES else 0


def run(args, tmp, procs):
    repo = os.path.abspath(args.repo)  # Prometheus resolves rule_files from its config's dir.
    config = os.path.join(repo, "deploy", "config", "pdc.yaml")
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write(TOKEN + "\n")
    # pdc-node's own identity: with no Kubernetes API here (no TokenReview),
    # the per-node token fallback, extender.nodeAuth.tokenDir.
    node_tokens = os.path.join(tmp, "node-tokens")
    os.makedirs(node_tokens)
    with open(os.path.join(node_tokens, "node-a"), "w") as f:
        f.write(NODE_A_TOKEN + "\n")
    node_token = os.path.join(tmp, "node-a-token")
    with open(node_token, "w") as f:
        f.write(NODE_A_TOKEN + "\n")
    ext_port, node_port, prom_port = free_port(), free_port(), free_port()
    ext = f"http://127.0.0.1:{ext_port}"
    node_metrics = f"http://127.0.0.1:{node_port}/metrics"

    # 1. Fake node tree and pdc-node, before the extender exists.
    tree = os.path.join(tmp, "node-a")
    os.makedirs(tree)
    subprocess.run([args.fake_tree, tree, f"{tmp}/node-state"], check=True, capture_output=True)
    procs.start("pdc-node", [
        args.node, f"--config={config}",  # the shipped logFormat: json
        "--node.nodeName=node-a", f"--node.extenderURL={ext}",
        f"--node.sysfsRoot={tree}/sys", f"--node.devRoot={tree}/dev",
        f"--node.procRoot={tree}/proc",
        f"--node.stateDir={tmp}/node-state", f"--node.metricsListen=127.0.0.1:{node_port}",
        "--node.heartbeatInterval=1s", f"--node.tokenFile={node_token}", "--node.tls.caFile=",
        # The fake tree has no NVMe controller to answer Identify (CMIC/NMIC).
        "--node.allowSharedNvme=true",
        "--device-plugin=false"])  # No kubelet here: the test confirms hand-offs.
    wait_for("pdc-node to count a failed inventory report", lambda: (
        procs.alive("pdc-node") or (_ for _ in ()).throw(RuntimeError("pdc-node exited"))) and
        'pdc_node_extender_errors_total{operation="inventory"}' in http("GET", node_metrics)[1])

    # 2. pdc-extender with the shipped configuration.
    procs.start("pdc-extender", [
        args.extender, f"--config={config}",  # the shipped logFormat: json
        f"--extender.listen=127.0.0.1:{ext_port}", "--extender.store=file",
        f"--extender.dataDir={tmp}/extender-data",
        "--extender.kubernetes.mode=none", f"--extender.tokenFile={token}",
        # TokenReviews need the Kubernetes API: node-a's token is a file.
        "--extender.nodeAuth.serviceAccount=", f"--extender.nodeAuth.tokenDir={node_tokens}",
        # The admission webhook needs its TLS Secret and a Kubernetes API;
        # the listener's TLS its Secrets (loopback needs no authentication).
        "--extender.webhook.listen=", "--extender.webhook.certFile=",
        "--extender.webhook.keyFile=", "--extender.tls.certFile=", "--extender.tls.keyFile=",
        "--extender.tls.clientCAFile=",
        # Replicas with a leader need the Kubernetes API store.
        "--extender.leaderElection.enabled=false",
        "--extender.nodeStaleAfter=4s"])
    wait_for("pdc-extender /readyz", lambda: (
        procs.alive("pdc-extender") or (_ for _ in ()).throw(RuntimeError("pdc-extender exited")))
        and http("GET", ext + "/readyz")[0] == 200)
    check_code("GET /healthz", http("GET", ext + "/healthz"), 200)

    def node_a_reporting():
        code, body = http("GET", ext + "/v1/nodes/node-a", token=TOKEN)
        return code == 200 and json.loads(body).get("reporting") and \
            len(json.loads(body).get("devices", [])) == 4
    wait_for("node-a's 4 devices in the extender", node_a_reporting)

    # 3. Prometheus scraping both, with the shipped rules.
    prom_cfg = os.path.join(tmp, "prometheus.yml")
    with open(prom_cfg, "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {os.path.join(repo, 'deploy', 'prometheus', 'pdc-rules.yaml')}
scrape_configs:
  - job_name: pdc-extender
    static_configs: [{{targets: ["127.0.0.1:{ext_port}"]}}]
  - job_name: pdc-node
    static_configs: [{{targets: ["127.0.0.1:{node_port}"], labels: {{node: node-a}}}}]
""")
    procs.start("prometheus", [
        "prometheus", f"--config.file={prom_cfg}", f"--storage.tsdb.path={tmp}/prom",
        f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"])
    prom = Prom(f"http://127.0.0.1:{prom_port}")
    wait_for("prometheus ready", lambda: http("GET", prom.base + "/-/ready")[0] == 200)
    wait_for("first scrapes", lambda: len((prom.query("up == 1")[0] or {}).get("result", [])) == 2,
             timeout=30)

    # 4. Workload.
    workload(ext, procs)
    # The node must have acted on its allocations: bind failures for 03/04,
    # a failed restore of 02 (the static tree cannot move it off vfio-pci),
    # and 03's erase held for an administrator (no journal entry names the
    # drive that held the deleted claim's data). (Its allocation polls back
    # off up to 30s after errors, hence the generous wait.)
    for series in ('pdc_node_bind_failures_total{operation="bind"',
                   'pdc_node_bind_failures_total{operation="restore"',
                   'pdc_node_bind_failures_total{operation="erase",reason="erase_identity_unknown"'):
        wait_for(f"pdc-node to export {series}...}}",
                 lambda: series in http("GET", node_metrics)[1], timeout=90, interval=0.5)

    # 5. promtool check metrics on the live outputs.
    for name, url in (("pdc-extender", ext + "/metrics"), ("pdc-node", node_metrics)):
        code, text = http("GET", url)
        check_code(f"GET {name} /metrics", (code, text), 200)
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True)
        log(f"promtool check metrics {name}: exit {p.returncode} "
            f"({len(text.splitlines())} lines) {p.stdout.strip()} {p.stderr.strip()}")
        if p.returncode != 0:
            fail(f"promtool check metrics {name}: {p.stdout} {p.stderr}")

    # 6. Every panel query, variable query and alert expression.
    check_dashboard(repo, prom)
    check_rules(repo, prom)

    # 7. Extender down -> PdcExtenderDown pending.
    procs.stop("pdc-extender")
    def down_pending():
        data, err = prom.api("alerts")
        return data and any(a["labels"].get("alertname") == "PdcExtenderDown" and
                            a["state"] in ("pending", "firing") for a in data["alerts"])
    try:
        wait_for("PdcExtenderDown pending after the extender stopped", down_pending, timeout=20)
        log("PdcExtenderDown is pending after pdc-extender stopped")
    except TimeoutError as e:
        fail(str(e))


def check_code(what, result, want):
    code, body = result
    if code != want:
        fail(f"{what}: HTTP {code}, want {want}: {body[:300]}")


def workload(ext, procs):
    sched = Scheduler(ext, "/scheduler")
    both = ["node-a", "node-b"]
    # node-b: a second node whose "driver" is this test (REST inventory).
    inv_b = {"node": "node-b", "devices": [nvme("0000:81:00.0", 81, "SNB1"),
                                           nvme("0000:82:00.0", 82, "SNB2")]}
    check_code("PUT node-b inventory", http("PUT", ext + "/v1/nodes/node-b/inventory", inv_b,
                                            token=TOKEN), 200)
    # Unauthenticated mutating call: refused.
    check_code("PUT inventory without token",
               http("PUT", ext + "/v1/nodes/node-b/inventory", inv_b), 401)

    # vm1: template claim vm1-nvme, lowest address on node-a (0000:01:00.0, warm).
    sched.schedule(pod("vm1", "11111111-0000-0000-0000-000000000001"), both, "node-a")
    # vm2: named claim `scratch`, reclaimPolicy Delete -> 0000:02:00.0.
    check_code("POST claim scratch", http("POST", ext + "/v1/namespaces/default/claims", {
        "name": "scratch", "resourceName": "devices.kubevirt.io/nvme", "count": 1,
        "node": "", "serial": "", "address": "", "reclaimPolicy": "Delete"}, token=TOKEN), 201)
    sched.schedule(pod("vm2", "22222222-0000-0000-0000-000000000002", claims="scratch"), both,
                   "node-a")
    # vm3 (named claim scratch3, Delete) and vm4 -> 0000:03:00.0 and
    # 0000:04:00.0, which pdc-node cannot take (its IOMMU group holds a USB
    # controller; a device the host used would not be offered at all).
    check_code("POST claim scratch3", http("POST", ext + "/v1/namespaces/default/claims", {
        "name": "scratch3", "resourceName": "devices.kubevirt.io/nvme", "count": 1,
        "node": "", "serial": "", "address": "", "reclaimPolicy": "Delete"}, token=TOKEN), 201)
    sched.schedule(pod("vm3", "33333333-0000-0000-0000-000000000003", claims="scratch3"), both,
                   "node-a")
    sched.schedule(pod("vm4", "44444444-0000-0000-0000-000000000004"), both, "node-a")
    # vm5 on node-b.
    sched.schedule(pod("vm5", "55555555-0000-0000-0000-000000000005"), both, "node-b")
    # vm1 restarts (new pod): node-a is its sticky node, node-b is not feasible.
    f = sched.schedule(pod("vm1", "11111111-0000-0000-0000-0000000000a1"), both, "node-a")
    if "node-b" not in (f.get("FailedAndUnresolvableNodes") or {}):
        fail(f"restarted vm1: node-b should be unresolvable (bound elsewhere): {f}")
    # vm6 wants two drives: node-a has none free, node-b one -> insufficient;
    # kube-scheduler then asks preempt.
    p6 = pod("vm6", "66666666-0000-0000-0000-000000000006", nvme=2)
    f = sched.filter(p6, both)
    if f.get("NodeNames"):
        fail(f"vm6 (2 drives) should fit nowhere: {f}")
    sched.call("preempt", {"Pod": p6, "NodeNameToVictims": None, "NodeNameToMetaVictims": {
        "node-b": {"Pods": [{"UID": "55555555-0000-0000-0000-000000000005"}],
                   "NumPDBViolations": 0}}})
    # A pod without managed devices passes through untouched.
    f = sched.filter(pod("plain", "77777777-0000-0000-0000-000000000007", nvme=0), both)
    if sorted(f.get("NodeNames") or []) != both:
        fail(f"a pod without devices should pass: {f}")

    # Users: list and look up; a missing claim; deleting a claim in use.
    check_code("GET claims", http("GET", ext + "/v1/claims", token=TOKEN), 200)
    check_code("GET claims without the token", http("GET", ext + "/v1/claims"), 401)
    check_code("GET devices", http("GET", ext + "/v1/devices", token=TOKEN), 200)
    check_code("GET missing claim", http("GET", ext + "/v1/namespaces/default/claims/nope", token=TOKEN), 404)
    check_code("DELETE claim in use",
               http("DELETE", ext + "/v1/namespaces/default/claims/vm1-nvme", token=TOKEN), 409)

    # vm2 and vm3 are gone for good: release and delete their Delete claims ->
    # pdc-node hands 0000:02:00.0 back (on vfio-pci: the static tree makes
    # that restore fail) and holds 0000:03:00.0 (on no driver, and no journal
    # entry says which drive to erase).
    for claim in ("scratch", "scratch3"):
        check_code(f"release {claim}", http(
            "POST", ext + f"/v1/namespaces/default/claims/{claim}/release", b"", token=TOKEN), 200)
        check_code(f"DELETE {claim}", http(
            "DELETE", ext + f"/v1/namespaces/default/claims/{claim}", token=TOKEN), 200)

    # node-b loses 0000:81:00.0 -> vm5's claim is Lost; then node-b's driver
    # falls silent -> not reporting after extender.nodeStaleAfter (4s).
    inv_b["devices"] = inv_b["devices"][1:]
    check_code("PUT node-b inventory (81 gone)", http("PUT", ext + "/v1/nodes/node-b/inventory",
                                                      inv_b, token=TOKEN), 200)
    code, body = http("GET", ext + "/v1/namespaces/default/claims/vm5-nvme", token=TOKEN)
    if code != 200 or json.loads(body)["status"]["phase"] != "Lost":
        fail(f"vm5-nvme should be Lost after its device vanished: {code} {body[:300]}")
    time.sleep(5)  # nodeStaleAfter (4s) must pass in real time: the binaries use the wall clock.
    f = sched.filter(pod("vm7", "88888888-0000-0000-0000-000000000008"), both)
    if "node-b" not in (f.get("FailedNodes") or {}):
        fail(f"node-b should fail filter as not reporting: {f}")
    # Keep the scheduler verbs busy for a few scrapes so rates are not zero.
    for i in range(20):
        sched.filter(pod("vm1", "11111111-0000-0000-0000-0000000000a1"), both)
        sched.call("prioritize", {"Pod": pod("vm1", "11111111-0000-0000-0000-0000000000a1"),
                                  "Nodes": None, "NodeNames": ["node-a"]})
        time.sleep(0.1)
    log("workload done")


def check_dashboard(repo, prom):
    with open(os.path.join(repo, "deploy", "dashboards", "pdc.json")) as f:
        dash = json.load(f)
    variables = {}
    for v in dash["templating"]["list"]:
        if v["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", v["query"]["query"])
        if not m:
            fail(f"variable {v['name']}: unsupported query {v['query']['query']}")
            continue
        data, err = prom.api(f"label/{m.group(2)}/values", **{"match[]": m.group(1)})
        if err or not data:
            fail(f"variable {v['name']}: {v['query']['query']} -> {err or 'no values'}")
            continue
        cur = v["current"]["value"]
        if v.get("includeAll") and cur == "$__all":
            variables[v["name"]] = v["allValue"]
        else:
            if cur not in data:
                fail(f"variable {v['name']}: default {cur} not among {data}")
            variables[v["name"]] = cur
        log(f"variable {v['name']} = {variables[v['name']]} (values {data})")
    n = 0
    deadline = time.monotonic() + 20
    pending = [(p["title"], t) for p in dash["panels"] for t in p.get("targets", [])]
    # Wait for scrapes that saw the end of the workload, then judge.
    while True:
        results = []
        for title, t in pending:
            expr = substitute(t["expr"], variables)
            data, err = prom.query(expr)
            results.append((title, t, expr, data, err))
        missing = [r for r in results if r[4] or not has_data(r[3])]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(1)
    for title, t, expr, data, err in results:
        n += 1
        if err:
            fail(f"panel {title!r} {t['refId']}: error {err}: {expr}")
        elif not has_data(data):
            fail(f"panel {title!r} {t['refId']}: no data: {expr}")
        rdata, rerr = prom.query_range(expr, 60)
        if rerr:
            fail(f"panel {title!r} {t['refId']} (range): error {rerr}")
        elif not has_data(rdata):
            fail(f"panel {title!r} {t['refId']} (range): no data")
        else:
            log(f"panel {title!r} {t['refId']}: {len(data['result'])} series")
    log(f"{n} panel queries checked")


# What each alert expression must return right after the workload: True =
# the condition holds (the alert is pending), False = quiet.
EXPECTED_ALERT_CONDITIONS = {
    "PdcExtenderDown": False,
    "PdcExtenderNoLeader": False,     # one replica without election: it leads
    "PdcExtenderReplicaDown": False,
    "PdcFilterLatencyHigh": False,
    "PdcClaimsLost": True,            # vm5-nvme lost its device
    "PdcNodeDriverNotReporting": False,  # threshold 120s; node-b is 5-20s stale
    "PdcBindErrors": False,
    "PdcHandoffStuck": False,         # every hand-off was confirmed
    "PdcNodeDriverDown": False,
    "PdcNodeBindFailures": True,      # 0000:03:00.0 and 0000:04:00.0
    "PdcNodeCannotReachExtender": False,  # errors at start, reports since
}


def check_rules(repo, prom):
    import yaml  # python3-yaml (Debian)
    with open(os.path.join(repo, "deploy", "prometheus", "pdc-rules.yaml")) as f:
        rules = yaml.safe_load(f)
    seen = set()
    for g in rules["groups"]:
        for r in g["rules"]:
            name = r.get("alert") or r.get("record")
            seen.add(name)
            data, err = prom.query(r["expr"])
            if err:
                fail(f"alert {name}: error {err}")
                continue
            want = EXPECTED_ALERT_CONDITIONS.get(name)
            if want is None:
                fail(f"alert {name}: no expectation in EXPECTED_ALERT_CONDITIONS")
            elif has_data(data) != want:
                fail(f"alert {name}: condition {'holds' if has_data(data) else 'does not hold'}"
                     f", expected the opposite: {data}")
            else:
                log(f"alert {name}: condition {'holds' if want else 'quiet'} as expected")
            # Every vector selector in the expression selects real series.
            for sel in VECTOR_SELECTOR.findall(r["expr"]):
                d, e = prom.query(sel)
                if e or not has_data(d):
                    fail(f"alert {name}: selector {sel} has no series ({e})")
    for name in EXPECTED_ALERT_CONDITIONS:
        if name not in seen:
            fail(f"alert {name} expected but not in pdc-rules.yaml")
    # Prometheus' own evaluation of the loaded rules.
    time.sleep(2)
    data, err = prom.api("rules")
    loaded = [r for g in (data or {}).get("groups", []) for r in g["rules"]]
    if err or len(loaded) != len(seen):
        fail(f"Prometheus loaded {len(loaded)} rules, want {len(seen)} ({err})")
    for r in loaded:
        if r.get("health") != "ok":
            fail(f"Prometheus evaluated {r['name']}: health {r.get('health')} {r.get('lastError')}")
    data, err = prom.api("alerts")
    active = sorted({a["labels"]["alertname"] for a in (data or {}).get("alerts", [])})
    want_active = sorted(n for n, v in EXPECTED_ALERT_CONDITIONS.items() if v)
    if active != want_active:
        fail(f"active (pending/firing) alerts {active}, want {want_active}")
    else:
        log(f"active alerts as expected: {active}")


if __name__ == "__main__":
    sys.exit(main())
