#!/usr/bin/env bash
# promtool (Debian package `prometheus`) on the alert rules: syntax and
# semantics (`check rules`) and behaviour on synthetic series (`test rules`,
# pdc-rules.test.yaml). The live /metrics output of the binaries is checked
# with `promtool check metrics` by prometheus_integration_test.py.
#   tests/deploy/check_promtool.sh [repo-root]
set -euo pipefail
repo="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
if ! command -v promtool >/dev/null; then
  echo "check_promtool: promtool not found; install the Debian package: apt-get install prometheus" >&2
  exit 1
fi
cd "${repo}"
promtool check rules deploy/prometheus/pdc-rules.yaml
# The PrometheusRule CR's spec is the same rules file (check_manifests.py
# compares them); check its spec as a rules file too.
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
python3 - "${tmp}/cr-rules.yaml" <<'PY'
import sys, yaml
cr = yaml.safe_load(open("deploy/prometheus/prometheusrule.yaml"))
yaml.safe_dump(cr["spec"], open(sys.argv[1], "w"))
PY
promtool check rules "${tmp}/cr-rules.yaml"
promtool test rules tests/deploy/pdc-rules.test.yaml
echo "check_promtool: OK"
