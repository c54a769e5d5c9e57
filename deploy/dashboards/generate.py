#!/usr/bin/env python3
"""Writes dashboards/pdc.json, the Grafana dashboard of pdc.

The JSON is generated so that every panel is laid out the same way and the
queries stay readable here. Edit this file, then run
    python3 deploy/dashboards/generate.py
tests/deploy/check_manifests.py fails when pdc.json differs from the output,
and tests/deploy/prometheus_integration_test.py runs every query against a
real Prometheus scraping real pdc-extender and pdc-node processes.

Metric names: extender/extender_metrics.h, driver/node_metrics.h.
Standard library only.
"""
import json
import os
import sys

EXT = 'job=~"$extender_job"'
NODE = 'job=~"$node_job"'
RI = '$__rate_interval'
DS = {"type": "prometheus", "uid": "${datasource}"}

_panels = []
_next_id = [1]
_cursor = [0, 0]  # x, y of the next panel
_row_height = [0]


def _place(w, h):
    x, y = _cursor
    if x + w > 24:
        x, y = 0, y + _row_height[0]
        _row_height[0] = 0
    _cursor[0], _cursor[1] = x + w, y
    _row_height[0] = max(_row_height[0], h)
    return {"h": h, "w": w, "x": x, "y": y}


def row(title):
    if _cursor[0] != 0:
        _cursor[0], _cursor[1] = 0, _cursor[1] + _row_height[0]
        _row_height[0] = 0
    _panels.append({"type": "row", "title": title, "collapsed": False,
                    "id": _next_id[0], "gridPos": _place(24, 1), "panels": []})
    _next_id[0] += 1
    _cursor[0], _cursor[1] = 0, _cursor[1] + 1
    _row_height[0] = 0


def panel(title, description, targets, unit="short", kind="timeseries", w=12, h=8,
          stack=False):
    refs = "ABCDEFGH"
    p = {
        "type": kind,
        "title": title,
        "description": description,
        "id": _next_id[0],
        "datasource": DS,
        "gridPos": _place(w, h),
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {"datasource": DS, "refId": refs[i], "expr": expr, "legendFormat": legend,
             "range": kind != "stat", "instant": kind == "stat"}
            for i, (expr, legend) in enumerate(targets)
        ],
    }
    if kind == "timeseries":
        p["fieldConfig"]["defaults"]["custom"] = {
            "drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if stack else 0,
            "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
        p["options"] = {"legend": {"displayMode": "table", "placement": "bottom",
                                   "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}
    elif kind == "stat":
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                          "values": False},
                        "colorMode": "value", "graphMode": "none", "textMode": "value_and_name"}
    _next_id[0] += 1
    _panels.append(p)


def build():
    # ---- scheduler extender -------------------------------------------------
    row("Scheduler extender (pdc-extender)")
    panel("Claims by phase",
          "Claims Pending (not yet bound), Bound (held by a node's device), Lost "
          "(node or device gone: the VM cannot start).",
          [(f'sum by (phase) (pdc_claims{{{EXT}}})', "{{phase}}")], kind="stat", w=6, h=5)
    panel("Devices by state",
          "Managed devices known to the extender: free, allocated to a claim, unhealthy.",
          [(f'sum by (state) (pdc_devices{{{EXT}}})', "{{state}}")], kind="stat", w=6, h=5)
    panel("Node drivers by state",
          "Nodes whose pdc-node reports (heartbeat within extender.nodeStaleAfter) or not.",
          [(f'sum by (state) (pdc_nodes{{{EXT}}})', "{{state}}")], kind="stat", w=6, h=5)
    panel("Leader by replica",
          "1 on the replica that serves as the leader (the Lease pdc-extender), 0 on the "
          "followers standing by. No 1 anywhere: nothing is served (PdcExtenderNoLeader).",
          [(f'max by (instance) (pdc_leader{{{EXT}}})', "{{instance}}")], kind="stat", w=6,
          h=5)
    panel("Request rate by verb",
          "Requests per second by route: the scheduler verbs (filter, prioritize, bind, "
          "preempt) and the REST API (inventory, allocations, claims, ...).",
          [(f'sum by (verb) (rate(pdc_http_requests_total{{{EXT}}}[{RI}]))', "{{verb}}")],
          unit="reqps")
    panel("Non-2xx responses by verb and code",
          "Rejected or failed requests. 5xx on a scheduler verb makes kube-scheduler retry "
          "the pod; 409 on claims is a claim in use.",
          [(f'sum by (verb, code) (rate(pdc_http_requests_total{{{EXT},code!~"2.."}}[{RI}]))',
            "{{verb}} {{code}}")], unit="reqps")
    panel("Scheduler verb latency p99",
          "99th percentile time from a complete request to its answer. kube-scheduler's "
          "httpTimeout for the extender is 10s.",
          [(f'histogram_quantile(0.99, sum by (verb, le) (rate(pdc_http_request_duration_seconds_bucket{{{EXT},verb=~"filter|prioritize|bind|preempt"}}[{RI}])))',
            "{{verb}} p99")], unit="s")
    panel("Scheduler verb latency p50",
          "Median latency of the scheduler verbs.",
          [(f'histogram_quantile(0.5, sum by (verb, le) (rate(pdc_http_request_duration_seconds_bucket{{{EXT},verb=~"filter|prioritize|bind|preempt"}}[{RI}])))',
            "{{verb}} p50")], unit="s")
    panel("Filter outcomes (nodes per second)",
          "Candidate nodes judged by filter, by the reason of the verdict: sticky_hit (holds "
          "the VM's claims), fresh_fit, bound_elsewhere, insufficient, not_reporting, ...",
          [(f'sum by (reason) (rate(pdc_filter_nodes_total{{{EXT}}}[{RI}]))', "{{reason}}")],
          stack=True)
    panel("Binds and rollbacks",
          "Bind results, and binds whose allocation was undone because the Kubernetes API "
          "call failed.",
          [(f'sum by (result) (rate(pdc_binds_total{{{EXT}}}[{RI}]))', "bind {{result}}"),
           (f'sum(rate(pdc_bind_rollbacks_total{{{EXT}}}[{RI}]))', "rollback")],
          unit="ops")
    panel("VM pods waiting for their devices",
          "Pods bound to a node whose device plugin has not yet handed them their devices. "
          "At most one per node and resource; while one waits, other VM pods for that node get "
          "\"another VM is starting on this node\". `pdcctl get handoffs` lists them.",
          [(f'sum by (resource) (pdc_handoffs_pending{{{EXT}}})', "{{resource}}")])
    panel("Inventory age by node",
          "Seconds since each node's driver last reported (heartbeat every 10s). Above "
          "extender.nodeStaleAfter the node fails filter with \"node driver not reporting\".",
          [(f'max by (node) (pdc_node_inventory_age_seconds{{{EXT},node=~"$node"}})',
            "{{node}}")], unit="s")
    panel("Store sync latency p99",
          "Time to make a store record durable (fsync, group commit); every bind waits for it.",
          [(f'histogram_quantile(0.99, sum by (le) (rate(pdc_store_sync_duration_seconds_bucket{{{EXT}}}[{RI}])))',
            "p99")], unit="s", w=8)
    panel("Store revision",
          "Revision of the allocator's durable state; it moves with every persisted change.",
          [(f'max(pdc_store_revision{{{EXT}}})', "revision")], w=8)
    panel("Allocation long-polls waiting",
          "pdc-node long-polls parked in the extender (about one per node).",
          [(f'sum(pdc_long_polls_waiting{{{EXT}}})', "waiting")], w=8)
    # ---- node drivers ------------------------------------------------------
    row("Node drivers (pdc-node)")
    panel("Node drivers up",
          "Scrape health of each pdc-node.",
          [(f'up{{{NODE}}}', "{{instance}}")], kind="stat", w=8, h=5)
    panel("Seconds since last accepted report",
          "Per driver, from its own clock: time since pdc-extender last accepted its "
          "inventory.",
          [(f'time() - max by (instance) (pdc_node_last_report_timestamp_seconds{{{NODE}}} > 0)',
            "{{instance}}")], unit="s", w=8, h=5)
    panel("Managed devices by current driver",
          "Devices matched by a device class on the scraped nodes, by the kernel driver "
          "they are bound to (vfio-pci = ready for a VM).",
          [(f'sum by (driver) (pdc_node_devices{{{NODE}}})', "{{driver}}")],
          kind="stat", w=8, h=5)
    panel("vfio-pci binds by outcome",
          "bound = moved to vfio-pci now; already_bound = was there (the warm path).",
          [(f'sum by (instance, outcome) (rate(pdc_node_binds_total{{{NODE}}}[{RI}]))',
            "{{instance}} {{outcome}}")], unit="ops")
    panel("Bind and restore failures",
          "Failed or refused binds and restores by reason (device used by the host, IOMMU "
          "group, probe failed, ...). Each one leaves a VM without its device.",
          [(f'sum by (instance, operation, reason) (increase(pdc_node_bind_failures_total{{{NODE}}}[{RI}]))',
            "{{instance}} {{operation}} {{reason}}")])
    panel("Restores to the host driver",
          "Devices handed back to their host driver after a claim with reclaimPolicy "
          "Delete was deleted.",
          [(f'sum by (instance, outcome) (rate(pdc_node_restores_total{{{NODE}}}[{RI}]))',
            "{{instance}} {{outcome}}")], unit="ops")
    panel("Errors talking to pdc-extender",
          "Failed inventory reports and allocation polls.",
          [(f'sum by (instance, operation) (rate(pdc_node_extender_errors_total{{{NODE}}}[{RI}]))',
            "{{instance}} {{operation}}")], unit="ops")
    panel("Bind / discovery duration p99",
          "Time to move devices to vfio-pci, and to walk sysfs for managed devices.",
          [(f'histogram_quantile(0.99, sum by (instance, le) (rate(pdc_node_bind_duration_seconds_bucket{{{NODE}}}[{RI}])))',
            "{{instance}} bind"),
           (f'histogram_quantile(0.99, sum by (instance, le) (rate(pdc_node_discovery_duration_seconds_bucket{{{NODE}}}[{RI}])))',
            "{{instance}} discovery")], unit="s")
    panel("Reconcile passes and inventory reports",
          "Loop activity per driver: reconcile passes and accepted inventory reports.",
          [(f'sum by (instance) (rate(pdc_node_reconcile_passes_total{{{NODE}}}[{RI}]))',
            "{{instance}} passes"),
           (f'sum by (instance) (rate(pdc_node_inventory_reports_total{{{NODE}}}[{RI}]))',
            "{{instance}} reports")], unit="ops")


def dashboard():
    build()
    return {
        "uid": "pdc-overview",
        "title": "pdc: persistent device claims",
        "description": "pdc-extender (scheduler extender, claims) and pdc-node (vfio-pci "
                       "node drivers). Source: deploy/dashboards/generate.py.",
        "tags": ["pdc", "kubevirt"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "",
        "version": 1,
        "annotations": {"list": []},
        "links": [],
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource",
             "query": "prometheus", "current": {}, "hide": 0},
            {"name": "extender_job", "label": "Extender job", "type": "query",
             "datasource": DS, "query": {"query": "label_values(pdc_build_info, job)",
                                         "refId": "extender_job"},
             "definition": "label_values(pdc_build_info, job)",
             "current": {"text": "pdc-extender", "value": "pdc-extender"},
             "refresh": 1, "includeAll": False, "multi": False, "hide": 0, "sort": 1},
            {"name": "node_job", "label": "Node driver job", "type": "query",
             "datasource": DS,
             "query": {"query": "label_values(pdc_node_reconcile_passes_total, job)",
                       "refId": "node_job"},
             "definition": "label_values(pdc_node_reconcile_passes_total, job)",
             "current": {"text": "pdc-node", "value": "pdc-node"},
             "refresh": 1, "includeAll": False, "multi": False, "hide": 0, "sort": 1},
            {"name": "node", "label": "Node", "type": "query", "datasource": DS,
             "query": {"query": "label_values(pdc_node_inventory_age_seconds, node)",
                       "refId": "node"},
             "definition": "label_values(pdc_node_inventory_age_seconds, node)",
             "current": {"text": "All", "value": "$__all"},
             "refresh": 2, "includeAll": True, "allValue": ".*", "multi": True,
             "hide": 0, "sort": 1},
        ]},
        "panels": _panels,
    }


def render():
    return json.dumps(dashboard(), indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pdc.json")
    if len(sys.argv) > 1 and sys.argv[1] == "--stdout":
        sys.stdout.write(render())
    else:
        with open(out, "w") as f:
            f.write(render())
