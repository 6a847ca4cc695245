"""A real Prometheus (Debian package `prometheus`, its own process on a free loopback port) scrapes `gpuledger
exporter` (the CLI, its own process) over an analysed simulated lake, with deploy/prometheus/gpuledger-rules.yaml
loaded: PromQL returns the series the exporter serves, a group_left join on the *_info gauge carries the driver onto
each model's figures, and every rule evaluates without error against the real series."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from prometheus_server import PROMETHEUS, exporter_and_prometheus, get, query, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PROMETHEUS is None, reason="Debian package prometheus not installed"),
]


@pytest.fixture
def stack(tmp_path, analysed_lake):
    with exporter_and_prometheus(tmp_path, analysed_lake) as s:
        yield s


def test_prometheus_scrapes_the_exporter_and_the_rules_evaluate(stack):
    prom = stack["prom"]
    allocated = "gpuledger_tenant_allocated_gpus"
    wait_for(lambda: "gpuledger_tenant_allocated_gpus{" in get(stack["exporter"]), "the exporter's first snapshot")
    wait_for(lambda: len(query(prom, allocated)) > 0, "the figures in Prometheus")
    served = {
        tuple(sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(get(stack["exporter"]))
        for s in f.samples
        if s.name == allocated
    }
    got = {
        tuple(sorted((k, v) for k, v in r["metric"].items() if k not in ("__name__", "job", "instance"))): float(
            r["value"][1]
        )
        for r in query(prom, allocated)
    }
    assert got == served and len(got) >= 2
    # the static attributes joined onto each model's figures
    joined = query(
        prom, "gpuledger_fleet_gpus * on (cluster, gpu_model) group_left (driver_version) gpuledger_gpu_model_info"
    )
    models = {r["metric"]["gpu_model"] for r in query(prom, "gpuledger_fleet_gpus")}
    assert {r["metric"]["gpu_model"] for r in joined} == models and len(models) == 3
    assert all(r["metric"]["driver_version"].startswith("sim-") for r in joined)
    # the Xid counters, as a rate; the analytics' age (the lake ends 2026-11-02: stale by now)
    assert query(prom, "gpuledger_analytics_last_run_age_seconds > 0")

    def rules_evaluated():
        groups = json.loads(get(f"{prom}/api/v1/rules"))["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return len(rules) == 18 and all(r.get("lastEvaluation", "").startswith("20") for r in rules) and rules

    wait_for(rules_evaluated, "every rule evaluated")
    rules = rules_evaluated()
    assert [r["name"] for r in rules if r["health"] != "ok"] == []
