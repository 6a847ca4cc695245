"""The pieces a panel is made of: the selector that keeps a panel in step with the exporter (`sel`), a query (`Q`),
a panel (`Panel`) and its Grafana JSON (`panel_json`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuledger.analytics.exporter.figures import METRICS

UID = "gpuledger"
DS = {"type": "prometheus", "uid": "${datasource}"}
# The exporter's own metrics (server.Exporter.collect), and Prometheus' own series the dashboard reads.
OWN = (
    "gpuledger_exporter_up",
    "gpuledger_exporter_snapshot_age_seconds",
    "gpuledger_exporter_snapshot_build_seconds",
    "gpuledger_exporter_snapshot_errors_total",
)
BUILTIN = ("up", "ALERTS")
EXPORTER_JOB = "gpuledger-exporter"  # the scrape job deploy/prometheus/gpuledger-rules.yaml expects
VARIABLE = {"cluster": "cluster", "tenant": "tenant", "gpu_model": "model"}  # label -> the variable filtering it


def family(name: str) -> str:
    """The METRICS key of an exposed sample name (a counter's `_total`, an info's `_info`); KeyError if none."""
    for suffix, kind in (("_total", "counter"), ("_info", "info")):
        base = name.removesuffix(suffix)
        if base != name and base in METRICS and METRICS[base].kind == kind:
            return base
    if name in METRICS and METRICS[name].kind == "gauge":
        return name
    raise KeyError(f"{name}: not a metric the exporter declares (analytics/exporter/figures.py METRICS)")


def sel(name: str, all_models: bool = False, **matchers: str) -> str:
    """`name{...}` with the variables' matchers for the labels the metric has, then `matchers` (label -> `="v"`).
    all_models: keep the tenants' all-models quota rows (gpu_model="*") whatever model is selected."""
    labels = () if name in OWN else METRICS[family(name)].labels
    parts = []
    for label in labels:
        if label in VARIABLE:
            extra = "|[*]" if all_models and label == "gpu_model" else ""
            parts.append(f'{label}=~"${VARIABLE[label]}{extra}"')
    parts += [f"{k}{v}" for k, v in matchers.items()]
    return f"{name}{{{', '.join(parts)}}}" if parts else name


def help_of(*names: str) -> str:
    return " ".join(f"{n}: {METRICS[family(n)].help}." for n in names if n not in OWN and n not in BUILTIN)


# -- panels ------------------------------------------------------------------------------------------------------
@dataclass
class Q:
    expr: str
    legend: str = ""
    instant: bool = False  # stat, bar gauge and table panels ask for the latest value only


@dataclass
class Panel:
    kind: str  # timeseries, stat, bargauge, table
    title: str
    queries: list[Q]
    unit: str = "short"
    w: int = 8
    h: int = 8
    description: str = ""
    thresholds: tuple[tuple[float | None, str], ...] = ()  # (from, colour) above the base green
    stack: bool = False
    max: float | None = None
    options: dict = field(default_factory=dict)


def _thresholds(steps: tuple[tuple[float | None, str], ...]) -> dict:
    """Green below the first step, unless the first step is (None, colour): the base colour."""
    base = steps[0][1] if steps and steps[0][0] is None else "green"
    rest = [{"color": c, "value": v} for v, c in steps if v is not None]
    return {"mode": "absolute", "steps": [{"color": base, "value": None}, *rest]}


def panel_json(p: Panel, pid: int, x: int, y: int) -> dict:
    defaults: dict = {
        "unit": p.unit,
        "min": 0,
        "thresholds": _thresholds(p.thresholds),
        "color": {"mode": "palette-classic"},
    }
    if p.max is not None:
        defaults["max"] = p.max
    if p.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 30 if p.stack else 10,
            "showPoints": "never",
            "stacking": {"mode": "normal" if p.stack else "none", "group": "A"},
        }
        options = {
            "legend": {"displayMode": "table", "placement": "right", "showLegend": True, "calcs": ["lastNotNull"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    elif p.kind in ("stat", "bargauge"):
        if p.thresholds:
            defaults["color"] = {"mode": "thresholds"}
        options = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "orientation": "horizontal",
        }
        if p.kind == "stat":
            options |= {"colorMode": "value", "graphMode": "none", "textMode": "auto", "justifyMode": "auto"}
        else:
            options |= {"displayMode": "gradient", "showUnfilled": True, "valueMode": "color"}
    else:  # table: one row per series, every query's value a column (merged on the labels)
        options = {"showHeader": True, "cellHeight": "sm", "footer": {"show": False, "reducer": ["sum"], "fields": ""}}
    targets = []
    for i, q in enumerate(p.queries):
        t = {"datasource": DS, "refId": chr(ord("A") + i), "expr": q.expr, "legendFormat": q.legend or "__auto"}
        t |= {"editorMode": "code", "range": not q.instant, "instant": q.instant}
        if p.kind == "table":
            t["format"] = "table"
        targets.append(t)
    out = {
        "id": pid,
        "type": p.kind,
        "title": p.title,
        "description": p.description or help_of(*_names(p)),
        "datasource": DS,
        "gridPos": {"h": p.h, "w": p.w, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options | p.options,
        "targets": targets,
    }
    if p.kind == "table":  # one row per label set; each query's value a column named by its legend
        # (a query without a legend only contributes labels: its value, 1 for an info or alert series, is hidden)
        column = {t["refId"]: "Value" if len(targets) == 1 else f"Value #{t['refId']}" for t in targets}
        names = {column[t["refId"]]: q.legend for t, q in zip(targets, p.queries, strict=True) if q.legend}
        hidden = dict.fromkeys(("Time", "__name__", "job", "instance"), True)
        hidden |= {column[t["refId"]]: True for t, q in zip(targets, p.queries, strict=True) if not q.legend}
        out["transformations"] = [
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": hidden, "renameByName": names}},
        ]
    return out


def _names(p: Panel) -> list[str]:
    """The gpuledger metrics a panel reads, in order of first use (for its description)."""
    seen: list[str] = []
    for q in p.queries:
        for n in re.findall(r"\bgpuledger_\w+", q.expr):
            if n not in seen:
                seen.append(n)
    return seen


def sum_by(by: str, name: str, **kw) -> str:
    return f"sum by ({by}) ({sel(name, **kw)})"
