"""The month's figures as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched.

Every number is in an element carrying its exact value: `data-value` holds the query's value (repr of the float,
in the unit its column names), the text shows it rounded for a reader. Key figures have an id; table cells a
`data-col` (the query's column) in a row with a `data-key` (the tenant, job or model). A test reads them back and
compares them with the same figures queried from the views.
"""

from __future__ import annotations

import datetime as dt
from html import escape

import polars as pl

from gpuledger import __version__
from gpuledger.report import svg
from gpuledger.report.month import TOP_IDLE, MonthReport

IDLE_POLICY = {
    "proportional": "shared to tenants in proportion to their cost of the same day and GPU model",
    "platform": "charged to the platform tenant {platform}",
    "none": "charged to nobody: it stays on the idle line",
}
NO_TENANT = "(jobs of no tenant)"
IDLE_LINE = "(idle, not shared)"
STATE_NAMES = ["active", "allocated, idle", "unallocated", "down"]
STATE_COLORS = [svg.PALETTE[2], svg.PALETTE[1], svg.PALETTE[0], svg.PALETTE[3]]

CSS = """
body{font:14px/1.45 system-ui,sans-serif;color:#222;margin:0;background:#f6f6f4}
main{max-width:1240px;margin:0 auto;padding:24px 32px;background:#fff}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#555}.badge{display:inline-block;padding:2px 8px;border-radius:4px;font-size:12px;font-weight:600}
.partial{background:#fde9c8;color:#7a4b00}.complete{background:#dcefd9;color:#1f5a17}
.kpis{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.kpi{flex:1 1 180px;border:1px solid #ddd;border-radius:6px;padding:10px 12px}
.kpi .label{color:#555;font-size:12px}.kpi .big{font-size:22px;font-weight:600}.kpi .small{font-size:12px;color:#555}
table{border-collapse:collapse;width:100%;margin:6px 0 4px;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:left}th{background:#fafafa;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}tr.total td{font-weight:600;border-top:2px solid #999}
tr.line td:first-child{font-style:italic}.note{color:#555;font-size:12px;margin:4px 0}
.recon{font-size:15px;padding:8px 12px;border-radius:6px;margin:10px 0}
.holds{background:#eef7ec}.fails{background:#fbe3e3}.up{color:#a33}.down{color:#2a7a2a}
.panels{display:flex;flex-wrap:wrap;gap:8px}.panels svg{flex:1 1 420px;max-width:600px}
footer{margin-top:32px;border-top:1px solid #ddd;padding-top:8px;font-size:12px;color:#444}
footer li{margin:3px 0}
"""


def _repr(v) -> str:
    if v is None:
        return ""
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


def _text(v, kind: str) -> str:
    if v is None:
        return "–"
    if kind == "usd":
        return f"{v:,.2f}"
    if kind == "pct":
        return f"{v:,.1f} %"
    if kind == "chg":
        return f"{v:+,.1f} %"
    if kind == "h":
        return f"{v:,.1f}"
    if kind == "gpus":
        return f"{v:,.2f}"
    if kind == "int":
        return f"{int(v):,}"
    if kind == "min":
        return f"{v / 60:,.1f}"
    if kind == "ts":
        return f"{v:%Y-%m-%d %H:%M}"
    if kind == "date":
        return f"{v:%Y-%m-%d}"
    if kind == "ratio":
        return f"{v:,.3f}"
    return escape(str(v))


def num(v, kind: str, id_: str | None = None, cls: str = "") -> str:
    """A number in a span: its exact value in data-value, its rounded text inside."""
    attrs = f' id="{id_}"' if id_ else ""
    if kind == "chg" and v is not None:
        cls += " up" if v > 0 else " down"
    return f'<span{attrs} class="{("num " + cls).strip()}" data-value="{_repr(v)}">{_text(v, kind)}</span>'


def td(v, kind: str, col: str) -> str:
    cls = "num" + ((" up" if v > 0 else " down") if kind == "chg" and v is not None else "")
    return f'<td class="{cls}" data-col="{col}" data-value="{_repr(v)}">{_text(v, kind)}</td>'


def table(tid: str, columns: list[tuple[str, str, str]], rows: list[tuple[str, str, dict]], cls_of=None) -> str:
    """columns: (column, heading, kind; kind 'text' for a label); rows: (data-key, row class, values)."""
    head = "".join(f'<th class="{"" if k == "text" else "num"}">{escape(h)}</th>' for _, h, k in columns)
    body = []
    for key, rcls, vals in rows:
        cells = "".join(
            f'<td data-col="{c}">{escape(str(vals.get(c) if vals.get(c) is not None else "–"))}</td>'
            if k == "text"
            else td(vals.get(c), k, c)
            for c, _, k in columns
        )
        body.append(f'<tr data-key="{escape(key)}" class="{rcls}">{cells}</tr>')
    return f'<table id="{tid}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def kpi(label: str, big: str, small: str = "") -> str:
    return f'<div class="kpi"><div class="label">{escape(label)}</div><div class="big">{big}</div>' + (
        f'<div class="small">{small}</div></div>' if small else "</div>"
    )


def _sum(frame: pl.DataFrame, col: str, where: pl.Expr | None = None) -> float:
    f = frame if where is None else frame.filter(where)
    return float(f[col].sum()) if f.height else 0.0


def _label(tenant) -> str:
    return NO_TENANT if tenant is None else tenant


def _month_name(r: MonthReport) -> str:
    return f"{dt.date(r.start.year, r.start.month, 1):%B %Y}"


def _header(r: MonthReport) -> str:
    scope = (
        f"cluster {escape(r.cluster)}"
        if r.cluster
        else (
            "all clusters: " + escape(", ".join(r.clusters))
            if len(r.clusters) > 1
            else f"cluster {escape(r.clusters[0])}"
            if r.clusters
            else "all clusters"
        )
    )
    span = (
        f"data from {num(r.data_from, 'ts', 'data-from')} to {num(r.data_to, 'ts', 'data-to')} (UTC)"
        if r.data_from
        else "no fleet telemetry this month"
    )
    badge = (
        f'<span id="partial" class="badge partial" data-value="true">PARTIAL MONTH: data up to '
        f"{r.data_to:%Y-%m-%d %H:%M} UTC</span>"
        if r.partial
        else '<span id="partial" class="badge complete" data-value="false">complete month</span>'
    )
    return (
        f'<h1>GPU fleet report, {_month_name(r)} <span id="month" data-value="{r.month}"></span></h1>'
        f'<div class="sub">{badge} &nbsp; {scope} &nbsp;·&nbsp; {span} &nbsp;·&nbsp; '
        f"{num(r.days, 'int', 'days')} day(s) with cost</div>"
    )


def _summary(r: MonthReport) -> str:
    t, ten = r.totals, r.tenants
    total, prev = t["total_usd"], t["prev_total_usd"]
    daily = total / r.days if total is not None and r.days else None
    prev_daily = prev / r.prev_days if prev is not None and r.prev_days else None
    change = 100 * (daily - prev_daily) / prev_daily if daily is not None and prev_daily else None
    budgeted = ten.filter(pl.col("budget_usd").is_not_null())
    budget = _sum(budgeted, "budget_usd") if budgeted.height else None
    spent = _sum(budgeted, "total_usd") if budgeted.height else None
    used = 100 * spent / budget if budget else None
    cap = r.capacity
    active = _sum(cap, "active_gpu_hours")
    allocated = active + _sum(cap, "allocated_idle_gpu_hours")
    cards = [
        kpi(
            "Total GPU cost (USD)",
            num(total, "usd", "total-usd"),
            f"last month {num(prev, 'usd', 'prev-total-usd')} over {num(r.prev_days, 'int', 'prev-days')} day(s)",
        ),
        kpi(
            "Cost per day against last month",
            num(daily, "usd", "daily-usd"),
            f"last month {num(prev_daily, 'usd', 'prev-daily-usd')} a day: {num(change, 'chg', 'daily-change-pct')}",
        ),
        kpi(
            "Budgets (tenants with one)",
            num(budget, "usd", "budget-usd"),
            f"spent {num(spent, 'usd', 'budgeted-spend-usd')} = {num(used, 'pct', 'budget-used-pct')}",
        ),
        kpi(
            "Active of allocated GPU-hours",
            num(100 * active / allocated if allocated else None, "pct", "active-pct"),
            f"{num(active, 'h', 'active-gpu-hours')} of {num(allocated, 'h', 'allocated-gpu-hours')} GPU-hours",
        ),
    ]
    if r.partial and total is not None and r.data_from and r.data_to:
        covered_h = (r.data_to - r.data_from).total_seconds() / 3600
        month_h = (r.end - r.start).days * 24
        cards.insert(
            1,
            kpi(
                "Month-end projection (USD)",
                num(total * month_h / covered_h, "usd", "projected-usd"),
                f"at this month's rate, from {covered_h:,.0f} of {month_h} hours",
            ),
        )
    return f'<h2>Summary</h2><div class="kpis">{"".join(cards)}</div>' + _reconciliation(r)


def _reconciliation(r: MonthReport) -> str:
    t = r.totals
    holds = r.reconciles
    diff = r.parts_usd - (t["total_usd"] or 0.0)
    return (
        f'<div id="reconciliation" class="recon {"holds" if holds else "fails"}" data-holds="{str(holds).lower()}">'
        f"<b>Reconciliation:</b> tenants {num(t['tenants_usd'] or 0.0, 'usd', 'recon-tenants-usd')}"
        f" + jobs of no tenant {num(t['unclaimed_usd'] or 0.0, 'usd', 'recon-unclaimed-usd')}"
        f" + idle capacity not shared {num(t['idle_unshared_usd'] or 0.0, 'usd', 'recon-idle-usd')}"
        f" = {num(r.parts_usd, 'usd', 'recon-parts-usd')} USD; "
        f"the month's FOCUS BilledCost {num(t['total_usd'] or 0.0, 'usd', 'recon-total-usd')} USD: "
        f"difference {num(diff, 'usd', 'recon-diff-usd')} "
        + ("(holds to the cent)" if holds else "<b>(DOES NOT HOLD: re-run `gpuledger analyze`)</b>")
        + "</div>"
    )


def _chargeback(r: MonthReport) -> str:
    t = r.totals
    policy = IDLE_POLICY.get(r.idle_policy, r.idle_policy).format(platform=r.platform_tenant or "(unset)")
    cols = [
        ("tenant", "tenant", "text"),
        ("cost_usd", "own jobs (USD)", "usd"),
        ("idle_share_usd", "idle share (USD)", "usd"),
        ("total_usd", "charged (USD)", "usd"),
        ("budget_usd", "budget (USD)", "usd"),
        ("budget_used_pct", "budget used", "pct"),
        ("prev_total_usd", "last month (USD)", "usd"),
        ("charged_gpu_hours", "GPU-hours charged", "h"),
    ]
    rows = [
        (_label(x["tenant"]), "" if x["tenant"] else "line", x | {"tenant": _label(x["tenant"])})
        for x in r.tenants.iter_rows(named=True)
    ]
    idle = r.idle_line
    if idle["total_usd"] or idle["prev_total_usd"]:
        rows.append(
            (
                IDLE_LINE,
                "line",
                {
                    "tenant": IDLE_LINE,
                    "idle_share_usd": idle["total_usd"] or 0.0,
                    "total_usd": idle["total_usd"] or 0.0,
                    "prev_total_usd": idle["prev_total_usd"],
                },
            )
        )
    rows.append(
        (
            "total",
            "total",
            {
                "tenant": "total",
                "cost_usd": _sum(r.tenants, "cost_usd"),
                "idle_share_usd": _sum(r.tenants, "idle_share_usd") + (idle["total_usd"] or 0.0),
                "total_usd": r.parts_usd,
                "prev_total_usd": t["prev_total_usd"],
                "charged_gpu_hours": _sum(r.tenants, "charged_gpu_hours"),
            },
        )
    )
    unpriced = t["unpriced_gpu_hours"]
    return (
        "<h2>Chargeback per tenant</h2>"
        f'<p id="idle-method" data-value="{escape(r.idle_policy)}"><b>Idle method</b> ([analytics] idle_policy = '
        f'"{escape(r.idle_policy)}"): the cost of GPU time no job held is {escape(policy)}. A tenant is charged its '
        "own jobs' GPU-hours at the rate card plus that idle share (chargeback_monthly).</p>"
        + table("chargeback", cols, rows)
        + (
            f'<p class="note">Not priced: {num(unpriced, "h", "unpriced-gpu-hours")} GPU-hours of models with no '
            "rate (add them to [[rates]]).</p>"
            if unpriced
            else ""
        )
    )


def _spend(r: MonthReport) -> str:
    cols = [
        ("tenant", "tenant", "text"),
        ("daily_usd", "USD per day", "usd"),
        ("prev_daily_usd", "last month, per day", "usd"),
        ("daily_change_pct", "change", "chg"),
        ("last7_usd", "last 7 days (USD)", "usd"),
        ("prior7_usd", "7 days before", "usd"),
        ("last7_change_pct", "change", "chg"),
    ]
    rows = [
        (_label(x["tenant"]), "" if x["tenant"] else "line", x | {"tenant": _label(x["tenant"])})
        for x in r.tenants.iter_rows(named=True)
    ]
    idle = r.idle_line
    if idle["total_usd"] or idle["prev_total_usd"]:
        chg = (
            100 * (idle["daily_usd"] - idle["prev_daily_usd"]) / idle["prev_daily_usd"]
            if idle["daily_usd"] is not None and idle["prev_daily_usd"]
            else None
        )
        chg7 = (
            100 * (idle["last7_usd"] - idle["prior7_usd"]) / idle["prior7_usd"]
            if idle["last7_usd"] is not None and idle["prior7_usd"]
            else None
        )
        rows.append(
            (IDLE_LINE, "line", idle | {"tenant": IDLE_LINE, "daily_change_pct": chg, "last7_change_pct": chg7})
        )
    days = sorted(set(r.daily["day"].to_list()))
    lines = (
        r.daily.group_by("line")
        .agg(pl.col("usd").sum())
        .sort([pl.col("line").str.starts_with("("), pl.col("usd")], descending=[False, True])["line"]
        .to_list()
    )
    series = {}
    for line in lines:
        by_day = dict(r.daily.filter(pl.col("line") == line).select("day", "usd").iter_rows())
        series[line] = [by_day.get(d, 0.0) for d in days]
    prev = r.totals["prev_total_usd"]
    ref = (prev / r.prev_days, "last month's mean per day") if prev and r.prev_days else None
    fig = svg.stacked_days("fig-daily", days, series, f"Cost per day, {r.month} (USD)", "USD", ref)
    return (
        "<h2>Spend against the baseline</h2>"
        '<p class="note">Baselines: the previous calendar month, as USD per day with data (this month: '
        f"{r.days} day(s), last month: {r.prev_days}); and the month's last 7 days with data "
        f"({r.last_day - dt.timedelta(days=6):%Y-%m-%d} to {r.last_day:%Y-%m-%d}) against the 7 days before them "
        "(Kubecost's spendChange with a 7-day window). Own jobs plus idle share.</p>" + table("spend", cols, rows) + fig
    )


def _usage(r: MonthReport) -> str:
    cols = [
        ("tenant", "tenant", "text"),
        ("allocated_gpu_hours", "allocated GPU-hours", "h"),
        ("active_gpu_hours", "active GPU-hours", "h"),
        ("active_pct", "active", "pct"),
        ("idle_gpu_hours", "idle GPU-hours (waste rule)", "h"),
    ]
    rows = [
        (_label(x["tenant"]), "" if x["tenant"] else "line", x | {"tenant": _label(x["tenant"])})
        for x in r.tenants.iter_rows(named=True)
        if x["allocated_gpu_hours"]
    ]
    cap_cols = [
        ("cluster", "cluster", "text"),
        ("gpu_model", "GPU model", "text"),
        ("inventory_gpus", "GPUs", "int"),
        ("active_gpu_hours", "active", "h"),
        ("allocated_idle_gpu_hours", "allocated, idle", "h"),
        ("unallocated_gpu_hours", "unallocated", "h"),
        ("down_gpu_hours", "down", "h"),
        ("capacity_gpu_hours", "capacity", "h"),
        ("active_pct", "active of allocated", "pct"),
    ]
    if len(r.clusters) <= 1:
        cap_cols = cap_cols[1:]
    cap_rows = [(f"{x['cluster']}/{x['gpu_model']}", "", x) for x in r.capacity.iter_rows(named=True)]
    bars = [
        (
            x["gpu_model"] if len(r.clusters) <= 1 else f"{x['cluster']}: {x['gpu_model']}",
            [x["active_gpu_hours"], x["allocated_idle_gpu_hours"], x["unallocated_gpu_hours"], x["down_gpu_hours"]],
        )
        for x in r.capacity.iter_rows(named=True)
    ]
    fig = (
        svg.stacked_rows("fig-capacity", bars, STATE_NAMES, STATE_COLORS, "Capacity states (GPU-hours)", "GPU-hours")
        if bars
        else ""
    )
    return (
        "<h2>Active against allocated GPU-hours</h2>"
        '<p class="note">Per tenant, from its jobs (job_hourly): active = allocated x the GPU\'s duty cycle; idle by '
        "the waste rule = allocated GPU-hours in runs of idle hours ([analytics] waste_*).</p>"
        + table("usage", cols, rows)
        + "<h2>Capacity states</h2>"
        '<p class="note">Per GPU model, GPU-hours of the month (fleet_hourly, nodes): <b>active</b> (busy, at most '
        "what was allocated), <b>allocated, idle</b> (held with no kernel running), <b>unallocated</b> (reporting, "
        "held by no job), <b>down</b> (GPUs of the inventory that did not report). They add up to the capacity. "
        f"GPUs lost from the inventory this month: {num(r.lost_gpus, 'int', 'lost-gpus')}.</p>"
        + table("capacity", cap_cols, cap_rows)
        + fig
    )


def _idle_jobs(r: MonthReport) -> str:
    cols = [
        ("tenant", "tenant", "text"),
        ("job_id", "job", "text"),
        ("gpu_model", "GPU model", "text"),
        ("idle_gpu_hours", "idle GPU-hours", "h"),
        ("allocated_gpu_hours", "allocated GPU-hours", "h"),
        ("idle_pct", "idle", "pct"),
    ]
    rows = [(x["job_id"], "", x | {"tenant": _label(x["tenant"])}) for x in r.top_idle.iter_rows(named=True)]
    return (
        f'<h2>Top idle holders</h2><p class="note">The {TOP_IDLE} jobs that held the most GPU-hours idle by the waste '
        "rule this month (job_hourly.idle_gpu_hours).</p>"
        + (table("idle-jobs", cols, rows) if rows else '<p id="idle-jobs">No job held GPUs idle this month.</p>')
    )


def _queue(r: MonthReport) -> str:
    cols = [
        ("cluster", "cluster", "text"),
        ("gpu_model", "GPU model", "text"),
        ("jobs", "jobs submitted", "int"),
        ("scheduled", "scheduled", "int"),
        ("wait_p50_s", "wait p50 (min)", "min"),
        ("wait_p90_s", "p90 (min)", "min"),
        ("wait_p99_s", "p99 (min)", "min"),
        ("pending_gpus_mean", "GPUs waiting, mean", "gpus"),
        ("pending_gpus_peak", "peak", "gpus"),
        ("free_gpus_mean", "free GPUs, mean", "gpus"),
        ("frag_pct", "fragmented", "pct"),
        ("stranded_8gpu_mean", "stranded for 8-GPU jobs", "gpus"),
    ]
    if len(r.clusters) <= 1:
        cols = cols[1:]
    rows = [(f"{x['cluster']}/{x['gpu_model']}", "", x) for x in r.queue.iter_rows(named=True)]
    return (
        "<h2>Queue and fragmentation</h2>"
        '<p class="note">Waits of the jobs submitted this month (job_stats; percentiles as queue_stats computes them); '
        "GPUs waiting jobs asked for, hourly means (fleet_hourly); free capacity and the share of it the model's "
        "typical jobs cannot use (FGD, fragmentation: the sum of fragmented GPUs over the sum of free GPUs).</p>"
        + table("queue", cols, rows)
    )


def _forecast(r: MonthReport) -> str:
    cols = [
        ("cluster", "cluster", "text"),
        ("gpu_model", "GPU model", "text"),
        ("method", "method (chosen by backtest)", "text"),
        ("backtest_mape_pct", "MAPE", "pct"),
        ("baseline_mape_pct", "seasonal naive MAPE", "pct"),
        ("backtest_mase", "MASE", "ratio"),
        ("baseline_mase", "seasonal naive MASE", "ratio"),
        ("exceeds_supply_day", "demand exceeds supply on", "date"),
        ("exceeds_supply_earliest_day", "as early as (80 %)", "date"),
        ("exceeds_supply_latest_day", "by (80 %)", "date"),
    ]
    if len(r.clusters) <= 1:
        cols = cols[1:]
    fc = r.forecast
    if fc.is_empty():
        return '<h2>Capacity forecast</h2><p id="forecast">No forecast yet (`gpuledger analyze` makes one).</p>'
    rows = [
        (
            f"{x['cluster']}/{x['gpu_model']}",
            "",
            x | ({"method": "not enough history"} if x["kind"] == "too_short" else {}),
        )
        for x in fc.iter_rows(named=True)
    ]
    panels = []
    s = r.forecast_series
    for i, ((cluster, model), part) in enumerate(s.group_by(["cluster", "gpu_model"], maintain_order=True)):
        panels.append(
            svg.forecast_panel(
                f"fig-forecast-{i}",
                model if len(r.clusters) <= 1 else f"{cluster}: {model}",
                part["day"].to_list(),
                part["actual_gpus"].to_list(),
                part["supply_gpus"].to_list(),
                part["demand_gpus"].to_list(),
                part["lo80_gpus"].to_list(),
                part["hi80_gpus"].to_list(),
            )
        )
    computed = fc["computed_at"].max()
    return (
        "<h2>Capacity forecast</h2>"
        f'<p class="note">The latest forecast (computed {num(computed, "ts", "forecast-computed-at")} UTC, '
        "demand_forecast): daily mean GPUs asked for, per model, by the method the backtest chose; its error against "
        "the seasonal naive baseline in the same backtest; the first forecast day whose mean demand exceeds the last "
        "day's supply, and when the 80 % interval's upper and lower bounds do (– : not within the horizon).</p>"
        + table("forecast", cols, rows)
        + f'<div class="panels">{"".join(panels)}</div>'
    )


def _rates(r: MonthReport) -> str:
    cols = [
        ("rate_model", "rate card entry", "text"),
        ("usd_per_gpu_hour", "USD per GPU-hour", "usd"),
        ("from_ts", "from", "date"),
        ("to_ts", "to", "date"),
    ]
    rows = [(x["rate_model"], "", x) for x in r.rates.iter_rows(named=True)]
    return table("rates", cols, rows) if rows else ""


def _footer(r: MonthReport) -> str:
    methods = ", ".join(sorted(set(r.rates["method"].drop_nulls().to_list()))) or "–"
    return (
        "<footer><h2>Methodology</h2><ul>"
        f"<li>Period: the calendar month {r.month} in UTC, [{r.start}, {r.end}). "
        + (
            "<b>Partial</b>: the lake's analysed data ends before the month does; figures cover the hours shown at "
            "the top, and the projection scales the month's cost to the whole month at the same rate. "
            if r.partial
            else ""
        )
        + "Every number is a query over gpuledger's SQL views (sql/ folder, as `gpuledger sql` runs them): "
        "focus_cost, chargeback_monthly, cost_daily, tenants, job_hourly, fleet_hourly, nodes, health_events, "
        "job_stats, fragmentation, demand_forecast, cost_allocation.</li>"
        "<li>Cost: each GPU's hours in a UTC day (cut where a rate changes) priced by the rate card and split among "
        f"the jobs that held it (method {escape(methods)}: request = share x time, max = OpenCost's max(request, "
        "use) per hour); the rest of its reported hours is idle capacity. The total is the month's FOCUS 1.3 "
        "BilledCost (`gpuledger export focus --period` writes the same rows).</li>"
        f"<li>Idle method: {escape(r.idle_policy)} ([analytics] idle_policy of the config this report ran with; "
        "the lake's cost was computed by `gpuledger analyze` with its config, and the reconciliation shows where "
        "the idle cost went).</li>"
        "<li>Reconciliation: tenants (own jobs + idle share) + jobs of no tenant + idle capacity nobody was charged "
        "for = the total BilledCost, shown with its difference; it holds when that is under half a cent.</li>"
        "<li>Budgets: the tenants' monthly budgets in the config at the latest analysis (tenants view); budget used "
        "is chargeback_monthly's, summed over clusters.</li>"
        "<li>Rounding: figures are shown rounded; each element's data-value attribute holds the exact value.</li>"
        f"<li>Rates in effect this month:</li></ul>{_rates(r)}"
        f"<p>Lake {escape(r.lake)} · generated {r.generated_at:%Y-%m-%d %H:%M} UTC by gpuledger {__version__} "
        f"(`gpuledger report --month {r.month}{' --cluster ' + escape(r.cluster) if r.cluster else ''}`)</p>"
        "</footer>"
    )


def render(r: MonthReport) -> str:
    body = "".join(
        [
            _header(r),
            _summary(r),
            _chargeback(r),
            _spend(r),
            _usage(r),
            _idle_jobs(r),
            _queue(r),
            _forecast(r),
            _footer(r),
        ]
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>GPU fleet report {r.month}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{CSS}</style></head><body><main>{body}</main></body></html>\n"
    )
