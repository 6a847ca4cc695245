"""deploy/grafana/gpuledger.json: it is what the generator (gpuledger.analytics.exporter.grafana) makes, every metric
name its PromQL reads (panels and template variables) is one the exporter declares, one of the exporter's own, or
Prometheus' own, every figure the exporter declares is on a panel, and every selector filters by the dashboard's
variables for the labels its metric has. That its queries return data: tests/exporter/test_grafana_prometheus.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from gpuledger.analytics.exporter import Exporter
from gpuledger.analytics.exporter import grafana as g
from gpuledger.analytics.exporter.figures import METRICS

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "gpuledger.json"
RULES = ROOT / "deploy" / "prometheus" / "gpuledger-rules.yaml"
SUFFIX = {"gauge": "", "counter": "_total", "info": "_info"}  # a family's sample name, as Prometheus stores it
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
KEYWORDS |= {"inf", "nan", "atan2"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: its selectors' names, and the names a `__name__` matcher spells
    out as an alternation. Strings, label matchers, ranges, label lists of by/without/on/ignoring/group_*, function
    names (a word before `(`), keywords and numbers are not names."""
    names = set()
    for m in re.finditer(r'__name__\s*=~?\s*"([^"]*)"', expr):
        assert re.fullmatch(r"[\w:]+(\|[\w:]+)*", m.group(1)), f"{m.group(1)}: only an alternation of names"
        names |= set(m.group(1).split("|"))
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    for m in re.finditer(r"(?<![\w.:])[a-zA-Z_:][\w:]*", s):
        if m.group(0).lower() not in KEYWORDS and not s[m.end() :].lstrip().startswith("("):
            names.add(m.group(0))
    return names


def declared(tmp_path: Path) -> set[str]:
    """Every series name the exporter can serve: METRICS' samples and its own (an exporter over an empty lake,
    never started, serves only those), Prometheus' own series, and the rules file's recording rules."""
    own = set()
    for f in Exporter(tmp_path, 2.0).collect():
        own.add(f.name + SUFFIX[f.type])
    assert set(g.OWN) <= own
    recorded = {
        r["record"] for grp in yaml.safe_load(RULES.read_text())["groups"] for r in grp["rules"] if "record" in r
    }
    return {n + SUFFIX[s.kind] for n, s in METRICS.items()} | own | set(g.BUILTIN) | recorded


def exprs(dash: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every template variable's selector."""
    out = [(f"{p['title']}/{t['refId']}", t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.+), (\w+)\)", v["query"]["query"])
            assert m, v["query"]
            out.append((f"${v['name']}", m.group(1)))
    return out


def test_the_committed_dashboard_is_the_generators():
    assert DASHBOARD.read_text() == g.render(), (
        "deploy/grafana/gpuledger.json is stale: python -m gpuledger.analytics.exporter.grafana > "
        "deploy/grafana/gpuledger.json"
    )


def test_the_name_extractor():
    assert metric_names('sum by (tenant) (increase(a_total{x=~"b|c"}[$__range])) / on (t) group_left (u) d') == {
        "a_total",
        "d",
    }
    assert metric_names('label_values_like({__name__=~"e|f", cluster=~"$cluster"})') == {"e", "f"}
    assert metric_names('max by (cluster) (g) > 1e9 and h offset 5m unless ALERTS{alertname="x"}') == {
        "g",
        "h",
        "ALERTS",
    }


def test_every_metric_the_dashboard_reads_is_declared(tmp_path):
    known = declared(tmp_path)
    dash = json.loads(DASHBOARD.read_text())
    read = {}
    for where, expr in exprs(dash):
        names = metric_names(expr)
        assert names, (where, expr)
        assert names <= known, (where, sorted(names - known))
        read |= dict.fromkeys(names, where)
    # every figure the exporter declares is on some panel
    assert [n for n, s in METRICS.items() if n + SUFFIX[s.kind] not in read] == []
    # a metric renamed in the exporter (or misspelt here) fails
    renamed = DASHBOARD.read_text().replace("gpuledger_tenant_cost_usd", "gpuledger_tenant_spend_usd")
    bad = {w for w, e in exprs(json.loads(renamed)) if not metric_names(e) <= known}
    assert bad == {w for w, e in exprs(dash) if "gpuledger_tenant_cost_usd" in e} and len(bad) >= 3


def test_the_generator_refuses_a_metric_the_exporter_does_not_declare():
    with pytest.raises(KeyError, match="gpuledger_tenant_spend_usd"):
        g.sel("gpuledger_tenant_spend_usd")


def test_every_selector_filters_by_the_variables_of_its_labels():
    dash = json.loads(DASHBOARD.read_text())
    for where, expr in exprs(dash):
        if where.startswith("$"):  # a variable: the tenants and models of the clusters chosen
            assert where == "$cluster" or 'cluster=~"$cluster"' in expr, where
            continue
        for name, matchers in re.findall(r"\b(gpuledger_\w+)(?:\{([^}]*)\})?", expr):
            labels = METRICS[g.family(name)].labels if name not in g.OWN else ()
            for label, var in g.VARIABLE.items():
                if label in labels:
                    assert f'{label}=~"${var}' in matchers, (where, name, label)


def test_panels_datasource_layout_and_variables():
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] == "gpuledger" and dash["schemaVersion"] >= 36
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource", "cluster", "tenant", "model"]
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    rows = [p["title"] for p in panels if p["type"] == "row"]
    assert rows == [
        "Overview",
        "Tenants",
        "Cost and budgets",
        "Idle holds",
        "Workload classes",
        "Queue",
        "Fragmentation",
        "Capacity against demand",
        "Health",
    ]
    cells = set()
    for p in panels:
        gp = p["gridPos"]
        assert gp["x"] + gp["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(gp["x"], gp["x"] + gp["w"]) for y in range(gp["y"], gp["y"] + gp["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert all(t["datasource"] == p["datasource"] for t in p["targets"]), p["title"]
            assert p["description"], p["title"]
