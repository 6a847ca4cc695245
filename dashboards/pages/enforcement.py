"""Enforcement: the admission webhook's decisions over time by outcome and policy, and recent denials."""

from __future__ import annotations

from gpuledger.dashboards import figures
from gpuledger.dashboards.filters import BOTH_SQL
from gpuledger.dashboards.ui import graph, kpi, note, section, table

PATH = "/enforcement"
NAME = "Enforcement"


def layout(ctx, f):
    data = ctx.data
    if not data.has("admission_decisions"):
        return [
            note(
                "No admission decisions recorded yet. The enforcer (`gpuledger enforcer serve`, an admission webhook) "
                "appends every decision to the lake's admission_decisions table; this page shows them once it runs.",
                "no-data",
            )
        ]
    p = [f.start, f.end, *f.both_args]
    daily = data.frame(
        "SELECT date_trunc('day', ts) AS day, decision, count(*) AS decisions FROM admission_decisions "
        f"WHERE date BETWEEN ? AND ? AND NOT coalesce(dry_run, false) AND {BOTH_SQL} GROUP BY ALL ORDER BY 2, 1",
        p,
        lake=True,
    )
    by_policy = data.frame(
        "SELECT coalesce(policy, '(none)') AS policy, coalesce(mode, '') AS mode, decision, count(*) AS decisions, "
        "1000 * quantile_cont(latency_s, 0.99) AS latency_p99_ms FROM admission_decisions "
        f"WHERE date BETWEEN ? AND ? AND {BOTH_SQL} GROUP BY ALL ORDER BY 4 DESC",
        p,
        lake=True,
    )
    denials = data.frame(
        "SELECT ts, tenant, namespace, kind, name, gpu_model, gpus, policy, mode, reason FROM admission_decisions "
        f"WHERE date BETWEEN ? AND ? AND decision = 'deny' AND {BOTH_SQL} ORDER BY ts DESC LIMIT 50",
        p,
        lake=True,
    )
    return [
        kpi(
            "en-total", "decisions in the range (dry runs included)", int(by_policy["decisions"].sum() or 0), "requests"
        ),
        section(
            "Decisions per day by outcome",
            graph(
                "en-daily",
                figures.lines(
                    daily,
                    "day",
                    {"decisions": "decisions"},
                    "Admission decisions",
                    "requests per day",
                    by="decision",
                    x_title="day (UTC)",
                ),
            ),
        ),
        section("By policy and mode", table("en-policy", by_policy)),
        section("Recent denials", table("en-denials", denials)),
    ]
