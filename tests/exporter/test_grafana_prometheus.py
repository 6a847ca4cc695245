"""deploy/grafana/gpuledger.json against a real Prometheus: Grafana cannot run here, so every panel's PromQL and
every template variable's query is taken out of the committed JSON, its variables substituted as Grafana would, and
run against Prometheus (Debian's, its own process) scraping `gpuledger exporter` (its own process) over an analysed
simulated lake, with the alert rules loaded.

The lake: the session's small simulated lake (3 nodes x 4 GPUs, one day), plus an Xid, an ECC and a lost-GPU event
two hours before the analytics run, analysed with the built-in config, whose tenants have quotas and (all but
`platform`) monthly budgets. The exporter's config sets `[enforcer] idle_min_h` to 0.01 h (36 s): that lake's
longest idle hold is under 3 minutes, and the idle-held panels would be empty at the default 2 h.

On it every panel has data: each query must parse and return at least one series, and every `{{label}}` its legend
names must be a label of each series. EXPECTED_EMPTY would name a panel that is empty on this lake, and why; it is
empty because none is. Then each query again with one cluster, tenant and GPU model chosen: it must still parse, and
every series that carries one of those labels must carry the chosen value.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import time

import polars as pl
import pytest

from builders import END, epoch_us, write_rows
from prometheus_server import PROMETHEUS, REPO, api, exporter_and_prometheus, query, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PROMETHEUS is None, reason="Debian package prometheus not installed"),
]

DASHBOARD = json.loads((REPO / "deploy" / "grafana" / "gpuledger.json").read_text())
# Grafana's built-in intervals, as durations this Prometheus (1 s scrapes, a minute or so of data) can answer.
DURATIONS = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h"}
ALL = {"cluster": ".*", "tenant": ".*", "model": ".*"}  # each variable's "All" (allValue)
H100 = "NVIDIA H100 80GB HBM3"
ONE = {"cluster": "default", "tenant": "nlp", "model": H100}
LABEL = {"cluster": "cluster", "tenant": "tenant", "model": "gpu_model"}
EXPECTED_EMPTY: dict[str, str] = {}  # panel title -> why it has no data on this lake


def panels() -> list[dict]:
    return [p for p in DASHBOARD["panels"] if p["type"] != "row"]


def substitute(expr: str, values: dict[str, str]) -> str:
    for k, v in DURATIONS.items():
        expr = expr.replace(k, v)
    for name, value in values.items():
        assert not re.search(r"[\\^$.|?*+()\[\]{}]", value) or value == ".*", value  # Grafana would escape it
        expr = expr.replace(f"${{{name}}}", value).replace(f"${name}", value)
    assert "$" not in expr, expr
    return expr


@pytest.fixture(scope="module")
def lake(small_lake, tmp_path_factory):
    from gpuledger.analytics.runner import run

    path = tmp_path_factory.mktemp("grafana") / "lake"
    shutil.copytree(small_lake, path)
    node = pl.read_parquet(path / "nodes" / "**" / "*.parquet").sort("node").row(0, named=True)["node"]
    t = dt.datetime.fromtimestamp(END, dt.timezone.utc) - dt.timedelta(hours=2)
    ev = {"cluster": "default", "node": node, "gpu_uuid": f"{node}-gpu0", "source": "sim", "ts": epoch_us(t)}
    write_rows(
        path,
        "health_events",
        [
            {**ev, "kind": "xid", "code": 48, "detail": "double-bit ECC error"},
            {**ev, "kind": "ecc", "detail": "3 single-bit ECC errors corrected"},
            {**ev, "kind": "lost", "code": 79, "detail": "GPU has fallen off the bus"},
        ],
        "grafana-test",
    )
    run(path, until_s=END)
    return path


@pytest.fixture(scope="module")
def prom(lake, tmp_path_factory):
    config = "[enforcer]\nidle_min_h = 0.01\n"  # the lake's idle holds are minutes long (the docstring)
    with exporter_and_prometheus(tmp_path_factory.mktemp("prom"), lake, config) as s:
        p = s["prom"]
        # At least three scrapes of the figures (rate() and increase() need two), and the rules evaluated: the lost
        # GPU fires GpuledgerGpuLost, which has no `for`.
        wait_for(
            lambda: (
                (r := query(p, "count_over_time(gpuledger_gpu_xid_events_total[1m])")) and float(r[0]["value"][1]) >= 3
            ),
            "three scrapes of the exporter's figures",
        )
        wait_for(lambda: query(p, 'ALERTS{alertname="GpuledgerGpuLost", alertstate="firing"}'), "the rules evaluated")
        yield p


def run_target(prom: str, target: dict, values: dict[str, str]) -> list[dict]:
    """The target's series as Grafana would ask: an instant query, or a range query over the last minute."""
    q = substitute(target["expr"], values)
    if target.get("instant"):
        return query(prom, q)
    now = time.time()
    return api(prom, "query_range", query=q, start=now - 60, end=now, step=5)["result"]


def test_every_panel_returns_the_series_its_legend_names(prom):
    assert len(panels()) >= 30
    empty = {}
    for p in panels():
        for t in p["targets"]:
            series = run_target(prom, t, ALL)
            if not series:
                empty.setdefault(p["title"], []).append(t["refId"])
            wanted = re.findall(r"\{\{(\w+)\}\}", t["legendFormat"])
            for s in series:
                assert set(wanted) <= set(s["metric"]), (p["title"], t["refId"], wanted, s["metric"])
    assert {k: "" for k in empty} == {k: "" for k in EXPECTED_EMPTY}, empty


def test_one_cluster_tenant_and_model_keep_every_panel_to_them(prom):
    checked = dict.fromkeys(LABEL, 0)
    for p in panels():
        for t in p["targets"]:
            for s in run_target(prom, t, ONE):
                for var, label in LABEL.items():
                    if label in s["metric"] and not t["expr"].startswith("ALERTS"):  # alerts: every cluster's
                        ok = {ONE[var], "*"} if var == "model" and "[*]" in t["expr"] else {ONE[var]}
                        assert s["metric"][label] in ok, (p["title"], t["refId"], s["metric"])
                        checked[var] += 1
    assert min(checked.values()) >= 5, checked  # the check saw series of each label


def test_the_variables_list_the_lakes_clusters_tenants_and_models(prom):
    """Grafana's label_values(selector, label) is Prometheus' /api/v1/label/<label>/values?match[]=selector."""
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    got = {}
    for name in ("cluster", "tenant", "model"):
        v = variables[name]
        assert v["includeAll"] and v["multi"] and v["allValue"] == ".*"
        m = re.fullmatch(r"label_values\((.+), (\w+)\)", v["query"]["query"])
        assert m and m.group(2) == LABEL[name], v["query"]
        got[name] = set(api(prom, f"label/{m.group(2)}/values", **{"match[]": substitute(m.group(1), ALL)}))
    assert got["cluster"] == {"default"}
    assert got["tenant"] >= {"vision", "nlp", "recsys", "research", "platform"}  # the built-in config's
    assert got["model"] == {H100, "NVIDIA A100-SXM4-80GB", "NVIDIA L40S"}
    assert ONE["tenant"] in got["tenant"] and ONE["model"] in got["model"]
