"""The alert rules as a PrometheusRule of the Prometheus Operator, for deploy/components/prometheus-operator:

    python deploy/prometheus/operator.py > deploy/components/prometheus-operator/prometheus-rule.yaml

The object's `spec` is gpuledger-rules.yaml itself, every line indented under `spec:` (its comments kept), so the
two cannot drift: tests/deploy/test_deploy.py fails while the committed file differs from this output.
"""

from __future__ import annotations

import sys
from pathlib import Path

RULES = Path(__file__).with_name("gpuledger-rules.yaml")
HEADER = """\
# Generated from deploy/prometheus/gpuledger-rules.yaml; do not edit here. After changing the rules:
#   python deploy/prometheus/operator.py > deploy/components/prometheus-operator/prometheus-rule.yaml
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: gpuledger
  namespace: gpuledger
  labels:
    app.kubernetes.io/name: gpuledger-rules
    app.kubernetes.io/part-of: gpuledger
    release: kube-prometheus-stack  # the label your Prometheus selects rules by
spec:
"""


def render(rules: str) -> str:
    """`rules` (a Prometheus rule file's text) as a PrometheusRule: the file under `spec:`, blank lines kept blank."""
    return HEADER + "".join(f"  {line}" if line.strip() else line for line in rules.splitlines(keepends=True))


if __name__ == "__main__":
    sys.stdout.write(render(RULES.read_text()))
